/// @file cpu_ops.hpp
/// @brief The CPU reference backend: plain loops written from the math, readable as
///        documentation; the oracle the CUDA ops are tested against.
#pragma once

#include "ops/ops.hpp"

namespace fh::ops {

class CpuOps final : public Ops {
public:
    Backend backend() const noexcept override { return Backend::cpu; }
    std::string description() const override { return "cpu (reference backend)"; }
    void synchronize() override {}

protected:
    void* allocate_bytes(std::size_t bytes) override;
    void release_bytes(void* p) noexcept override;
    void upload_bytes(void* dst, const void* src, std::size_t bytes) override;
    void download_bytes(void* dst, const void* src, std::size_t bytes) override;

    void fill_impl(View<float> y, float value) override;
    void copy_impl(View<float> dst, View<const float> src) override;
    void saxpy_impl(View<float> y, float a, View<const float> x) override;
    void scale_impl(View<float> y, float alpha) override;

    void env_reset_impl(View<env::EnvState> state, View<float> portfolio,
                        View<const std::uint8_t> mask, const env::MarketView& market,
                        const env::EnvParams& params) override;
    void env_step_impl(View<env::EnvState> state, View<float> portfolio, View<float> reward,
                       View<std::uint8_t> done, View<env::StepInfo> info, View<const int> actions,
                       const env::MarketView& market, const env::EnvParams& params) override;
    void gather_states_impl(View<float> states, View<const env::EnvState> state,
                            View<const float> portfolio, const env::MarketView& market,
                            const env::EnvParams& params) override;
    void random_actions_impl(View<int> actions, std::uint64_t seed, std::uint64_t step,
                             int num_actions) override;

    // ---- backtest ops (src/ops/cpu/cpu_backtest_ops.cpp) ---------------------------------
    void backtest_reset_impl(View<backtest::SegmentState> state, View<backtest::BarRecord> records,
                             View<const backtest::Segment> segments,
                             const env::EnvParams& params) override;
    void backtest_step_impl(View<backtest::SegmentState> state, View<backtest::BarRecord> records,
                            View<const backtest::Segment> segments, View<const int> actions,
                            const env::MarketView& market, const env::EnvParams& params) override;
    void backtest_gather_impl(View<float> states, View<const backtest::SegmentState> state,
                              const env::MarketView& market, const env::EnvParams& params) override;
    void backtest_metrics_impl(View<backtest::MetricsOut> out, View<long long> histogram,
                               View<const backtest::BarRecord> records,
                               View<const backtest::SegmentState> state,
                               View<const backtest::Segment> segments, const env::MarketView& market,
                               const backtest::MetricsParams& params) override;

    // ---- network ops (src/ops/cpu/cpu_nn_ops.cpp) ----------------------------------------
    void linear_forward_impl(View<float> Y, View<const float> X, View<const float> W,
                             View<const float> b, int batch, int in, int out,
                             Activation act) override;
    void linear_backward_impl(View<float> dX, View<float> dW, View<float> db, View<float> dY,
                              View<const float> Y, View<const float> X, View<const float> W,
                              int batch, int in, int out, Activation act,
                              bool accumulate) override;
    void global_norm_impl(View<float> out, View<const float> x, View<float> scratch) override;
    void adam_step_impl(View<float> params, View<float> m, View<float> v, View<const float> grads,
                        View<const float> grad_norm, View<const int> gate,
                        const core::AdamConstants& c) override;

