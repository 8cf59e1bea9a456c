/// @file ops.hpp
/// @brief The device operations every trainer is written against (SPEC section 2b). Each op has a
///        CUDA implementation (ops/cuda/, the embedded kernels and cuBLAS) and a plain C++ one
///        (ops/cpu/, the reference the CUDA ops are tested against). Argument checks (sizes,
///        aliasing) live here, once, in the non-virtual public functions.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <utility>
#include <vector>

#include "math/backtest.h"
#include "abi/dqn_c51.h"
#include "math/replay.h"
#include "math/env.h"
#include "abi/dqn_monitor.h"
#include "abi/nn_guard.h"
#include "abi/core_network.h"
#include "math/ppo.h"
#include "math/iql.h"
#include "util/errors.hpp"

namespace fh::ops {

enum class Backend { cpu, cuda };

/// Network types shared with the kernels (cuda/abi/core_network.h).
using Activation = core::Activation;
using AdamParams = core::AdamParams;

/// `count` elements of T in a backend's memory: host memory for the CPU backend, device memory
/// for CUDA. Deliberately has no operator[]: only a backend's own code dereferences data().
template <class T> class View {
public:
    View() = default;
    View(T* data, std::size_t count) : data_(data), count_(count) {}
    template <class U>
        requires std::is_same_v<const U, T>
    View(View<U> v) : data_(v.data()), count_(v.size()) {}

    T* data() const noexcept { return data_; }
    std::size_t size() const noexcept { return count_; }
    bool empty() const noexcept { return count_ == 0; }
    View subview(std::size_t offset, std::size_t count) const;

private:
    T* data_ = nullptr;
    std::size_t count_ = 0;
};

/// True when the byte ranges of a and b share at least one byte.
template <class A, class B> bool overlaps(View<A> a, View<B> b) {
    if (a.empty() || b.empty()) return false;
    const auto a0 = reinterpret_cast<std::uintptr_t>(a.data());
    const auto b0 = reinterpret_cast<std::uintptr_t>(b.data());
    return a0 < b0 + b.size() * sizeof(B) && b0 < a0 + a.size() * sizeof(A);
}

class Ops;

/// Owns `count` elements in the memory of the Ops that allocated it. Move-only (copies are
/// explicit ops::copy calls); must not outlive its Ops.
template <class T> class Buffer {
public:
    Buffer() = default;
    Buffer(Ops* owner, T* data, std::size_t count) : owner_(owner), data_(data), count_(count) {}
    ~Buffer() { release(); }
    Buffer(const Buffer&) = delete;
    Buffer& operator=(const Buffer&) = delete;
    Buffer(Buffer&& o) noexcept
        : owner_(std::exchange(o.owner_, nullptr)),
          data_(std::exchange(o.data_, nullptr)),
          count_(std::exchange(o.count_, 0)) {}
    Buffer& operator=(Buffer&& o) noexcept {
        if (this != &o) {
            release();
            owner_ = std::exchange(o.owner_, nullptr);
            data_ = std::exchange(o.data_, nullptr);
            count_ = std::exchange(o.count_, 0);
        }
        return *this;
    }

    View<T> view() noexcept { return {data_, count_}; }
    View<const T> view() const noexcept { return {data_, count_}; }
    View<const T> cview() const noexcept { return {data_, count_}; }
    std::size_t size() const noexcept { return count_; }

private:
    void release() noexcept;
    Ops* owner_ = nullptr;
    T* data_ = nullptr;
    std::size_t count_ = 0;
};

class Ops {
public:
    virtual ~Ops() = default;
    virtual Backend backend() const noexcept = 0;
    /// One line for logs: "cpu (reference)" or "cuda:0 NVIDIA H200 (sm_90)".
    virtual std::string description() const = 0;
    /// Waits until every op issued so far has finished (a no-op on the CPU).
    virtual void synchronize() = 0;

    /// The memory a run may budget for: the device's free bytes now (CUDA), or nothing where
    /// memory is not budgeted (the CPU backend).
    struct MemoryInfo {
        std::string name;
        std::size_t free_bytes = 0, total_bytes = 0;
    };
    virtual std::optional<MemoryInfo> memory() const { return std::nullopt; }
    /// TF32 tensor-core math for the network ops' matrix products (gpu.tf32); the CPU backend
    /// always computes in FP32.
    virtual void set_tf32(bool /*on*/) {}

