/// @file op_begin.hpp
/// @brief Opens an op header's host part (cuda/abi/<module>.h, after `#ifndef __CUDACC__`): the
///        dispatch and checks (ops/op.hpp), then `namespace fh::ops {`, which ops/op_end.hpp
///        closes. No include guard: every op header includes it once.
#include "ops/op.hpp"

namespace fh::ops {
