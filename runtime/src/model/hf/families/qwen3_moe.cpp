// Qwen3-MoE (Qwen3MoeForCausalLM): Qwen3's attention (each head's query and
// key RMS-normalized before the rotation) with a mixture of experts in the
// sparse layers — a router picks num_experts_per_tok of num_experts SwiGLU
// experts of moe_intermediate_size, their softmax weights renormalized
// only with norm_topk_prob — and a dense SwiGLU of intermediate_size in
// the others (mlp_only_layers, and the layers off the decoder_sparse_step
// stride). Experts as transformers 4 saves them (mlp.experts.{e}.gate_proj,
// up_proj, down_proj) or fused as transformers 5 does (mlp.experts
// .gate_up_proj [experts, 2·F, D], gate rows first; .down_proj [experts, D,
// F]). Field names and defaults: configuration_qwen3_moe.py; the layer:
// modeling_qwen3_moe.py's Qwen3MoeDecoderLayer and Qwen3MoeSparseMoeBlock.
#include "llama_like.h"

#include "../../layers/layers.h"

#include <algorithm>

namespace halformer {
namespace hf {
namespace {

// One layer, as Qwen3MoeDecoderLayer runs it.
void qwen3_moe_layer(Session &k, const layers::Pass &p, const LayerW &L, bool causal, layers::LayerIO &io) {
    using namespace layers;
    qwen3_attention(k, p, L, causal, io);                  // Qwen3's attention half, + residual
    layer_norm(k, L.norm("norm2"), io.x1, io.n3, io.M());  // post_attention_layernorm
    if (io.moe_layer) {
        moe(k, p, L, io.n3, io.x1, io, io.x_out);                       // the sparse block, + residual
    } else {
        feed_forward(k, p, L, io.n3, io.x1, io, io.x_out);              // the dense mlp, + residual
    }
}

struct Experts {
    int experts = 0, top_k = 0, d_ff = 0, step = 1;
    bool renormalize = false;
    std::vector<bool> sparse;
};

Experts experts(const Fields &f, int layers) {
    Experts x;
    // (transformers 5 also names it num_local_experts.)
    x.experts = f.integer("num_experts", f.integer("num_local_experts", 128));
    x.top_k = f.integer("num_experts_per_tok", 8);
    x.d_ff = f.integer("moe_intermediate_size", 768);
    x.step = f.integer("decoder_sparse_step", 1);
    x.renormalize = f.boolean("norm_topk_prob", false);
    if (x.experts < 0 || x.top_k < 1 || x.top_k > 8 || (x.experts > 0 && x.top_k > x.experts)) {
        f.fail("num_experts_per_tok = " + std::to_string(x.top_k) + " of num_experts = " + std::to_string(x.experts) +
               " (Halformer routes 1 to 8 experts per token, at most all of them)");
    }
    if (x.step < 1) f.fail("field \"decoder_sparse_step\" must be at least 1");
    std::vector<int> dense;
    if (const json::Value *only = f.get("mlp_only_layers", json::Value::Kind::Array)) {
        for (auto &v : only->array) {
            if (!v.is_number()) f.fail("field \"mlp_only_layers\" must list layer numbers");
            dense.push_back((int)v.number);
        }
    }
    for (int l = 0; l < layers; l++) {
        const bool listed = std::find(dense.begin(), dense.end(), l) != dense.end();
        x.sparse.push_back(!listed && x.experts > 0 && (l + 1) % x.step == 0);
    }
    return x;
}

Config qwen3_moe(const Fields &f) {
    Config c = llama_like(f, {"qwen3_moe", "Qwen3MoeForCausalLM", 151936, 2048, 6144, 24, 32, 4, 32768, -1, -1, false, 0});
    c.qkv_bias = c.out_bias = f.boolean("attention_bias", false);
    c.ffn_bias = false;
    (void)qwen_windows(f, c.num_decoder_layers);
    (void)experts(f, c.num_decoder_layers);
    (void)f.boolean("output_router_logits", false);
    (void)f.number("router_aux_loss_coef", 0);
    if (c.eos_id < 0) f.fail("field \"eos_token_id\" is missing (Qwen3MoeConfig has no default)");
    return c;
}

void qwen3_moe_describe(const Fields &f, const Config &c, Description &d) {
    d.layer = qwen3_moe_layer;
    d.qk_norm = Description::QkNorm::Head;
    d.layer_tensors = {{"q_norm", d.head_dim}, {"k_norm", d.head_dim}};
    const Experts x = experts(f, c.num_decoder_layers);
    d.moe = {x.experts, x.top_k, x.d_ff, x.renormalize};
    const std::vector<int> windows = qwen_windows(f, c.num_decoder_layers);
    d.layer_specs.clear();
    for (int l = 0; l < c.num_decoder_layers; l++) d.layer_specs.push_back({windows[(size_t)l], 0, x.sparse[(size_t)l]});
}

WeightRules qwen3_moe_weights(Config &cfg, const Fields &f, const Has &has) {
    WeightRules w = llama_weights(cfg, f, has);
    Rules &r = w.rules;
    const std::string ours = "decoder.layers.{i}.", theirs = "model.layers.{i}.";
    r[ours + "q_norm.weight"] = {How::Same, {theirs + "self_attn.q_norm.weight"}};
    r[ours + "k_norm.weight"] = {How::Same, {theirs + "self_attn.k_norm.weight"}};
    r[ours + "router.weight"] = {How::Same, {theirs + "mlp.gate.weight"}};
    const Experts x = experts(f, cfg.num_decoder_layers);
    const int64_t D = cfg.d_model, F = x.d_ff;
    // Fused (transformers 5) where the first sparse layer's file has it.
    int first_sparse = -1;
    for (size_t l = 0; l < x.sparse.size() && first_sparse < 0; l++) {
        if (x.sparse[l]) first_sparse = (int)l;
    }
    const bool fused =
        first_sparse >= 0 && has("model.layers." + std::to_string(first_sparse) + ".mlp.experts.gate_up_proj");
    for (int e = 0; e < x.experts; e++) {
        const std::string o = ours + "experts." + std::to_string(e) + ".";
        if (fused) {
            const std::string t = theirs + "mlp.experts.";
            r[o + "linear1.weight"] = {How::Slice, {t + "gate_up_proj"}, 1, e * 2 * F * D, {F, D}};
            r[o + "linear_gate.weight"] = {How::Slice, {t + "gate_up_proj"}, 1, e * 2 * F * D + F * D, {F, D}};
            r[o + "linear2.weight"] = {How::Slice, {t + "down_proj"}, 1, e * D * F, {D, F}};
        } else {
            const std::string t = theirs + "mlp.experts." + std::to_string(e) + ".";
            r[o + "linear1.weight"] = {How::Same, {t + "gate_proj.weight"}};
            r[o + "linear_gate.weight"] = {How::Same, {t + "up_proj.weight"}};
            r[o + "linear2.weight"] = {How::Same, {t + "down_proj.weight"}};
        }
    }
    return w;
}

}  // namespace

const Family &qwen3_moe_family() {
    static const Family f{"qwen3_moe", qwen3_moe, qwen3_moe_weights, kRotaryBuffers, "llama", qwen3_moe_describe};
    return f;
}

}  // namespace hf
}  // namespace halformer