    // ---- memory ---------------------------------------------------------------------------
    template <class T> Buffer<T> alloc(std::size_t count) {
        T* p = static_cast<T*>(allocate_bytes(count * sizeof(T)));
        bytes_in_use_ += count * sizeof(T);
        if (bytes_in_use_ > peak_bytes_) peak_bytes_ = bytes_in_use_;
        return Buffer<T>(this, p, count);
    }
    template <class T> void upload(View<T> dst, std::span<const T> src) {
        require_same_size(dst.size(), src.size(), "upload");
        upload_bytes(dst.data(), src.data(), src.size_bytes());
    }
    template <class T> void download(std::span<T> dst, View<const T> src) {
        require_same_size(dst.size(), src.size(), "download");
        download_bytes(dst.data(), src.data(), dst.size_bytes());
    }
    template <class T> std::vector<T> to_host(View<const T> src) {
        std::vector<T> out(src.size());
        download(std::span<T>(out), src);
        return out;
    }
    template <class T> Buffer<T> from_host(std::span<const T> src) {
        Buffer<T> b = alloc<T>(src.size());
        upload(b.view(), src);
        return b;
    }
    void free_bytes(void* p, std::size_t bytes) noexcept {
        release_bytes(p);
        bytes_in_use_ -= bytes;
    }
    /// Bytes held in Buffers now, and the most ever held at once (libraries' own workspaces,
    /// e.g. cuBLAS's, are not counted).
    std::size_t bytes_in_use() const noexcept { return bytes_in_use_; }
    std::size_t peak_bytes() const noexcept { return peak_bytes_; }

    // ---- utility ops (cuda/kernels/core_vector.cu) -----------------------------------------
    /// y[i] = value
    void fill(View<float> y, float value);
    /// dst[i] = src[i]; dst and src must not overlap.
    void copy(View<float> dst, View<const float> src);
    /// y[i] += a * x[i] (fused); x and y must be the same size and must not overlap. To scale a
    /// buffer in place use scale(), never saxpy(y, alpha - 1, y).
    void saxpy(View<float> y, float a, View<const float> x);
    /// y[i] *= alpha, in place.
    void scale(View<float> y, float alpha);

    // ---- vectorized environment (cuda/kernels/env.cu, math/env.h) -------------
    // n_envs = state.size(). `market` points into this backend's memory (env::DeviceMarket).
    /// Resets the environments whose mask entry is non-zero; an empty mask resets all.
    /// portfolio (n_envs * PORTFOLIO_STRIDE), mask (n_envs) or empty.
    void env_reset(View<env::EnvState> state, View<float> portfolio, View<const std::uint8_t> mask,
                   const env::MarketView& market, const env::EnvParams& params);
    /// Steps every environment; actions must lie in [0, position_levels * urgency_levels).
    /// reward, done, info, actions (n_envs); all buffers distinct.
    void env_step(View<env::EnvState> state, View<float> portfolio, View<float> reward,
                  View<std::uint8_t> done, View<env::StepInfo> info, View<const int> actions,
                  const env::MarketView& market, const env::EnvParams& params);
    /// states (n_envs * state_dim) = [features of bar t | portfolio features] per environment.
    void gather_states(View<float> states, View<const env::EnvState> state,
                       View<const float> portfolio, const env::MarketView& market,
                       const env::EnvParams& params);
    /// actions[e] uniformly random in [0, num_actions), a function of (seed, e, step) only.
    void random_actions(View<int> actions, std::uint64_t seed, std::uint64_t step, int num_actions);

