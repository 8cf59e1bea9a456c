/// @file attention.h
/// @brief Feature-group attention (dqn.attention, docs/dqn.md "Feature attention"): per sample,
///        a softmax over G contiguous groups of the state's columns scales each group, so the
///        network sees x'_j = G * alpha_g(j) * x_j. The scores s (G) come from a linear layer on
///        the whole state (an nn::Mlp of the network); this header is the elementwise part and
///        its backward, written once for the kernels (cuda/kernels/nn_attention.cu), the CPU
///        twins and the double-precision gradient check (templated on the float type).
#pragma once

#include "math/host_device.h"

#if defined(__CUDACC__)
#define FH_ATTENTION_EXP(x) exp(x)
#else
#include <cmath>
#define FH_ATTENTION_EXP(x) std::exp(x)
#endif

namespace fh::attention {

inline constexpr int kMaxGroups = 16;

/// The groups: columns [begin[g], begin[g + 1]) for g < count; begin[count] = the state's width.
struct Groups {
    int count;
    int begin[kMaxGroups + 1];
};

/// alpha (G) = softmax(scores) (max-subtracted, summed in group order); x_out_j = G alpha_g x_j.
template <class T>
FH_HD void forward_row(T* x_out, T* alpha, const T* x, const T* scores, const Groups& g) {
    T mx = scores[0];
    for (int k = 1; k < g.count; ++k) mx = scores[k] > mx ? scores[k] : mx;
    T sum = T(0);
    for (int k = 0; k < g.count; ++k) {
        alpha[k] = FH_ATTENTION_EXP(scores[k] - mx);
        sum += alpha[k];
    }
    for (int k = 0; k < g.count; ++k) alpha[k] = alpha[k] / sum;
    for (int k = 0; k < g.count; ++k) {
        const T scale = static_cast<T>(g.count) * alpha[k];
        for (int j = g.begin[k]; j < g.begin[k + 1]; ++j) x_out[j] = scale * x[j];
    }
}

/// From dL/dx_out (D): d_scores (G) = dL/dscores, the softmax's backward of
/// d_alpha_g = G sum_{j in g} dx_out_j x_j: d_scores_g = alpha_g (d_alpha_g - sum_h alpha_h d_alpha_h).
/// (The gradient reaching x through the scaling, G alpha_g dx_out_j, is not needed: x is data.)
template <class T>
FH_HD void backward_row(T* d_scores, const T* d_x_out, const T* x, const T* alpha, const Groups& g) {
    T dot = T(0);
    for (int k = 0; k < g.count; ++k) {
        T da = T(0);
        for (int j = g.begin[k]; j < g.begin[k + 1]; ++j) da += d_x_out[j] * x[j];
        da = static_cast<T>(g.count) * da;
        d_scores[k] = da;  // d_alpha for now
        dot += alpha[k] * da;
    }
    for (int k = 0; k < g.count; ++k) d_scores[k] = alpha[k] * (d_scores[k] - dot);
}

}  // namespace fh::attention
