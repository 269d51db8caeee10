// OLMo 2 (Olmo2ForCausalLM): no norm before the sub-layers; each
// sub-layer's output is RMS-normalized, then added to the stream
// (post_attention_layernorm, post_feedforward_layernorm), and the queries
// and keys are RMS-normalized over their whole projected width (q_norm:
// heads × head_dim, k_norm: kv_heads × head_dim) before the rotation.
// Field names and defaults: configuration_olmo2.py; the layer:
// modeling_olmo2.py's Olmo2DecoderLayer.
#include "llama_like.h"

#include "../../layers/layers.h"

namespace halformer {
namespace hf {
namespace {

// One layer, as Olmo2DecoderLayer runs it.
void olmo2_layer(Session &k, const layers::Pass &p, const LayerW &L, bool causal, layers::LayerIO &io) {
    using namespace layers;
    const int M = io.M();
    QK qk = project_qkv(k, p, L.attn("self_attn"), io.x_in, io);         // q_proj, k_proj, v_proj
    qk = qk_norm(k, L.norm("q_norm"), L.norm("k_norm"), qk, false, io);  // q_norm, k_norm: the whole width
    rotate_qk(k, qk, io);                                                // rotary; K|V to the cache
    self_attention(k, p, causal, io);
    attention_output(k, p, L.attn("self_attn"), io, nullptr, io.y1);  // o_proj
    norm_add(k, L.norm("norm1"), io.y1, io.x_in, io.x1, M);           // post_attention_layernorm, + residual
    feed_forward(k, p, L, io.x1, nullptr, io, io.y3);                 // mlp (SwiGLU)
    norm_add(k, L.norm("norm2"), io.y3, io.x1, io.x_out, M);          // post_feedforward_layernorm, + residual
}

Config olmo2(const Fields &f) {
    Config c = llama_like(f, {"olmo2", "Olmo2ForCausalLM", 50304, 4096, 11008, 32, 32, 0, 2048, -1, 50279, false, 0});
    c.qkv_bias = c.out_bias = f.boolean("attention_bias", false);
    c.ffn_bias = false;
    c.layer_norm_eps = f.number("rms_norm_eps", 1e-5f);
    c.pad_id = f.integer("pad_token_id", 1);
    return c;
}

void olmo2_describe(const Fields &, const Config &, Description &d) {
    d.layer = olmo2_layer;
    d.qk_norm = Description::QkNorm::Width;
    d.layer_tensors = {{"q_norm", d.attn_width}, {"k_norm", d.kv_width}};
}

WeightRules olmo2_weights(Config &cfg, const Fields &f, const Has &has) {
    WeightRules w = llama_weights(cfg, f, has);
    Rules &r = w.rules;
    const std::string ours = "decoder.layers.{i}.", theirs = "model.layers.{i}.";
    // The sub-layers' norms, applied to their outputs (olmo2_layer).
    r[ours + "norm1.weight"] = {How::Same, {theirs + "post_attention_layernorm.weight"}};
    r[ours + "norm2.weight"] = {How::Same, {theirs + "post_feedforward_layernorm.weight"}};
    r[ours + "q_norm.weight"] = {How::Same, {theirs + "self_attn.q_norm.weight"}};
    r[ours + "k_norm.weight"] = {How::Same, {theirs + "self_attn.k_norm.weight"}};
    return w;
}

}  // namespace

const Family &olmo2_family() {
    static const Family f{"olmo2", olmo2, olmo2_weights, kRotaryBuffers, "llama", olmo2_describe};
    return f;
}

}  // namespace hf
}  // namespace halformer
