/// @file cpu.cpp
/// @brief CPU twins of the IQN op family: the shared math (math/iqn.h) in plain loops, in the
///        kernels' order of operations (every sum on one thread of the kernel): equal to
///        cuda/kernels/dqn_iqn.cu bit for bit.
#include <algorithm>
#include <limits>
#include <vector>

#include "abi/dqn_iqn.h"

namespace fh::ops {

void cpu(const IqnTaus& a) {
    const auto& [features, taus, agent, counters, rows, quantiles, n_cos] = a;
    const long long n = static_cast<long long>(rows) * quantiles;
    const long long update = agent.empty() ? 0 : counters.data()[0].updates + 1;
    for (long long t = 0; t < n; ++t) {
        const int r = static_cast<int>(t / quantiles), k = static_cast<int>(t % quantiles);
        const float tau =
            agent.empty() ? iqn::midpoint_tau(k, quantiles) : iqn::sample_tau(agent.data()[0].seed, r, update, k);
        taus.data()[t] = tau;
        for (int i = 0; i < n_cos; ++i) features.data()[t * n_cos + i] = iqn::cos_feature(tau, i);
    }
}

void cpu(const IqnHadamard& a) {
    const auto& [x, phi, psi, count, rows, quantiles, psi_rows, width] = a;
    const long long per_net = static_cast<long long>(rows) * quantiles;
    for (long long c = 0; c < count; ++c)
        for (long long r = 0; r < per_net; ++r) {
            const float* p = phi.data() + (c * rows + r / quantiles) * width;
            const float* s = psi.data() + (c * psi_rows + r % psi_rows) * width;
            float* y = x.data() + (c * per_net + r) * width;
            for (int h = 0; h < width; ++h) y[h] = p[h] * s[h];
        }
}

void cpu(const IqnHadamardBackward& a) {
    const auto& [d_phi, d_psi, dx, phi, psi, batch, quantiles, width] = a;
    for (long long b = 0; b < batch; ++b) {
        const long long r0 = b * quantiles;
        for (int h = 0; h < width; ++h) {
            const float p = phi.data()[b * width + h];
            for (int k = 0; k < quantiles; ++k)
                d_psi.data()[(r0 + k) * width + h] = dx.data()[(r0 + k) * width + h] * p;
            d_phi.data()[b * width + h] =
                iqn::phi_gradient(dx.data() + r0 * width, psi.data() + r0 * width, quantiles, width, h);
        }
    }
}

void cpu(const IqnLoss& a) {
    const auto& [d_head, stats, head_s, head_select, head_target, taus, actions, returns, discounts, agent, h,
                 quantiles, batch] = a;
    const int N = quantiles, W = dqn::head_width(h), A = h.num_actions;
    const long long NW = static_cast<long long>(N) * W;
    std::vector<float> scratch(static_cast<std::size_t>(iqn::loss_scratch(h, N)));
    const float scale = 1.0f / static_cast<float>(batch);
    for (long long b = 0; b < batch; ++b) {
        float* d = d_head.data() + b * NW;
        const int act = actions.data()[b];
        if (act < 0 || act >= A) {
            std::fill(d, d + NW, 0.f);
            for (int k = 0; k < dqn::kSampleStats; ++k)
                stats.data()[k * batch + b] = std::numeric_limits<float>::quiet_NaN();
            continue;
        }
        float st[dqn::kSampleStats];
        iqn::sample_loss(head_s.data() + b * NW, head_select.data() + b * NW, head_target.data() + b * NW,
                         taus.data() + b * N, N, act, returns.data()[b], discounts.data()[b], scale,
                         agent.data()[0].cql_alpha, h, d, scratch.data(), st);
        for (int k = 0; k < dqn::kSampleStats; ++k) stats.data()[k * batch + b] = st[k];
    }
}

void cpu(const IqnMeanRows& a) {
    const auto& [out, head, n, quantiles, width] = a;
    for (long long e = 0; e < n; ++e)
        for (int w = 0; w < width; ++w)
            out.data()[e * width + w] = iqn::mean_row_element(head.data() + e * quantiles * width, quantiles, width, w);
}

}  // namespace fh::ops
