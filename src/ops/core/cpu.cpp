/// @file cpu.cpp
/// @brief CPU twins of the core ops (cuda/abi/core_vector.h, core_optim.h): plain loops over the
///        shared math (math/core.h), the reference the CUDA kernels are tested against.
#include <cmath>
#include <cstring>
#include <vector>

#include "abi/core_optim.h"
#include "abi/core_vector.h"
#include "abi/nn_guard.h"

namespace fh::ops {

void cpu(const Fill& a) {
    for (std::size_t i = 0; i < a.y.size(); ++i) a.y.data()[i] = a.value;
}

void cpu(const Copy& a) {
    for (std::size_t i = 0; i < a.dst.size(); ++i) a.dst.data()[i] = a.src.data()[i];
}

void cpu(const CopyGroup& a) {
    for (const CopyPair& c : a.copies)
        if (!c.dst.empty())
            for (std::size_t r = 0; r < c.rows; ++r)
                std::memcpy(c.dst.data() + r * c.dst_pitch, c.src.data() + r * c.src_pitch, c.width);
}

void cpu(const Saxpy& a) {
    for (std::size_t i = 0; i < a.y.size(); ++i) a.y.data()[i] = core::saxpy_element(a.y.data()[i], a.a, a.x.data()[i]);
}

void cpu(const Scale& a) {
    for (std::size_t i = 0; i < a.y.size(); ++i) a.y.data()[i] *= a.alpha;
}

void cpu(const Mean& a) {
    const std::size_t n = a.x.size() / a.out.size();
    for (std::size_t s = 0; s < a.out.size(); ++s) {
        double sum = 0.0;
        for (std::size_t i = 0; i < n; ++i) sum += a.x.data()[s * n + i];
        a.out.data()[s] = static_cast<float>(sum / static_cast<double>(n));
    }
}

void cpu(const Increment& a) {
    for (std::size_t i = 0; i < a.counter.size(); ++i) a.counter.data()[i] += 1;
}

void cpu(const CopyEvery& a) {
    const std::size_t n = a.dst.size() / a.counter.size();
    for (std::size_t g = 0; g < a.counter.size(); ++g)
        if (a.counter.data()[g] % a.period == 0)
            std::copy(a.src.data() + g * n, a.src.data() + (g + 1) * n, a.dst.data() + g * n);
}

void cpu(const GlobalNorm& a) {
    double s = 0.0;
    for (std::size_t i = 0; i < a.x.size(); ++i) {
        const double xi = a.x.data()[i];
        s += xi * xi;
    }
    a.out.data()[0] = static_cast<float>(std::sqrt(s));
}

void cpu(const AdamStep& a) {
    const SoftTarget& target = a.target;
    const auto follow = [&] {  // the soft target, after the step (or its skip)
        float* t = target.target.data();
        for (std::size_t i = 0; i < target.target.size(); ++i)
            t[i] = core::saxpy_element(t[i] * target.keep, target.tau, a.params.data()[i]);
    };
    if (!a.gate.empty() && a.gate.data()[0] == 0) {  // the guard skipped this update
        follow();
        return;
    }
    core::AdamConstants c = detail::adam_constants(a.p, a.step);
    if (a.step.counter != nullptr) c = core::at_step(c, a.step.value());
    if (!a.lr.empty()) c.lr = a.lr.data()[0];
    const float scale = c.clip_norm > 0.f ? core::clip_scale(a.grad_norm.data()[0], c.clip_norm) : 1.f;
    for (std::size_t i = 0; i < a.params.size(); ++i)
        core::adam_element(a.params.data()[i], a.m.data()[i], a.v.data()[i], a.grads.data()[i], scale, c);
    follow();
}

void cpu(const NormAndGuard& a) {
    cpu(GlobalNorm{a.grad_norm, a.x, a.scratch.subview(0, global_norm_scratch_size())});
    cpu(TrainingGuard{a.gate, a.state, a.losses, a.grad_norm, a.update});
    if (!a.accum.empty()) cpu(Saxpy{a.accum, 1.0f, a.stats});
}

// NormAndGuard's steps on each agent's slices.
void cpu(const NormAndGuardAgents& a) {
    const std::size_t N = static_cast<std::size_t>(a.agents), P = a.x.size() / N;
    const std::size_t n_stats = a.stats.size() / N;
    const std::size_t stride = a.accum_stride ? static_cast<std::size_t>(a.accum_stride) : n_stats;
    std::vector<float> losses(static_cast<std::size_t>(a.n_losses));
    for (std::size_t g = 0; g < N; ++g) {
        const View<float> norm = a.stats.subview(static_cast<std::size_t>(a.norm_index) * N + g, 1);
        cpu(GlobalNorm{norm, a.x.subview(g * P, P),
                       a.scratch.subview(g * norm_guard_scratch_size(), global_norm_scratch_size())});
        for (std::size_t k = 0; k < losses.size(); ++k) losses[k] = a.stats.data()[k * N + g];
        cpu(TrainingGuard{a.gate.subview(g, 1), a.state.subview(g, 1), View<const float>(losses.data(), losses.size()),
                          norm, a.update.agent(static_cast<long long>(g))});
        for (std::size_t k = 0; k < (a.accum.empty() ? 0 : n_stats); ++k) {
            float& sum = a.accum.data()[g * stride + k];
            sum = core::saxpy_element(sum, 1.0f, a.stats.data()[k * N + g]);
        }
    }
}

// AdamStep on each agent's slices with its scalars.
void cpu(const AdamStepAgents& a) {
    const std::size_t N = static_cast<std::size_t>(a.agents), P = a.params.size() / N;
    for (std::size_t g = 0; g < N; ++g) {
        AdamParams own = a.p;
        own.lr = a.lr.data()[g];
        const SoftTarget soft = a.target.empty() ? SoftTarget{}
                                                 : SoftTarget{a.target.subview(g * P, P), a.tau_keep.data()[2 * g],
                                                              a.tau_keep.data()[2 * g + 1]};
        cpu(AdamStep{a.params.subview(g * P, P), a.m.subview(g * P, P), a.v.subview(g * P, P),
                     a.grads.subview(g * P, P), a.p.clip_norm > 0.f ? a.grad_norm.subview(g, 1) : View<const float>(),
                     a.gate.empty() ? View<const int>() : a.gate.subview(g, 1), a.step.agent(static_cast<long long>(g)),
                     own, a.lr.subview(g, 1), soft});
    }
}

}  // namespace fh::ops
