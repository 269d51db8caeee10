// Gemma 2 (Gemma2ForCausalLM): Gemma 3's layer without the q/k norms —
// RMSNorm as x·(1 + w), embeddings × √hidden_size in the config's dtype,
// norms before and after each sub-layer, scores × query_pre_attn_scalar^-½,
// the GELU-tanh gated feed-forward — with every other layer local (the even
// ones: a sliding window) and one rope base, and soft-caps: each attention
// score s becomes cap·tanh(s/cap) (attn_logit_softcapping) and so does
// each logit (final_logit_softcapping). Field names and defaults:
// configuration_gemma2.py; the layer: modeling_gemma2.py's
// Gemma2DecoderLayer.
#include "gemma_like.h"

#include "../../layers/layers.h"

#include <cmath>

namespace halformer {
namespace hf {
namespace {

// One layer, as Gemma2DecoderLayer runs it.
void gemma2_layer(Session &k, const layers::Pass &p, const LayerW &L, bool causal, layers::LayerIO &io) {
    using namespace layers;
    const int M = io.M();
    layer_norm(k, L.norm("norm1"), io.x_in, io.n1, M);                     // input_layernorm
    self_projections(k, p, L.attn("self_attn"), io.n1, io);                // q|k|v_proj, rotary; K|V to the cache
    self_attention(k, p, causal, io);                                      // soft-capped; local: the window
    attention_output(k, p, L.attn("self_attn"), io, nullptr, io.y1);       // o_proj
    norm_add(k, L.norm("post_attention_norm"), io.y1, io.x_in, io.x1, M);  // post_attention_layernorm, + residual
    layer_norm(k, L.norm("norm2"), io.x1, io.n3, M);                       // pre_feedforward_layernorm
    feed_forward(k, p, L, io.n3, nullptr, io, io.y3);                      // mlp (GELU-tanh gated)
    norm_add(k, L.norm("post_ffn_norm"), io.y3, io.x1, io.x_out, M);       // post_feedforward_layernorm, + residual
}

struct Gemma2 {
    std::vector<bool> local;
    int window = 0;
    float query_pre_attn_scalar = 256, attn_cap = 50, logit_cap = 30;
};

Gemma2 gemma2_fields(const Fields &f, const Config &c) {
    Gemma2 g;
    // (transformers: layer i slides when i is even; layer_types where given.)
    g.local = sliding_layers(f, c.num_decoder_layers, [](int l) { return l % 2 == 0; });
    g.window = f.integer("sliding_window", 4096);
    if (g.window < 1) f.fail("field \"sliding_window\" must be at least 1");
    g.query_pre_attn_scalar = f.number("query_pre_attn_scalar", 256.0f);
    if (!(g.query_pre_attn_scalar > 0)) f.fail("field \"query_pre_attn_scalar\" must be positive");
    // A null cap is none (0).
    const json::Value *a = f.root.find("attn_logit_softcapping"), *l = f.root.find("final_logit_softcapping");
    g.attn_cap = a && a->is_number() ? (float)a->number : a ? 0.0f : 50.0f;
    g.logit_cap = l && l->is_number() ? (float)l->number : l ? 0.0f : 30.0f;
    (void)f.number("attn_logit_softcapping", 0);
    (void)f.number("final_logit_softcapping", 0);
    if (g.attn_cap < 0 || g.logit_cap < 0) f.fail("a soft-cap must be positive (or null: none)");
    return g;
}

Config gemma2(const Fields &f) {
    Config c = gemma_like(f, {"gemma2", "Gemma2ForCausalLM", 256000, 2304, 9216, 26, 8, 4, 8192, 2, 1, true, 256});
    (void)gemma2_fields(f, c);
    return c;
}

void gemma2_describe(const Fields &f, const Config &c, Description &d) {
    const Gemma2 g = gemma2_fields(f, c);
    d.layer = gemma2_layer;
    d.layer_tensors = {{"post_attention_norm", d.d_model}, {"post_ffn_norm", d.d_model}};
    gemma_scales(f, c, g.query_pre_attn_scalar, d);
    d.attn_softcap = g.attn_cap;
    d.logit_softcap = g.logit_cap;
    d.layer_specs.clear();
    for (bool l : g.local) d.layer_specs.push_back({l ? g.window : 0, 0});
}

}  // namespace

const Family &gemma2_family() {
    static const Family f{"gemma2", gemma2, gemma_weights, kRotaryBuffers, "llama", gemma2_describe};
    return f;
}

}  // namespace hf
}  // namespace halformer