    // DQN (cuda/*_loss_kernel.cu, nstep, epsilon_greedy, training_guard, monitoring)
    void copy_bytes(void* dst, const void* src, std::size_t bytes) override;
    void mean_impl(View<float> out, View<const float> x) override;
    void c51_head_forward_impl(View<float> logits, View<float> probs, View<float> q,
                               View<const float> value, View<const float> adv,
                               const dqn::HeadParams& head, int batch) override;
    void c51_head_backward_impl(View<float> d_value, View<float> d_adv, View<const float> d_logits,
                                const dqn::HeadParams& head, int batch) override;
    void c51_loss_impl(View<float> loss, View<float> d_logits, View<const float> logits,
                       View<const float> probs, View<const float> q_next_select,
                       View<const float> probs_next_target, View<const int> actions,
                       View<const float> returns, View<const float> discounts,
                       const dqn::HeadParams& head, int batch) override;
    void mse_loss_impl(View<float> loss, View<float> d_logits, View<float> td, View<const float> probs,
                       View<const float> q, View<const float> q_next_select,
                       View<const float> q_next_target, View<const int> actions,
                       View<const float> returns, View<const float> discounts,
                       const dqn::HeadParams& head, int batch) override;
    void nstep_sample_impl(View<float> states, View<float> next_states, View<int> actions,
                           View<float> returns, View<float> discounts, const replay::ReplayView& replay,
                           const replay::SampleParams& params, int batch) override;
    void epsilon_greedy_impl(View<int> actions, View<const float> q, int num_actions, float epsilon,
                             std::uint64_t seed, std::uint64_t step) override;
    void training_guard_impl(View<int> gate, View<nn::GuardState> state, View<const float> losses,
                             View<const float> grad_norm, long long update) override;
    void monitor_update_impl(View<dqn::MonitorStats> stats, View<const float> losses,
                             View<const float> q, View<const int> actions, View<const float> td,
                             View<const float> grad_norm, int num_actions, int batch) override;
    void monitor_actions_impl(View<unsigned long long> histogram, View<const int> actions,
                              int num_actions) override;

    // PPO (cuda/ppo_*_kernel.cu, curiosity_training_kernel.cu; src/ops/cpu/cpu_ppo_ops.cpp)
    void ppo_sample_impl(View<int> actions, View<float> log_probs, View<const float> logits, int num_actions,
                         std::uint64_t seed, std::uint64_t step) override;
    void ppo_diversity_impl(View<int> window, View<int> counts, View<float> penalty, View<const int> actions,
                            int num_actions, int diversity_window, float coef, std::uint64_t step) override;
    void ppo_gae_impl(View<float> advantages, View<float> returns, View<const float> rewards,
                      View<const float> values, View<const float> next_values, View<const std::uint8_t> done,
                      float gamma, float lambda, int T) override;
    void normalize_impl(View<float> x, View<float> scratch) override;
    void ppo_gather_impl(View<float> states, View<int> actions, View<float> old_log_probs,
                         View<float> advantages, View<float> returns, View<float> old_values,
                         const ppo::RolloutView& rollout, std::uint64_t seed, std::uint64_t epoch,
                         int offset) override;
    void ppo_loss_impl(View<float> stats, View<float> d_logits, View<float> d_values, View<const float> logits,
                       View<const float> values, View<const int> actions, View<const float> old_log_probs,
                       View<const float> advantages, View<const float> returns, View<const float> old_values,
                       const ppo::LossParams& p) override;
    void curiosity_input_impl(View<float> input, View<const float> states, View<const int> actions,
                              int num_actions) override;
    void curiosity_error_impl(View<float> error, View<float> d_pred, View<const float> pred,
                              View<const float> next_states, int state_dim) override;
    // ---- IQL (src/ops/cpu/cpu_iql_ops.cpp) --------------------------------------------------------
    void iql_value_loss_impl(View<float> loss, View<float> d_v, View<const float> v,
                             View<const float> q1, View<const float> q2, View<const int> actions,
                             float expectile, int num_actions, int batch) override;
    void iql_q_loss_impl(View<float> loss, View<float> d_q1, View<float> d_q2, View<const float> q1,
                         View<const float> q2, View<const int> actions, View<const float> rewards,
                         View<const float> discounts, View<const float> v_next, int num_actions,
                         int batch) override;
    void awr_policy_loss_impl(View<float> loss, View<float> weights, View<float> d_logits,
                              View<const float> logits, View<const float> q1, View<const float> q2,
                              View<const float> v, View<const int> actions, float beta,
                              float max_weight, int num_actions, int batch) override;
    void behaviour_actions_impl(View<int> actions, View<const float> states,
                                const iql::BehaviourParams& p, std::uint64_t step) override;
};

}  // namespace fh::ops
