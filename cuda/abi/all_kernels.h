/// @file all_kernels.h
/// @brief Every kernel the host expects: FH_ALL_KERNELS(X) expands X(module, kernel, signature)
///        once per kernel. The host's kernel table, the start-up check and the cubin ABI test
///        are all generated from this list.
#pragma once

#include "abi/dqn_utility_abi.h"
#include "abi/experience_abi.h"
#include "abi/network_abi.h"
#include "abi/backtest_abi.h"
#include "abi/c51_loss_abi.h"
#include "abi/epsilon_greedy_abi.h"
#include "abi/monitoring_abi.h"
#include "abi/mse_loss_abi.h"
#include "abi/nstep_abi.h"
#include "abi/training_guard_abi.h"
#include "abi/ppo_experience_abi.h"
#include "abi/ppo_gae_abi.h"
#include "abi/ppo_minibatch_abi.h"
#include "abi/ppo_loss_abi.h"
#include "abi/curiosity_training_abi.h"
#include "abi/awr_policy_abi.h"
#include "abi/iql_behaviour_abi.h"
#include "abi/iql_value_abi.h"

#define FH_ALL_KERNELS(X) \
    FH_DQN_UTILITY_KERNELS(X)  \
    FH_NETWORK_KERNELS(X)      \
    FH_EXPERIENCE_KERNELS(X)   \
    FH_C51_LOSS_KERNELS(X)     \
    FH_MSE_LOSS_KERNELS(X)     \
    FH_NSTEP_KERNELS(X)        \
    FH_EPSILON_GREEDY_KERNELS(X) \
    FH_TRAINING_GUARD_KERNELS(X) \
    FH_MONITORING_KERNELS(X)   \
    FH_BACKTEST_ENV_KERNELS(X) \
    FH_BACKTEST_GATHER_KERNELS(X) \
    FH_BACKTEST_METRICS_KERNELS(X) \
    FH_PPO_EXPERIENCE_KERNELS(X) \
    FH_PPO_GAE_KERNELS(X)      \
    FH_PPO_MINIBATCH_KERNELS(X) \
    FH_PPO_LOSS_KERNELS(X)     \
    FH_CURIOSITY_TRAINING_KERNELS(X) \
    FH_IQL_VALUE_KERNELS(X)    \
    FH_AWR_POLICY_KERNELS(X)   \
    FH_IQL_BEHAVIOUR_KERNELS(X)
