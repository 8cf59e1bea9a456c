/// @file cuda.cpp
/// @brief CUDA twins of the env op family: launchers of cuda/kernels/env.cu on the device's stream.
///        The op (src/ops/env/ops.hpp) checked sizes and that the buffers of each launch are
///        distinct before these run.
#include "ops/env/ops.hpp"
#include "ops/cuda_device.hpp"

namespace fh::ops::cuda_twin {

using cuda::LaunchDims;

namespace {
const abi::EnvAgent* agents_of(View<const abi::EnvAgent> agents) {
    return agents.empty() ? nullptr : agents.data();
}
int per_agent(std::size_t n, View<const abi::EnvAgent> agents) {
    return static_cast<int>(agents.empty() ? n : n / agents.size());
}
}  // namespace

void env_reset(CudaDevice& device, View<env::EnvState> state, View<float> portfolio, View<const std::uint8_t> mask,
               const env::MarketView& market, const env::EnvParams& params, View<const abi::EnvAgent> agents) {
    device.kernels().env_reset_kernel(device.stream(), LaunchDims::linear(state.size(), 128), state.data(),
                                      portfolio.data(), mask.empty() ? nullptr : mask.data(), market, params,
                                      static_cast<int>(state.size()), agents_of(agents),
                                      per_agent(state.size(), agents));
}

void env_step(CudaDevice& device, View<env::EnvState> state, View<float> portfolio, View<float> reward,
              View<std::uint8_t> done, View<env::StepInfo> info, View<const int> actions, const env::MarketView& market,
              const env::EnvParams& params, View<const abi::EnvAgent> agents) {
    device.kernels().env_step_kernel(device.stream(), LaunchDims::linear(state.size(), 128), state.data(),
                                     portfolio.data(), reward.data(), done.data(), info.data(), actions.data(), market,
                                     params, static_cast<int>(state.size()), agents_of(agents),
                                     per_agent(state.size(), agents));
}

void env_gather_states(CudaDevice& device, View<float> states, View<const env::EnvState> state,
                       View<const float> portfolio, const env::MarketView& market, const env::EnvParams& params,
                       View<const abi::EnvAgent> agents) {
    device.kernels().env_gather_states_kernel(
        device.stream(), LaunchDims::linear(states.size()), states.data(), state.data(), portfolio.data(), market,
        params, static_cast<int>(state.size()), agents_of(agents), per_agent(state.size(), agents));
}

void env_random_actions(CudaDevice& device, View<int> actions, std::uint64_t seed, std::uint64_t step,
                        int num_actions) {
    device.kernels().env_random_actions_kernel(device.stream(), LaunchDims::linear(actions.size()), actions.data(),
                                               seed, step, num_actions, static_cast<int>(actions.size()));
}

}  // namespace fh::ops::cuda_twin