    // ---- backtest (cuda/backtest_{env,gather,metrics}_kernel.cu, math/backtest.h) ------------
    // Segments evaluated in lock-step from flat (src/eval/backtest.hpp). n_segments =
    // state.size() = segments.size(); records hold every segment's bars (Segment::offset).
    // CPU twins: src/ops/cpu/cpu_backtest_ops.cpp. Checked in src/ops/backtest_ops.cpp.
    /// Starts every segment flat at its first bar and writes its first record.
    void backtest_reset(View<backtest::SegmentState> state, View<backtest::BarRecord> records,
                        View<const backtest::Segment> segments, const env::EnvParams& params);
    /// One step of every running segment with actions (n_segments); finished ones idle.
    void backtest_step(View<backtest::SegmentState> state, View<backtest::BarRecord> records,
                       View<const backtest::Segment> segments, View<const int> actions,
                       const env::MarketView& market, const env::EnvParams& params);
    /// states (n_segments * state_dim) = [features of bar t | portfolio features] per segment.
    void backtest_gather(View<float> states, View<const backtest::SegmentState> state,
                         const env::MarketView& market, const env::EnvParams& params);
    /// out (1) and histogram (num_actions) = the metrics of the records (fixed order, double).
    void backtest_metrics(View<backtest::MetricsOut> out, View<long long> histogram,
                          View<const backtest::BarRecord> records,
                          View<const backtest::SegmentState> state,
                          View<const backtest::Segment> segments, const env::MarketView& market,
                          const backtest::MetricsParams& params);

    // ---- network: linear layers, gradient norm, Adam (cuda/kernels/core_network.cu + cuBLAS) ------
    // Row-major matrices; shapes beside each view. Every size must be >= 1. Outputs must not
    // overlap any other operand (checked: the kernels' pointers are __restrict__ and cuBLAS
    // forbids C overlapping A or B). CPU twins: src/ops/cpu/cpu_nn_ops.cpp (src/nn/reference.hpp).
    /// Y = act(X W^T + b). Y (batch, out), X (batch, in), W (out, in), b (out) or empty (no bias).
    void linear_forward(View<float> Y, View<const float> X, View<const float> W,
                        View<const float> b, int batch, int in, int out, Activation act);
    /// Backward of linear_forward. dY (batch, out) holds dL/dY (the activated output) and is
    /// overwritten in place with dL/dZ (the pre-activation gradient). Y (batch, out) is the
    /// activated output of the forward, X (batch, in) and W (out, in) its inputs.
    /// dW (out, in) and db (out) are set, or added to when `accumulate`; db may be empty (no
    /// bias). dX (batch, in) is set (never accumulated), or skipped when empty.
    void linear_backward(View<float> dX, View<float> dW, View<float> db, View<float> dY,
                         View<const float> Y, View<const float> X, View<const float> W, int batch,
                         int in, int out, Activation act, bool accumulate);
    /// Floats of scratch that global_norm needs (one partial sum per block of its fixed grid).
    static constexpr std::size_t global_norm_scratch_size() noexcept {
        return static_cast<std::size_t>(abi::kNormBlocks);
    }
    /// out[0] = sqrt(sum_i x[i]^2), deterministic (a fixed reduction order on each backend).
    /// out (1), x (n >= 0), scratch (>= global_norm_scratch_size()); all distinct.
    void global_norm(View<float> out, View<const float> x, View<float> scratch);
    /// One Adam update with global-norm clipping (core::adam_element, core::clip_scale):
    /// params, m, v, grads (n), all distinct. grad_norm (1): read when p.clip_norm > 0 (may be
    /// empty otherwise). gate (1) or empty: when gate[0] == 0 nothing at all is written (the
    /// training guard's skip, decided on the device). p.step >= 1 is this update's number.
    void adam_step(View<float> params, View<float> m, View<float> v, View<const float> grads,
                   View<const float> grad_norm, View<const int> gate, const AdamParams& p);

