/// @file cuda_env_ops.cpp
/// @brief Launchers for cuda/kernels/env.cu. Ops:: checked sizes and that every buffer of
///        a launch is distinct before these run (the kernels' pointers are __restrict__).
#include "ops/cuda/cuda_ops.hpp"

namespace fh::ops {

using cuda::LaunchDims;

void CudaOps::env_reset_impl(View<env::EnvState> state, View<float> portfolio,
                             View<const std::uint8_t> mask, const env::MarketView& market,
                             const env::EnvParams& params) {
    kernels().env_reset_kernel(stream(), LaunchDims::linear(state.size(), 128),
                                          state.data(), portfolio.data(),
                                          mask.empty() ? nullptr : mask.data(), market, params,
                                          static_cast<int>(state.size()));
}

void CudaOps::env_step_impl(View<env::EnvState> state, View<float> portfolio, View<float> reward,
                            View<std::uint8_t> done, View<env::StepInfo> info,
                            View<const int> actions, const env::MarketView& market,
                            const env::EnvParams& params) {
    kernels().env_step_kernel(stream(), LaunchDims::linear(state.size(), 128),
                                         state.data(), portfolio.data(), reward.data(), done.data(),
                                         info.data(), actions.data(), market, params,
                                         static_cast<int>(state.size()));
}

void CudaOps::gather_states_impl(View<float> states, View<const env::EnvState> state,
                                 View<const float> portfolio, const env::MarketView& market,
                                 const env::EnvParams& params) {
    kernels().env_gather_states_kernel(stream(), LaunchDims::linear(states.size()),
                                             states.data(), state.data(), portfolio.data(), market,
                                             params, static_cast<int>(state.size()));
}

void CudaOps::random_actions_impl(View<int> actions, std::uint64_t seed, std::uint64_t step,
                                  int num_actions) {
    kernels().env_random_actions_kernel(stream(), LaunchDims::linear(actions.size()),
                                               actions.data(), seed, step, num_actions,
                                               static_cast<int>(actions.size()));
}

}  // namespace fh::ops
