/// @file cuda.cpp
/// @brief CUDA twins of the DQN op family: launchers of cuda/kernels/dqn_step.cu on the device's
///        stream. The op (src/ops/dqn/ops.hpp) checked sizes and that the buffers of each launch
///        are distinct before these run.
#include "ops/cuda_device.hpp"
#include "ops/dqn/ops.hpp"

namespace fh::ops::cuda_twin {

using cuda::LaunchDims;

namespace {

/// One warp per row, kDqnWarpsPerBlock warps per block, one grid row per agent.
LaunchDims per_row(long long rows, std::size_t agents, const dqn::HeadParams& h) {
    const long long blocks = (rows + abi::kDqnWarpsPerBlock - 1) / abi::kDqnWarpsPerBlock;
    return LaunchDims{dim3(static_cast<unsigned>(blocks), static_cast<unsigned>(agents)),
                      dim3(32 * abi::kDqnWarpsPerBlock),
                      sizeof(float) * static_cast<std::size_t>(abi::kDqnWarpsPerBlock) *
                          static_cast<std::size_t>(abi::dqn_step_smem_floats(h))};
}

abi::DqnRing ring_of(const RingViews& r) {
    return abi::DqnRing{r.states.data(), r.next_states.data(), r.actions.data(), r.rewards.data(),
                        r.done.data(),   r.capacity_steps,     r.n_envs,         r.state_dim};
}

}  // namespace

void dqn_act(CudaDevice& device, View<int> actions, View<float> q, View<unsigned long long> histogram,
             View<const float> head, const dqn::HeadParams& h, View<const dqn::AgentParams> agent,
             View<const dqn::Counters> counters, int n, bool explore) {
    const std::size_t N = agent.empty() ? 1 : agent.size();
    abi::DqnActArgs a{
        actions.data(), or_null(q), or_null(histogram), head.data(), or_null(agent), or_null(counters), h, n,
        explore ? 1 : 0};
    device.kernels().dqn_act_kernel(device.stream(), per_row(n, N, h), a);  // shared memory checked by the op
}

void dqn_loss(CudaDevice& device, View<float> d_head, View<float> stats, View<const float> head_s,
              View<const float> head_select, View<const float> head_target, View<const int> actions,
              View<const float> returns, View<const float> discounts, View<const dqn::AgentParams> agent,
              const dqn::HeadParams& h, int batch, View<const int> target_actions, View<const float> masks) {
    abi::DqnLossArgs a{d_head.data(),
                       stats.data(),
                       head_s.data(),
                       head_select.data(),
                       head_target.data(),
                       actions.data(),
                       returns.data(),
                       discounts.data(),
                       or_null(target_actions),
                       or_null(masks),
                       agent.data(),
                       h,
                       batch,
                       0};
    // A block of kDqnLossWarps warps per C51 head row, or a warp per row (abi::dqn_loss_split), by
    // the rows of every agent on the GPU: this launch's agents and those of the other sharers. The
    // scalar head's few flops per row take a warp (a lane) each.
    const long long rows = static_cast<long long>(batch) * h.ensemble;
    const long long rows_on_gpu = rows * static_cast<long long>(agent.size()) * device.gpu_sharers();
    if (!h.scalar && abi::dqn_loss_split(rows_on_gpu, device.device().sm_count)) {
        const auto smem_per_sm = static_cast<long long>(device.device().shared_memory_per_sm);
        a.stage_rows = device.stage_head_rows() && abi::dqn_loss_stages_rows(h, smem_per_sm) ? 1 : 0;
        const long long floats = abi::kDqnLossWarps * abi::dqn_step_smem_floats(h) +
                                 (a.stage_rows != 0 ? abi::dqn_loss_staged_floats(h) : 0);
        const LaunchDims dims{dim3(static_cast<unsigned>(rows), static_cast<unsigned>(agent.size())),
                              dim3(32 * abi::kDqnLossWarps), sizeof(float) * static_cast<std::size_t>(floats)};
        device.kernels().dqn_loss_kernel(device.stream(), dims, a);
    } else {
        device.kernels().dqn_loss_rows_kernel(device.stream(), per_row(rows, agent.size(), h), a);
    }
}

void dqn_update_finish(CudaDevice& device, View<dqn::UpdateStep> step, View<nn::GuardState> guard,
                       View<dqn::MonitorStats> stats, View<dqn::Counters> counters, View<float> norm_partials,
                       View<const float> grads, View<const float> sample_stats, View<const dqn::AgentParams> agent,
                       int batch, int inject_nan) {
    const std::size_t N = agent.size(), P = grads.size() / N;
    // One launch: the partials of Device::global_norm (its fixed grid) for every agent, each
    // agent's last block finishing.
    abi::DqnFinishArgs a{step.data(),          guard.data(), stats.data(),        counters.data(),
                         norm_partials.data(), grads.data(), sample_stats.data(), agent.data(),
                         static_cast<int>(P),  batch,        inject_nan};
    device.kernels().dqn_finish_kernel(
        device.stream(), LaunchDims{dim3(abi::kNormBlocks, static_cast<unsigned>(N)), dim3(abi::kDqnFinishThreads), 0},
        a);
}

void dqn_adam_target(CudaDevice& device, View<float> params, View<float> m, View<float> v, View<float> target,
                     View<const float> grads, View<const dqn::UpdateStep> step, View<const dqn::AgentParams> agent,
                     View<dqn::Counters> advance) {
    const std::size_t N = agent.size();
    const int P = static_cast<int>(params.size() / N);
    const LaunchDims dims{dim3(static_cast<unsigned>(abi::dqn_adam_blocks(P)), static_cast<unsigned>(N)),
                          dim3(abi::kDqnAdamThreads), 0};
    abi::DqnAdamTargetArgs a{params.data(), m.data(),         v.data(), target.data(), grads.data(), step.data(),
                             agent.data(),  or_null(advance), P};
    device.kernels().dqn_adam_target_kernel(device.stream(), dims, a);
}

void dqn_advance(CudaDevice& device, View<dqn::Counters> counters) {
    device.kernels().dqn_advance_kernel(device.stream(), LaunchDims{dim3(1), dim3(32), 0}, counters.data(),
                                        static_cast<int>(counters.size()));
}

void dqn_collect(CudaDevice& device, View<env::EnvState> state, View<float> portfolio, View<float> states,
                 View<const int> actions, const RingViews& ring, View<const dqn::Counters> counters,
                 const env::MarketView& market, const env::EnvParams& params, const CollectAdvance& advance,
                 View<const abi::EnvAgent> agents) {
    const long long n = ring.n_envs;
    const long long blocks = (n + abi::kDqnCollectWarps - 1) / abi::kDqnCollectWarps;
    abi::DqnCollectArgs a{state.data(),
                          portfolio.data(),
                          states.data(),
                          actions.data(),
                          ring_of(ring),
                          counters.data(),
                          or_null(advance.counters),
                          or_null(advance.tickets),
                          market,
                          params,
                          or_null(agents),
                          static_cast<int>(n)};
    const LaunchDims dims{dim3(static_cast<unsigned>(blocks), static_cast<unsigned>(counters.size())),
                          dim3(32 * abi::kDqnCollectWarps), 0};
    if (agents.empty())
        device.kernels().dqn_collect_kernel(device.stream(), dims, a);
    else
        device.kernels().dqn_collect_agents_kernel(device.stream(), dims, a);
}

void dqn_sample(CudaDevice& device, View<float> x, View<int> actions, View<float> returns, View<float> discounts,
                View<float> masks, const RingViews& ring, View<const dqn::Counters> counters,
                View<const dqn::AgentParams> agent, int batch, int ensemble) {
    const LaunchDims dims{dim3(static_cast<unsigned>((batch + 3) / 4), static_cast<unsigned>(agent.size())), dim3(128),
                          0};  // one warp per row
    abi::DqnSampleArgs a{x.data(),       actions.data(), returns.data(),  discounts.data(),
                         or_null(masks), ring_of(ring),  counters.data(), agent.data(),
                         batch,          ensemble};
    device.kernels().dqn_sample_kernel(device.stream(), dims, a);
}

void dqn_curiosity_gather(CudaDevice& device, View<float> input, View<float> next_market, const RingViews& ring,
                          View<const dqn::Counters> counters, int num_actions, int market_dim) {
    const long long n = ring.n_envs;
    const long long blocks = (n + abi::kDqnWarpsPerBlock - 1) / abi::kDqnWarpsPerBlock;
    abi::DqnCuriosityGatherArgs a{input.data(), next_market.data(), ring_of(ring),      counters.data(),
                                  num_actions,  market_dim,         static_cast<int>(n)};
    device.kernels().dqn_curiosity_gather_kernel(
        device.stream(),
        LaunchDims{dim3(static_cast<unsigned>(blocks), static_cast<unsigned>(counters.size())),
                   dim3(32 * abi::kDqnWarpsPerBlock), 0},
        a);
}

void dqn_curiosity_bonus(CudaDevice& device, const RingViews& ring, View<dqn::CuriosityStats> stats,
                         View<const float> error, View<const dqn::Counters> counters,
                         View<const dqn::AgentParams> agent) {
    abi::DqnCuriosityBonusArgs a{ring.rewards.data(), stats.data(),        error.data(), counters.data(),
                                 agent.data(),        ring.capacity_steps, ring.n_envs};
    device.kernels().dqn_curiosity_bonus_kernel(
        device.stream(), LaunchDims{dim3(static_cast<unsigned>(agent.size())), dim3(abi::kDqnFinishThreads), 0}, a);
}

void dqn_her_observe(CudaDevice& device, View<float> obs, View<float> goals, View<const env::EnvState> state,
                     View<const float> states, View<const dqn::Counters> counters, View<const dqn::AgentParams> agent,
                     int capacity_steps, int state_dim) {
    const std::size_t N = agent.size();
    const long long n = static_cast<long long>(state.size() / N);
    const long long blocks = (n + abi::kDqnWarpsPerBlock - 1) / abi::kDqnWarpsPerBlock;
    abi::DqnHerObserveArgs a{obs.data(),   goals.data(),   state.data(),        states.data(), counters.data(),
                             agent.data(), capacity_steps, static_cast<int>(n), state_dim};
    device.kernels().dqn_her_observe_kernel(
        device.stream(),
        LaunchDims{dim3(static_cast<unsigned>(blocks), static_cast<unsigned>(N)), dim3(32 * abi::kDqnWarpsPerBlock), 0},
        a);
}

void dqn_goal_states(CudaDevice& device, View<float> obs, View<const float> states, View<const float> goal,
                     int state_dim) {
    const std::size_t N = goal.size();
    const long long n = static_cast<long long>(states.size() / (N * static_cast<std::size_t>(state_dim)));
    const long long blocks = (n + abi::kDqnWarpsPerBlock - 1) / abi::kDqnWarpsPerBlock;
    abi::DqnGoalStatesArgs a{obs.data(), states.data(), goal.data(), static_cast<int>(n), state_dim};
    device.kernels().dqn_goal_states_kernel(
        device.stream(),
        LaunchDims{dim3(static_cast<unsigned>(blocks), static_cast<unsigned>(N)), dim3(32 * abi::kDqnWarpsPerBlock), 0},
        a);
}

void dqn_her_sample(CudaDevice& device, View<float> x, View<int> actions, View<float> returns, View<float> discounts,
                    View<float> masks, View<float> goals_out, const RingViews& ring, View<const float> goals,
                    View<const dqn::Counters> counters, View<const dqn::AgentParams> agent, int batch, int ensemble) {
    const LaunchDims dims{dim3(static_cast<unsigned>((batch + 3) / 4), static_cast<unsigned>(agent.size())), dim3(128),
                          0};  // one warp per row
    abi::DqnHerSampleArgs a{x.data(),        actions.data(),     returns.data(), discounts.data(),
                            or_null(masks),  or_null(goals_out), ring_of(ring),  goals.data(),
                            counters.data(), agent.data(),       batch,          ensemble};
    device.kernels().dqn_her_sample_kernel(device.stream(), dims, a);
}

}  // namespace fh::ops::cuda_twin