    // ---- DQN: head, losses, replay, exploration, guard, monitoring ---------------------------
    // (cuda/kernels/dqn_c51.cu, mse_loss_kernel.cu, nstep_kernel.cu, epsilon_greedy_kernel.cu,
    // training_guard_kernel.cu, monitoring_kernel.cu; math in cuda/math/dqn.h; CPU twins in
    // src/ops/cpu/cpu_dqn_ops.cpp). B = batch, A = num_actions, Z = num_atoms. All buffers of
    // one call must be distinct (checked).
    /// dst = src for any trivially copyable T (a device-to-device copy on CUDA).
    template <class T> void copy_raw(View<T> dst, View<const T> src) {
        require_same_size(dst.size(), src.size(), "copy_raw");
        if (overlaps(dst, src)) throw std::invalid_argument("ops::copy_raw: dst and src overlap");
        if (!dst.empty()) copy_bytes(dst.data(), src.data(), dst.size() * sizeof(T));
    }
    /// out[0] = mean of x (n >= 1), in a fixed order.
    void mean(View<float> out, View<const float> x);
    /// logits, probs (B, A, Z) and q (B, A) of the C51 head from value (B, Z; empty without
    /// dueling) and adv (B, A*Z).
    void c51_head_forward(View<float> logits, View<float> probs, View<float> q, View<const float> value,
                          View<const float> adv, const dqn::HeadParams& head, int batch);
    /// d_value (B, Z; empty without dueling) and d_adv (B, A*Z) from d_logits (B, A, Z).
    void c51_head_backward(View<float> d_value, View<float> d_adv, View<const float> d_logits,
                           const dqn::HeadParams& head, int batch);
    /// Per-sample C51 cross-entropy loss (B) and d_logits (B, A, Z) of the batch-mean loss.
    /// q_next_select (B, A) picks a* (online Q(s') for double DQN); probs_next_target (B, A, Z).
    void c51_loss(View<float> loss, View<float> d_logits, View<const float> logits,
                  View<const float> probs, View<const float> q_next_select,
                  View<const float> probs_next_target, View<const int> actions,
                  View<const float> returns, View<const float> discounts,
                  const dqn::HeadParams& head, int batch);
    /// Per-sample MSE loss on the expected Q (B), d_logits (B, A, Z) and TD errors (B).
    void mse_loss(View<float> loss, View<float> d_logits, View<float> td, View<const float> probs,
                  View<const float> q, View<const float> q_next_select, View<const float> q_next_target,
                  View<const int> actions, View<const float> returns, View<const float> discounts,
                  const dqn::HeadParams& head, int batch);
    /// A batch of n-step transitions from the replay ring (replay::sample_nstep).
    /// states, next_states (B, state_dim); actions, returns, discounts (B).
    void nstep_sample(View<float> states, View<float> next_states, View<int> actions,
                      View<float> returns, View<float> discounts, const replay::ReplayView& replay,
                      const replay::SampleParams& params, int batch);
    /// actions (n) epsilon-greedy from q (n, num_actions).
    void epsilon_greedy(View<int> actions, View<const float> q, int num_actions, float epsilon,
                        std::uint64_t seed, std::uint64_t step);
    /// gate (1) = 1 when every loss (n_losses) and the gradient norm (1) are finite; updates the
    /// guard counters (1).
    void training_guard(View<int> gate, View<nn::GuardState> state, View<const float> losses,
                        View<const float> grad_norm, long long update);
    /// Accumulates one update's statistics: losses (2), q (B, A), actions (B), td (B), grad_norm (1).
    void monitor_update(View<dqn::MonitorStats> stats, View<const float> losses, View<const float> q,
                        View<const int> actions, View<const float> td, View<const float> grad_norm,
                        int num_actions, int batch);
    /// histogram (num_actions) += counts of actions (n).
    void monitor_actions(View<unsigned long long> histogram, View<const int> actions, int num_actions);

