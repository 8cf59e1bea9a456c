/// @file dqn_population.cpp
/// @brief DqnTrainer's collection step and update for N agents at once: the same ops in the same
///        order, each launched once over [agents][...] buffers (docs/sweeps.md).
#include "trainers/dqn_population.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <stdexcept>
#include <tuple>

#include "io/json.hpp"
#include "nn/init.hpp"
#include "trainers/dqn_trainer.hpp"
#include "trainers/setup.hpp"
#include "util/errors.hpp"

namespace fh::trainers {

std::string DqnPopulation::unsupported(const config::Profile& p, const config::Profile& first) {
    if (p.run.trainer != "dqn") return fmt::format("run.trainer = \"{}\" (only dqn)", p.run.trainer);
    if (p.dqn.head != "c51" && p.dqn.head != "mse") return fmt::format("dqn.head = \"{}\"", p.dqn.head);
    if (p.dqn.her) return "dqn.her";
    if (p.dqn.curiosity) return "dqn.curiosity";
    if (p.dqn.attention) return "dqn.attention";
    if (p.dqn.ensemble_size > 1) return "dqn.ensemble_size > 1";
    if (!p.eval.deterministic) return "eval.deterministic = false";
    if (p.replay_buffer.save_dump) return "replay_buffer.save_dump";
    // What the agents share: one network shape, batch, ring, schedule and environment.
    const auto shape = [](const config::Profile& q) {
        return std::tie(q.dqn.hidden, q.dqn.num_atoms, q.dqn.dueling, q.dqn.v_min, q.dqn.v_max, q.dqn.head,
                        q.dqn.double_dqn, q.experience.gpu_n_episodes, q.experience.n_step,
                        q.replay_buffer.batch_size, q.replay_buffer.buffer_size, q.replay_buffer.min_replay_size,
                        q.training.updates_per_iteration, q.gpu.tf32);
    };
    if (shape(p) != shape(first))
        return "a shape (dqn.hidden, num_atoms, dueling, v_min, v_max, head, double_dqn, experience.gpu_n_episodes, "
               "n_step, replay_buffer sizes, training.updates_per_iteration or gpu.tf32) differs from the first agent's";
    if (env_without_seed(trainers::env_params(p, 1)) != env_without_seed(trainers::env_params(first, 1)))
        return "the environment ([instrument], [env] or experience.gpu_timesteps_per_episode) differs from the first "
               "agent's";
    return "";
}

DqnPopulation::DqnPopulation(ops::Device& ops, const std::vector<config::Profile>& agents,
                             const std::vector<const env::DeviceMarket*>& markets)
    : ops_(ops),
      profiles_(agents),
      agents_(static_cast<int>(agents.size())),
      n_envs_(static_cast<int>(first_agent(agents, markets, "DQN").experience.gpu_n_episodes)),
      batch_(static_cast<int>(agents.front().replay_buffer.batch_size)),
      num_actions_(static_cast<int>(agents.front().num_actions())),
      capacity_steps_(0),
      min_steps_(0),
      updates_per_iteration_(0),
      env_params_(trainers::env_params(agents.front(), markets.front()->market_dim())),
      net_(network_config(agents.front(), env_params_.state_dim)) {
    const config::Profile& first = agents.front();
    for (std::size_t i = 0; i < agents.size(); ++i) {
        const std::string why = unsupported(agents[i], first);
        if (!why.empty())
            throw UsageError(fmt::format("agent {} cannot train in a batched DQN population: {}", i, why));
        if (markets[i]->market_dim() != env_params_.market_dim)
            throw UsageError(fmt::format("agent {}'s market has {} features, the first agent's {}", i,
                                         markets[i]->market_dim(), env_params_.market_dim));
    }
    const std::size_t N = agents.size(), P = params(), n = static_cast<std::size_t>(n_envs_),
                      B = static_cast<std::size_t>(batch_), D = static_cast<std::size_t>(env_params_.state_dim),
                      W = static_cast<std::size_t>(net_.output_width());
    const DqnReplaySteps replay = dqn_replay_steps(first);
    capacity_steps_ = replay.capacity;
    min_steps_ = replay.before_updates;
    updates_per_iteration_ = first.training.updates_per_iteration;

    // Parameters as DqnTrainer initialises them, agent by agent (the padding zero).
    online_ = ops.alloc<float>(N * P);
    ops.fill(online_.view(), 0.0f);
    for (std::size_t i = 0; i < N; ++i)
        nn::init_params(ops, online_.view().subview(i * P, P), net_.layout(),
                        static_cast<std::uint64_t>(agents[i].run.seed));
    target_ = ops.alloc<float>(N * P);
    ops.copy(target_.view(), online_.cview());
    for (auto* b : {&grads_, &m_, &v_}) {
        *b = ops.alloc<float>(N * P);
        ops.fill(b->view(), 0.0f);
    }

    // Each agent's environments start as its single run's (its seed, its market).
    env_state_ = ops.alloc<env::EnvState>(N * n);
    env_portfolio_ = ops.alloc<float>(N * n * env::PORTFOLIO_STRIDE);
    env_states_ = ops.alloc<float>(N * n * D);
    std::vector<abi::EnvAgent> collect_agents(N);
    for (std::size_t i = 0; i < N; ++i) {
        env::VecEnv venv(ops, *markets[i], env::Split::train, trainers::env_params(agents[i], env_params_.market_dim), n_envs_);
        venv.reset_all();
        auto start = venv.persistent();
        ops.copy_raw(env_state_.view().subview(i * n, n), ops::View<const env::EnvState>(start.state));
        ops.copy(env_portfolio_.view().subview(i * n * env::PORTFOLIO_STRIDE, n * env::PORTFOLIO_STRIDE),
                 ops::View<const float>(start.portfolio));
        ops.copy(env_states_.view().subview(i * n * D, n * D), ops::View<const float>(start.states));
        collect_agents[i] = abi::EnvAgent{venv.market(), static_cast<std::uint64_t>(agents[i].run.seed)};
        if (i == 0) market0_ = venv.market();
        ops.synchronize();  // the copies are done before venv's buffers go
    }
    collect_agents_ = ops.from_host<abi::EnvAgent>(collect_agents);

    // The rings, zeroed as ReplayRing's.
    const std::size_t rows = N * static_cast<std::size_t>(capacity_steps_) * n;
    ring_states_ = ops.alloc<float>(rows * D);
    ring_next_states_ = ops.alloc<float>(rows * D);
    ring_rewards_ = ops.alloc<float>(rows);
    ops.fill(ring_states_.view(), 0.0f);
    ops.fill(ring_next_states_.view(), 0.0f);
    ops.fill(ring_rewards_.view(), 0.0f);
    ring_actions_ = ops.from_host<int>(std::vector<int>(rows, 0));
    ring_done_ = ops.from_host<std::uint8_t>(std::vector<std::uint8_t>(rows, 0));

    std::vector<dqn::AgentParams> params_host;
    for (const auto& p : agents) params_host.push_back(dqn_agent_params(p));
    agent_ = ops.from_host<dqn::AgentParams>(params_host);
    counters_ = ops.from_host<dqn::Counters>(std::vector<dqn::Counters>(N, dqn::Counters{}));
    collect_tickets_ = ops.from_host<unsigned>(std::vector<unsigned>(N, 0u));
    step_ = ops.from_host<dqn::UpdateStep>(std::vector<dqn::UpdateStep>(N, dqn::UpdateStep{}));
    x_ = ops.alloc<float>(N * 2 * B * D);
    returns_ = ops.alloc<float>(N * B);
    discounts_ = ops.alloc<float>(N * B);
    batch_actions_ = ops.alloc<int>(N * B);
    actions_ = ops.alloc<int>(N * n);
    d_head_ = ops.alloc<float>(N * B * W);
    sample_stats_ = ops.alloc<float>(N * dqn::kSampleStats * B);
    norm_partials_ = ops.alloc<float>(N * ops::dqn_finish_scratch_size());
    ops.fill(norm_partials_.view(), 0.f);  // the finish's tickets start at zero
    guard_ = ops.from_host<nn::GuardState>(std::vector<nn::GuardState>(N, nn::GuardState{0, 0, -1, 0, 0}));
    stats_ = ops.from_host<dqn::MonitorStats>(std::vector<dqn::MonitorStats>(N, dqn::MonitorStats{}));
    histogram_ = ops.from_host<unsigned long long>(std::vector<unsigned long long>(N * num_actions_, 0));

    const int agents_n = agents_;
    ws_act_ = net_.make_workspace(ops, agents_n * n_envs_);
    ws_s_ = net_.make_workspace(ops, agents_n * batch_);
    ws_next_ = net_.make_workspace(ops, agents_n * batch_);
    ws_target_ = net_.make_workspace(ops, agents_n * batch_);
}

ops::RingViews DqnPopulation::ring() {
    return ops::RingViews{ring_states_.view(), ring_next_states_.view(), ring_actions_.view(), ring_rewards_.view(),
                          ring_done_.view(),   capacity_steps_,         n_envs_,             env_params_.state_dim};
}

DqnPopulation::AgentState DqnPopulation::agent_state(int agent) {
    const std::size_t a = static_cast<std::size_t>(agent), P = params(), n = static_cast<std::size_t>(n_envs_),
                      D = static_cast<std::size_t>(env_params_.state_dim),
                      rows = static_cast<std::size_t>(capacity_steps_) * n, A = static_cast<std::size_t>(num_actions_);
    if (agent < 0 || agent >= agents_) throw std::out_of_range("DqnPopulation::agent_state: no such agent");
    return AgentState{online_.view().subview(a * P, P),
                      target_.view().subview(a * P, P),
                      m_.view().subview(a * P, P),
                      v_.view().subview(a * P, P),
                      ring_states_.view().subview(a * rows * D, rows * D),
                      ring_next_states_.view().subview(a * rows * D, rows * D),
                      ring_rewards_.view().subview(a * rows, rows),
                      ring_actions_.view().subview(a * rows, rows),
                      ring_done_.view().subview(a * rows, rows),
                      env_state_.view().subview(a * n, n),
                      env_portfolio_.view().subview(a * n * env::PORTFOLIO_STRIDE, n * env::PORTFOLIO_STRIDE),
                      env_states_.view().subview(a * n * D, n * D),
                      guard_.view().subview(a, 1),
                      stats_.view().subview(a, 1),
                      histogram_.view().subview(a * A, A)};
}

void DqnPopulation::restore_counters(int agent, long long steps, long long updates) {
    if (agent < 0 || agent >= agents_) throw std::out_of_range("DqnPopulation::restore_counters: no such agent");
    if (!restored_) {
        if (steps_ != 0 || updates_ != 0)
            throw std::logic_error("DqnPopulation::restore_counters after the population iterated");
        steps_ = steps;
        updates_ = updates;
        restored_ = true;
    } else if (steps != steps_ || updates != updates_) {
        throw UsageError(fmt::format("agent {} of a batched population continues from step {} (update {}), another "
                                     "from step {} (update {}); resume with run.population_batching = \"off\"",
                                     agent, steps, updates, steps_, updates_));
    }
    ops_.upload<dqn::Counters>(counters_.view().subview(static_cast<std::size_t>(agent), 1),
                               std::vector<dqn::Counters>{dqn::Counters{steps, updates, steps}});
}

bool DqnPopulation::ready_to_update() const noexcept { return steps_ >= min_steps_; }

// DqnTrainer::collect_ops for every agent: the online networks on their environments'
// observations, epsilon-greedy, the environment step into the rings' slots.
void DqnPopulation::collect_ops(bool advance) {
    const std::size_t n = static_cast<std::size_t>(n_envs_), D = static_cast<std::size_t>(env_params_.state_dim);
    const auto head =
        net_.forward_agents(ops_, online_.cview(), params(), env_states_.cview(), n * D, n_envs_, agents_, ws_act_);
    ops::dqn_act(ops_, actions_.view(), {}, histogram_.view(), head, net_.head(), agent_.cview(), counters_.cview());
    ops::dqn_collect(ops_, env_state_.view(), env_portfolio_.view(), env_states_.view(), actions_.cview(), ring(),
                     counters_.cview(), market0_, env_params_,
                     advance ? ops::CollectAdvance{counters_.view(), collect_tickets_.view()} : ops::CollectAdvance{},
                     collect_agents_.cview());
}

// DqnTrainer::gradient_ops for every agent (the C51 or scalar head): sampling, the online
// networks on s (differentiated) and s', the targets on s' (three batched forwards side by side;
// rows being independent, each agent's are its single run's paired pass's), the loss, the
// backward, the finish.
void DqnPopulation::gradient_ops(std::uint32_t inject_nan) {
    const int B = batch_;
    const std::size_t Bs = static_cast<std::size_t>(B), D = static_cast<std::size_t>(env_params_.state_dim);
    const std::size_t xs = 2 * Bs * D;  // one agent's [s; s']
    ops::dqn_sample(ops_, x_.view(), batch_actions_.view(), returns_.view(), discounts_.view(), ring(),
                    counters_.cview(), agent_.cview(), B);
    // Agent i's states at i * xs, its next states B rows further (each view ends with the last agent's).
    const std::size_t span = static_cast<std::size_t>(agents_ - 1) * xs + Bs * D;
    const auto states = x_.cview().subview(0, span), next = x_.cview().subview(Bs * D, span);
    const bool double_dqn = profiles_.front().dqn.double_dqn;
    ops::View<const float> head_s, head_next, head_target;
    ops_.run_concurrently(
        [&] { head_s = net_.forward_agents(ops_, online_.cview(), params(), states, xs, B, agents_, ws_s_); },
        [&] {
            if (double_dqn) head_next = net_.forward_agents(ops_, online_.cview(), params(), next, xs, B, agents_, ws_next_);
        },
        [&] { head_target = net_.forward_agents(ops_, target_.cview(), params(), next, xs, B, agents_, ws_target_); });
    ops::dqn_loss(ops_, d_head_.view(), sample_stats_.view(), head_s, double_dqn ? head_next : head_target, head_target,
                  batch_actions_.cview(), returns_.cview(), discounts_.cview(), agent_.cview(), net_.head(), B);
    net_.backward_agents(ops_, online_.cview(), grads_.view(), d_head_.view(), ws_s_);
    ops::dqn_update_finish(ops_, step_.view(), guard_.view(), stats_.view(), counters_.view(), norm_partials_.view(),
                           grads_.cview(), sample_stats_.cview(), agent_.cview(), B, inject_nan);
}

void DqnPopulation::adam_ops(bool end_step) {
    ops::dqn_adam_target(ops_, online_.view(), m_.view(), v_.view(), target_.view(), grads_.cview(), step_.cview(),
                         agent_.cview(), end_step ? counters_.view() : ops::View<dqn::Counters>{});
}

// As DqnTrainer::iterate: the first update's gradient beside the collection step, its Adam step
// after the join (collection acts with the weights of the iteration's start), the last Adam step
// advancing the counters.
void DqnPopulation::iterate() {
    if (!ready_to_update()) return collect();
    const long long n = updates_per_iteration_;
    // Tests: the agents whose updates get a NaN loss (their Trainers' inject_nan_at_updates).
    std::vector<std::uint32_t> nan(static_cast<std::size_t>(n), 0u);
    bool inject = false;
    for (long long k = 0; k < n; ++k) {
        const std::uint32_t mask = members_.nan_mask(updates_ + k + 1);
        nan[static_cast<std::size_t>(k)] = mask;
        inject = inject || mask != 0;
    }
    const auto issue = [&] {
        ops_.run_concurrently([this] { collect_ops(false); }, [&] { gradient_ops(nan[0]); });
        adam_ops(n == 1);
        for (long long k = 2; k <= n; ++k) {
            gradient_ops(nan[static_cast<std::size_t>(k - 1)]);
            adam_ops(k == n);
        }
    };
    if (inject) issue();  // tests: never captured
    else ops_.run_sequence(iteration_sequence_, issue);
    ++steps_;
    updates_ += n;
}

void DqnPopulation::prepare() {
    while (!ready_to_update()) collect();
}

void DqnPopulation::collect() {
    ops_.run_sequence(collect_sequence_, [this] { collect_ops(true); });
    ++steps_;
}

void DqnPopulation::update() {
    ops_.run_sequence(update_sequence_, [this] {
        gradient_ops();
        adam_ops(false);
    });
    ++updates_;
}

std::unique_ptr<Trainer> DqnPopulation::agent(int i) {
    return std::make_unique<DqnPopulationAgent>(shared_from_this(), i);
}

DqnPopulationAgent::DqnPopulationAgent(std::shared_ptr<DqnPopulation> population, int agent)
    : population_(std::move(population)),
      agent_(agent),
      state_(population_->agent_state(agent)),
      env_params_(trainers::env_params(population_->profile(agent), population_->env_params().market_dim)),
      policy_(network_config(population_->profile(agent), env_params_.state_dim), eval_goal(population_->profile(agent))) {
    population_->members_.join(this);
}

DqnPopulationAgent::~DqnPopulationAgent() { population_->members_.leave(this); }

void DqnPopulationAgent::iterate() {
    PopulationAgents<DqnPopulationAgent>::advance(*population_, population_->steps(), steps_);
    ++steps_;
}

LogLine DqnPopulationAgent::read_log(double seconds) {
    ops::Device& ops = population_->ops_;
    const dqn::MonitorStats s = ops.to_host(ops::View<const dqn::MonitorStats>(state_.stats))[0];
    const nn::GuardState g = ops.to_host(ops::View<const nn::GuardState>(state_.guard))[0];
    const auto histogram = ops.to_host(ops::View<const unsigned long long>(state_.histogram));
    ops.upload<dqn::MonitorStats>(state_.stats, std::vector<dqn::MonitorStats>{dqn::MonitorStats{}});
    ops.upload<unsigned long long>(state_.histogram, std::vector<unsigned long long>(histogram.size(), 0));
    return dqn_log_line(population_->profile(agent_), s, g, histogram, dqn::CuriosityStats{}, steps_, updates(),
                        population_->n_envs(), seconds, log_marks_);
}

// DqnTrainer::state_tensors' names, shapes and order (without its options' extras, which a batched
// population does not take): an agent's checkpoint is a single run's.
std::vector<StateTensor> DqnPopulationAgent::state_tensors() {
    const auto P = static_cast<std::int64_t>(state_.online.size());
    const auto D = static_cast<std::int64_t>(env_params_.state_dim);
    const auto n = static_cast<std::int64_t>(population_->n_envs());
    const auto rows = static_cast<std::int64_t>(population_->capacity_steps()) * n;
    return {state_tensor("params/online", "F32", {P}, state_.online),
            state_tensor("params/target", "F32", {P}, state_.target),
            state_tensor("adam/m", "F32", {P}, state_.m),
            state_tensor("adam/v", "F32", {P}, state_.v),
            state_tensor("replay/states", "F32", {rows, D}, state_.ring_states),
            state_tensor("replay/next_states", "F32", {rows, D}, state_.ring_next_states),
            state_tensor("replay/rewards", "F32", {rows}, state_.ring_rewards),
            state_tensor("replay/actions", "I32", {rows}, state_.ring_actions),
            state_tensor("replay/done", "U8", {rows}, state_.ring_done),
            state_tensor("env/state", "U8", {n, static_cast<std::int64_t>(sizeof(env::EnvState))}, state_.env_state),
            state_tensor("env/portfolio", "F32", {n, env::PORTFOLIO_STRIDE}, state_.env_portfolio),
            state_tensor("env/states", "F32", {n, D}, state_.env_states),
            state_tensor("guard/state", "U8", {static_cast<std::int64_t>(sizeof(nn::GuardState))}, state_.guard),
            state_tensor("monitor/stats", "U8", {static_cast<std::int64_t>(sizeof(dqn::MonitorStats))}, state_.stats),
            state_tensor("monitor/histogram", "U64", {static_cast<std::int64_t>(state_.histogram.size())},
                         state_.histogram)};
}

// DqnTrainer::restore_counter_values' checks and counters, the population's shared by every agent.
void DqnPopulationAgent::restore_counter_values(std::span<const std::int64_t> v) {
    if (v.size() != 3 || v[0] < 0 || v[1] < 0 || v[2] != v[0])
        throw UsageError("checkpoint counters are inconsistent (steps, updates, pushed steps)");
    population_->restore_counters(agent_, v[0], v[1]);
    steps_ = v[0];
    log_marks_ = DqnLogMarks{v[1], v[0] * population_->n_envs()};
}

long long DqnPopulationAgent::bench_update() {
    throw std::logic_error("DqnPopulationAgent: bench the population (bench_population), not one of its agents");
}

}  // namespace fh::trainers
