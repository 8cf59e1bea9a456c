/// @file cuda.cpp
/// @brief CUDA twins of the ppo op family: launchers of cuda/kernels/ppo_*.cu on the device's stream.
///        The op (src/ops/ppo/ops.hpp) checked sizes and that the buffers of each launch are
///        distinct before these run.
#include "ops/ppo/ops.hpp"

#include <algorithm>

#include "ops/cuda_device.hpp"

namespace fh::ops::cuda_twin {

using cuda::LaunchDims;

void ppo_sample(CudaDevice& device, View<int> actions, View<float> log_probs, View<const float> logits, int num_actions,
                std::uint64_t seed, CounterValue step, View<const std::uint64_t> agent_seeds) {
    device.kernels().ppo_sample_kernel(
        device.stream(), LaunchDims::linear(actions.size(), 128), actions.data(), log_probs.data(), logits.data(),
        num_actions, seed, step, static_cast<int>(actions.size()), agent_seeds.empty() ? nullptr : agent_seeds.data(),
        static_cast<int>(agent_seeds.empty() ? actions.size() : actions.size() / agent_seeds.size()));
}

void ppo_diversity(CudaDevice& device, View<int> window, View<int> counts, View<float> penalty, View<const int> actions,
                   int num_actions, int diversity_window, float coef, CounterValue step, View<const float> agent_coef) {
    device.kernels().ppo_diversity_kernel(
        device.stream(), LaunchDims::linear(actions.size(), 128), window.data(), counts.data(), penalty.data(),
        actions.data(), num_actions, diversity_window, coef, step, static_cast<int>(actions.size()),
        agent_coef.empty() ? nullptr : agent_coef.data(),
        static_cast<int>(agent_coef.empty() ? actions.size() : actions.size() / agent_coef.size()));
}

void ppo_gae(CudaDevice& device, View<float> advantages, View<float> returns, View<const float> rewards,
             View<const float> values, View<const float> next_values, View<const std::uint8_t> done, float gamma,
             float lambda, int T, View<const float> agent_gamma_lambda) {
    const std::size_t agents = std::max<std::size_t>(1, agent_gamma_lambda.size() / 2);
    const std::size_t n = rewards.size() / agents / static_cast<std::size_t>(T);  // each agent's environments
    device.kernels().ppo_gae_kernel(
        device.stream(), LaunchDims::linear(n * agents, 128), advantages.data(), returns.data(), rewards.data(),
        values.data(), next_values.data(), done.data(), gamma, lambda, T, static_cast<int>(n),
        agent_gamma_lambda.empty() ? nullptr : agent_gamma_lambda.data(), static_cast<int>(agents));
}

void normalize(CudaDevice& device, View<float> x, View<float> scratch) {
    // A fixed grid for the partial sums (whatever the device), so the moments are the same on
    // every run; the apply kernel's blocks each reduce the partials in the same fixed order.
    const LaunchDims partial_dims{dim3(ppo::kNormalizeBlocks), dim3(ppo::kNormalizeThreads), 0};
    const int n = static_cast<int>(x.size());
    device.kernels().ppo_normalize_partials_kernel(device.stream(), partial_dims, scratch.data(), x.data(), n);
    device.kernels().ppo_normalize_apply_kernel(
        device.stream(), LaunchDims::linear(x.size(), ppo::kNormalizeThreads, 1024), x.data(), scratch.data(), n);
}

void ppo_collect_truncated(CudaDevice& device, View<int> rows, View<int> bars, View<float> portfolio, View<int> count,
                           View<const float> next_states, View<const env::StepInfo> info, View<const std::uint8_t> done,
                           int market_dim, int row_base, bool restart, int agents) {
    const std::size_t N = static_cast<std::size_t>(agents);
    device.kernels().ppo_collect_truncated_kernel(
        device.stream(), LaunchDims{dim3(static_cast<unsigned>(agents)), dim3(ppo::kCollectThreads), 0}, rows.data(),
        bars.data(), portfolio.data(), count.data(), next_states.data(), info.data(), done.data(),
        static_cast<int>(done.size() / N), static_cast<int>(next_states.size() / done.size()), market_dim, row_base,
        static_cast<int>(rows.size() / N), restart ? 1 : 0);
}

void ppo_terminal_observations(CudaDevice& device, View<float> observations, View<const int> bars,
                               View<const float> portfolio, View<const float> features, int market_dim) {
    const int r = static_cast<int>(bars.size());
    device.kernels().ppo_terminal_observations_kernel(
        device.stream(), LaunchDims::linear(observations.size(), 128), observations.data(), bars.data(),
        portfolio.data(), features.data(), static_cast<int>(features.size() / static_cast<std::size_t>(market_dim)), r,
        static_cast<int>(observations.size() / bars.size()), market_dim);
}

void ppo_scatter_values(CudaDevice& device, View<float> dst, View<const float> values, View<const int> rows) {
    device.kernels().ppo_scatter_values_kernel(device.stream(), LaunchDims::linear(values.size(), 128), dst.data(),
                                               values.data(), rows.data(), static_cast<int>(values.size()),
                                               static_cast<int>(dst.size()));
}

void ppo_gather(CudaDevice& device, View<float> states, View<int> actions, View<float> old_log_probs,
                View<float> advantages, View<float> returns, View<float> old_values, const ppo::RolloutView& rollout,
                std::uint64_t seed, CounterValue epoch, int offset, View<const std::uint64_t> agent_seeds) {
    const std::size_t N = agent_seeds.empty() ? 1 : agent_seeds.size(), B = actions.size() / N;
    const std::size_t rows = static_cast<std::size_t>(abi::kPpoGatherRowsPerWarp);
    const std::size_t warps = (B + rows - 1) / rows;
    LaunchDims dims = LaunchDims::linear(warps * 32, 128);
    dims.grid.y = static_cast<unsigned>(N);  // agent y's minibatch
    device.kernels().ppo_gather_kernel(device.stream(), dims, states.data(), actions.data(), old_log_probs.data(),
                                       advantages.data(), returns.data(), old_values.data(), rollout, seed, epoch,
                                       offset, static_cast<int>(B), abi::kPpoGatherRowsPerWarp,
                                       agent_seeds.empty() ? nullptr : agent_seeds.data());
}

void ppo_learning_rate(CudaDevice& device, View<float> lr, double base_lr, bool linear, double total_rollouts,
                       CounterValue rollouts) {
    device.kernels().ppo_learning_rate_kernel(device.stream(), LaunchDims{dim3(1), dim3(1), 0}, lr.data(), base_lr,
                                              linear ? 1 : 0, total_rollouts, rollouts);
}

void ppo_loss(CudaDevice& device, View<float> stats, View<float> d_logits, View<float> d_values,
              View<const float> logits, View<const float> values, View<const int> actions,
              View<const float> old_log_probs, View<const float> advantages, View<const float> returns,
              View<const float> old_values, const ppo::LossParams& p, View<const ppo::LossParams> agent_params) {
    const std::size_t B = actions.size();
    const LaunchDims dims = LaunchDims::linear(B * abi::kPpoLossLanes, abi::kPpoLossThreads);  // lanes per sample
    device.kernels().ppo_loss_kernel(
        device.stream(), dims, stats.data(), d_logits.data(), d_values.data(), logits.data(), values.data(),
        actions.data(), old_log_probs.data(), advantages.data(), returns.data(), old_values.data(), p,
        static_cast<int>(logits.size() / B), static_cast<int>(B), agent_params.empty() ? nullptr : agent_params.data(),
        static_cast<int>(agent_params.empty() ? B : B / agent_params.size()));
}

void curiosity_input(CudaDevice& device, View<float> input, View<const float> states, View<const int> actions,
                     int num_actions) {
    const std::size_t n = actions.size();
    device.kernels().curiosity_input_kernel(device.stream(), LaunchDims::linear(n, 128), input.data(), states.data(),
                                            actions.data(), static_cast<int>(states.size() / n), num_actions,
                                            static_cast<int>(n));
}

void curiosity_error(CudaDevice& device, View<float> error, View<float> d_pred, View<const float> pred,
                     View<const float> next_states, int state_dim) {
    const std::size_t n = error.size();
    device.kernels().curiosity_error_kernel(device.stream(), LaunchDims::linear(n, 128), error.data(), d_pred.data(),
                                            pred.data(), next_states.data(), static_cast<int>(pred.size() / n),
                                            state_dim, static_cast<int>(n));
}

}  // namespace fh::ops::cuda_twin