    // ---- PPO: sampling, diversity, GAE, normalisation, minibatches, loss, curiosity ------------
    // (cuda/kernels/ppo_experience.cu, ppo_gae_kernel.cu, ppo_minibatch_kernel.cu,
    // ppo_loss_kernel.cu, curiosity_training_kernel.cu; math in cuda/math/ppo.h and
    // policy_math.h; CPU twins in src/ops/cpu/cpu_ppo_ops.cpp; checks in src/ops/ppo_ops.cpp;
    // formulas in docs/ppo.md). n = environments, T = rollout steps, rollout rows t * n + e,
    // A = num_actions, B = minibatch rows. Every size must be >= 1. Outputs overlap nothing;
    // read-only inputs may share (checked).
    /// For each env e (n = actions.size()), logits (n, A): u = unit_float(Philox(seed,
    /// policy_sample, e, step).v[0]); actions[e] = policy::sample(row e, u); log_probs[e] =
    /// policy::log_prob(row e, actions[e]).
    void ppo_sample(View<int> actions, View<float> log_probs, View<const float> logits, int num_actions,
                    std::uint64_t seed, std::uint64_t step);
    /// The action-diversity penalty (ppo::diversity_update). window (n, W = diversity_window) is
    /// the ring of each env's last W actions and counts (n, A) their counts (both zeroed by the
    /// caller before step 0; never reset at episode ends); step = the 0-based global collection
    /// step. Stores and counts actions (n) (uncounting the action W steps old), then penalty (n) =
    /// coef * max(0, (c - 0.5) / 0.5), c = the most frequent action's share of the window, once
    /// step + 1 >= W; 0 before. Actions must lie in [0, A).
    void ppo_diversity(View<int> window, View<int> counts, View<float> penalty, View<const int> actions,
                       int num_actions, int diversity_window, float coef, std::uint64_t step);
    /// GAE (ppo::gae_env) over a (T, n) rollout, n = rewards.size() / T: advantages, returns,
    /// rewards, values (V(s_t)), next_values (V of the observation after step t: the terminal
    /// one when done, V(s_T) at t = T-1), done (env::DoneFlag) all (T, n). A termination does not
    /// bootstrap; a truncation bootstraps from next_values but ends the episode (gae restarts).
    /// Bit-identical on both backends.
    void ppo_gae(View<float> advantages, View<float> returns, View<const float> rewards,
                 View<const float> values, View<const float> next_values, View<const std::uint8_t> done,
                 float gamma, float lambda, int T);
    /// Floats of scratch that normalize needs.
    static constexpr std::size_t normalize_scratch_size() noexcept {
        return static_cast<std::size_t>(ppo::kNormalizeScratch);
    }
    /// In place: x = (x - mean) / (std + 1e-8), population std, deterministic (a fixed reduction
    /// order on each backend, double sums). x (>= 1), scratch (>= normalize_scratch_size()); distinct.
    void normalize(View<float> x, View<float> scratch);
    /// A shuffled minibatch of B = actions.size() rows: output row i = rollout row
    /// ppo::permute(offset + i, rollout.rows, seed, epoch) (a bijection of the rollout rows keyed
    /// by (seed, epoch), so offsets 0, B, 2B, ... of one epoch never repeat a row).
    /// states (B, rollout.state_dim), the rest (B); 0 <= offset, offset + B <= rollout.rows.
    void ppo_gather(View<float> states, View<int> actions, View<float> old_log_probs, View<float> advantages,
                    View<float> returns, View<float> old_values, const ppo::RolloutView& rollout,
                    std::uint64_t seed, std::uint64_t epoch, int offset);
    /// The PPO loss of a minibatch (ppo::loss_sample): B = actions.size(), logits (B, A),
    /// A = logits.size() / B; values (B) = the critic's current output; old_log_probs, advantages,
    /// returns, old_values (B). d_logits (B, A) and d_values (B) = gradients of the minibatch-mean
    /// total loss; stats (ppo::kPpoLossStats, B), stat k of sample i at k * B + i: policy loss,
    /// value loss, entropy, approx KL, clipped (ppo::LossStat).
    void ppo_loss(View<float> stats, View<float> d_logits, View<float> d_values, View<const float> logits,
                  View<const float> values, View<const int> actions, View<const float> old_log_probs,
                  View<const float> advantages, View<const float> returns, View<const float> old_values,
                  const ppo::LossParams& p);
    /// The curiosity forward model's input (n, D + A) = [states row (D) | one-hot(action) (A)],
    /// n = actions.size(), D = states.size() / n.
    void curiosity_input(View<float> input, View<const float> states, View<const int> actions, int num_actions);
    /// The forward model's error: pred (n, P), P = pred.size() / n <= state_dim, predicts the
    /// first P columns of next_states (n, state_dim); n = error.size(). error[e] = 0.5 * mean_j
    /// (pred - target)^2 (the intrinsic reward before its coefficient); d_pred (n, P) =
    /// (pred - target) / (n * P), the gradient of mean_e error[e].
    void curiosity_error(View<float> error, View<float> d_pred, View<const float> pred,
                         View<const float> next_states, int state_dim);
    // ---- IQL: critic and actor losses, behaviour policy -------------------------------------
    // (cuda/kernels/iql_value.cu, awr_policy_kernel.cu, iql_behaviour_kernel.cu; math in
    // cuda/math/iql.h; checks in src/ops/iql_ops.cpp; CPU twins in
    // src/ops/cpu/cpu_iql_ops.cpp; docs/iql.md). B = batch, A = num_actions (taken from the
    // sizes: A = q1.size() / B). Gradients are those of the batch-MEAN loss. Outputs may overlap
    // nothing; read-only inputs may share memory (checked). An action outside [0, A) gives that
    // row a NaN loss (the training guard skips the update) and zero gradients.
    /// Expectile value loss. v (B) = V(s); q1, q2 (B, A) = the TARGET twin Q at s; actions (B).
    /// q = min(q1[a], q2[a]), u = q - v, w = |expectile - 1(u < 0)|: loss[i] = w u^2 (B),
    /// d_v[i] = -2 w u / B (B). expectile in (0, 1).
    void iql_value_loss(View<float> loss, View<float> d_v, View<const float> v, View<const float> q1,
                        View<const float> q2, View<const int> actions, float expectile);
    /// Twin-Q TD loss. q1, q2 (B, A) = the ONLINE twin Q at s; actions, rewards, discounts (B)
    /// (discounts = gamma (1 - terminated)); v_next (B) = V(s'). y = rewards + discounts * v_next,
    /// loss[i] = (q1[a] - y)^2 + (q2[a] - y)^2 (B); d_q1, d_q2 (B, A) = 2 (q - y) / B at column a,
    /// 0 elsewhere.
    void iql_q_loss(View<float> loss, View<float> d_q1, View<float> d_q2, View<const float> q1,
                    View<const float> q2, View<const int> actions, View<const float> rewards,
                    View<const float> discounts, View<const float> v_next);
    /// AWR policy loss. logits (B, A) of the policy; q1, q2 (B, A) = the TARGET twin Q at s;
    /// v (B); actions (B). adv = min(q1[a], q2[a]) - v, weights[i] = min(exp(beta adv),
    /// max_weight) with the exponent clamped to iql::kMaxAwrExponent (B; a constant, no gradient);
    /// loss[i] = -weights[i] log pi(a|s) (B); d_logits (B, A) = weights[i] (softmax - onehot(a)) / B.
    /// beta >= 0 and max_weight > 0, both finite.
    void awr_policy_loss(View<float> loss, View<float> weights, View<float> d_logits,
                         View<const float> logits, View<const float> q1, View<const float> q2,
                         View<const float> v, View<const int> actions, float beta, float max_weight);
    /// The behaviour policy of the offline data set (iql::behaviour_action): actions (n) from
    /// states (n, p.state_dim), a mixture of traders by environment index e % 4 (random, momentum,
    /// mean reversion, trend), Philox (p.seed, behaviour, e, step). Exact, equal on both backends.
    void behaviour_actions(View<int> actions, View<const float> states, const iql::BehaviourParams& p,
                           std::uint64_t step);

protected:
    virtual void* allocate_bytes(std::size_t bytes) = 0;
    virtual void release_bytes(void* p) noexcept = 0;
    virtual void upload_bytes(void* dst, const void* src, std::size_t bytes) = 0;
    virtual void download_bytes(void* dst, const void* src, std::size_t bytes) = 0;

