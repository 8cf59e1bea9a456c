/// @file cpu.cpp
/// @brief CPU twins of the Decision Transformer op family (cuda/abi/dt_*.h): the shared math
///        (math/dt.h) in plain loops, in the order the kernels' threads are numbered.
#include "abi/dt_act.h"
#include "abi/dt_train.h"

namespace fh::ops {

void cpu(const DtStateInput& a) {
    for (std::size_t i = 0; i < a.states.size(); ++i)
        dt::state_input_element(static_cast<long long>(i), a.out.data(), a.states.data(), a.state_dim, a.market_dim);
}

void cpu(const DtEmbed& a) {
    const dt::EmbedParams p = embed_params(a.weights);
    for (long long r = 0; r < static_cast<long long>(a.rtg.size()) * dt::kTokensPerStep; ++r)
        dt::embed_row(r, a.x.data(), a.rtg.data(), a.s_proj.data(), a.actions.data(), p);
}

void cpu(const DtEmbedBackward& a) {
    const auto steps = static_cast<long long>(a.rtg.size());
    const long long n = dt::embed_backward_elements(steps, a.dim, a.num_actions);
    for (long long i = 0; i < n; ++i)
        dt::embed_backward_element(i, a.d_return_w.data(), a.d_return_b.data(), a.d_action_table.data(),
                                   a.d_s_proj.data(), a.dx.data(), a.rtg.data(), a.actions.data(), steps, a.dim,
                                   a.num_actions);
}

void cpu(const DtLayerNorm& a) {
    const auto rows = static_cast<long long>(a.x.size() / static_cast<std::size_t>(a.dim));
    for (long long r = 0; r < rows; ++r)
        dt::layer_norm_row(r, a.y.data(), a.stats.data(), a.x.data(), a.gain.data(), a.bias.data(), a.dim);
}

void cpu(const DtLayerNormBackward& a) {
    const auto rows = static_cast<long long>(a.x.size() / static_cast<std::size_t>(a.dim));
    for (long long r = 0; r < rows; ++r)
        dt::layer_norm_backward_row(r, a.dx.data(), a.dy.data(), a.x.data(), a.stats.data(), a.gain.data(), a.dim,
                                    a.accumulate ? 1 : 0);
    for (int c = 0; c < a.dim; ++c)
        dt::layer_norm_param_grad(c, a.d_gain.data(), a.d_bias.data(), a.dy.data(), a.x.data(), a.stats.data(), rows,
                                  a.dim);
}

void cpu(const DtGelu& a) {
    for (std::size_t i = 0; i < a.z.size(); ++i) a.y.data()[i] = dt::gelu(a.z.data()[i]);
}

void cpu(const DtGeluBackward& a) {
    for (std::size_t i = 0; i < a.z.size(); ++i) a.dz.data()[i] = a.dy.data()[i] * dt::gelu_derivative(a.z.data()[i]);
}

void cpu(const DtAttention& a) {
    const dt::AttentionShape& s = a.shape;
    for (int b = 0; b < s.batch; ++b)
        for (int h = 0; h < s.heads; ++h)
            for (int i = 0; i < s.tokens; ++i) dt::attention_query(b, h, i, a.out.data(), a.P.data(), a.qkv.data(), s);
}

void cpu(const DtAttentionBackward& a) {
    const dt::AttentionShape& s = a.shape;
    for (int b = 0; b < s.batch; ++b)
        for (int h = 0; h < s.heads; ++h)
            for (int i = 0; i < s.tokens; ++i)
                dt::attention_backward_query(b, h, i, a.dqkv.data(), a.dS.data(), a.d_out.data(), a.qkv.data(),
                                             a.P.data(), s);
    for (int b = 0; b < s.batch; ++b)
        for (int h = 0; h < s.heads; ++h)
            for (int j = 0; j < s.tokens; ++j)
                dt::attention_backward_key(b, h, j, a.dqkv.data(), a.dS.data(), a.d_out.data(), a.qkv.data(),
                                           a.P.data(), s);
}

void cpu(const DtGather& a) {
    const dt::Dataset d = dt_dataset(a.dataset);
    for (long long b = 0; b < static_cast<long long>(a.lengths.size()); ++b)
        dt::gather_window(b, a.states.data(), a.rtg.data(), a.actions.data(), a.lengths.data(), d, a.params);
}

void cpu(const DtActionLoss& a) {
    const auto batch = static_cast<int>(a.lengths.size());
    float* d = a.d_logits.empty() ? nullptr : a.d_logits.data();
    for (int b = 0; b < batch; ++b)
        dt::action_loss_window(b, a.loss.data(), a.correct.data(), d, a.logits.data(), a.actions.data(),
                               a.lengths.data(), batch, a.context, a.num_actions);
}

void cpu(const DtLearningRate& a) {
    a.lr.data()[0] = dt::warmup_learning_rate(a.base, a.warmup, a.step.value());
}

void cpu(const DtActTokens& a) {
    const dt::EmbedParams e = embed_params(a.weights);
    for (int i = 0; i < static_cast<int>(a.hist.size()); ++i)
        dt::act_tokens(i, a.x.data(), a.hist.data(), a.states.data(), a.s_proj.data(), e, a.params);
}

void cpu(const DtCacheAttention& a) {
    const auto n = static_cast<int>(a.hist.size());
    for (int e = 0; e < n; ++e)
        for (int r = 0; r < dt::kTokensPerStep; ++r)
            dt::cache_write(e, r, a.cache.data(), a.qkv.data(), a.hist.data(), a.params);
    for (int e = 0; e < n; ++e)
        for (int h = 0; h < a.params.heads; ++h)
            for (int r = 0; r < dt::kTokensPerStep; ++r)
                dt::cache_attend(e, h, r, a.out.data(), a.cache.data(), a.qkv.data(), a.hist.data(), a.params);
}

void cpu(const DtActSelect& a) {
    for (int e = 0; e < static_cast<int>(a.hist.size()); ++e)
        dt::act_select(e, a.actions.data(), a.hist.data(), a.logits.data(), a.num_actions);
}

}  // namespace fh::ops
