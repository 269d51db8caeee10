// Gemma 3's text decoder (Gemma3ForCausalLM, model_type "gemma3_text"):
// RMSNorm as x·(1 + w) (the files hold w; the gains are made 1 + w once at
// load), the embeddings times √hidden_size rounded to the weights' dtype,
// a norm before and after each sub-layer (the output normalized, then
// added), each head's query and key normalized (1 + w) before the
// rotation, scores scaled by query_pre_attn_scalar^-½, the GELU-tanh gated
// feed-forward, and two kinds of layer: local ones (a sliding window, rope
// base rope_local_base_freq, no scaling) and global ones (every key,
// rope_theta with rope_scaling). Which is which: layer_types, or every
// sliding_window_pattern-th layer global. Field names and defaults:
// configuration_gemma3.py (Gemma3TextConfig); the layer: modeling_gemma3.py's
// Gemma3DecoderLayer.
#include "gemma_like.h"

#include "../../layers/layers.h"

#include <cmath>

namespace halformer {
namespace hf {
namespace {

// One layer, as Gemma3DecoderLayer runs it.
void gemma3_layer(Session &k, const layers::Pass &p, const LayerW &L, bool causal, layers::LayerIO &io) {
    using namespace layers;
    const int M = io.M();
    layer_norm(k, L.norm("norm1"), io.x_in, io.n1, M);                     // input_layernorm
    QK qk = project_qkv(k, p, L.attn("self_attn"), io.n1, io);             // q_proj, k_proj, v_proj
    qk = qk_norm(k, L.norm("q_norm"), L.norm("k_norm"), qk, true, io);     // q_norm, k_norm: each head
    rotate_qk(k, qk, io);                                                  // the layer's rope table
    self_attention(k, p, causal, io);                                      // local: the sliding window
    attention_output(k, p, L.attn("self_attn"), io, nullptr, io.y1);       // o_proj
    norm_add(k, L.norm("post_attention_norm"), io.y1, io.x_in, io.x1, M);  // post_attention_layernorm, + residual
    layer_norm(k, L.norm("norm2"), io.x1, io.n3, M);                       // pre_feedforward_layernorm
    feed_forward(k, p, L, io.n3, nullptr, io, io.y3);                      // mlp (GELU-tanh gated)
    norm_add(k, L.norm("post_ffn_norm"), io.y3, io.x1, io.x_out, M);       // post_feedforward_layernorm, + residual
}

// What Gemma3TextConfig says beyond Config: which layers are local, their
// window and rope base, the scores' scale.
struct Gemma3 {
    std::vector<bool> local;
    int window = 0;
    float query_pre_attn_scalar = 256;
    // The local layers' rope: rope_local_base_freq unscaled (transformers
    // 4), or rope_parameters.sliding_attention (5).
    Config local_rope;
};

Gemma3 gemma3_fields(const Fields &f, const Config &c) {
    Gemma3 g;
    const int pattern = f.integer("sliding_window_pattern", f.integer("_sliding_window_pattern", 6));
    if (pattern < 1) f.fail("field \"sliding_window_pattern\" must be at least 1");
    g.local = sliding_layers(f, c.num_decoder_layers, [&](int l) { return (l + 1) % pattern != 0; });
    g.window = f.integer("sliding_window", 4096);
    if (g.window < 1) f.fail("field \"sliding_window\" must be at least 1");
    if (f.boolean("use_bidirectional_attention", false)) {
        f.fail("field \"use_bidirectional_attention\" = true is not supported by Halformer (a causal decoder)");
    }
    g.local_rope = c;
    if (rope_per_layer_type(f)) {
        rope(f, g.local_rope, "sliding_attention");
    } else {
        g.local_rope.rope_theta = f.number("rope_local_base_freq", 10000.0f);
        g.local_rope.rope_scaling = {};
    }
    g.query_pre_attn_scalar = f.number("query_pre_attn_scalar", 256.0f);
    if (!(g.query_pre_attn_scalar > 0)) f.fail("field \"query_pre_attn_scalar\" must be positive");
    for (const char *cap : {"final_logit_softcapping", "attn_logit_softcapping"}) {
        const json::Value *v = f.get(cap, json::Value::Kind::Number);
        if (v) f.fail(std::string("field \"") + cap + "\" = " + std::to_string(v->number) +
                      " is not supported by Halformer for gemma3_text (Gemma 3 has none: null)");
    }
    return g;
}

Config gemma3(const Fields &f) {
    Config c = gemma_like(f, {"gemma3_text", "Gemma3ForCausalLM", 262208, 2304, 9216, 26, 8, 4, 131072, 2, 1, true, 256});
    (void)gemma3_fields(f, c);
    return c;
}

void gemma3_describe(const Fields &f, const Config &c, Description &d) {
    const Gemma3 g = gemma3_fields(f, c);
    d.layer = gemma3_layer;
    d.qk_norm = Description::QkNorm::Head;
    d.layer_tensors = {{"q_norm", d.head_dim}, {"k_norm", d.head_dim}, {"post_attention_norm", d.d_model},
                       {"post_ffn_norm", d.d_model}};
    gemma_scales(f, c, g.query_pre_attn_scalar, d);
    d.rope_tables = {rope_frequencies(g.local_rope)};
    d.layer_specs.clear();
    for (bool l : g.local) d.layer_specs.push_back(l ? Description::LayerSpec{g.window, 1} : Description::LayerSpec{0, 0});
}

// Gemma 2's gains, and the q/k norms' (1 + w too).
WeightRules gemma3_weights(Config &cfg, const Fields &f, const Has &has) {
    WeightRules w = gemma_weights(cfg, f, has);
    const std::string ours = "decoder.layers.{i}.", theirs = "model.layers.{i}.self_attn.";
    w.rules[ours + "q_norm.weight"] = {How::Offset, {theirs + "q_norm.weight"}, 1.0f};
    w.rules[ours + "k_norm.weight"] = {How::Offset, {theirs + "k_norm.weight"}, 1.0f};
    return w;
}

}  // namespace

const Family &gemma3_text_family() {
    static const Family f{"gemma3_text", gemma3, gemma3_weights, kRotaryBuffers, "llama", gemma3_describe};
    return f;
}

}  // namespace hf
}  // namespace halformer