    virtual void fill_impl(View<float> y, float value) = 0;
    virtual void copy_impl(View<float> dst, View<const float> src) = 0;
    virtual void saxpy_impl(View<float> y, float a, View<const float> x) = 0;
    virtual void scale_impl(View<float> y, float alpha) = 0;

    virtual void env_reset_impl(View<env::EnvState> state, View<float> portfolio,
                                View<const std::uint8_t> mask, const env::MarketView& market,
                                const env::EnvParams& params) = 0;
    virtual void env_step_impl(View<env::EnvState> state, View<float> portfolio, View<float> reward,
                               View<std::uint8_t> done, View<env::StepInfo> info,
                               View<const int> actions, const env::MarketView& market,
                               const env::EnvParams& params) = 0;
    virtual void gather_states_impl(View<float> states, View<const env::EnvState> state,
                                    View<const float> portfolio, const env::MarketView& market,
                                    const env::EnvParams& params) = 0;
    virtual void random_actions_impl(View<int> actions, std::uint64_t seed, std::uint64_t step,
                                     int num_actions) = 0;

    // backtest (src/ops/backtest_ops.cpp checked the arguments)
    virtual void backtest_reset_impl(View<backtest::SegmentState> state,
                                     View<backtest::BarRecord> records,
                                     View<const backtest::Segment> segments,
                                     const env::EnvParams& params) = 0;
    virtual void backtest_step_impl(View<backtest::SegmentState> state,
                                    View<backtest::BarRecord> records,
                                    View<const backtest::Segment> segments,
                                    View<const int> actions, const env::MarketView& market,
                                    const env::EnvParams& params) = 0;
    virtual void backtest_gather_impl(View<float> states, View<const backtest::SegmentState> state,
                                      const env::MarketView& market,
                                      const env::EnvParams& params) = 0;
    virtual void backtest_metrics_impl(View<backtest::MetricsOut> out, View<long long> histogram,
                                       View<const backtest::BarRecord> records,
                                       View<const backtest::SegmentState> state,
                                       View<const backtest::Segment> segments,
                                       const env::MarketView& market,
                                       const backtest::MetricsParams& params) = 0;

