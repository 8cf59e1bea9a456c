/// @file engine.cpp
/// @brief The IQL algorithm, top to bottom (docs/iql.md), for every agent of an engine at once:
///        build each agent's dataset once, then per update: sample a batch (n = 1), V by expectile
///        regression on min(Q1', Q2')(s, a), the twin Q towards r + gamma (1 - terminated) V(s'),
///        the policy by advantage-weighted regression, backward, guard, Adam, target update.
#include "trainers/iql/engine.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <stdexcept>
#include <tuple>

#include "io/json.hpp"
#include "nn/init.hpp"
#include "abi/iql_awr.h"
#include "abi/replay_nstep.h"
#include "trainers/offline_dataset.hpp"
#include "trainers/setup.hpp"
#include "util/errors.hpp"
#include "abi/core_optim.h"
#include "abi/core_vector.h"

namespace fh::trainers {

using namespace iql_stats;

namespace {
/// The losses each update passes to the guard, in order (statistics [0, 3)); then the gradient norm.
constexpr const char* kGuardLossNames[] = {"the value (expectile) loss", "the Q loss", "the policy (AWR) loss"};
static_assert(kGuardLosses == static_cast<int>(std::size(kGuardLossNames)));
/// Share of the behaviour policy's rule-based traders' actions taken uniformly at random.
constexpr float kBehaviourRandomFraction = 0.2f;
}  // namespace

IqlNetworks::IqlNetworks(const config::Profile& p, int state_dim, int num_actions)
    : layout(),
      q1(layout, "q1", nn::MlpConfig::stack(state_dim, p.iql.hidden, num_actions, ops::Activation::relu)),
      q2(layout, "q2", nn::MlpConfig::stack(state_dim, p.iql.hidden, num_actions, ops::Activation::relu)),
      v(layout, "v", nn::MlpConfig::stack(state_dim, p.iql.hidden, 1, ops::Activation::relu)),
      // A small last layer starts the policy near uniform.
      policy(layout, "policy",
             nn::MlpConfig::stack(state_dim, p.iql.hidden, num_actions, ops::Activation::relu, 0.01f)) {}

iql::BehaviourParams behaviour_params(const env::EnvParams& e, std::uint64_t seed) {
    return iql::BehaviourParams{e.position_levels, e.urgency_levels,         e.market_dim,
                                e.state_dim,       kBehaviourRandomFraction, seed};
}

std::unique_ptr<IqlAgent> make_iql_trainer(ops::Device& ops, const config::Profile& profile,
                                           const env::DeviceMarket& market) {
    return single_run<IqlAgent, IqlAgent, IqlEngine>(ops, profile, market);
}

std::string IqlEngine::unsupported(const config::Profile& p, const config::Profile& first) {
    if (p.run.trainer != "iql") return fmt::format("run.trainer = \"{}\" (only iql)", p.run.trainer);
    if (!p.eval.deterministic) return "eval.deterministic = false";
    // What the agents share: the networks, batch, dataset, clipping and target mode.
    const auto shape = [](const config::Profile& q) {
        return std::tie(q.iql.hidden, q.iql.dataset, q.iql.dataset_size, q.replay_buffer.batch_size,
                        q.training.grad_clip_norm, q.training.target_update_period, q.experience.gpu_n_episodes,
                        q.gpu.precision);
    };
    if (shape(p) != shape(first))
        return "a shape (iql.hidden, iql.dataset, iql.dataset_size, replay_buffer.batch_size, "
               "training.grad_clip_norm, training.target_update_period, experience.gpu_n_episodes or gpu.precision) "
               "differs from the first agent's";
    if ((p.training.tau > 0) != (first.training.tau > 0))
        return "training.tau > 0 (a soft target) for some agents and not for others";
    if (env_without_seed(trainers::env_params(p, 1)) != env_without_seed(trainers::env_params(first, 1)))
        return "the environment ([instrument], [env] or experience.gpu_timesteps_per_episode) differs from the first "
               "agent's";
    return "";
}

MemoryPlan IqlEngine::plan(const config::Profile& first, int agents, const PlanInputs& in) {
    const int state_dim = trainers::env_params(first, in.market_dim).state_dim,
              batch = static_cast<int>(first.replay_buffer.batch_size);
    const IqlNetworks net(first, state_dim, static_cast<int>(first.num_actions()));
    const std::uint64_t N = static_cast<std::uint64_t>(agents), P = net.layout.total(),
                        B = static_cast<std::uint64_t>(batch), D = static_cast<std::uint64_t>(state_dim),
                        A = static_cast<std::uint64_t>(first.num_actions());
    MemoryPlan plan(agents);
    plan_offline_dataset(plan, first, state_dim, first.iql.dataset, first.iql.dataset_size, "iql", in, N, false);
    // Its buffers, [agents][...] (PerAgent) but for the update ticket, set to their starting value
    // where a kernel reads them before it writes them (reset_agent sets a slot's again).
    using E = IqlEngine;
    using PerAgent = MemoryPlan::PerAgent;
    plan.consumer(fmt::format("networks ({} parameters, with gradients, Adam moments, target)", N * P), "iql.hidden");
    plan.add("parameters, gradients and Adam moments", {&E::online_, &E::grads_, &E::m_, &E::v_}, PerAgent{P}, 0.0f);
    plan.add("targets", {&E::target_}, PerAgent{P});
    plan.add("sampling constants", {&E::sample_agents_}, PerAgent{1});
    plan.add("update steps", {&E::step_}, PerAgent{1}, 0ll);
    plan.add("update ticket", {&E::step_ticket_}, 1, 0u);
    plan.add("learning rates", {&E::lr_}, PerAgent{1});
    plan.add("target rates", {&E::tau_keep_}, PerAgent{2});
    plan.add("loss constants", {&E::scalars_}, PerAgent{1});
    plan.consumer(fmt::format("batch and workspaces ({} rows)", B), "replay_buffer.batch_size");
    plan.add("batch states", {&E::x_}, PerAgent{2 * B * D});
    plan.add("batch scalars",
             {&E::rewards_, &E::discounts_, &E::loss_v_, &E::loss_q_, &E::loss_pi_, &E::awr_weights_, &E::d_v_},
             PerAgent{B});
    plan.add("batch actions", {&E::actions_}, PerAgent{B});
    plan.add("batch logit gradients", {&E::d_q1_, &E::d_q2_, &E::d_logits_}, PerAgent{B * A});
    plan.add("update statistics", {&E::current_}, PerAgent{1, iql_stats::kCount}, 0.0f);  // stat-major
    plan.add("monitor sums", {&E::accum_}, PerAgent{iql_stats::kCount}, 0.0f);
    plan.add("norm scratch", {&E::norm_scratch_}, PerAgent{ops::norm_guard_scratch_size()}, 0.0f);  // tickets zero
    plan.add("gates", {&E::gate_}, PerAgent{1}, 0);
    plan.add("guards", {&E::guard_}, PerAgent{1}, nn::GuardState{0, 0, -1, 0, 0});
    // An engine of one: the twins' pairs and V on [s; s'] (2B rows each); else N x B rows each (and the twins' own).
    const int rows = agents == 1 ? 2 * batch : agents * batch;
    plan.add("Q workspaces", net.q1.workspace_size(rows), agents == 1 ? 2 : 4);
    plan.add("V workspaces", net.v.workspace_size(rows), agents == 1 ? 1 : 2);
    plan.add("policy update workspace", net.policy.workspace_size(agents * batch));
    const auto segments = static_cast<int>(first.eval.segments);
    plan.consumer(fmt::format("the backtests' policy ({} segments)", segments), "eval.segments");
    plan.add("policy workspace", net.policy.workspace_size(segments), N);
    plan.host("the host copy a checkpoint is written from", 4 * P * 4, "iql.hidden");
    return plan;
}

IqlEngine::IqlEngine(ops::Device& ops, const std::vector<config::Profile>& agents,
                     const std::vector<const env::DeviceMarket*>& markets)
    : BatchedEngine(ops, agents, markets, "IQL"),
      num_actions_(static_cast<int>(agents.front().num_actions())),
      state_dim_(trainers::env_params(agents.front(), markets.front()->market_dim()).state_dim),
      batch_(static_cast<int>(agents.front().replay_buffer.batch_size)),
      net_(agents.front(), state_dim_, num_actions_) {
    const config::Profile& first = agents.front();
    check_agents(agents, markets, "a batched IQL population", unsupported, [](const auto&) {});
    const std::size_t N = agents.size();
    env_params_.resize(N);
    PlanInputs inputs;
    inputs.market_dim = markets.front()->market_dim();
    plan_ = IqlEngine::plan(first, agents_, inputs);
    plan_.allocate(ops, *this);
    twin_stride_ = net_.q2.layers().front().weight.offset - net_.q1.layers().front().weight.offset;
    for (std::size_t l = 0; l < net_.q1.layers().size(); ++l) {
        const auto &a = net_.q1.layers()[l], &b = net_.q2.layers()[l];
        if (b.weight.offset != a.weight.offset + twin_stride_ || b.bias.offset != a.bias.offset + twin_stride_)
            throw std::logic_error("IqlEngine: the twin Q networks are not laid out at one stride");
    }
    datasets_.resize(N);
    transitions_.assign(N, 0);
    collection_seconds_.assign(N, 0.0);
    updates_.assign(N, 0);
    for (std::size_t i = 0; i < N; ++i) start_agent(i, agents[i], *markets[i]);

    // An engine of one: the twins' pairs and V on [s; s'] (2B rows each); else N x B rows each.
    const int rows = alone() ? 2 * batch_ : agents_ * batch_;
    for (auto* ws : {&ws_q1_target_, &ws_q1_}) *ws = net_.q1.make_workspace(ops, rows);
    ws_v_ = net_.v.make_workspace(ops, rows);
    ws_policy_ = net_.policy.make_workspace(ops, agents_ * batch_);
    if (!alone()) {
        for (auto* ws : {&ws_q2_target_, &ws_q2_}) *ws = net_.q1.make_workspace(ops, rows);
        ws_v_next_ = net_.v.make_workspace(ops, rows);
    }
}

void IqlEngine::start_agent(std::size_t a, const config::Profile& p, const env::DeviceMarket& market) {
    const std::size_t P = params();
    profiles_[a] = p;
    env_params_[a] = trainers::env_params(p, market.market_dim());
    // Its dataset as its single run builds it (its seed's behaviour data on its market).
    OfflineDataset ds =
        build_offline_dataset(ops_, p, market, env_params_[a], p.iql.dataset, p.iql.dataset_size, "iql");
    datasets_[a] = std::move(ds.ring);
    transitions_[a] = ds.transitions;
    collection_seconds_[a] = ds.collection_seconds;
    // The weights from its seed (the padding zero), the target a copy.
    const auto online = online_.view().subview(a * P, P);
    nn::init_params(ops_, online, net_.layout, static_cast<std::uint64_t>(p.run.seed));
    ops::run(ops_, ops::Copy{target_.view().subview(a * P, P), ops::View<const float>(online)});
    upload_keys(a, p);  // its keys and its dataset's sampling
    updates_[a] = 0;
}

void IqlEngine::reset_agent(int agent, const config::Profile& p, const env::DeviceMarket& market) {
    require_greedy_evaluation(p);
    check_new_agent(profiles_, agent, p, market, env_params_.front().market_dim, unsupported, "an IQL engine");
    plan_.reset_agent(ops_, *this, agent);
    start_agent(static_cast<std::size_t>(agent), p,
                market);  // its keys and sampling: the captured update captured again
    ops_.synchronize();
}

// One update of every agent. Each agent's number (sampling, the guard, Adam's bias corrections,
// the periodic target copy) is read from its update counter in device memory, which the update's
// first launch (the sampling) advances: no per-update value comes from the host, so the sequence
// is captured once and replayed.
void IqlEngine::update_ops(std::uint32_t inject_nan) {
    const int N = agents_, B = batch_;
    const std::size_t Ns = static_cast<std::size_t>(N), P = params(), Bs = static_cast<std::size_t>(B),
                      D = static_cast<std::size_t>(state_dim_);
    const std::size_t xs = 2 * Bs * D;  // one agent's [s; s']
    const std::size_t span = (Ns - 1) * xs + Bs * D;
    const auto update = step_.cview();
    const ops::CounterValue own_update = agent_counter(update);  // agent a's: update[a]

    // 1. Every agent's uniform batch of one-step transitions (s, a, r, gamma (1 - terminated), s')
    //    at the update number the sampling advances the counter to (no launch of its own).
    ops::run(ops_, ops::NstepSampleAgents{x_.view().subview(0, span), x_.view().subview(Bs * D, span), actions_.view(),
                                          rewards_.view(), discounts_.view(), sample_agents_.cview(), xs,
                                          ops::CounterAdvance{step_.view(), step_ticket_.view()}, B, state_dim_});
    const auto states = x_.cview().subview(0, span), next = x_.cview().subview(Bs * D, span);
    const auto online = online_.cview(), target = target_.cview();
    // q2 of agent i is q1's layers shifted by twin_stride_ inside agent i's slice.
    const auto online_q2 = online.subview(twin_stride_, Ns * P - twin_stride_);
    const auto target_q2 = target.subview(twin_stride_, Ns * P - twin_stride_);

    // The forwards are independent (each writes only its own workspace): the target twin, V on s
    // and s', the online twin and the policy run as four branches (four streams on CUDA: small
    // layers leave most of the GPU idle, so they overlap). Each layer is one strided-batched
    // product over the agents' networks.
    // An engine of one runs each twin as one batched pass of its two networks on s (q2 is q1's
    // layers shifted by twin_stride_) and V on [s; s'] as one pass of 2B rows: fewer, larger
    // products (the same rows).
    ops::View<const float> q1_target, q2_target, v, v_next, q1, q2, logits;
    const std::size_t BA = Bs * static_cast<std::size_t>(num_actions_);
    // The twins of `params` (q2's: `params_q2`) on s, into q1_out and q2_out.
    const auto twins = [&](ops::View<const float> params, ops::View<const float> params_q2, nn::Mlp::Workspace& ws1,
                           nn::Mlp::Workspace& ws2, ops::View<const float>& q1_out, ops::View<const float>& q2_out) {
        if (alone()) {
            const auto pair = net_.q1.forward_batched(ops_, params, twin_stride_, states, 0, B, 2, ws1);
            q1_out = pair.subview(0, BA);
            q2_out = pair.subview(BA, BA);
        } else {
            q1_out = net_.q1.forward_batched(ops_, params, P, states, xs, B, N, ws1);
            q2_out = net_.q1.forward_batched(ops_, params_q2, P, states, xs, B, N, ws2);
        }
    };
    ops_.run_concurrently([&] { twins(target, target_q2, ws_q1_target_, ws_q2_target_, q1_target, q2_target); },
                          [&] {
                              if (alone()) {
                                  const auto pair = net_.v.forward(ops_, online, x_.cview(), 2 * B, ws_v_);
                                  v = pair.subview(0, Bs);
                                  v_next = pair.subview(Bs, Bs);
                                  return;
                              }
                              v = net_.v.forward_batched(ops_, online, P, states, xs, B, N, ws_v_);
                              v_next = net_.v.forward_batched(ops_, online, P, next, xs, B, N, ws_v_next_);
                          },
                          [&] { twins(online, online_q2, ws_q1_, ws_q2_, q1, q2); },
                          [&] {
                              logits = alone()
                                           ? net_.policy.forward(ops_, online, states, B, ws_policy_)
                                           : net_.policy.forward_batched(ops_, online, P, states, xs, B, N, ws_policy_);
                          });

    // 2-5. Three branches, each a loss, its networks' backward and its statistics (every branch
    //    writes only its own loss, gradient buffers, workspace rows, gradient slices and
    //    statistics; all read the forwards' outputs; statistics stat-major: stat k of agent a at
    //    k N + a, one mean launch per statistic for every agent):
    //  - V(s) by expectile regression towards min of the target twin Q at (s, a);
    //  - twin Q towards r + gamma (1 - terminated) V(s'), then Q1's and Q2's backwards side by
    //    side (Q2 is q1's layers shifted by twin_stride_);
    //  - the policy by advantage-weighted regression: weights min(exp(beta (Q' - V)), max_weight).
    const auto cur = current_.view();
    const auto stat = [&](int k) { return cur.subview(static_cast<std::size_t>(k) * Ns, Ns); };
    const auto grads = grads_.view();
    const auto grads_q2 = grads.subview(twin_stride_, Ns * P - twin_stride_);
    const auto& first = profiles_.front().iql;
    // The backward of one of the networks (V, the policy) from its outputs' gradient `d`.
    const auto backward = [&](const nn::Mlp& net, ops::View<float> d, nn::Mlp::Workspace& ws) {
        if (alone())
            net.backward(ops_, online, grads, d, {}, B, ws, false);
        else
            net.backward_batched(ops_, online, grads, d, {}, ws, false);
    };
    ops_.run_concurrently(
        [&] {
            fh::ops::run(ops_,
                         fh::ops::IqlValueLoss{loss_v_.view(), d_v_.view(), v, q1_target, q2_target, actions_.cview(),
                                               static_cast<float>(first.expectile), scalars_.cview()});
            backward(net_.v, d_v_.view(), ws_v_);
            ops::run(ops_, ops::Mean{stat(kValueLoss), loss_v_.cview()});
            ops::run(ops_, ops::Mean{stat(kV), v});
            inject_nan_at(ops_, stat(kValueLoss), inject_nan);
        },
        [&] {
            fh::ops::run(ops_, fh::ops::IqlQLoss{loss_q_.view(), d_q1_.view(), d_q2_.view(), q1, q2, actions_.cview(),
                                                 rewards_.cview(), discounts_.cview(), v_next, N});
            if (alone())  // network 0 and 1 of the twin pair's pass
                ops_.run_concurrently(
                    [&] { net_.q1.backward(ops_, online, grads, d_q1_.view(), {}, B, ws_q1_, false, 0); },
                    [&] { net_.q1.backward(ops_, online, grads, d_q2_.view(), {}, B, ws_q1_, false, 1); });
            else
                ops_.run_concurrently(
                    [&] { net_.q1.backward_batched(ops_, online, grads, d_q1_.view(), {}, ws_q1_, false); },
                    [&] { net_.q1.backward_batched(ops_, online_q2, grads_q2, d_q2_.view(), {}, ws_q2_, false); });
            ops::run(ops_, ops::Mean{stat(kQLoss), loss_q_.cview()});
        },
        [&] {
            fh::ops::run(
                ops_, fh::ops::AwrPolicyLoss{loss_pi_.view(), awr_weights_.view(), d_logits_.view(), logits, q1_target,
                                             q2_target, v, actions_.cview(), static_cast<float>(first.beta),
                                             static_cast<float>(first.max_weight), scalars_.cview()});
            backward(net_.policy, d_logits_.view(), ws_policy_);
            ops::run(ops_, ops::Mean{stat(kPolicyLoss), loss_pi_.cview()});
            ops::run(ops_, ops::Mean{stat(kWeight), awr_weights_.cview()});
        });

    // 6. Norm, guard and the log's sums per agent (one launch), Adam per agent with its learning
    //    rate; with tau > 0 the soft target copy (target += tau (online - target)) in Adam's pass,
    //    else the periodic copy after it (each agent at its own update number). Only the Q slices of
    //    the target are read; updating the whole buffer keeps one operation.
    ops::run(ops_, ops::NormAndGuardAgents{N, grads_.cview(), norm_scratch_.view(), gate_.view(), guard_.view(), cur,
                                           kGuardLosses, kGradNorm, own_update, accum_.view()});
    const auto& t = profiles_.front().training;
    ops::AdamParams adam;
    adam.clip_norm = static_cast<float>(t.grad_clip_norm);
    const bool soft = t.tau > 0;
    ops::run(ops_, ops::AdamStepAgents{N, online_.view(), m_.view(), v_.view(), grads_.cview(), stat(kGradNorm),
                                       gate_.cview(), own_update, adam, lr_.cview(),
                                       soft ? target_.view() : ops::View<float>(),
                                       soft ? tau_keep_.cview() : ops::View<const float>()});
    if (!soft)  // each agent at its own update number
        ops::run(ops_, ops::CopyEvery{target_.view(), online_.cview(), update, t.target_update_period});
}

void IqlEngine::iterate() {
    const std::uint32_t nan = members_.nan_mask([&](int a) { return updates_[static_cast<std::size_t>(a)] + 1; });
    run_unless_injected(ops_, update_sequence_, nan != 0, [&] { update_ops(nan); });
    ++iterations_;
    for (auto& u : updates_) ++u;
}

void IqlEngine::restore_updates(int agent, long long updates) {
    if (agent < 0 || agent >= agents_) throw std::out_of_range("IqlEngine::restore_updates: no such agent");
    if (iterations_ != 0) throw std::logic_error("IqlEngine::restore_updates after the engine updated");
    const auto a = static_cast<std::size_t>(agent);
    updates_[a] = updates;
    upload_agent(ops_, step_, a, {updates});
}

// The sum of the agents' rates, as an unbatched population's bench reports it.
double IqlEngine::dataset_collection_env_steps_per_s() const noexcept {
    double rate = 0;
    for (std::size_t i = 0; i < transitions_.size(); ++i)
        if (collection_seconds_[i] > 0) rate += static_cast<double>(transitions_[i]) / collection_seconds_[i];
    return rate;
}

IqlEngine::AgentState IqlEngine::agent_state(int agent) {
    if (agent < 0 || agent >= agents_) throw std::out_of_range("IqlEngine::agent_state: no such agent");
    const std::size_t a = static_cast<std::size_t>(agent), P = params();
    const double seconds = collection_seconds_[a];
    return AgentState{online_.view().subview(a * P, P),
                      target_.view().subview(a * P, P),
                      m_.view().subview(a * P, P),
                      v_.view().subview(a * P, P),
                      accum_.view().subview(a * kCount, kCount),
                      guard_.view().subview(a, 1),
                      transitions_[a],
                      seconds > 0 ? static_cast<double>(transitions_[a]) / seconds : 0};
}

IqlAgent::IqlAgent(std::shared_ptr<IqlEngine> population, int agent)
    : EngineAgent(population, agent, population->updates(agent)),
      state_(engine_->agent_state(agent)),
      policy_(engine_->networks().policy, engine_->networks().layout.total()) {}

void IqlAgent::iterate() {
    advance(updates_);
    ++updates_;
}

LogLine IqlAgent::read_log(double seconds) {
    const Interval r = read_interval(engine_->device(), state_.accumulators, state_.guard, seconds);
    return iql_log_line(engine_->profile(agent_), r.sums, r.guard, r.updates, r.updates_per_s, updates_,
                        state_.dataset_transitions);
}

void IqlEngine::set_agent_keys(int a, const config::Profile& p) {
    upload_keys(replace_agent_keys(profiles_, a, p, unsupported,
                                   "an IQL agent keeps its run.seed while it trains (its dataset and sampling)"),
                p);
}

void IqlEngine::upload_keys(std::size_t i, const config::Profile& p) {
    upload_agent(ops_, lr_, i, {static_cast<float>(p.training.learning_rate)});
    const ops::SoftTarget soft = ops::SoftTarget::of({}, p.training.tau > 0 ? p.training.tau : 1.0);
    upload_agent(ops_, tau_keep_, i, {soft.tau, soft.keep});
    upload_agent(ops_, scalars_, i,
                 {iql::LossScalars{static_cast<float>(p.iql.expectile), static_cast<float>(p.iql.beta),
                                   static_cast<float>(p.iql.max_weight)}});
    upload_agent(
        ops_, sample_agents_, i,
        {datasets_[i].sample_agent(static_cast<std::uint64_t>(p.run.seed), 1, static_cast<float>(p.training.gamma))});
    update_sequence_.reset();
}

// The checkpoint's tensors (their names, shapes and order are those of checkpoints written by
// earlier versions' single runs, which therefore resume).
std::vector<StateTensor> IqlAgent::state_tensors() {
    const auto P = static_cast<std::int64_t>(state_.online.size());
    return {state_tensor("params/online", "F32", {P}, state_.online),
            state_tensor("params/target", "F32", {P}, state_.target),
            state_tensor("adam/m", "F32", {P}, state_.m),
            state_tensor("adam/v", "F32", {P}, state_.v),
            state_tensor("guard/state", "U8", {static_cast<std::int64_t>(sizeof(nn::GuardState))}, state_.guard),
            state_tensor("monitor/accumulators", "F32", {static_cast<std::int64_t>(state_.accumulators.size())},
                         state_.accumulators)};
}

long long IqlAgent::bench_update() {
    require_alone();
    iterate();
    return 1;
}

LogLine iql_log_line(const config::Profile& profile, const std::vector<float>& acc, const nn::GuardState& g, double n,
                     double updates_per_s, long long updates, long long dataset_transitions) {
    const double loss = (acc[kValueLoss] + acc[kQLoss] + acc[kPolicyLoss]) / n;
    LogLine line;
    line.json = io::json::object({
        {"updates", updates},
        {"dataset_transitions", dataset_transitions},
        {"losses/loss", loss},
        {"losses/value", acc[kValueLoss] / n},
        {"losses/q", acc[kQLoss] / n},
        {"losses/policy", acc[kPolicyLoss] / n},
        {"charts/awr_weight", acc[kWeight] / n},
        {"values/v", acc[kV] / n},
        {"charts/grad_norm", acc[kGradNorm] / n},
        {"charts/skipped_updates", g.bad_total},
        {"perf/updates_per_s", updates_per_s},
    });
    line.text = fmt::format(
        "update {:>8} | loss {:.4f} (value {:.4f}, Q {:.4f}, policy {:.4f}) | weight {:.3f} | V "
        "{:+.3f} | {:.3g} updates/s",
        updates, loss, acc[kValueLoss] / n, acc[kQLoss] / n, acc[kPolicyLoss] / n, acc[kWeight] / n, acc[kV] / n,
        updates_per_s);
    line.loss = loss;
    line.updates_per_s = updates_per_s;
    throw_if_diverged(g, profile.training.max_bad_updates, kGuardLossNames,
                      "Lower training.learning_rate or iql.beta, or check the dataset.");
    return line;
}

}  // namespace fh::trainers
