/// @file cuda.cpp
/// @brief CUDA twins of the Decision Transformer op family: launchers of cuda/kernels/dt_*.cu on
///        the device's stream. The ops (src/ops/dt/ops.hpp) checked sizes and that the buffers of
///        each launch are distinct before these run.
#include "ops/dt/ops.hpp"

#include <algorithm>

#include "device/cuda_device.hpp"

namespace fh::ops::cuda_twin {

using cuda::LaunchDims;

namespace {
LaunchDims threads_for(long long n) {
    return LaunchDims::linear(static_cast<std::size_t>(n), 128);
}
long long attention_threads(const dt::AttentionShape& s) {
    return static_cast<long long>(s.batch) * s.heads * s.tokens;
}
}  // namespace

void dt_state_input(CudaDevice& d, View<float> out, View<const float> states, int state_dim, int market_dim) {
    const auto n = static_cast<long long>(states.size());
    d.kernels().dt_state_input_kernel(d.stream(), threads_for(n), out.data(), states.data(), n, state_dim, market_dim);
}

void dt_embed(CudaDevice& d, View<float> x, View<const float> rtg, View<const float> s_proj, View<const int> actions,
              const dt::EmbedParams& p, long long steps) {
    d.kernels().dt_embed_kernel(d.stream(), threads_for(steps * dt::kTokensPerStep), x.data(), rtg.data(),
                                s_proj.data(), actions.data(), p, steps);
}

void dt_embed_backward(CudaDevice& d, View<float> d_return_w, View<float> d_return_b, View<float> d_action_table,
                       View<float> d_s_proj, View<const float> dx, View<const float> rtg, View<const int> actions,
                       long long steps, int dim, int num_actions) {
    d.kernels().dt_embed_backward_kernel(d.stream(), threads_for(dt::embed_backward_elements(steps, dim, num_actions)),
                                         d_return_w.data(), d_return_b.data(), d_action_table.data(), d_s_proj.data(),
                                         dx.data(), rtg.data(), actions.data(), steps, dim, num_actions);
}

void dt_layer_norm(CudaDevice& d, View<float> y, View<float> stats, View<const float> x, View<const float> gain,
                   View<const float> bias, long long rows, int dim) {
    d.kernels().dt_layer_norm_kernel(d.stream(), threads_for(rows), y.data(), stats.data(), x.data(), gain.data(),
                                     bias.data(), rows, dim);
}

void dt_layer_norm_backward(CudaDevice& d, View<float> dx, View<float> d_gain, View<float> d_bias, View<const float> dy,
                            View<const float> x, View<const float> stats, View<const float> gain, long long rows,
                            int dim, bool accumulate) {
    d.kernels().dt_layer_norm_backward_kernel(d.stream(), threads_for(rows), dx.data(), dy.data(), x.data(),
                                              stats.data(), gain.data(), rows, dim, accumulate ? 1 : 0);
    const LaunchDims per_feature{dim3(static_cast<unsigned>(std::min(dim, 1024))), dim3(dt::kParamGradThreads), 0};
    d.kernels().dt_layer_norm_param_grad_kernel(d.stream(), per_feature, d_gain.data(), d_bias.data(), dy.data(),
                                                x.data(), stats.data(), rows, dim);
}

void dt_gelu(CudaDevice& d, View<float> y, View<const float> z) {
    const auto n = static_cast<long long>(z.size());
    d.kernels().dt_gelu_kernel(d.stream(), threads_for(n), y.data(), z.data(), n);
}

void dt_gelu_backward(CudaDevice& d, View<float> dz, View<const float> dy, View<const float> z) {
    const auto n = static_cast<long long>(z.size());
    d.kernels().dt_gelu_backward_kernel(d.stream(), threads_for(n), dz.data(), dy.data(), z.data(), n);
}

void dt_attention(CudaDevice& d, View<float> out, View<float> P, View<const float> qkv, const dt::AttentionShape& s) {
    d.kernels().dt_attention_kernel(d.stream(), threads_for(attention_threads(s)), out.data(), P.data(), qkv.data(), s);
}

void dt_attention_backward(CudaDevice& d, View<float> dqkv, View<float> dS, View<const float> d_out,
                           View<const float> qkv, View<const float> P, const dt::AttentionShape& s) {
    // The key pass reads every query's dS row: it runs after the query pass (stream order).
    d.kernels().dt_attention_backward_query_kernel(d.stream(), threads_for(attention_threads(s)), dqkv.data(),
                                                   dS.data(), d_out.data(), qkv.data(), P.data(), s);
    d.kernels().dt_attention_backward_key_kernel(d.stream(), threads_for(attention_threads(s)), dqkv.data(), dS.data(),
                                                 d_out.data(), qkv.data(), P.data(), s);
}

void dt_gather(CudaDevice& d, View<float> states, View<float> rtg, View<int> actions, View<int> lengths,
               const dt::Dataset& ds, const dt::WindowParams& w, int batch) {
    d.kernels().dt_gather_kernel(d.stream(), threads_for(batch), states.data(), rtg.data(), actions.data(),
                                 lengths.data(), ds, w, batch);
}

void dt_action_loss(CudaDevice& d, View<float> loss, View<float> correct, View<float> d_logits,
                    View<const float> logits, View<const int> actions, View<const int> lengths, int batch, int context,
                    int num_actions) {
    d.kernels().dt_action_loss_kernel(d.stream(), threads_for(batch), loss.data(), correct.data(),
                                      d_logits.empty() ? nullptr : d_logits.data(), logits.data(), actions.data(),
                                      lengths.data(), batch, context, num_actions);
}

void dt_learning_rate(CudaDevice& d, View<float> lr, double base, long long warmup, core::CounterValue step) {
    d.kernels().dt_learning_rate_kernel(d.stream(), LaunchDims::linear(1, 32), lr.data(), base, warmup, step);
}

void dt_act_tokens(CudaDevice& d, View<float> x, View<dt::History> hist, View<const float> states,
                   View<const float> s_proj, const dt::EmbedParams& e, const dt::ActParams& a, int n) {
    d.kernels().dt_act_tokens_kernel(d.stream(), threads_for(n), x.data(), hist.data(), states.data(), s_proj.data(), e,
                                     a, n);
}

void dt_cache_write(CudaDevice& d, View<float> cache, View<const float> qkv, View<const dt::History> hist,
                    const dt::ActParams& a, int n) {
    d.kernels().dt_cache_write_kernel(d.stream(), threads_for(static_cast<long long>(n) * dt::kTokensPerStep),
                                      cache.data(), qkv.data(), hist.data(), a, n);
}

void dt_cache_attend(CudaDevice& d, View<float> out, View<const float> cache, View<const float> qkv,
                     View<const dt::History> hist, const dt::ActParams& a, int n) {
    d.kernels().dt_cache_attend_kernel(d.stream(),
                                       threads_for(static_cast<long long>(n) * a.heads * dt::kTokensPerStep),
                                       out.data(), cache.data(), qkv.data(), hist.data(), a, n);
}

void dt_act_select(CudaDevice& d, View<int> actions, View<dt::History> hist, View<const float> logits, int num_actions,
                   int n) {
    d.kernels().dt_act_select_kernel(d.stream(), threads_for(n), actions.data(), hist.data(), logits.data(),
                                     num_actions, n);
}

}  // namespace fh::ops::cuda_twin