    // network (src/ops/nn_ops.cpp checked the arguments)
    virtual void linear_forward_impl(View<float> Y, View<const float> X, View<const float> W,
                                     View<const float> b, int batch, int in, int out,
                                     Activation act) = 0;
    virtual void linear_backward_impl(View<float> dX, View<float> dW, View<float> db,
                                      View<float> dY, View<const float> Y, View<const float> X,
                                      View<const float> W, int batch, int in, int out,
                                      Activation act, bool accumulate) = 0;
    virtual void global_norm_impl(View<float> out, View<const float> x, View<float> scratch) = 0;
    virtual void adam_step_impl(View<float> params, View<float> m, View<float> v,
                                View<const float> grads, View<const float> grad_norm,
                                View<const int> gate, const core::AdamConstants& c) = 0;

    // DQN (src/ops/dqn_ops.cpp checked the arguments)
    virtual void copy_bytes(void* dst, const void* src, std::size_t bytes) = 0;
    virtual void mean_impl(View<float> out, View<const float> x) = 0;
    virtual void c51_head_forward_impl(View<float> logits, View<float> probs, View<float> q,
                                       View<const float> value, View<const float> adv,
                                       const dqn::HeadParams& head, int batch) = 0;
    virtual void c51_head_backward_impl(View<float> d_value, View<float> d_adv,
                                        View<const float> d_logits, const dqn::HeadParams& head,
                                        int batch) = 0;
    virtual void c51_loss_impl(View<float> loss, View<float> d_logits, View<const float> logits,
                               View<const float> probs, View<const float> q_next_select,
                               View<const float> probs_next_target, View<const int> actions,
                               View<const float> returns, View<const float> discounts,
                               const dqn::HeadParams& head, int batch) = 0;
    virtual void mse_loss_impl(View<float> loss, View<float> d_logits, View<float> td,
                               View<const float> probs, View<const float> q,
                               View<const float> q_next_select, View<const float> q_next_target,
                               View<const int> actions, View<const float> returns,
                               View<const float> discounts, const dqn::HeadParams& head,
                               int batch) = 0;
    virtual void nstep_sample_impl(View<float> states, View<float> next_states, View<int> actions,
                                   View<float> returns, View<float> discounts,
                                   const replay::ReplayView& replay, const replay::SampleParams& params,
                                   int batch) = 0;
    virtual void epsilon_greedy_impl(View<int> actions, View<const float> q, int num_actions,
                                     float epsilon, std::uint64_t seed, std::uint64_t step) = 0;
    virtual void training_guard_impl(View<int> gate, View<nn::GuardState> state,
                                     View<const float> losses, View<const float> grad_norm,
                                     long long update) = 0;
    virtual void monitor_update_impl(View<dqn::MonitorStats> stats, View<const float> losses,
                                     View<const float> q, View<const int> actions,
                                     View<const float> td, View<const float> grad_norm,
                                     int num_actions, int batch) = 0;
    virtual void monitor_actions_impl(View<unsigned long long> histogram, View<const int> actions,
                                      int num_actions) = 0;

