// Qwen3 (Qwen3ForCausalLM): Qwen2's decoder without its Q/K/V biases, with
// each head's query and key RMS-normalized (q_norm, k_norm over head_dim)
// before the rotation, and head_dim its own (128 by default, not hidden /
// heads). Field names and defaults: configuration_qwen3.py; the layer:
// modeling_qwen3.py's Qwen3DecoderLayer.
#include "llama_like.h"

#include "../../layers/layers.h"

namespace halformer {
namespace hf {

void qwen3_attention(Session &k, const layers::Pass &p, const LayerW &L, bool causal, layers::LayerIO &io) {
    using namespace layers;
    layer_norm(k, L.norm("norm1"), io.x_in, io.n1, io.M());             // input_layernorm
    QK qk = project_qkv(k, p, L.attn("self_attn"), io.n1, io);          // q_proj, k_proj, v_proj
    qk = qk_norm(k, L.norm("q_norm"), L.norm("k_norm"), qk, true, io);  // q_norm, k_norm: each head
    rotate_qk(k, qk, io);                                               // rotary; K|V to the cache
    self_attention(k, p, causal, io);                                   // causal, the layer's window
    attention_output(k, p, L.attn("self_attn"), io, io.x_in, io.x1);    // o_proj, + residual
}

namespace {

// One layer, as Qwen3DecoderLayer runs it.
void qwen3_layer(Session &k, const layers::Pass &p, const LayerW &L, bool causal, layers::LayerIO &io) {
    using namespace layers;
    qwen3_attention(k, p, L, causal, io);                  // the attention half, + residual
    layer_norm(k, L.norm("norm2"), io.x1, io.n3, io.M());  // post_attention_layernorm
    feed_forward(k, p, L, io.n3, io.x1, io, io.x_out);     // mlp (SwiGLU), + residual
}

Config qwen3(const Fields &f) {
    Config c = llama_like(f, {"qwen3", "Qwen3ForCausalLM", 151936, 4096, 22016, 32, 32, 32, 32768, -1, -1, false, 128});
    c.qkv_bias = c.out_bias = f.boolean("attention_bias", false);
    c.ffn_bias = false;
    (void)qwen_windows(f, c.num_decoder_layers);
    if (c.eos_id < 0) f.fail("field \"eos_token_id\" is missing (Qwen3Config has no default)");
    return c;
}

void qwen3_describe(const Fields &f, const Config &c, Description &d) {
    d.layer = qwen3_layer;
    d.qk_norm = Description::QkNorm::Head;
    d.layer_tensors = {{"q_norm", d.head_dim}, {"k_norm", d.head_dim}};
    d.layer_specs.clear();
    for (int w : qwen_windows(f, c.num_decoder_layers)) d.layer_specs.push_back({w, 0});
}

WeightRules qwen3_weights(Config &cfg, const Fields &f, const Has &has) {
    WeightRules w = llama_weights(cfg, f, has);
    const std::string ours = "decoder.layers.{i}.", theirs = "model.layers.{i}.self_attn.";
    w.rules[ours + "q_norm.weight"] = {How::Same, {theirs + "q_norm.weight"}};
    w.rules[ours + "k_norm.weight"] = {How::Same, {theirs + "k_norm.weight"}};
    return w;
}

}  // namespace

const Family &qwen3_family() {
    static const Family f{"qwen3", qwen3, qwen3_weights, kRotaryBuffers, "llama", qwen3_describe};
    return f;
}

}  // namespace hf
}  // namespace halformer
