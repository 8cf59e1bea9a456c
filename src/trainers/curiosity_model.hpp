/// @file curiosity_model.hpp
/// @brief The curiosity bonus's forward model (ICM-style, docs/ppo.md and docs/dqn.md), shared by
///        PPO and DQN: an MLP [state | one-hot(action)] -> the next bar's market features, its
///        prediction error per transition (the bonus before its coefficient) and one Adam step of
///        the model on the same transitions. It owns its parameters, optimizer and one step's
///        buffers; the trainer fills input() and adds the error to its rewards.
#pragma once

#include <cstdint>
#include <vector>

#include "nn/mlp.hpp"
#include "nn/param_layout.hpp"
#include "device/device.hpp"
#include "trainers/adam_state.hpp"
#include "trainers/state_tensor.hpp"

namespace fh::trainers {

class CuriosityModel {
public:
    /// A model for `rows` transitions per step: input state_dim + num_actions, one tanh layer of
    /// `hidden`, output market_dim; weights drawn from run.seed (a stream of its own).
    CuriosityModel(ops::Device& ops, int state_dim, int num_actions, int hidden, int market_dim, int rows,
                   std::uint64_t run_seed);
    /// Declares what `copies` models of these shapes allocate; returns a model's parameters.
    static std::uint64_t plan(MemoryPlan& plan, int state_dim, int num_actions, int hidden, int market_dim, int rows,
                              std::uint64_t copies);

    /// The step's input rows (rows, state_dim + num_actions), for the trainer to fill
    /// (ops::curiosity_input or the DQN ring's gather).
    ops::View<float> input() noexcept { return input_.view(); }
    /// One step on the filled input: error (rows) = ppo::curiosity_error_row against the first
    /// market_dim columns of `next` (rows, next_width), then the model's backward and one Adam
    /// step (learning rate lr) at its device step. Capturable; the host counts each call with
    /// count_steps outside the sequence.
    void train_step(ops::Device& ops, ops::View<float> error, ops::View<const float> next, int next_width, float lr);

    void count_steps(long long n) noexcept { adam_.count_steps(n); }
    /// Adam steps taken (one per train_step).
    long long steps() const noexcept { return adam_.steps(); }
    void restore_steps(ops::Device& ops, long long steps) { adam_.restore_steps(ops, steps); }
    /// `<prefix>params`, `<prefix>adam_m`, `<prefix>adam_v` (e.g. "curiosity/").
    std::vector<StateTensor> state_tensors(const std::string& prefix);

private:
    nn::ParamLayout layout_;
    nn::Mlp net_;
    int rows_;
    ops::Buffer<float> params_, grads_, input_, d_pred_;
    AdamState adam_;
    nn::Mlp::Workspace ws_;
};

}  // namespace fh::trainers
