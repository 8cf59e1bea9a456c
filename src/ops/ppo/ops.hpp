/// @file ops.hpp
/// @brief The PPO ops (action sampling, the diversity penalty, GAE, normalisation, shuffled
///        minibatches, the clipped loss, the curiosity model's input and error; docs/ppo.md),
///        declared in the headers of their kernel modules; CPU twins: src/ops/ppo/cpu.cpp.
#pragma once

#include "abi/ppo_curiosity.h"
#include "abi/ppo_experience.h"
#include "abi/ppo_gae.h"
#include "abi/ppo_loss.h"
#include "abi/ppo_minibatch.h"
