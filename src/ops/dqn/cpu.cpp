/// @file cpu.cpp
/// @brief CPU twins of the DQN op family: the shared math (math/dqn.h) in plain loops. The
///        acting and loss twins sum over atoms in order (the kernels sum across a warp: equal
///        within rounding); the finish twin emulates the kernels' fixed reduction trees and
///        equals them bit for bit.
#include <algorithm>
#include <cmath>
#include <limits>
#include <vector>

#include "abi/dqn_step.h"
#include "math/ppo.h"

namespace fh::ops {

namespace {

/// Softmax over the atoms of action a of one head row (as the kernels compute it): e_z =
/// exp(logit_z - max), their sum, Q = (sum_z e_z atom_z) / sum.
struct Softmax {
    float max, sum, q;
};
Softmax softmax_q(const float* row, const float* mean, int a, const dqn::HeadParams& h, float* e) {
    const int Z = h.num_atoms;
    float mx = -std::numeric_limits<float>::infinity();
    for (int z = 0; z < Z; ++z) mx = std::fmax(mx, dqn::head_logit(row, mean[z], a, z, h));
    float sum = 0.f, q = 0.f;
    for (int z = 0; z < Z; ++z) {
        e[z] = std::exp(dqn::head_logit(row, mean[z], a, z, h) - mx);
        sum += e[z];
        q += e[z] * dqn::atom<float>(h, z);
    }
    return Softmax{mx, sum, q / sum};
}

void mean_advantages(float* mean, const float* row, const dqn::HeadParams& h) {
    for (int z = 0; z < h.num_atoms; ++z) mean[z] = dqn::head_mean_adv(row, z, h);
}

/// The kernels' fixed tree over T = kDqnFinishThreads (or kNormThreads) values: stride T/2, T/4,
/// ..., 1, each s[t] += s[t + stride].
double tree_sum(std::vector<double> s) {
    for (std::size_t stride = s.size() / 2; stride > 0; stride /= 2)
        for (std::size_t t = 0; t < stride; ++t) s[t] += s[t + stride];
    return s[0];
}

}  // namespace

void cpu(const DqnAct& a) {
    const auto& [actions, q, histogram, head, h, agent, counters, explore, n_rows] = a;
    const int n = static_cast<int>(actions.size() / (agent.empty() ? 1 : agent.size()));
    const int A = h.num_actions, Z = h.num_atoms, W = dqn::head_width(h), K = h.ensemble;
    const std::size_t As = static_cast<std::size_t>(A), N = agent.empty() ? 1 : agent.size();
    std::vector<float> mean(static_cast<std::size_t>(Z)), p(static_cast<std::size_t>(Z)), qa(As),
        q_heads(static_cast<std::size_t>(K) * As), score(As);
    for (std::size_t g = 0; g < N; ++g)
        for (int e = 0; e < n; ++e) {
            const std::size_t row_index = g * static_cast<std::size_t>(n) + static_cast<std::size_t>(e);
            const float* row = head.data() + row_index * static_cast<std::size_t>(dqn::output_width(h));
            for (int k = 0; k < K; ++k) {
                const float* hk = row + static_cast<std::size_t>(k) * static_cast<std::size_t>(W);
                float* qk = q_heads.data() + static_cast<std::size_t>(k) * As;
                if (h.scalar) {
                    dqn::scalar_q(hk, h, qk);
                } else {
                    mean_advantages(mean.data(), hk, h);
                    for (int a = 0; a < A; ++a) qk[a] = softmax_q(hk, mean.data(), a, h, p.data()).q;
                }
            }
            const bool exploring = !agent.empty() && explore;
            if (K == 1) {
                std::copy_n(q_heads.begin(), As, qa.begin());
                score = qa;
            } else {
                const float ucb = exploring ? agent.data()[g].ucb : 0.f;
                for (int a = 0; a < A; ++a) {
                    const auto eq = dqn::ensemble_q(q_heads.data(), K, A, a);
                    qa[static_cast<std::size_t>(a)] = eq.mean;
                    score[static_cast<std::size_t>(a)] = dqn::ensemble_score(eq, ucb);
                }
            }
            int action;
            if (exploring) {
                const auto& ap = agent.data()[g];
                const long long step = counters.data()[g].steps;
                action = policy::epsilon_greedy(score.data(), A, dqn::epsilon_at(ap, step), ap.seed, e,
                                                static_cast<std::uint64_t>(step));
            } else {
                action = policy::argmax(qa.data(), A);
            }
            actions.data()[row_index] = action;
            if (!histogram.empty())
                histogram.data()[g * static_cast<std::size_t>(A) + static_cast<std::size_t>(action)] += 1;
            if (!q.empty()) std::copy(qa.begin(), qa.end(), q.data() + row_index * static_cast<std::size_t>(A));
        }
}

void cpu(const DqnLoss& a) {
    const auto& [d_head, stats, head_s, head_select, head_target, actions, returns, discounts, agent, h, batch,
                 target_actions, masks, stage_rows] = a;
    const int A = h.num_actions, Z = h.num_atoms, W = dqn::head_width(h);
    const std::size_t Zs = static_cast<std::size_t>(Z);
    std::vector<float> mean(Zs), p(Zs), p_next(Zs), m(Zs), qa(static_cast<std::size_t>(A)), q2(2 * qa.size());
    // Head rows: B * K per agent (row r: head r % K of sample r / K), as the kernel's warps.
    const int K = h.ensemble, R = batch * K;
    const float row_scale = 1.0f / static_cast<float>(R);
    for (std::size_t g = 0; g < agent.size(); ++g) {
        const float alpha = agent.data()[g].mse_alpha, cql = agent.data()[g].cql_alpha;
        float* st = stats.data() + g * dqn::kSampleStats * static_cast<std::size_t>(R);
        for (int b = 0; b < R; ++b) {
            const std::size_t row_index = g * static_cast<std::size_t>(R) + static_cast<std::size_t>(b);
            const std::size_t sample = g * static_cast<std::size_t>(batch) + static_cast<std::size_t>(b / K);
            const std::size_t off = row_index * static_cast<std::size_t>(W);
            const float *hs = head_s.data() + off, *hsel = head_select.data() + off, *ht = head_target.data() + off;
            float* d = d_head.data() + off;
            const int act = actions.data()[sample];
            const float ret = returns.data()[sample], disc = discounts.data()[sample];
            const float scale = masks.empty() ? row_scale : row_scale * masks.data()[row_index];
            if (act < 0 || act >= A) {
                std::fill(d, d + W, 0.f);
                for (int k = 0; k < dqn::kSampleStats; ++k) st[k * R + b] = std::numeric_limits<float>::quiet_NaN();
                continue;
            }
            const int given_star = target_actions.empty() ? -1 : target_actions.data()[sample];
            if (h.scalar) {
                float stat[dqn::kSampleStats];
                dqn::scalar_sample_loss(hs, hsel, ht, act, ret, disc, scale, cql, h, d, q2.data(), stat, given_star);
                for (int k = 0; k < dqn::kSampleStats; ++k) st[k * R + b] = stat[k];
                continue;
            }
            // 1. a* = the first maximal Q of the select row, or the ensemble's.
            int a_star = given_star;
            if (a_star < 0) {
                mean_advantages(mean.data(), hsel, h);
                a_star = 0;
                float best = 0.f;
                for (int x = 0; x < A; ++x) {
                    const float qx = softmax_q(hsel, mean.data(), x, h, p.data()).q;
                    if (x == 0 || qx > best) best = qx, a_star = x;
                }
            }
            // 2. The target distribution of a* and its Q; 3. its projection (gather form).
            mean_advantages(mean.data(), ht, h);
            const Softmax tsm = softmax_q(ht, mean.data(), a_star, h, p_next.data());
            const float q_target = tsm.q;
            for (int z = 0; z < Z; ++z) p_next[static_cast<std::size_t>(z)] /= tsm.sum;
            for (int i = 0; i < Z; ++i) {
                float mi = 0.f;
                for (int j = 0; j < Z; ++j)
                    mi += p_next[static_cast<std::size_t>(j)] *
                          dqn::projection_weight(dqn::projection_position(ret, disc, j, h), i);
                m[static_cast<std::size_t>(i)] = mi;
            }
            // 4. The online network at s, taken action.
            mean_advantages(mean.data(), hs, h);
            const Softmax ssm = softmax_q(hs, mean.data(), act, h, p.data());
            const float log_sum = ssm.max + std::log(ssm.sum);
            float ce = 0.f;
            for (int z = 0; z < Z; ++z)
                ce -= m[static_cast<std::size_t>(z)] *
                      (dqn::head_logit(hs, mean[static_cast<std::size_t>(z)], act, z, h) - log_sum);
            const float q = ssm.q;
            const float td = q - (ret + disc * q_target);
            // 5. The blended gradient of the taken action; 6. with CQL, every action's CQL gradient
            //    (added to the taken one's blended gradient); the head's backward.
            const int adv_off = h.dueling ? Z : 0;
            float cql_loss = 0.f;
            if (cql == 0.f) {
                for (int z = 0; z < Z; ++z) {
                    const float pz = p[static_cast<std::size_t>(z)] / ssm.sum;
                    const float gz = dqn::blended_logit_gradient(pz, m[static_cast<std::size_t>(z)], td,
                                                                 dqn::atom<float>(h, z), q, scale, alpha);
                    if (h.dueling) d[z] = gz;
                    const float share = h.dueling ? gz / static_cast<float>(A) : 0.f;
                    for (int x = 0; x < A; ++x) d[adv_off + x * Z + z] = (x == act ? gz : 0.f) - share;
                }
            } else {
                float* g = d + adv_off;  // the raw logit gradients (A, Z), then the dueling backward
                for (int z = 0; z < Z; ++z)
                    g[act * Z + z] = dqn::blended_logit_gradient(p[static_cast<std::size_t>(z)] / ssm.sum,
                                                                 m[static_cast<std::size_t>(z)], td,
                                                                 dqn::atom<float>(h, z), q, scale, alpha);
                for (int x = 0; x < A; ++x)
                    qa[static_cast<std::size_t>(x)] = softmax_q(hs, mean.data(), x, h, p.data()).q;
                const auto sm = dqn::cql_soft_maximum(qa.data(), A);
                for (int x = 0; x < A; ++x) {
                    const Softmax sx = softmax_q(hs, mean.data(), x, h, p.data());
                    const float coef = dqn::cql_coefficient(qa.data(), x, act, sm, cql * scale);
                    for (int z = 0; z < Z; ++z) {
                        const float cg = dqn::cql_logit_gradient(coef, p[static_cast<std::size_t>(z)] / sx.sum,
                                                                 dqn::atom<float>(h, z), sx.q);
                        g[x * Z + z] = x == act ? g[x * Z + z] + cg : cg;
                    }
                }
                for (int z = 0; z < Z; ++z) {
                    float sum = 0.f;
                    for (int x = 0; x < A; ++x) sum += g[x * Z + z];
                    if (h.dueling) {
                        d[z] = sum;
                        for (int x = 0; x < A; ++x) g[x * Z + z] -= sum / static_cast<float>(A);
                    }
                }
                cql_loss = dqn::cql_term(qa.data(), act, sm);
            }
            st[dqn::kStatC51 * R + b] = ce;
            st[dqn::kStatMse * R + b] = 0.5f * td * td;
            st[dqn::kStatTd * R + b] = td;
            st[dqn::kStatQ * R + b] = q;
            st[dqn::kStatCql * R + b] = cql_loss;
        }
    }
}

void cpu(const DqnUpdateFinish& a) {
    const auto& [step, guard, stats, counters, norm_partials, grads, sample_stats, agent, batch, inject_nan, n_params] =
        a;
    const std::size_t N = agent.size(), P = grads.size() / N;
    constexpr int kBlocks = abi::kNormBlocks, kThreads = abi::kNormThreads, T = abi::kDqnFinishThreads;
    const long long grid = static_cast<long long>(kBlocks) * kThreads;
    for (std::size_t g = 0; g < N; ++g) {
        // The norm partials as network_norm_partials_kernel computes them: thread (blk, t) sums
        // x[i]^2 for i = blk * threads + t + k * grid (fma), then each block sums its threads in a tree.
        const float* x = grads.data() + g * P;
        float* partials = norm_partials.data() + g * dqn_finish_scratch_size();
        for (int blk = 0; blk < kBlocks; ++blk) {
            std::vector<double> acc(kThreads, 0.0);
            for (int t = 0; t < kThreads; ++t)
                for (long long i = static_cast<long long>(blk) * kThreads + t; i < static_cast<long long>(P);
                     i += grid) {
                    const double xi = x[i];
                    acc[static_cast<std::size_t>(t)] = std::fma(xi, xi, acc[static_cast<std::size_t>(t)]);
                }
            partials[blk] = static_cast<float>(tree_sum(acc));
        }
        // The finish kernel: one block of T threads.
        std::vector<double> norm(T, 0.0), s0(T, 0.0), s1(T, 0.0), s2(T, 0.0), s3(T, 0.0), s4(T, 0.0);
        for (int t = 0; t < T; ++t)
            for (int i = t; i < kBlocks; i += T) norm[static_cast<std::size_t>(t)] += partials[i];
        const float* st = sample_stats.data() + g * dqn::kSampleStats * static_cast<std::size_t>(batch);
        dqn::BatchSums sums{};
        sums.q_min = std::numeric_limits<float>::infinity();
        sums.q_max = -sums.q_min;
        for (int t = 0; t < T; ++t)
            for (int b = t; b < batch; b += T) {
                const auto ts = static_cast<std::size_t>(t);
                s0[ts] += st[dqn::kStatC51 * batch + b];
                s1[ts] += st[dqn::kStatMse * batch + b];
                const float qb = st[dqn::kStatQ * batch + b];
                s2[ts] += qb;
                const float td = st[dqn::kStatTd * batch + b];
                s3[ts] += td < 0 ? -td : td;
                s4[ts] += st[dqn::kStatCql * batch + b];
                sums.q_min = std::fmin(sums.q_min, qb);
                sums.q_max = std::fmax(sums.q_max, qb);
            }
        sums.c51 = tree_sum(s0);
        sums.mse = tree_sum(s1);
        sums.q = tree_sum(s2);
        sums.td_abs = tree_sum(s3);
        sums.cql = tree_sum(s4);
        dqn::finish_update(step.data()[g], guard.data()[g], stats.data()[g], counters.data()[g], agent.data()[g], sums,
                           static_cast<float>(std::sqrt(tree_sum(norm))), batch,
                           g < 32 ? static_cast<int>((static_cast<unsigned>(inject_nan) >> g) & 1u) : 0);
    }
}

void cpu(const DqnAdamTarget& a) {
    const auto& [params, m, v, target, grads, step, agent, advance, n_params] = a;
    const std::size_t N = agent.size(), P = params.size() / N;
    for (std::size_t g = 0; g < N; ++g) {
        const dqn::UpdateStep& s = step.data()[g];
        const float clip = s.adam.clip_norm > 0.f ? core::clip_scale(s.grad_norm, s.adam.clip_norm) : 1.f;
        for (std::size_t i = g * P; i < (g + 1) * P; ++i)
            dqn::adam_target_element(params.data()[i], m.data()[i], v.data()[i], target.data()[i], grads.data()[i],
                                     clip, s, agent.data()[g]);
    }
    if (!advance.empty()) cpu(DqnAdvance{advance});
}

void cpu(const DqnAdvance& a) {
    const auto& [counters] = a;
    for (std::size_t g = 0; g < counters.size(); ++g) {
        counters.data()[g].steps += 1;
        counters.data()[g].pushed += 1;
    }
}

void cpu(const DqnCollect& a) {
    const auto& [state, portfolio, states, actions, ring, counters, one_market, params, advance, agents, n_envs] = a;
    for (std::size_t g = 0; g < agents.size(); ++g)  // the agents' markets' sizes (host memory here)
        detail::require(agents.data()[g].market.n_starts >= 1 && agents.data()[g].market.n_bars >= 2, "dqn_collect",
                        "an agent's market has no valid episode start");
    const std::size_t n = static_cast<std::size_t>(ring.n_envs), D = static_cast<std::size_t>(params.state_dim),
                      M = static_cast<std::size_t>(params.market_dim);
    const std::size_t ring_rows = static_cast<std::size_t>(ring.capacity_steps) * n;
    for (std::size_t g = 0; g < counters.size(); ++g) {
        // A population's agent: its own market and episode seed.
        env::EnvParams p = params;
        if (!agents.empty()) p.seed = agents.data()[g].seed;
        const env::MarketView& market = agents.empty() ? one_market : agents.data()[g].market;
        auto gather = [&](float* out, int t, const float* pf) {
            for (std::size_t c = 0; c < D; ++c)
                out[c] = env::observation_value(market.features, t, static_cast<int>(M), pf, static_cast<int>(c));
        };
        const auto slot = static_cast<std::size_t>(counters.data()[g].pushed % ring.capacity_steps);
        for (std::size_t e = 0; e < n; ++e) {
            const std::size_t k = g * n + e, row = g * ring_rows + slot * n + e;
            float* obs = states.data() + k * D;
            float* pf = portfolio.data() + k * env::PORTFOLIO_STRIDE;
            std::copy(obs, obs + D, ring.states.data() + row * D);
            env::EnvState s = state.data()[k];
            env::StepInfo info;
            std::uint8_t done = 0;
            const int action = actions.data()[k];
            ring.rewards.data()[row] = env::step_env(s, action, market, p, info, done);
            ring.done.data()[row] = done;
            ring.actions.data()[row] = action;
            env::portfolio_features(s, market, p, pf);
            gather(ring.next_states.data() + row * D, s.t, pf);
            if (done != 0) {
                env::reset_env(s, static_cast<int>(e), market, p);
                env::portfolio_features(s, market, p, pf);
            }
            state.data()[k] = s;
            gather(obs, s.t, pf);
        }
    }
    if (!advance.counters.empty()) cpu(DqnAdvance{advance.counters});
}

void cpu(const DqnSample& a) {
    const auto& [x, actions, returns, discounts, ring, counters, agent, batch, masks, ensemble] = a;
    const std::size_t D = static_cast<std::size_t>(ring.state_dim), B = static_cast<std::size_t>(batch);
    for (std::size_t g = 0; g < agent.size(); ++g) {
        const dqn::AgentParams& p = agent.data()[g];
        const auto [view, sp] = ring_sampling(ring, static_cast<long long>(g), counters.data()[g], p);
        float* xg = x.data() + g * 2 * B * D;
        for (std::size_t b = 0; b < B; ++b) {
            const replay::NstepDraw draw =
                replay::sample_nstep(static_cast<int>(b), view, sp, xg + b * D, xg + (B + b) * D,
                                     actions.data()[g * B + b], returns.data()[g * B + b], discounts.data()[g * B + b]);
            if (!masks.empty())
                dqn::bootstrap_masks(masks.data() + (g * B + b) * static_cast<std::size_t>(ensemble), ensemble, p.seed,
                                     draw.env, draw.step, p.bootstrap_prob);
        }
    }
}

void cpu(const DqnCuriosityGather& a) {
    const auto& [input, next_market, ring, counters, num_actions, market_dim, n_envs] = a;
    const std::size_t n = static_cast<std::size_t>(ring.n_envs), D = static_cast<std::size_t>(ring.state_dim),
                      A = static_cast<std::size_t>(num_actions), M = static_cast<std::size_t>(market_dim);
    const std::size_t ring_rows = static_cast<std::size_t>(ring.capacity_steps) * n;
    for (std::size_t g = 0; g < counters.size(); ++g) {
        const auto slot = static_cast<std::size_t>(counters.data()[g].pushed % ring.capacity_steps);
        for (std::size_t e = 0; e < n; ++e) {
            const std::size_t k = g * n + e, row = g * ring_rows + slot * n + e;
            ppo::curiosity_input_row(input.data() + k * (D + A), ring.states.data() + row * D, ring.actions.data()[row],
                                     static_cast<int>(D), num_actions);
            std::copy_n(ring.next_states.data() + row * D, M, next_market.data() + k * M);
        }
    }
}

void cpu(const DqnCuriosityBonus& a) {
    const auto& [ring, stats, error, counters, agent] = a;
    constexpr int T = abi::kDqnFinishThreads;
    const std::size_t n = static_cast<std::size_t>(ring.n_envs);
    const std::size_t ring_rows = static_cast<std::size_t>(ring.capacity_steps) * n;
    for (std::size_t g = 0; g < agent.size(); ++g) {
        const auto slot = static_cast<std::size_t>(counters.data()[g].pushed % ring.capacity_steps);
        const float coef = agent.data()[g].curiosity_coef;
        const float* err = error.data() + g * n;
        std::vector<double> sums(T, 0.0);  // the kernel's threads, then its tree
        for (std::size_t e = 0; e < n; ++e) {
            float& r = ring.rewards.data()[g * ring_rows + slot * n + e];
            r = dqn::reward_with_bonus(r, coef, err[e]);
            sums[e % T] += err[e];
        }
        stats.data()[g].error_sum += tree_sum(std::move(sums));
        stats.data()[g].transitions += static_cast<long long>(n);
    }
}

void cpu(const DqnHerObserve& a) {
    const auto& [obs, goals, state, states, counters, agent, capacity_steps, state_dim, n_envs] = a;
    const std::size_t N = agent.size(), n = state.size() / N, D = static_cast<std::size_t>(state_dim);
    const std::size_t DG = D + her::kGoalFeatures, ring_rows = static_cast<std::size_t>(capacity_steps) * n;
    const int col = her::achieved_column(state_dim);
    for (std::size_t g = 0; g < N; ++g) {
        const dqn::AgentParams& p = agent.data()[g];
        const auto slot = static_cast<std::size_t>(counters.data()[g].pushed % capacity_steps);
        for (std::size_t e = 0; e < n; ++e) {
            const std::size_t k = g * n + e;
            const float goal =
                her::episode_goal(p.seed, static_cast<int>(e), state.data()[k].episode, p.her_goal_min, p.her_goal_max);
            her::goal_state_row(obs.data() + k * DG, states.data() + k * D, state_dim, col, goal);
            goals.data()[g * ring_rows + slot * n + e] = goal;
        }
    }
}

void cpu(const DqnGoalStates& a) {
    const auto& [obs, states, goal, state_dim, n_rows] = a;
    const std::size_t N = goal.size(), D = static_cast<std::size_t>(state_dim), n = states.size() / (N * D);
    const std::size_t DG = D + her::kGoalFeatures;
    const int col = her::achieved_column(state_dim);
    for (std::size_t g = 0; g < N; ++g)
        for (std::size_t e = 0; e < n; ++e)
            her::goal_state_row(obs.data() + (g * n + e) * DG, states.data() + (g * n + e) * D, state_dim, col,
                                goal.data()[g]);
}

void cpu(const DqnHerSample& a) {
    const auto& [x, actions, returns, discounts, ring, goals, counters, agent, batch, masks, ensemble, goals_out] = a;
    const std::size_t D = static_cast<std::size_t>(ring.state_dim), B = static_cast<std::size_t>(batch);
    const std::size_t DG = D + her::kGoalFeatures;
    const std::size_t ring_rows = static_cast<std::size_t>(ring.capacity_steps) * static_cast<std::size_t>(ring.n_envs);
    const int col = her::achieved_column(ring.state_dim);
    for (std::size_t g = 0; g < agent.size(); ++g) {
        const dqn::Counters c = counters.data()[g];
        const dqn::AgentParams& p = agent.data()[g];
        const auto [view, sp] = ring_sampling(ring, static_cast<long long>(g), c, p);
        const std::size_t base = g * ring_rows;  // this agent's goal column
        const her::RelabelParams hp{p.her_ratio, p.her_reward, p.her_horizon, col, c.pushed - 1};
        float* xg = x.data() + g * 2 * B * DG;
        for (std::size_t b = 0; b < B; ++b) {
            const her::GoalDraw gd = her::draw_goal_nstep(static_cast<int>(b), view, goals.data() + base, sp, hp);
            const auto first = static_cast<std::size_t>(gd.draw.first), last = static_cast<std::size_t>(gd.draw.last);
            her::goal_state_row(xg + b * DG, view.states + first * D, ring.state_dim, col, gd.goal);
            her::goal_state_row(xg + (B + b) * DG, view.next_states + last * D, ring.state_dim, col, gd.goal);
            actions.data()[g * B + b] = gd.draw.action;
            returns.data()[g * B + b] = gd.draw.ret;
            discounts.data()[g * B + b] = gd.draw.discount;
            if (!goals_out.empty()) goals_out.data()[g * B + b] = gd.goal;
            if (!masks.empty())
                dqn::bootstrap_masks(masks.data() + (g * B + b) * static_cast<std::size_t>(ensemble), ensemble, p.seed,
                                     gd.draw.env, gd.draw.step, p.bootstrap_prob);
        }
    }
}

}  // namespace fh::ops
