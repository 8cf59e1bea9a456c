/// @file op_end.hpp
/// @brief Closes an op header's host part (ops/op_begin.hpp opened it): the namespace, then the
///        launch rules' device (device/cuda_device.hpp, complete where ops::run is instantiated),
///        except while the kernel table includes the op headers for their kernel lists
///        (FH_INCLUDING_KERNEL_LISTS: the table needs every module's list before any host part).
///        No include guard: every op header includes it once.
}  // namespace fh::ops

#ifndef FH_INCLUDING_KERNEL_LISTS
#include "device/cuda_device.hpp"
#endif
