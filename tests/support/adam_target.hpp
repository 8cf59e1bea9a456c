/// @file adam_target.hpp
/// @brief One Adam step with a soft target on any device, fused (ops::AdamStep with an
///        ops::SoftTarget) or as the separate ops it replaces (AdamStep, then Scale and Saxpy on
///        the target), for the tests that compare the two on each backend.
#pragma once

#include <vector>

#include "device/device.hpp"
#include "support/compare.hpp"
#include "abi/core_optim.h"
#include "abi/core_vector.h"

namespace fh::test {

struct AdamTargetResult {
    std::vector<float> params, m, v, target;
};

/// n parameters at update number 4 (from device memory, as a captured update reads it), clipping
/// at 1, the guard's gate set to gate_value, tau 0.05.
inline AdamTargetResult adam_with_target(ops::Device& ops, std::size_t n, int gate_value, bool fused) {
    auto P = ops.from_host<float>(random_floats(n, 11));
    auto M = ops.from_host<float>(random_floats(n, 12, -0.1f, 0.1f));
    auto V = ops.from_host<float>(random_floats(n, 13, 0.01f, 0.1f));
    auto G = ops.from_host<float>(random_floats(n, 14));
    auto T = ops.from_host<float>(random_floats(n, 15));
    auto norm = ops.from_host<float>(std::vector<float>{3.f});
    auto gate = ops.from_host<int>(std::vector<int>{gate_value});
    auto step = ops.from_host<long long>(std::vector<long long>{4});
    ops::AdamParams hp;
    hp.lr = 3e-3f;
    hp.clip_norm = 1.f;
    const double tau = 0.05;
    const auto counter = ops::counter_value(step.cview());
    if (fused) {
        fh::ops::run(ops, fh::ops::AdamStep{P.view(),
                                            M.view(),
                                            V.view(),
                                            G.cview(),
                                            norm.cview(),
                                            gate.cview(),
                                            counter,
                                            hp,
                                            {},
                                            ops::SoftTarget::of(T.view(), tau)});
    } else {
        fh::ops::run(
            ops, fh::ops::AdamStep{P.view(), M.view(), V.view(), G.cview(), norm.cview(), gate.cview(), counter, hp});
        fh::ops::run(ops, fh::ops::Scale{T.view(), static_cast<float>(1.0 - tau)});
        fh::ops::run(ops, fh::ops::Saxpy{T.view(), static_cast<float>(tau), P.cview()});
    }
    return {ops.to_host(P.cview()), ops.to_host(M.cview()), ops.to_host(V.cview()), ops.to_host(T.cview())};
}

}  // namespace fh::test
