/// @file all_kernels.h
/// @brief Every kernel the host expects: FH_ALL_KERNELS(X) expands X(module, kernel, signature)
///        once per kernel. The host's kernel table, the start-up check and the cubin ABI test
///        are all generated from this list.
#pragma once

#include "abi/dqn_utility_abi.h"
#include "abi/experience_abi.h"

#define FH_ALL_KERNELS(X) \
    FH_DQN_UTILITY_KERNELS(X)  \
    FH_EXPERIENCE_KERNELS(X)
