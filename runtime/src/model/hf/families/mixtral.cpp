// Mixtral (MixtralForCausalLM): Mistral's layer with a mixture of experts
// for its feed-forward — a router picks num_experts_per_tok of
// num_local_experts SwiGLU experts per token, their softmax weights
// renormalized over the chosen ones. Field names and defaults:
// configuration_mixtral.py; the layer: modeling_mixtral.py's
// MixtralDecoderLayer and MixtralSparseMoeBlock.
#include "llama_like.h"

#include "../../layers/layers.h"

namespace halformer {
namespace hf {
namespace {

// One layer, as MixtralDecoderLayer runs it.
void mixtral_layer(Session &k, const layers::Pass &p, const LayerW &L, bool causal, layers::LayerIO &io) {
    using namespace layers;
    const int M = io.M();
    layer_norm(k, L.norm("norm1"), io.x_in, io.n1, M);                // input_layernorm
    self_projections(k, p, L.attn("self_attn"), io.n1, io);           // q|k|v_proj, rotary; K|V to the cache
    self_attention(k, p, causal, io);                                 // causal, sliding_window where set
    attention_output(k, p, L.attn("self_attn"), io, io.x_in, io.x1);  // o_proj, + residual
    layer_norm(k, L.norm("norm2"), io.x1, io.n3, M);                  // post_attention_layernorm
    moe(k, p, L, io.n3, io.x1, io, io.x_out);                         // block_sparse_moe, + residual
}

Config mixtral(const Fields &f) {
    Config c = llama_like(f, {"mixtral", "MixtralForCausalLM", 32000, 4096, 14336, 32, 32, 8, 4096 * 32, 1, 2, false, 0});
    c.qkv_bias = c.out_bias = c.ffn_bias = false;
    c.layer_norm_eps = f.number("rms_norm_eps", 1e-5f);
    c.sliding_window = f.integer("sliding_window", 0);
    (void)f.number("router_jitter_noise", 0);  // (training only)
    (void)f.boolean("output_router_logits", false);
    (void)f.number("router_aux_loss_coef", 0);
    return c;
}

void mixtral_describe(const Fields &f, const Config &c, Description &d) {
    d.layer = mixtral_layer;
    d.moe.experts = f.integer("num_local_experts", 8);
    d.moe.top_k = f.integer("num_experts_per_tok", 2);
    d.moe.d_ff = c.d_ff;
    d.moe.renormalize = true;
    if (d.moe.experts < 1 || d.moe.top_k < 1 || d.moe.top_k > 8 || d.moe.top_k > d.moe.experts) {
        f.fail("num_experts_per_tok = " + std::to_string(d.moe.top_k) + " of num_local_experts = " +
               std::to_string(d.moe.experts) + " (Halformer routes 1 to 8 experts per token, at most all of them)");
    }
    d.layer_specs.assign((size_t)c.num_decoder_layers, {c.sliding_window, 0, true});
}

WeightRules mixtral_weights(Config &cfg, const Fields &f, const Has &has) {
    WeightRules w = llama_weights(cfg, f, has);
    Rules &r = w.rules;
    const std::string ours = "decoder.layers.{i}.", theirs = "model.layers.{i}.block_sparse_moe.";
    r[ours + "router.weight"] = {How::Same, {theirs + "gate.weight"}};
    const int E = f.integer("num_local_experts", 8);
    for (int e = 0; e < E; e++) {
        const std::string o = ours + "experts." + std::to_string(e) + ".", t = theirs + "experts." + std::to_string(e) + ".";
        r[o + "linear1.weight"] = {How::Same, {t + "w1.weight"}};      // silu(w1 x) ...
        r[o + "linear_gate.weight"] = {How::Same, {t + "w3.weight"}};  // ... · w3 x
        r[o + "linear2.weight"] = {How::Same, {t + "w2.weight"}};      // then w2
    }
    return w;
}

}  // namespace

const Family &mixtral_family() {
    static const Family f{"mixtral", mixtral, mixtral_weights, kRotaryBuffers, "llama", mixtral_describe};
    return f;
}

}  // namespace hf
}  // namespace halformer
