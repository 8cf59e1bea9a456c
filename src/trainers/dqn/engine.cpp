/// @file engine.cpp
/// @brief The DQN algorithm, top to bottom, for N agents at once: collect (epsilon-greedy, env
///        step, push), update (sample n-step batch, double-DQN C51 target, blended loss,
///        backward, guard, Adam, target update), log. No host synchronisation inside an
///        iteration: the host only reads the device at log intervals.
#include "trainers/dqn/engine.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <iterator>
#include <stdexcept>
#include <tuple>

#include "io/json.hpp"
#include "nn/init.hpp"
#include "abi/dqn_iqn.h"
#include "trainers/memory_plan.hpp"
#include "trainers/setup.hpp"
#include "util/errors.hpp"
#include "abi/core_vector.h"

namespace fh::trainers {

namespace {

/// Options the DQN trainer does not implement are refused, never silently ignored.
void require_supported(const config::Profile& p) {
    std::vector<std::string> missing;
    if (p.dqn.head != "c51" && p.dqn.head != "mse" && p.dqn.head != "iqn")
        missing.push_back(fmt::format("dqn.head = \"{}\" (only \"c51\", \"mse\" and \"iqn\")", p.dqn.head));
    if (!p.eval.deterministic) missing.push_back("eval.deterministic = false (only greedy evaluation exists)");
    if (!missing.empty()) {
        std::string list;
        for (const auto& m : missing) list += "\n  " + m;
        throw UsageError("the DQN trainer does not implement these profile options yet:" + list +
                         "\nset them to their defaults to train");
    }
}

/// The losses the DQN update passes to the guard, in order.
constexpr const char* kGuardLossNames[] = {"the C51 loss", "the MSE loss", "the CQL term"};  // dqn::UpdateStep::losses
static_assert(std::size(kGuardLossNames) == dqn::kUpdateLosses);
/// The same with the IQN head, whose loss takes the MSE's place (its C51 row stays 0).
constexpr const char* kIqnGuardLossNames[] = {"the C51 loss", "the quantile Huber loss", "the CQL term"};
static_assert(std::size(kIqnGuardLossNames) == dqn::kUpdateLosses);

/// A DQN metrics line from one log interval's monitor sums, guard, action histogram and curiosity
/// sums, at `steps` collection steps of n_envs environments and `updates` updates, `seconds` after
/// the line before (`marks`, advanced): the keys every DQN run writes (the options' extras are the
/// caller's). Throws DivergedError (exit 5) when the guard has skipped training.max_bad_updates
/// updates.
LogLine dqn_log_line(const config::Profile& profile, const dqn::MonitorStats& s, const nn::GuardState& g,
                     const std::vector<unsigned long long>& histogram, const dqn::CuriosityStats& curiosity,
                     long long steps, long long updates, int n_envs, double seconds, DqnLogMarks& marks) {
    const bool iqn = profile.dqn.head == "iqn";
    throw_if_diverged(g, profile.training.max_bad_updates, iqn ? kIqnGuardLossNames : kGuardLossNames,
                      "Lower training.learning_rate, raise training.grad_clip_norm's strictness (a smaller value) "
                      "or check the data.");

    // The scalar head's loss is the MSE alone (mse_blend_alpha blends the C51 head's two losses);
    // the IQN head's quantile Huber loss takes the MSE's row.
    const double alpha = profile.dqn.head == "c51" ? profile.dqn.mse_blend_alpha : 0.0;
    const double n = std::max(1, s.updates);
    const double samples = static_cast<double>(std::max<long long>(1, s.samples));
    const double loss_c51 = s.loss_sum[0] / n, loss_mse = s.loss_sum[1] / n, loss_cql = s.loss_sum[2] / n;
    const double cql = profile.dqn.cql_alpha;
    const double loss = alpha * loss_c51 + (1 - alpha) * loss_mse + cql * loss_cql;
    const double q_mean = s.q_sum / samples;
    const long long env_steps = steps * n_envs;
    seconds = std::max(1e-9, seconds);
    const double env_steps_per_s = static_cast<double>(env_steps - marks.env_steps) / seconds;
    const double updates_per_s = static_cast<double>(updates - marks.updates) / seconds;
    marks.updates = updates;
    marks.env_steps = env_steps;
    const bool any = s.updates > 0;
    const double epsilon = dqn::epsilon_at(dqn_agent_params(profile), steps);
    LogLine line;
    line.json = io::json::object({
        {"step", steps},
        {"env_steps", env_steps},
        {"updates", static_cast<long long>(g.applied_updates) + g.bad_total},
        {"losses/loss", any ? loss : 0.0},
        {"losses/c51", any ? loss_c51 : 0.0},
        {"losses/mse", any ? loss_mse : 0.0},
        {"losses/cql", any ? loss_cql : 0.0},
        {"losses/td_abs", any ? s.td_abs_sum / samples : 0.0},
        {"q/mean", any ? q_mean : 0.0},
        {"q/min", any ? static_cast<double>(s.q_min) : 0.0},
        {"q/max", any ? static_cast<double>(s.q_max) : 0.0},
        {"charts/epsilon", epsilon},
        {"charts/grad_norm", any ? s.grad_norm_sum / n : 0.0},
        {"charts/grad_norm_max", any ? static_cast<double>(s.grad_norm_max) : 0.0},
        {"charts/skipped_updates", g.bad_total},
        {"charts/action_histogram", io::json::array_of<unsigned long long>(histogram)},
        {"charts/curiosity",
         curiosity.transitions > 0 ? curiosity.error_sum / static_cast<double>(curiosity.transitions) : 0.0},
        {"perf/env_steps_per_s", env_steps_per_s},
        {"perf/updates_per_s", updates_per_s},
    });
    const std::string cql_part = cql > 0 ? fmt::format(", cql {:.4f}", any ? loss_cql : 0.0) : "";
    const std::string parts =
        iqn ? fmt::format("quantile Huber {:.4f}{}", any ? loss_mse : 0.0, cql_part)
            : fmt::format("c51 {:.4f}, mse {:.4f}{}", any ? loss_c51 : 0.0, any ? loss_mse : 0.0, cql_part);
    line.text = fmt::format(
        "step {:>9} env steps | loss {:.4f} ({}) | Q {:+.3f} | eps {:.3f} | "
        "{:.3g} env steps/s, {:.3g} updates/s",
        env_steps, any ? loss : 0.0, parts, any ? q_mean : 0.0, epsilon, env_steps_per_s, updates_per_s);
    line.loss = any ? loss : 0.0;
    line.env_steps_per_s = env_steps_per_s;
    line.updates_per_s = updates_per_s;
    return line;
}

}  // namespace

std::unique_ptr<DqnAgent> make_dqn_trainer(ops::Device& ops, const config::Profile& profile,
                                           const env::DeviceMarket& market) {
    return single_run<DqnAgent, DqnAgent, DqnEngine>(ops, profile, market);
}

/// run.population_batching = "auto" batches DQN agents whose replay_buffer.batch_size times widest
/// dqn.hidden layer reaches this: measured on an H200 (16 agents, docs/performance.md), smaller
/// agents' updates are bound by the batched engine's chain of launches and run faster on their own.
constexpr long long kAutoBatchingMinWork = 32768;

std::string DqnEngine::auto_batching_declined(const config::Profile& first) {
    const long long widest = *std::max_element(first.dqn.hidden.begin(), first.dqn.hidden.end());
    const long long work = first.replay_buffer.batch_size * widest;
    if (work >= kAutoBatchingMinWork) return "";
    return fmt::format(
        "run.population_batching = \"auto\": replay_buffer.batch_size x the widest dqn.hidden "
        "layer is {} < {}, where the agents run faster on their own; \"on\" batches them",
        work, kAutoBatchingMinWork);
}

std::string DqnEngine::unsupported(const config::Profile& p, const config::Profile& first) {
    if (p.run.trainer != "dqn") return fmt::format("run.trainer = \"{}\" (only dqn)", p.run.trainer);
    if (p.dqn.head != "c51" && p.dqn.head != "mse" && p.dqn.head != "iqn")
        return fmt::format("dqn.head = \"{}\"", p.dqn.head);
    if (!p.eval.deterministic) return "eval.deterministic = false";
    // What the agents share: one network shape and set of options, batch, ring, schedule and environment.
    const auto shape = [](const config::Profile& q) {
        return std::tie(q.dqn.hidden, q.dqn.num_atoms, q.dqn.dueling, q.dqn.v_min, q.dqn.v_max, q.dqn.head,
                        q.dqn.double_dqn, q.experience.gpu_n_episodes, q.experience.n_step, q.replay_buffer.batch_size,
                        q.replay_buffer.buffer_size, q.replay_buffer.min_replay_size, q.training.updates_per_iteration,
                        q.gpu.precision);
    };
    if (shape(p) != shape(first))
        return "a shape (dqn.hidden, num_atoms, dueling, v_min, v_max, head, double_dqn, experience.gpu_n_episodes, "
               "n_step, replay_buffer sizes, training.updates_per_iteration or gpu.precision) differs from the first "
               "agent's";
    const auto options = [](const config::Profile& q) {
        return std::make_tuple(q.dqn.her, q.dqn.curiosity, q.dqn.attention, q.dqn.ensemble_size,
                               q.dqn.ensemble_bootstrap < 1.0, q.dqn.head == "iqn" ? q.dqn.iqn_quantiles : 0,
                               q.dqn.head == "iqn" ? q.dqn.iqn_act_quantiles : 0,
                               q.dqn.head == "iqn" ? q.dqn.iqn_embedding : 0);
    };
    if (options(p) != options(first))
        return "an option's shape (dqn.her, curiosity, attention, ensemble_size, whether ensemble_bootstrap < 1, or "
               "the IQN head's quantiles and embedding) differs from the first agent's";
    if (env_without_seed(trainers::env_params(p, 1)) != env_without_seed(trainers::env_params(first, 1)))
        return "the environment ([instrument], [env] or experience.gpu_timesteps_per_episode) differs from the first "
               "agent's";
    return "";
}

MemoryPlan DqnEngine::plan(const config::Profile& first, int agents, const PlanInputs& in) {
    const auto state_dim = trainers::env_params(first, in.market_dim).state_dim;
    const QNetwork net(network_config(first, state_dim));
    const int n_envs = static_cast<int>(first.experience.gpu_n_episodes),
              batch = static_cast<int>(first.replay_buffer.batch_size), quantiles = net.iqn_params().quantiles;
    const std::uint64_t N = static_cast<std::uint64_t>(agents), P = net.layout().total(),
                        n = static_cast<std::uint64_t>(n_envs), B = static_cast<std::uint64_t>(batch),
                        D = static_cast<std::uint64_t>(state_dim), DX = static_cast<std::uint64_t>(net.state_dim()),
                        W = static_cast<std::uint64_t>(net.output_width()),
                        K = static_cast<std::uint64_t>(net.head().ensemble),
                        A = static_cast<std::uint64_t>(first.num_actions()),
                        Q = static_cast<std::uint64_t>(std::max(1, quantiles)),
                        M = static_cast<std::uint64_t>(in.market_dim);
    const std::uint64_t R = static_cast<std::uint64_t>(dqn_replay_steps(first).capacity) * n;  // an agent's ring
    const std::uint64_t rows = N * R, row_bytes = 2 * D * 4 + 4 + 4 + 1;
    // Its buffers, [agents][...] (PerAgent), set to their starting value where a kernel reads them
    // before it writes them (reset_agent sets a slot's again).
    using E = DqnEngine;
    using PerAgent = MemoryPlan::PerAgent;
    MemoryPlan plan(agents);
    plan.consumer(fmt::format("networks ({} parameters, with target, gradients and Adam moments)", N * P),
                  "dqn.hidden");
    plan.add("networks and targets", {&E::nets_}, PerAgent{P, 2}, 0.0f);
    plan.add("gradients and Adam moments", {&E::grads_, &E::m_, &E::v_}, PerAgent{P}, 0.0f);
    plan.consumer(fmt::format("environments ({} agents x {})", N, n), "experience.gpu_n_episodes");
    plan.add("environment states", {&E::env_state_}, PerAgent{n});
    plan.add("portfolios", {&E::env_portfolio_}, PerAgent{n * env::PORTFOLIO_STRIDE});
    plan.add("observations", {&E::env_states_}, PerAgent{n * D});
    plan.add("markets and seeds", {&E::collect_agents_}, PerAgent{1});
    plan.consumer(fmt::format("replay buffer ({} transitions x {} B)", rows, row_bytes), "replay_buffer.buffer_size");
    plan.add("replay states", {&E::ring_states_, &E::ring_next_states_}, PerAgent{R * D}, 0.0f);
    plan.add("replay rewards", {&E::ring_rewards_}, PerAgent{R}, 0.0f);
    plan.add("replay actions", {&E::ring_actions_}, PerAgent{R}, 0);
    plan.add("replay done flags", {&E::ring_done_}, PerAgent{R}, std::uint8_t{0});
    if (first.dqn.her) {
        plan.consumer(fmt::format("HER goals ({} transitions x 4 B)", rows), "dqn.her");
        plan.add("HER goals", {&E::her_goals_}, PerAgent{R}, 0.0f);
        plan.add("HER acting rows", {&E::her_obs_}, PerAgent{n * DX});
    }
    plan.consumer(fmt::format("batch and workspaces ({} rows, {} environments)", B, n), "replay_buffer.batch_size");
    plan.add("agent constants", {&E::agent_}, PerAgent{1});
    plan.add("counters", {&E::counters_}, PerAgent{1}, dqn::Counters{});
    plan.add("collection tickets", {&E::collect_tickets_}, PerAgent{1}, 0u);
    plan.add("update steps", {&E::step_}, PerAgent{1}, dqn::UpdateStep{});
    plan.add("batch states", {&E::x_}, PerAgent{2 * B * DX});
    plan.add("batch returns and discounts", {&E::returns_, &E::discounts_}, PerAgent{B});
    plan.add("batch actions", {&E::batch_actions_}, PerAgent{B});
    plan.add("acting actions", {&E::actions_}, PerAgent{n});
    plan.add("head gradients", {&E::d_head_}, PerAgent{B * Q * W});
    plan.add("sample statistics", {&E::sample_stats_}, PerAgent{dqn::kSampleStats * B * K});
    if (K > 1) plan.add("ensemble target actions", {&E::target_actions_}, PerAgent{B});
    if (bootstrap_masks(first)) plan.add("bootstrap masks", {&E::masks_}, PerAgent{B * K});
    if (quantiles > 0) {
        plan.add("IQN fraction features", {&E::iqn_features_},
                 PerAgent{2 * B * Q * static_cast<std::uint64_t>(net.iqn_params().n_cos)});
        plan.add("IQN fractions", {&E::iqn_taus_}, PerAgent{2 * B * Q});
    }
    plan.add("norm partials", {&E::norm_partials_}, PerAgent{ops::dqn_finish_scratch_size()}, 0.0f);
    plan.add("guards", {&E::guard_}, PerAgent{1}, nn::GuardState{0, 0, -1, 0, 0});
    plan.add("monitor sums", {&E::stats_}, PerAgent{1}, dqn::MonitorStats{});
    plan.add("action histograms", {&E::histogram_}, PerAgent{A}, 0ull);
    // Acting: one workspace of every agent's environments, or one per agent; the update's (make_update_workspaces).
    if (batched_net(net, agents))
        plan.add("acting workspace", net.workspace_size(agents * n_envs));
    else
        plan.add("acting workspace", net.workspace_size(n_envs), N);
    nn::WorkspaceSize update;
    for (const auto& w : update_workspaces(net, agents, batch, kPairedForwardMaxRows))
        if (w.rows > 0) update += net.workspace_size(w.rows, w.quantiles);
    plan.add("update workspaces", update);
    std::uint64_t curiosity = 0;  // the model's weights and Adam moments, in a checkpoint
    if (first.dqn.curiosity) {
        plan.consumer(fmt::format("curiosity model ({} rows per step)", n), "dqn.curiosity");
        curiosity = 3 * 4 *
                    CuriosityModel::plan(plan, state_dim, static_cast<int>(A),
                                         static_cast<int>(first.dqn.hidden.front()), in.market_dim, n_envs, N);
        plan.add("curiosity next features", {&E::cur_next_market_}, PerAgent{n * M});
        plan.add("curiosity errors", {&E::cur_error_}, PerAgent{n});
        plan.add("curiosity sums", {&E::cur_stats_}, PerAgent{1}, dqn::CuriosityStats{});
    }
    // Each agent's greedy policy in backtests (DqnGreedyPolicy): a workspace of eval.segments rows
    // (with HER, their goal rows and the goal).
    const auto segments = static_cast<int>(first.eval.segments);
    plan.consumer(fmt::format("the backtests' policy ({} segments)", segments), "eval.segments");
    plan.add("policy workspace", net.workspace_size(segments), N);
    if (first.dqn.her) plan.add<float>("policy goal rows", static_cast<std::uint64_t>(segments) * DX + 1, N);
    // A checkpoint's host copy: weights, target, Adam, the environments (and the replay unless
    // checkpoint.keep_replay = false), the curiosity model's weights and moments.
    const std::uint64_t replay = first.checkpoint.keep_replay ? rows * row_bytes : 0;
    plan.host("the host copy a checkpoint is written from",
              (4 * P * 4 + replay + curiosity) + n * (sizeof(env::EnvState) + env::PORTFOLIO_STRIDE * 4 + D * 4),
              first.checkpoint.keep_replay ? "replay_buffer.buffer_size" : "dqn.hidden");
    return plan;
}

DqnEngine::DqnEngine(ops::Device& ops, const std::vector<config::Profile>& agents,
                     const std::vector<const env::DeviceMarket*>& markets)
    : BatchedEngine(ops, agents, markets, "DQN"),
      n_envs_(static_cast<int>(agents.front().experience.gpu_n_episodes)),
      batch_(static_cast<int>(agents.front().replay_buffer.batch_size)),
      num_actions_(static_cast<int>(agents.front().num_actions())),
      env_params_(trainers::env_params(agents.front(), markets.front()->market_dim())),
      net_((require_supported(agents.front()), network_config(agents.front(), env_params_.state_dim))) {
    const config::Profile& first = agents.front();
    check_agents(agents, markets, "one DQN engine with agent 0", unsupported, require_supported);
    batched_net_ = batched_net(net_, agents_);
    const std::size_t N = agents.size(), P = params();
    const DqnReplaySteps replay = dqn_replay_steps(first);
    capacity_steps_ = replay.capacity;
    min_steps_ = replay.before_updates;
    updates_per_iteration_ = first.training.updates_per_iteration;
    PlanInputs inputs;
    inputs.market_dim = env_params_.market_dim;
    plan_ = DqnEngine::plan(first, agents_, inputs);
    plan_.allocate(ops, *this);
    online_ = nets_.view().subview(0, N * P);
    target_ = nets_.view().subview(N * P, N * P);
    steps_.assign(N, 0);
    updates_.assign(N, 0);
    pushed_.assign(N, 0);
    if (first.dqn.curiosity) curiosity_.reserve(N);
    for (std::size_t i = 0; i < N; ++i) start_agent(i, agents[i], *markets[i]);

    if (batched_net_)
        ws_act_.push_back(net_.make_workspace(ops, agents_ * n_envs_));
    else
        for (int a = 0; a < agents_; ++a) ws_act_.push_back(net_.make_workspace(ops, n_envs_));
    act_outputs_.resize(N);
    make_update_workspaces();
}

void DqnEngine::start_agent(std::size_t a, const config::Profile& p, const env::DeviceMarket& market) {
    const int agent = static_cast<int>(a);
    profiles_[a] = p;
    // The weights from its seed (the padding zero), the target a copy.
    nn::init_params(ops_, online(agent), net_.layout(), static_cast<std::uint64_t>(p.run.seed));
    ops::run(ops_, ops::Copy{target(agent), ops::View<const float>(online(agent))});
    // Its environments from its seed on its market; its constants and counters.
    const abi::EnvAgent env =
        env::VecEnv::start_into(ops_, {env_state_.view(), env_portfolio_.view(), env_states_.view()}, a, market,
                                env::Split::train, trainers::env_params(p, env_params_.market_dim), n_envs_);
    if (a == 0) market0_ = env.market;
    upload_agent(ops_, collect_agents_, a, {env});
    upload_agent(ops_, agent_, a, {dqn_agent_params(p)});
    steps_[a] = 0;
    updates_[a] = 0;
    pushed_[a] = 0;
    if (p.dqn.curiosity)
        put_agent(curiosity_, a,
                  CuriosityModel(ops_, env_params_.state_dim, num_actions_, static_cast<int>(p.dqn.hidden.front()),
                                 env_params_.market_dim, n_envs_, static_cast<std::uint64_t>(p.run.seed)));
}

void DqnEngine::reset_agent(int agent, const config::Profile& p, const env::DeviceMarket& market) {
    require_supported(p);
    check_new_agent(profiles_, agent, p, market, env_params_.market_dim, unsupported, "a DQN engine");
    plan_.reset_agent(ops_, *this, agent);
    start_agent(static_cast<std::size_t>(agent), p, market);
    // The curiosity model's buffers and learning rate are the captured sequences' arguments.
    for (auto* sequence : {&collect_sequence_, &iteration_sequence_, &update_sequence_}) sequence->reset();
    ops_.synchronize();
}

std::array<DqnEngine::WorkspaceShape, 3> DqnEngine::update_workspaces(const QNetwork& net, int agents, int batch,
                                                                      int paired_forward_max_rows) {
    const int quantiles = net.iqn_params().quantiles;
    if (batched_net(net, agents))  // three forwards of every agent's B rows
        return {{{agents * batch, 0}, {agents * batch, 0}, {agents * batch, 0}}};
    if (agents == 1 && quantiles == 0 && batch <= paired_forward_max_rows)  // both networks on [s; s']
        return {{{4 * batch, 0}, {}, {}}};
    if (agents == 1 && quantiles > 0)  // both networks' quantiles on [s; s'], one pass
        return {{{4 * batch, quantiles}, {}, {}}};
    return {{{2 * batch, quantiles}, {}, {batch, quantiles}}};  // the online network on [s; s'] beside the target on s'
}

void DqnEngine::make_update_workspaces() {
    const auto shapes = update_workspaces(net_, agents_, batch_, paired_forward_max_rows_);
    QNetwork::Workspace* workspaces[] = {&ws_pair_, &ws_next_, &ws_target_};
    for (auto* ws : workspaces) *ws = QNetwork::Workspace{};
    for (std::size_t k = 0; k < shapes.size(); ++k)
        if (shapes[k].rows > 0) *workspaces[k] = net_.make_workspace(ops_, shapes[k].rows, shapes[k].quantiles);
}

void DqnEngine::set_paired_forward_max_rows(int rows) {
    paired_forward_max_rows_ = rows;
    make_update_workspaces();
    update_sequence_.reset();  // captured with the old workspaces
    iteration_sequence_.reset();
}

ops::DqnRing DqnEngine::ring(int a) {
    const auto part = [&](auto& b) { return a < 0 ? b.view() : slice(b, a); };
    return ops::DqnRing{part(ring_states_),
                        part(ring_next_states_),
                        part(ring_actions_),
                        part(ring_rewards_),
                        part(ring_done_),
                        capacity_steps_,
                        n_envs_,
                        env_params_.state_dim};
}

env::EnvParams DqnEngine::env_params(int agent) const {
    return trainers::env_params(profile(agent), env_params_.market_dim);
}

ops::View<float> DqnEngine::masks(int a) {
    if (!bootstrap_masks(profiles_.front())) return {};
    if (masks_.size() == 0) throw std::logic_error("DqnEngine: its plan declares no bootstrap masks");
    return a < 0 ? masks_.view() : slice(masks_, a);
}

ops::View<float> DqnEngine::online(int agent) {
    if (agent < 0 || agent >= agents_) throw std::out_of_range("DqnEngine: no such agent");
    return online_.subview(static_cast<std::size_t>(agent) * params(), params());
}

ops::View<float> DqnEngine::target(int agent) {
    return target_.subview(static_cast<std::size_t>(agent) * params(), params());
}

void DqnEngine::restore_counters(int agent, long long steps, long long updates, long long pushed) {
    if (agent < 0 || agent >= agents_) throw std::out_of_range("DqnEngine::restore_counters: no such agent");
    if (iterations_ != 0) throw std::logic_error("DqnEngine::restore_counters after the engine iterated");
    const auto a = static_cast<std::size_t>(agent);
    steps_[a] = steps;
    updates_[a] = updates;
    pushed_[a] = pushed;
    // One curiosity model step per collection step.
    if (!curiosity_.empty()) curiosity_[a].restore_steps(ops_, steps);
    upload_agent(ops_, counters_, a, {dqn::Counters{steps, updates, pushed}});
}

// One collection step of every agent: each acts epsilon-greedily on its online network's Q and
// the transitions go into its ring's next slot. The step count, epsilon and the slot come from
// the device counters, so the sequence is captured once and replayed. With `advance` the counters
// advance after it: in the environment step's launch, unless the curiosity bonus still has to read
// this step's slot.
void DqnEngine::collect_ops(bool advance) {
    const std::size_t n = static_cast<std::size_t>(n_envs_), W = static_cast<std::size_t>(net_.output_width()),
                      DX = static_cast<std::size_t>(net_.state_dim());
    ops::View<const float> observations = env_states_.cview();
    if (profiles_.front().dqn.her) {  // the episodes' goals into the slot's goal column, and the rows acted on
        ops::run(ops_, ops::DqnHerObserve{her_obs_.view(), her_goals_.view(), env_state_.cview(), env_states_.cview(),
                                          counters_.cview(), agent_.cview(), capacity_steps_, env_params_.state_dim});
        observations = her_obs_.cview();
    }
    if (batched_net_) {
        const auto head = net_.forward_agents(ops_, ops::View<const float>(online_), params(), observations, n * DX,
                                              n_envs_, agents_, ws_act_.front());
        ops::run(
            ops_,
            ops::DqnAct{actions_.view(), {}, histogram_.view(), head, net_.head(), agent_.cview(), counters_.cview()});
        for (int a = 0; a < agents_; ++a) act_outputs_[static_cast<std::size_t>(a)] = head.subview(a * n * W, n * W);
    } else {
        for (int a = 0; a < agents_; ++a) {
            const auto head = net_.forward(ops_, online(a), observations.subview(a * n * DX, n * DX), n_envs_,
                                           ws_act_[static_cast<std::size_t>(a)]);
            act_outputs_[static_cast<std::size_t>(a)] = head;
            ops::run(ops_, ops::DqnAct{slice(actions_, a),
                                       {},
                                       slice(histogram_, a),
                                       head,
                                       net_.head(),
                                       cslice(agent_, a),
                                       cslice(counters_, a)});
        }
    }
    const bool advance_here = advance && curiosity_.empty();
    ops::run(ops_, ops::DqnCollect{env_state_.view(), env_portfolio_.view(), env_states_.view(), actions_.cview(),
                                   ring(), counters_.cview(), market0_, env_params_,
                                   advance_here ? ops::CollectAdvance{counters_.view(), collect_tickets_.view()}
                                                : ops::CollectAdvance{},
                                   collect_agents_.cview()});
    if (!curiosity_.empty()) curiosity_ops();
    if (advance && !advance_here) ops::run(ops_, ops::DqnAdvance{counters_.view()});
}

// The curiosity bonus (docs/dqn.md, "Curiosity"): each agent's forward model's error on the
// transitions just written, (s, a) -> the next bar's market features, is added to their stored
// rewards with its dqn.curiosity_coef before any update can sample them (the slot joins the
// sampled range at dqn_advance); then one Adam step of each model on the same transitions.
void DqnEngine::curiosity_ops() {
    const int M = env_params_.market_dim;
    for (int a = 0; a < agents_; ++a) {
        auto& model = curiosity_[static_cast<std::size_t>(a)];
        ops::run(ops_, ops::DqnCuriosityGather{model.input(), slice(cur_next_market_, a), ring(a), cslice(counters_, a),
                                               num_actions_, M});
        model.train_step(ops_, slice(cur_error_, a), cslice(cur_next_market_, a), M,
                         static_cast<float>(profile(a).training.learning_rate));
    }
    ops::run(ops_,
             ops::DqnCuriosityBonus{ring(), cur_stats_.view(), cur_error_.cview(), counters_.cview(), agent_.cview()});
}

// One gradient update of every agent on a uniform batch of its n-step transitions (docs/dqn.md):
// 1. sample [s; s'], actions, n-step returns and discounts at the device's counters;
// 2. the online network on s and s' (s' picks a* for double DQN), the target on s';
// 3. the fused loss: C51 projection and cross-entropy blended with the MSE on the expected Q
//    (dqn.head = "iqn": iqn_loss_ops), and the head's backward (d_head); an ensemble's K heads
//    are K rows per sample, each with its bootstrap mask, all bootstrapping from the action the
//    heads' mean Q picks at s';
// 4. backward through the network; the finish: gradient norm, guard, monitor, Adam constants;
// 5. Adam (skipped on the device when the guard says so) and the target update, one pass
//    (adam_ops: an iteration issues it after the collection's forward).
void DqnEngine::gradient_ops(std::uint32_t inject_nan) {
    const int B = batch_, K = net_.head().ensemble;
    if (profiles_.front().dqn.her)  // relabelled goals, goal-conditioned returns, rows with goal features
        ops::run(ops_, ops::DqnHerSample{x_.view(), batch_actions_.view(), returns_.view(), discounts_.view(), ring(),
                                         her_goals_.cview(), counters_.cview(), agent_.cview(), B, masks(), K});
    else
        ops::run(ops_, ops::DqnSample{x_.view(), batch_actions_.view(), returns_.view(), discounts_.view(), ring(),
                                      counters_.cview(), agent_.cview(), B, masks(), K});
    if (batched_net_) {
        // Every agent's online network on s (differentiated) and s', its target on s' (three batched
        // forwards side by side; rows being independent, each agent's are its own engine's).
        const std::size_t Bs = static_cast<std::size_t>(B), DX = static_cast<std::size_t>(net_.state_dim());
        const std::size_t xs = 2 * Bs * DX;  // one agent's [s; s']
        // Agent i's states at i * xs, its next states B rows further (each view ends with the last agent's).
        const std::size_t span = static_cast<std::size_t>(agents_ - 1) * xs + Bs * DX;
        const auto states = x_.cview().subview(0, span), next = x_.cview().subview(Bs * DX, span);
        const bool double_dqn = profiles_.front().dqn.double_dqn;
        const auto online = ops::View<const float>(online_), target = ops::View<const float>(target_);
        ops::View<const float> head_s, head_next, head_target;
        ops_.run_concurrently(
            [&] { head_s = net_.forward_agents(ops_, online, params(), states, xs, B, agents_, ws_pair_); },
            [&] {
                if (double_dqn) head_next = net_.forward_agents(ops_, online, params(), next, xs, B, agents_, ws_next_);
            },
            [&] { head_target = net_.forward_agents(ops_, target, params(), next, xs, B, agents_, ws_target_); });
        loss_ops(-1, head_s, double_dqn ? head_next : head_target, head_target);
        net_.backward_agents(ops_, online, grads_.view(), d_head_.view(), ws_pair_);
    } else {
        for (int a = 0; a < agents_; ++a) agent_gradient_ops(a);
    }
    ops::run(ops_,
             ops::DqnUpdateFinish{step_.view(), guard_.view(), stats_.view(), counters_.view(), norm_partials_.view(),
                                  grads_.cview(), sample_stats_.cview(), agent_.cview(), B * K, inject_nan});
}

// Agent a's forward, loss and backward, on its slices of the batch: the paired pass of an engine of
// one, else the online network on [s; s'] beside the target on s' (large batches: a quarter of the
// forward's products fewer; the GPU is full either way).
void DqnEngine::agent_gradient_ops(int a) {
    const int B = batch_;
    const std::size_t Bs = static_cast<std::size_t>(B), W = static_cast<std::size_t>(net_.output_width()),
                      DX = static_cast<std::size_t>(net_.state_dim());
    const auto x = cslice(x_, a);
    if (net_.iqn_params().quantiles > 0) {
        iqn_loss_ops(a);
    } else {
        ops::View<const float> head_s, head_online_next, head_target;
        if (paired_forward()) {
            // Both networks on [s; s'] in one batched pass: rows (net, 2B); the target's rows on s are unused.
            const auto heads = net_.forward_batched(ops_, nets_.cview(), 2, x, 2 * B, ws_pair_);
            head_s = heads.subview(0, Bs * W);
            head_online_next = heads.subview(Bs * W, Bs * W);
            head_target = heads.subview(3 * Bs * W, Bs * W);
        } else {
            ops::View<const float> online_heads;
            ops_.run_concurrently(
                [&] { online_heads = net_.forward(ops_, online(a), x, 2 * B, ws_pair_); },
                [&] { head_target = net_.forward(ops_, target(a), x.subview(Bs * DX, Bs * DX), B, ws_target_); });
            head_s = online_heads.subview(0, Bs * W);
            head_online_next = online_heads.subview(Bs * W, Bs * W);
        }
        loss_ops(a, head_s, profile(a).dqn.double_dqn ? head_online_next : head_target, head_target);
    }
    net_.backward(ops_, online(a), slice(grads_, a), slice(d_head_, a), B, ws_pair_);
}

// The IQN head's loss of agent a (docs/dqn.md, "IQN head"): this update's fractions (Philox on
// the update number in device memory) for the rows of [s; s'], both networks' head rows under
// them, the quantile Huber loss between the online quantiles at s and the targets at s', the
// head's backward.
void DqnEngine::iqn_loss_ops(int a) {
    const int B = batch_, N = net_.iqn_params().quantiles, n_cos = net_.iqn_params().n_cos;
    const std::size_t rows = static_cast<std::size_t>(B) * static_cast<std::size_t>(N);
    const std::size_t W = static_cast<std::size_t>(net_.output_width()),
                      DX = static_cast<std::size_t>(net_.state_dim());
    const auto x = cslice(x_, a);
    const auto features = cslice(iqn_features_, a), taus = cslice(iqn_taus_, a);
    ops::run(ops_, ops::IqnTaus{slice(iqn_features_, a), slice(iqn_taus_, a), cslice(agent_, a), cslice(counters_, a),
                                2 * B, N, n_cos});
    ops::View<const float> head_s, head_online_next, head_target;
    if (agents_ == 1) {
        // (network, [s; s'] rows x N, W): the online network's rows at s, its rows at s' (double
        // DQN's selection), the target's at s'.
        const auto heads = net_.forward_quantiles(ops_, nets_.cview(), 2, x, 2 * B, features, N, ws_pair_);
        head_s = heads.subview(0, rows * W);
        head_online_next = heads.subview(rows * W, rows * W);
        head_target = heads.subview(3 * rows * W, rows * W);
    } else {  // the online network on [s; s'], the target on s' (its fractions' rows of [s; s'])
        const auto heads = net_.forward_quantiles(ops_, online(a), 1, x, 2 * B, features, N, ws_pair_);
        head_s = heads.subview(0, rows * W);
        head_online_next = heads.subview(rows * W, rows * W);
        head_target = net_.forward_quantiles(
            ops_, target(a), 1, x.subview(static_cast<std::size_t>(B) * DX, static_cast<std::size_t>(B) * DX), B,
            features.subview(rows * static_cast<std::size_t>(n_cos), rows * static_cast<std::size_t>(n_cos)), N,
            ws_target_);
    }
    const auto head_select = profile(a).dqn.double_dqn ? head_online_next : head_target;
    ops::run(ops_, ops::IqnLoss{slice(d_head_, a), slice(sample_stats_, a), head_s, head_select, head_target,
                                taus.subview(0, rows), cslice(batch_actions_, a), cslice(returns_, a),
                                cslice(discounts_, a), cslice(agent_, a), net_.head(), N, B});
}

// The fused loss and the head's gradient (d_head) of every agent (a < 0) or of agent a, from the
// online network's heads at s, the select network's at s' (double DQN: the online network's) and
// the target's at s'.
void DqnEngine::loss_ops(int a, ops::View<const float> head_s, ops::View<const float> head_select,
                         ops::View<const float> head_target) {
    const auto part = [&](auto& b) { return a < 0 ? b.view() : slice(b, a); };
    const auto cpart = [&](auto& b) { return a < 0 ? b.cview() : cslice(b, a); };
    const int K = net_.head().ensemble;
    if (K > 1)  // the ensemble's a*: the heads' mean Q of the select network at s'
        ops::run(ops_,
                 ops::DqnAct{
                     part(target_actions_), {}, {}, head_select, net_.head(), cpart(agent_), cpart(counters_), false});
    ops::run(ops_, ops::DqnLoss{part(d_head_), part(sample_stats_), head_s, head_select, head_target,
                                cpart(batch_actions_), cpart(returns_), cpart(discounts_), cpart(agent_), net_.head(),
                                batch_, K > 1 ? cpart(target_actions_) : ops::View<const int>{}, masks(a)});
}

void DqnEngine::adam_ops(bool end_step) {
    ops::run(ops_, ops::DqnAdamTarget{online_, m_.view(), v_.view(), target_, grads_.cview(), step_.cview(),
                                      agent_.cview(), end_step ? counters_.view() : ops::View<dqn::Counters>{}});
}

bool DqnEngine::any_ready_to_update() const noexcept {
    for (std::size_t a = 0; a < pushed_.size(); ++a)
        if (ready_to_update(a)) return true;
    return false;
}

// The first update's gradient beside the collection step; its Adam step only after the
// collection's forward has read the weights (the join), so collection acts with the weights of the
// iteration's start without a copy of them. The last Adam step also advances the counters. The
// agents whose rings are not ready yet (a slot that started a new point while the others train)
// collect as the others do; their updates are discarded on the device (dqn::finish_update), so
// each agent trains as a single run of it does.
void DqnEngine::iterate() {
    if (!any_ready_to_update()) return collect();
    const long long n = updates_per_iteration_;
    // Tests: the agents whose updates get a NaN loss (their Trainers' inject_nan_at_updates).
    std::vector<std::uint32_t> nan(static_cast<std::size_t>(n), 0u);
    bool inject = false;
    for (long long k = 0; k < n; ++k) {
        const std::uint32_t mask =
            members_.nan_mask([&](int a) { return updates_[static_cast<std::size_t>(a)] + k + 1; });
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
    run_unless_injected(ops_, iteration_sequence_, inject, issue);
    for (std::size_t a = 0; a < updates_.size(); ++a)
        if (ready_to_update(a)) updates_[a] += n;
    after_collect();
}

void DqnEngine::after_collect() {
    ++iterations_;
    for (auto& s : steps_) ++s;
    for (auto& p : pushed_) ++p;
    for (auto& c : curiosity_) c.count_steps(1);
}

void DqnEngine::prepare() {
    while (!any_ready_to_update()) collect();
}

void DqnEngine::collect() {
    ops_.run_sequence(collect_sequence_, [this] { collect_ops(true); });
    after_collect();
}

void DqnEngine::update() {
    const std::uint32_t mask = members_.nan_mask([&](int a) { return updates_[static_cast<std::size_t>(a)] + 1; });
    const auto issue = [this, mask] {
        gradient_ops(mask);
        adam_ops(false);
    };
    run_unless_injected(ops_, update_sequence_, mask != 0, issue);
    for (std::size_t a = 0; a < updates_.size(); ++a)
        if (ready_to_update(a)) ++updates_[a];
}

LogLine DqnEngine::read_log(int a, double seconds, DqnLogMarks& marks) {
    const config::Profile& p = profile(a);
    const auto i = static_cast<std::size_t>(a);
    const dqn::MonitorStats s = ops_.to_host(cslice(stats_, a))[0];  // synchronises: once per log interval
    const nn::GuardState g = ops_.to_host(cslice(guard_, a))[0];
    const auto histogram = ops_.to_host(cslice(histogram_, a));
    // Start the next interval from zero.
    upload_agent(ops_, stats_, i, {dqn::MonitorStats{}});
    upload_agent(ops_, histogram_, i, std::vector<unsigned long long>(histogram.size(), 0));
    dqn::CuriosityStats curiosity{};
    if (!curiosity_.empty()) {
        curiosity = ops_.to_host(cslice(cur_stats_, a))[0];
        upload_agent(ops_, cur_stats_, i, {dqn::CuriosityStats{}});
    }
    // With attention: the weights of the last collection step's environments, mean per group.
    std::vector<double> attention_mean(net_.attention_groups().size(), 0.0);
    if (!attention_mean.empty()) {
        const auto alpha = ops_.to_host(net_.attention_weights(ws_act_[static_cast<std::size_t>(a)]));
        const std::size_t G = attention_mean.size(), rows = alpha.size() / G;
        for (std::size_t r = 0; r < rows; ++r)
            for (std::size_t k = 0; k < G; ++k) attention_mean[k] += alpha[r * G + k];
        for (auto& m : attention_mean) m /= static_cast<double>(std::max<std::size_t>(1, rows));
    }
    // With an ensemble: the heads' disagreement at the states of the log interval's last
    // collection step (its first kSpreadRows environments).
    const auto act_outputs = act_outputs_[static_cast<std::size_t>(a)];
    double spread = 0.0;
    const bool ensemble = net_.head().ensemble > 1 && !act_outputs.empty();
    if (ensemble) {
        constexpr std::size_t kSpreadRows = 256;
        const std::size_t OW = static_cast<std::size_t>(net_.output_width());
        const std::size_t rows = std::min<std::size_t>(kSpreadRows, act_outputs.size() / OW);
        spread = ensemble_spread(ops_.to_host(act_outputs.subview(0, rows * OW)), net_.head());
    }
    // With HER: the share of the environments whose return is at or above their episode's goal at
    // the log interval's last collection step (the acting rows' distance feature g - achieved <= 0).
    double goal_reached = 0.0;
    if (p.dqn.her && steps_[i] > 0) {
        const auto rows = ops_.to_host(cslice(her_obs_, a));
        const std::size_t DX = static_cast<std::size_t>(net_.state_dim());
        std::size_t reached = 0;
        for (std::size_t e = 0; e < static_cast<std::size_t>(n_envs_); ++e) reached += rows[e * DX + DX - 1] <= 0.0f;
        goal_reached = static_cast<double>(reached) / n_envs_;
    }
    LogLine line = dqn_log_line(p, s, g, histogram, curiosity, steps_[i], updates_[i], n_envs_, seconds, marks);
    auto members = line.json.as_object();
    if (p.dqn.head == "iqn")  // losses/quantile_huber: the IQN head's loss (losses/mse holds the same number)
        members.emplace_back("losses/quantile_huber", s.updates > 0 ? s.loss_sum[1] / std::max(1, s.updates) : 0.0);
    if (p.dqn.her) members.emplace_back("her/goal_reached", goal_reached);
    const auto& groups = net_.attention_groups();  // attention/<group>: what the agent looks at
    for (std::size_t k = 0; k < attention_mean.size(); ++k)
        members.emplace_back("attention/" + groups[k].name, attention_mean[k]);
    if (ensemble) members.emplace_back("q/ensemble_spread", spread);
    line.json = io::json::Value::object(std::move(members));
    return line;
}

std::vector<StateTensor> DqnEngine::state_tensors(int a) {
    const auto P = static_cast<std::int64_t>(params());
    const auto D = static_cast<std::int64_t>(env_params_.state_dim);
    const auto n = static_cast<std::int64_t>(n_envs_);
    const auto rows = static_cast<std::int64_t>(capacity_steps_) * n;
    std::vector<StateTensor> t{
        state_tensor("params/online", "F32", {P}, online(a)),
        state_tensor("params/target", "F32", {P}, target(a)),
        state_tensor("adam/m", "F32", {P}, slice(m_, a)),
        state_tensor("adam/v", "F32", {P}, slice(v_, a)),
        state_tensor("replay/states", "F32", {rows, D}, slice(ring_states_, a)),
        state_tensor("replay/next_states", "F32", {rows, D}, slice(ring_next_states_, a)),
        state_tensor("replay/rewards", "F32", {rows}, slice(ring_rewards_, a)),
        state_tensor("replay/actions", "I32", {rows}, slice(ring_actions_, a)),
        state_tensor("replay/done", "U8", {rows}, slice(ring_done_, a)),
        state_tensor("env/state", "U8", {n, static_cast<std::int64_t>(sizeof(env::EnvState))}, slice(env_state_, a)),
        state_tensor("env/portfolio", "F32", {n, env::PORTFOLIO_STRIDE}, slice(env_portfolio_, a)),
        state_tensor("env/states", "F32", {n, D}, slice(env_states_, a)),
        state_tensor("guard/state", "U8", {static_cast<std::int64_t>(sizeof(nn::GuardState))}, slice(guard_, a)),
        state_tensor("monitor/stats", "U8", {static_cast<std::int64_t>(sizeof(dqn::MonitorStats))}, slice(stats_, a)),
        state_tensor("monitor/histogram", "U64", {static_cast<std::int64_t>(num_actions_)}, slice(histogram_, a)),
    };
    if (profiles_.front().dqn.her)  // the goal of every transition in the ring
        t.push_back(
            state_tensor("her/goals", "F32", {static_cast<std::int64_t>(capacity_steps_), n}, slice(her_goals_, a)));
    if (!curiosity_.empty()) {
        for (auto& c : curiosity_[static_cast<std::size_t>(a)].state_tensors("curiosity/")) t.push_back(std::move(c));
        t.push_back(state_tensor("curiosity/stats", "U8", {static_cast<std::int64_t>(sizeof(dqn::CuriosityStats))},
                                 slice(cur_stats_, a)));
    }
    return t;
}

void DqnEngine::set_agent_keys(int a, const config::Profile& p) {
    replace_agent_keys(profiles_, a, p, unsupported,
                       "a DQN agent keeps its run.seed while it trains (its exploration and replay draws)");
    upload_agent(ops_, agent_, static_cast<std::size_t>(a), {dqn_agent_params(p)});
    // The curiosity models' learning rate is an argument of the captured sequences.
    for (auto* sequence : {&collect_sequence_, &iteration_sequence_, &update_sequence_}) sequence->reset();
}

io::ReplayDump DqnEngine::replay_dump(int a) {
    io::ReplayDump d;
    d.state_dim = env_params_.state_dim;
    d.n_envs = n_envs_;
    d.capacity_steps = capacity_steps_;
    d.num_actions = num_actions_;
    d.pushed_steps = pushed_.at(static_cast<std::size_t>(a));
    d.states = ops_.to_host(cslice(ring_states_, a));
    d.next_states = ops_.to_host(cslice(ring_next_states_, a));
    d.rewards = ops_.to_host(cslice(ring_rewards_, a));
    d.actions = ops_.to_host(cslice(ring_actions_, a));
    d.done = ops_.to_host(cslice(ring_done_, a));
    return d;
}

DqnAgent::DqnAgent(std::shared_ptr<DqnEngine> engine, int agent)
    : EngineAgent(engine, agent, engine->steps(agent)),
      policy_(network_config(engine_->profile(agent), env_params_.state_dim), eval_goal(engine_->profile(agent))),
      steps_(engine_->steps(agent)) {}

void DqnAgent::iterate() {
    advance(steps_);
    ++steps_;
}

void DqnAgent::restore_counter_values(std::span<const std::int64_t> v) {
    if (v.size() != 3 || v[0] < 0 || v[1] < 0 || v[2] < 0 || v[2] > v[0])
        throw UsageError("checkpoint counters are inconsistent (steps, updates, pushed steps)");
    engine_->restore_counters(agent_, v[0], v[1], v[2]);
    steps_ = v[0];
    restart_at(steps_);
    log_marks_ = DqnLogMarks{v[1], v[0] * engine_->n_envs()};
}

std::vector<std::int64_t> DqnAgent::counters_without_replay(std::span<const std::int64_t> v) const {
    std::vector<std::int64_t> out(v.begin(), v.end());
    if (out.size() == 3) out[2] = 0;  // steps and updates go on; the ring refills from empty
    return out;
}

void DqnAgent::bench_prepare() {
    require_alone();
    engine_->prepare();
    steps_ = engine_->steps(agent_);
}

long long DqnAgent::bench_collect() {
    require_alone();
    engine_->collect();
    ++steps_;
    return engine_->n_envs();
}

long long DqnAgent::bench_update() {
    require_alone();
    engine_->update();
    return 1;
}

}  // namespace fh::trainers
