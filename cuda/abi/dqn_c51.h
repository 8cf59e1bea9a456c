/// @file dqn_c51.h
/// @brief Signatures of cuda/kernels/dqn_c51.cu: the dueling C51 head and its loss.
#pragma once

#include "math/dqn.h"

namespace fh::abi {

/// Per sample (dqn::head_forward): logits, probs (B, A, Z) and q (B, A) from value (B, Z; null
/// without dueling) and adv (B, A*Z). All buffers distinct.
using C51HeadForward = void(float* __restrict__ logits, float* __restrict__ probs, float* __restrict__ q,
                            const float* __restrict__ value, const float* __restrict__ adv,
                            dqn::HeadParams head, int batch);

/// Per sample (dqn::head_backward): d_value (B, Z; null without dueling), d_adv (B, A*Z) from
/// d_logits (B, A, Z). All buffers distinct.
using C51HeadBackward = void(float* __restrict__ d_value, float* __restrict__ d_adv,
                             const float* __restrict__ d_logits, dqn::HeadParams head, int batch);

/// Per sample: a* = argmax of q_next_select (B, A) (the online net's Q at s' for double DQN,
/// else the target net's), m = C51 projection of probs_next_target[a*] through
/// returns + discounts * z, loss[b] = -sum m log p(s, a_b), d_logits (B, A, Z) = (p - m) / B on
/// the taken action's row and 0 elsewhere. All buffers distinct.
using C51Loss = void(float* __restrict__ loss, float* __restrict__ d_logits,
                     const float* __restrict__ logits, const float* __restrict__ probs,
                     const float* __restrict__ q_next_select, const float* __restrict__ probs_next_target,
                     const int* __restrict__ actions, const float* __restrict__ returns,
                     const float* __restrict__ discounts, dqn::HeadParams head, int batch);

}  // namespace fh::abi

#define FH_KERNELS_dqn_c51(FH_KERNEL)                                \
    FH_KERNEL(dqn_c51, c51_head_forward_kernel, C51HeadForward)   \
    FH_KERNEL(dqn_c51, c51_head_backward_kernel, C51HeadBackward) \
    FH_KERNEL(dqn_c51, c51_loss_kernel, C51Loss)
