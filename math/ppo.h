/// @file ppo.h
/// @brief The per-environment and per-sample math of PPO (Schulman et al. 2017) and its curiosity
///        bonus, written once for the kernels (nvcc) and the CPU twins (g++): action sampling,
///        the action-diversity penalty, GAE with the environment's done flags, advantage
///        normalisation, the minibatch permutation (a Feistel network over Philox), the clipped
///        surrogate loss with its gradient, and the ICM-style forward-model input and error.
///        The categorical policy itself (log-sum-exp, log-probabilities, entropy, inverse-CDF
///        sampling) is math/policy.h. docs/ppo.md ("Kernel-level math") states every formula.
#pragma once

#include <cstdint>

#include "math/rng.h"
#include "math/env.h"
#include "math/host_device.h"
#include "math/policy.h"

namespace fh::ppo {

// ---- action sampling ---------------------------------------------------------------------

/// The learning rate of the minibatch updates after `rollouts` rollouts: lr, or with the
/// linear schedule lr * max(0, 1 - rollouts / total_rollouts) (full at the first rollout), in
/// double; the host's log and the device (which counts the rollouts itself) use this one formula.
FH_HD float scheduled_learning_rate(double lr, int linear, double total_rollouts, long long rollouts) {
    if (!linear) return static_cast<float>(lr);
    const double left = 1.0 - static_cast<double>(rollouts) / total_rollouts;
    return static_cast<float>(lr * (left > 0.0 ? left : 0.0));
}

/// Samples environment e's action at collection step `step` from softmax(logits) (one row of
/// num_actions) with u = unit_float(Philox(seed, policy_sample, e, step).v[0]), and returns its
/// log-probability under the same logits.
FH_HD int sample_action(const float* logits, int num_actions, std::uint64_t seed, int e, std::uint64_t step,
                        float& log_prob) {
    const rng::U32x4 w = rng::draw(seed, rng::Purpose::policy_sample, static_cast<std::uint32_t>(e), step);
    const float u = rng::unit_float(w.v[0]);
    const int action = policy::sample(logits, num_actions, u);
    log_prob = policy::log_prob(logits, num_actions, action);
    return action;
}

// ---- action-diversity penalty ------------------------------------------------------------

/// Share of the most frequent action in the window at which the penalty starts.
inline constexpr float kDiversityThreshold = 0.5f;

/// The penalty of a full window whose most frequent action occurs max_count times out of
/// window: c = max_count / window; coef * max(0, (c - kDiversityThreshold) / (1 -
/// kDiversityThreshold)). 0 when no action has more than half the window, coef when one action
/// fills all of it.
FH_HD float diversity_penalty(int max_count, int window, float coef) {
    const float c = static_cast<float>(max_count) / static_cast<float>(window);
    const float x = (c - kDiversityThreshold) / (1.0f - kDiversityThreshold);
    return coef * (x > 0.0f ? x : 0.0f);
}

/// One environment at 0-based global collection step `step`: window (W) is the ring of its last
/// W actions (slot step % W), counts (num_actions) their counts. Once the ring has wrapped
/// (step >= W) the action leaving slot step % W is uncounted; the new action is stored and
/// counted. Returns the penalty: diversity_penalty(max_a counts[a], W, coef) once the window is
/// full (step + 1 >= W), else 0. Actions outside [0, num_actions) are stored but never counted
/// (they cannot come from ppo_sample; the guard keeps a bad input from writing out of bounds).
FH_HD float diversity_update(int* window, int* counts, int action, int num_actions, int W, float coef,
                             std::uint64_t step) {
    const int slot = static_cast<int>(step % static_cast<std::uint64_t>(W));
    if (step >= static_cast<std::uint64_t>(W)) {
        const int old = window[slot];
        if (old >= 0 && old < num_actions) counts[old] -= 1;
    }
    window[slot] = action;
    if (action >= 0 && action < num_actions) counts[action] += 1;
    if (step + 1 < static_cast<std::uint64_t>(W)) return 0.0f;
    int max_count = 0;
    for (int a = 0; a < num_actions; ++a) max_count = counts[a] > max_count ? counts[a] : max_count;
    return diversity_penalty(max_count, W, coef);
}

// ---- generalised advantage estimation ----------------------------------------------------

/// GAE for environment e of a (T, n) rollout (row t * n + e), backwards in t, in float:
///   delta_t = r_t + gamma * (done_t == kTerminated ? 0 : next_values_t) - values_t
///   gae_t   = delta_t + (gamma * lambda) * (done_t != kRunning ? 0 : gae_{t+1}),  gae_T = 0
///   advantages_t = gae_t, returns_t = gae_t + values_t.
/// next_values_t is V of the observation after step t: the terminal observation when the step
/// ended the episode (a truncation bootstraps from it, a termination does not), V(s_T) at t = T-1.
FH_HD void gae_env(int e, int n, int T, const float* rewards, const float* values, const float* next_values,
                   const std::uint8_t* done, float gamma, float lambda, float* advantages, float* returns) {
    const float gl = gamma * lambda;
    float gae = 0.0f;
    for (int t = T - 1; t >= 0; --t) {
        const long long i = static_cast<long long>(t) * n + e;
        const std::uint8_t d = done[i];
        const float bootstrap = d == env::kTerminated ? 0.0f : next_values[i];
        const float delta = rewards[i] + gamma * bootstrap - values[i];
        const float carry = d != env::kRunning ? 0.0f : gae;
        gae = delta + gl * carry;
        advantages[i] = gae;
        returns[i] = gae + values[i];
    }
}

// ---- bootstrap values of truncated episodes ----------------------------------------------

/// The rollout step's critic pass runs on s_{t+1} only, which is also the observation after
/// step t unless the episode ended there. Truncated episodes (GAE bootstraps from their terminal
/// observation) are gathered during the rollout in a compact form, their bar and portfolio
/// features, and valued after it: the observation is rebuilt from them (the market features of
/// the bar, then the portfolio features), which takes (2 + state_dim - market_dim) numbers per
/// rollout row in the worst case instead of state_dim.
/// A bar outside [0, n_bars) (never gathered) gives NaN, which the training guard reports.
FH_HD float terminal_observation_value(const float* features, int n_bars, int bar, int market_dim,
                                       const float* portfolio, int c) {
    if (c < market_dim && (bar < 0 || bar >= n_bars)) return __builtin_nanf("");
    return env::observation_value(features, bar, market_dim, portfolio, c);
}
/// Threads of the one block of ppo_collect_truncated_kernel (a multiple of 32): it walks the
/// environments in tiles of this many, so 2,048 environments take two.
inline constexpr int kCollectThreads = 1024;

// ---- advantage normalisation --------------------------------------------------------------

/// The CUDA reduction's fixed grid (independent of the device): kNormalizeBlocks blocks of
/// kNormalizeThreads threads.
inline constexpr int kNormalizeBlocks = 256;
inline constexpr int kNormalizeThreads = 256;
/// Floats of scratch: per block (sum hi, sum lo, sum-of-squares hi, lo), then the shift x[0].
inline constexpr int kNormalizeScratch = 4 * kNormalizeBlocks + 1;
/// Added to the standard deviation before dividing.
inline constexpr double kNormalizeEpsilon = 1e-8;

/// The two moments, from sums over the n elements of d = x - shift (shift = x[0], which keeps
/// the one-pass variance free of cancellation): mean = shift + S1 / n, population variance
/// S2 / n - (S1 / n)^2 (clamped at 0); denom = std + kNormalizeEpsilon. In double, rounded to
/// float at the end.
FH_HD void normalize_moments(double sum_d, double sum_d2, long long n, float shift, float& mean, float& denom) {
    const double m1 = sum_d / static_cast<double>(n);
    double var = sum_d2 / static_cast<double>(n) - m1 * m1;
    if (!(var > 0.0)) var = 0.0;
    mean = static_cast<float>(static_cast<double>(shift) + m1);
    denom = static_cast<float>(sqrt(var) + kNormalizeEpsilon);
}

/// x' = (x - mean) / denom, in float.
FH_HD float normalize_element(float x, float mean, float denom) {
    return (x - mean) / denom;
}

// ---- minibatch shuffle: a keyed permutation ----------------------------------------------

/// Feistel rounds of permute (4 suffice for a pseudorandom permutation, Luby-Rackoff; 6 give
/// the tiny domains of odd bit counts, where every other round moves the short half, more mixing).
inline constexpr int kFeistelRounds = 6;

/// The round function: the first Philox word of (seed, minibatch, stream = epoch (low 32 bits),
/// counter = round << 32 | half).
FH_HD std::uint32_t feistel_round(std::uint32_t half, int round, std::uint64_t seed, std::uint64_t epoch) {
    const std::uint64_t counter = (static_cast<std::uint64_t>(round) << 32) | half;
    return rng::draw(seed, rng::Purpose::minibatch, static_cast<std::uint32_t>(epoch), counter).v[0];
}

/// A keyed bijection of [0, 2^bits) (bits <= 32): kFeistelRounds rounds of an unbalanced Feistel
/// network. The value is (L, R) with L the high `lb` bits and R the low `rb` bits; a round maps it
/// to (R, L xor F(R)) with the sizes swapped (rb high bits, lb low bits), which is invertible
/// (R is kept, L = low xor F(R)), so every composition is a bijection whatever the sizes.
FH_HD std::uint32_t feistel(std::uint32_t x, int bits, std::uint64_t seed, std::uint64_t epoch) {
    int lb = bits / 2, rb = bits - lb;
    std::uint64_t v = x;
    for (int round = 0; round < kFeistelRounds; ++round) {
        const std::uint64_t rmask = (std::uint64_t{1} << rb) - 1, lmask = (std::uint64_t{1} << lb) - 1;
        const std::uint64_t L = v >> rb, R = v & rmask;
        const std::uint64_t f = feistel_round(static_cast<std::uint32_t>(R), round, seed, epoch);
        v = (R << lb) | ((L ^ f) & lmask);
        const int t = lb;
        lb = rb;
        rb = t;
    }
    return static_cast<std::uint32_t>(v);
}

/// A bijection of [0, m), keyed by (seed, epoch): the Feistel network on the smallest
/// power-of-two domain 2^bits >= m, cycle-walked (applied again while the value is >= m; the
/// domain is < 2m, so fewer than two applications on average). Different epochs give independent
/// orders. Row i of a shuffled pass over m rows is permute(i, m, seed, epoch). Requires i < m
/// (from i >= m the walk might never end); m <= 1 gives 0.
FH_HD std::uint32_t permute(std::uint32_t i, std::uint32_t m, std::uint64_t seed, std::uint64_t epoch) {
    if (m <= 1) return 0;  // the only row (and never an endless walk for m = 0)
    int bits = 0;
    while ((std::uint64_t{1} << bits) < m) ++bits;
    std::uint32_t v = i;
    do {
        v = feistel(v, bits, seed, epoch);
    } while (v >= m);
    return v;
}

// ---- minibatch gather ----------------------------------------------------------------------

/// The rollout buffer of one PPO update: M = T * n_envs rows (row t * n_envs + e). Device
/// pointers on CUDA, host pointers on CPU. Passed to kernels by value.
struct RolloutView {
    const float* states;      ///< (rows, state_dim)
    const int* actions;       ///< (rows)
    const float* log_probs;   ///< (rows) log pi_old(a | s) at collection
    const float* advantages;  ///< (rows) normally already normalised
    const float* returns;     ///< (rows) value targets
    const float* values;      ///< (rows) V_old(s) at collection
    int rows;
    int state_dim;
};

/// Agent `agent`'s rollout when several agents' rollouts of r.rows rows each lie one after the
/// other in r's buffers.
FH_HD RolloutView agent_rollout(RolloutView r, int agent) {
    const long long rows = static_cast<long long>(agent) * r.rows;
    r.states += rows * r.state_dim;
    r.actions += rows;
    r.log_probs += rows;
    r.advantages += rows;
    r.returns += rows;
    r.values += rows;
    return r;
}

/// The rollout row of minibatch row i: permute(offset + i, rows, seed, epoch).
FH_HD long long gather_source(int i, const RolloutView& r, std::uint64_t seed, std::uint64_t epoch, int offset) {
    return permute(static_cast<std::uint32_t>(offset + i), static_cast<std::uint32_t>(r.rows), seed, epoch);
}

/// Minibatch row i's scalars from rollout row src.
FH_HD void gather_scalars(int i, long long src, const RolloutView& r, int* actions, float* old_log_probs,
                          float* advantages, float* returns, float* old_values) {
    actions[i] = r.actions[src];
    old_log_probs[i] = r.log_probs[src];
    advantages[i] = r.advantages[src];
    returns[i] = r.returns[src];
    old_values[i] = r.values[src];
}

/// Minibatch row i = rollout row gather_source(i, ...): its state and scalars.
FH_HD void gather_row(int i, const RolloutView& r, std::uint64_t seed, std::uint64_t epoch, int offset, float* states,
                      int* actions, float* old_log_probs, float* advantages, float* returns, float* old_values) {
    const long long src = gather_source(i, r, seed, epoch, offset);
    const long long D = r.state_dim;
    for (long long c = 0; c < D; ++c) states[i * D + c] = r.states[src * D + c];
    gather_scalars(i, src, r, actions, old_log_probs, advantages, returns, old_values);
}

// ---- the clipped surrogate loss --------------------------------------------------------------

/// Statistics per sample, written as (kPpoLossStats, B) column blocks (stat k of sample i at
/// k * B + i): policy loss (-surrogate), value loss, entropy, approx KL (old - new log-prob),
/// clipped (1 when the clipped term won the min).
inline constexpr int kPpoLossStats = 5;
enum LossStat : int { kStatPolicy = 0, kStatValue = 1, kStatEntropy = 2, kStatKl = 3, kStatClipped = 4 };

/// Scalars of the PPO loss. Passed to kernels by value.
struct LossParams {
    float clip;          ///< eps: the ratio is clipped to [1 - eps, 1 + eps]; with clip_value,
                         ///< the value change to [-eps, eps]
    float value_coef;    ///< weight of the value loss
    float entropy_coef;  ///< weight of the entropy bonus
    int clip_value;      ///< 1: clipped value loss 0.5 max((v-R)^2, (v_old + clip(v-v_old) - R)^2)
};

/// One sample's terms of the loss, given its action's log-probability logp (= z[a] - lse):
///   ratio = exp(logp - old_logp); the surrogate min(ratio adv, clip(ratio, 1-eps, 1+eps) adv) and
///   d(-surrogate)/dlogp = -adv ratio when the unclipped term is the min, else 0 (g_logp);
///   the value loss Lv and dLv/dv: 0.5 (v - R)^2 and v - R, or with clip_value the larger branch
///   and its derivative (the clipped one's is v_clip - R inside [-eps, eps] and 0 outside; ties
///   take the unclipped branch).
struct LossTerms {
    float surrogate, g_logp, value_loss, d_value;
    bool clipped;  ///< the clipped term is the min: no gradient through the ratio
};
FH_HD LossTerms loss_terms(float logp, float old_logp, float adv, float v, float R, float v_old, const LossParams& p) {
    LossTerms t{};
    const float ratio = expf(logp - old_logp);
    const float lo = 1.0f - p.clip, hi = 1.0f + p.clip;
    const float clipped_ratio = ratio < lo ? lo : (ratio > hi ? hi : ratio);
    const float surr1 = ratio * adv, surr2 = clipped_ratio * adv;
    t.clipped = surr2 < surr1;
    t.surrogate = t.clipped ? surr2 : surr1;
    t.g_logp = t.clipped ? 0.0f : -adv * ratio;
    const float e1 = v - R;
    t.value_loss = 0.5f * e1 * e1;
    t.d_value = e1;
    if (p.clip_value) {
        const float dvo = v - v_old;
        const float dvc = dvo < -p.clip ? -p.clip : (dvo > p.clip ? p.clip : dvo);
        const float e2 = v_old + dvc - R;
        if (e2 * e2 > e1 * e1) {
            t.value_loss = 0.5f * e2 * e2;
            t.d_value = (dvo >= -p.clip && dvo <= p.clip) ? e2 : 0.0f;
        }
    }
    return t;
}

/// dL/dz_j of the minibatch-mean loss for logit j of a row whose log-softmax at j is lp (pi_j =
/// exp(lp)): dlogp/dz_j = [j == a] - pi_j, dH/dz_j = -pi_j (lp + H); scale = 1 / B.
FH_HD float loss_logit_grad(float lp, bool is_action, const LossTerms& t, float H, float entropy_coef, float scale) {
    const float pj = expf(lp);
    const float d_policy = t.g_logp * ((is_action ? 1.0f : 0.0f) - pj);
    const float d_entropy = -pj * (lp + H);
    return (d_policy - entropy_coef * d_entropy) * scale;
}

/// Writes sample i's d_values (scale: 1 / its minibatch's rows) and its kPpoLossStats stats (logp:
/// its action's log-probability) at stat k * B + i (B: the rows of every minibatch of the launch).
FH_HD void loss_write_sample(int i, int B, float scale, const LossTerms& t, float H, float logp, float old_logp,
                             const LossParams& p, float* stats, float* d_values) {
    d_values[i] = p.value_coef * t.d_value * scale;
    stats[kStatPolicy * B + i] = -t.surrogate;
    stats[kStatValue * B + i] = t.value_loss;
    stats[kStatEntropy * B + i] = H;
    stats[kStatKl * B + i] = old_logp - logp;
    stats[kStatClipped * B + i] = t.clipped ? 1.0f : 0.0f;
}

/// Sample i of a minibatch of B (logits (B, A) row i, scalars at i; several agents' minibatches of
/// `rows` each one after the other: B = agents x rows, 1 / rows the scale): writes its kPpoLossStats
/// stats and the gradients of the minibatch-mean loss
///   L = mean_i [ -min(ratio adv, clip(ratio, 1-eps, 1+eps) adv) + value_coef Lv - entropy_coef H ]
/// (loss_terms, loss_logit_grad): d_logits row i (A) and d_values[i]. The row's sums (its
/// log-sum-exp and entropy) in action order; the kernel sums them across abi::kPpoLossLanes lanes.
FH_HD void loss_sample(int i, int B, int rows, int A, const float* logits, const float* values, const int* actions,
                       const float* old_log_probs, const float* advantages, const float* returns,
                       const float* old_values, const LossParams& p, float* stats, float* d_logits, float* d_values) {
    const float* z = logits + static_cast<long long>(i) * A;
    float* dz = d_logits + static_cast<long long>(i) * A;
    const int a = actions[i];
    const float lse = policy::log_sum_exp(z, A);
    const float logp = z[a] - lse;
    float H = 0.0f;
    for (int j = 0; j < A; ++j) {
        const float lp = z[j] - lse;
        H -= expf(lp) * lp;
    }
    const LossTerms t = loss_terms(logp, old_log_probs[i], advantages[i], values[i], returns[i], old_values[i], p);
    const float scale = 1.0f / static_cast<float>(rows);
    for (int j = 0; j < A; ++j) dz[j] = loss_logit_grad(z[j] - lse, j == a, t, H, p.entropy_coef, scale);
    loss_write_sample(i, B, scale, t, H, logp, old_log_probs[i], p, stats, d_values);
}

// ---- curiosity (ICM-style forward model) ---------------------------------------------------

/// Row e of the forward model's input (D + A floats): [state row (D) | one-hot(action) (A)].
/// An action outside [0, A) gives an all-zero one-hot part.
FH_HD void curiosity_input_row(float* input, const float* state, int action, int D, int A) {
    for (int j = 0; j < D; ++j) input[j] = state[j];
    for (int a = 0; a < A; ++a) input[D + a] = a == action ? 1.0f : 0.0f;
}

/// Row e of the forward-model error: pred (P) predicts target = the first P columns of the next
/// state. Returns 0.5 * mean_j (pred_j - target_j)^2 (summed in order, in float) and writes
/// d_pred_j = (pred_j - target_j) / (n * P), the gradient of mean_e of the returned errors.
FH_HD float curiosity_error_row(float* d_pred, const float* pred, const float* target, int P, int n) {
    const float denom = static_cast<float>(static_cast<long long>(n) * P);
    float sum = 0.0f;
    for (int j = 0; j < P; ++j) {
        const float d = pred[j] - target[j];
        sum += d * d;
        d_pred[j] = d / denom;
    }
    return 0.5f * (sum / static_cast<float>(P));
}

}  // namespace fh::ppo
