/// @file cpu.cpp
/// @brief CPU twins of the Decision Transformer op family: the shared math (math/dt.h) in plain
///        loops, in the order the kernels' threads are numbered.
#include "ops/dt/ops.hpp"

namespace fh::ops::cpu_twin {

void dt_state_input(View<float> out, View<const float> states, int state_dim, int market_dim) {
    for (std::size_t i = 0; i < states.size(); ++i)
        dt::state_input_element(static_cast<long long>(i), out.data(), states.data(), state_dim, market_dim);
}

void dt_embed(View<float> x, View<const float> rtg, View<const float> s_proj, View<const int> actions,
              const dt::EmbedParams& p, long long steps) {
    for (long long r = 0; r < steps * dt::kTokensPerStep; ++r)
        dt::embed_row(r, x.data(), rtg.data(), s_proj.data(), actions.data(), p);
}

void dt_embed_backward(View<float> d_return_w, View<float> d_return_b, View<float> d_action_table, View<float> d_s_proj,
                       View<const float> dx, View<const float> rtg, View<const int> actions, long long steps, int dim,
                       int num_actions) {
    const long long n = dt::embed_backward_elements(steps, dim, num_actions);
    for (long long i = 0; i < n; ++i)
        dt::embed_backward_element(i, d_return_w.data(), d_return_b.data(), d_action_table.data(), d_s_proj.data(),
                                   dx.data(), rtg.data(), actions.data(), steps, dim, num_actions);
}

void dt_layer_norm(View<float> y, View<float> stats, View<const float> x, View<const float> gain,
                   View<const float> bias, long long rows, int dim) {
    for (long long r = 0; r < rows; ++r)
        dt::layer_norm_row(r, y.data(), stats.data(), x.data(), gain.data(), bias.data(), dim);
}

void dt_layer_norm_backward(View<float> dx, View<float> d_gain, View<float> d_bias, View<const float> dy,
                            View<const float> x, View<const float> stats, View<const float> gain, long long rows,
                            int dim, bool accumulate) {
    for (long long r = 0; r < rows; ++r)
        dt::layer_norm_backward_row(r, dx.data(), dy.data(), x.data(), stats.data(), gain.data(), dim,
                                    accumulate ? 1 : 0);
    for (int c = 0; c < dim; ++c)
        dt::layer_norm_param_grad(c, d_gain.data(), d_bias.data(), dy.data(), x.data(), stats.data(), rows, dim);
}

void dt_gelu(View<float> y, View<const float> z) {
    for (std::size_t i = 0; i < z.size(); ++i) y.data()[i] = dt::gelu(z.data()[i]);
}

void dt_gelu_backward(View<float> dz, View<const float> dy, View<const float> z) {
    for (std::size_t i = 0; i < z.size(); ++i) dz.data()[i] = dy.data()[i] * dt::gelu_derivative(z.data()[i]);
}

void dt_attention(View<float> out, View<float> P, View<const float> qkv, const dt::AttentionShape& s) {
    for (int b = 0; b < s.batch; ++b)
        for (int h = 0; h < s.heads; ++h)
            for (int i = 0; i < s.tokens; ++i) dt::attention_query(b, h, i, out.data(), P.data(), qkv.data(), s);
}

void dt_attention_backward(View<float> dqkv, View<float> dS, View<const float> d_out, View<const float> qkv,
                           View<const float> P, const dt::AttentionShape& s) {
    for (int b = 0; b < s.batch; ++b)
        for (int h = 0; h < s.heads; ++h)
            for (int i = 0; i < s.tokens; ++i)
                dt::attention_backward_query(b, h, i, dqkv.data(), dS.data(), d_out.data(), qkv.data(), P.data(), s);
    for (int b = 0; b < s.batch; ++b)
        for (int h = 0; h < s.heads; ++h)
            for (int j = 0; j < s.tokens; ++j)
                dt::attention_backward_key(b, h, j, dqkv.data(), dS.data(), d_out.data(), qkv.data(), P.data(), s);
}

void dt_gather(View<float> states, View<float> rtg, View<int> actions, View<int> lengths, const dt::Dataset& d,
               const dt::WindowParams& w, int batch) {
    for (long long b = 0; b < batch; ++b)
        dt::gather_window(b, states.data(), rtg.data(), actions.data(), lengths.data(), d, w);
}

void dt_action_loss(View<float> loss, View<float> correct, View<float> d_logits, View<const float> logits,
                    View<const int> actions, View<const int> lengths, int batch, int context, int num_actions) {
    float* d = d_logits.empty() ? nullptr : d_logits.data();
    for (int b = 0; b < batch; ++b)
        dt::action_loss_window(b, loss.data(), correct.data(), d, logits.data(), actions.data(), lengths.data(), batch,
                               context, num_actions);
}

void dt_learning_rate(View<float> lr, double base, long long warmup, core::CounterValue step) {
    lr.data()[0] = dt::warmup_learning_rate(base, warmup, step.value());
}

void dt_act_tokens(View<float> x, View<dt::History> hist, View<const float> states, View<const float> s_proj,
                   const dt::EmbedParams& e, const dt::ActParams& a, int n) {
    for (int i = 0; i < n; ++i) dt::act_tokens(i, x.data(), hist.data(), states.data(), s_proj.data(), e, a);
}

void dt_cache_write(View<float> cache, View<const float> qkv, View<const dt::History> hist, const dt::ActParams& a,
                    int n) {
    for (int e = 0; e < n; ++e)
        for (int r = 0; r < dt::kTokensPerStep; ++r) dt::cache_write(e, r, cache.data(), qkv.data(), hist.data(), a);
}

void dt_cache_attend(View<float> out, View<const float> cache, View<const float> qkv, View<const dt::History> hist,
                     const dt::ActParams& a, int n) {
    for (int e = 0; e < n; ++e)
        for (int h = 0; h < a.heads; ++h)
            for (int r = 0; r < dt::kTokensPerStep; ++r)
                dt::cache_attend(e, h, r, out.data(), cache.data(), qkv.data(), hist.data(), a);
}

void dt_act_select(View<int> actions, View<dt::History> hist, View<const float> logits, int num_actions, int n) {
    for (int e = 0; e < n; ++e) dt::act_select(e, actions.data(), hist.data(), logits.data(), num_actions);
}

}  // namespace fh::ops::cpu_twin