    // PPO (src/ops/ppo_ops.cpp checked the arguments)
    virtual void ppo_sample_impl(View<int> actions, View<float> log_probs, View<const float> logits,
                                 int num_actions, std::uint64_t seed, std::uint64_t step) = 0;
    virtual void ppo_diversity_impl(View<int> window, View<int> counts, View<float> penalty,
                                    View<const int> actions, int num_actions, int diversity_window,
                                    float coef, std::uint64_t step) = 0;
    virtual void ppo_gae_impl(View<float> advantages, View<float> returns, View<const float> rewards,
                              View<const float> values, View<const float> next_values,
                              View<const std::uint8_t> done, float gamma, float lambda, int T) = 0;
    virtual void normalize_impl(View<float> x, View<float> scratch) = 0;
    virtual void ppo_gather_impl(View<float> states, View<int> actions, View<float> old_log_probs,
                                 View<float> advantages, View<float> returns, View<float> old_values,
                                 const ppo::RolloutView& rollout, std::uint64_t seed, std::uint64_t epoch,
                                 int offset) = 0;
    virtual void ppo_loss_impl(View<float> stats, View<float> d_logits, View<float> d_values,
                               View<const float> logits, View<const float> values, View<const int> actions,
                               View<const float> old_log_probs, View<const float> advantages,
                               View<const float> returns, View<const float> old_values,
                               const ppo::LossParams& p) = 0;
    virtual void curiosity_input_impl(View<float> input, View<const float> states, View<const int> actions,
                                      int num_actions) = 0;
    virtual void curiosity_error_impl(View<float> error, View<float> d_pred, View<const float> pred,
                                      View<const float> next_states, int state_dim) = 0;
    // IQL (src/ops/iql_ops.cpp checked the arguments)
    virtual void iql_value_loss_impl(View<float> loss, View<float> d_v, View<const float> v,
                                     View<const float> q1, View<const float> q2,
                                     View<const int> actions, float expectile, int num_actions,
                                     int batch) = 0;
    virtual void iql_q_loss_impl(View<float> loss, View<float> d_q1, View<float> d_q2,
                                 View<const float> q1, View<const float> q2, View<const int> actions,
                                 View<const float> rewards, View<const float> discounts,
                                 View<const float> v_next, int num_actions, int batch) = 0;
    virtual void awr_policy_loss_impl(View<float> loss, View<float> weights, View<float> d_logits,
                                      View<const float> logits, View<const float> q1,
                                      View<const float> q2, View<const float> v,
                                      View<const int> actions, float beta, float max_weight,
                                      int num_actions, int batch) = 0;
    virtual void behaviour_actions_impl(View<int> actions, View<const float> states,
                                        const iql::BehaviourParams& p, std::uint64_t step) = 0;

    static void require_same_size(std::size_t a, std::size_t b, const char* op);
    /// Kernels index with int: refuse sizes they cannot address.
    static int checked_int_size(std::size_t n, const char* op);

private:
    std::size_t bytes_in_use_ = 0;
    std::size_t peak_bytes_ = 0;
};

/// The C51/MSE gradient blend of SPEC section 2: c51_grad = alpha * c51_grad + (1 - alpha) *
/// mse_grad, done as an in-place scale followed by a saxpy on two distinct buffers.
void blend_c51_mse_gradient(Ops& ops, View<float> c51_grad, View<const float> mse_grad,
                            float alpha);

template <class T> View<T> View<T>::subview(std::size_t offset, std::size_t count) const {
    if (offset > count_ || count > count_ - offset)
        throw std::out_of_range("ops::View::subview: range outside the view");
    return View<T>(data_ + offset, count);
}

template <class T> void Buffer<T>::release() noexcept {
    if (owner_ && data_) owner_->free_bytes(data_, count_ * sizeof(T));
    data_ = nullptr;
    count_ = 0;
}

}  // namespace fh::ops
