// GPT-2 (GPT2LMHeadModel, GPT2Model).
#include "../family.h"

#include "../../layers/layers.h"

#include <algorithm>
#include <climits>
#include <cstdint>
#include <cstdlib>

namespace halformer {
namespace hf {
namespace {

// GPT2Block (modeling_gpt2.py): pre-LN, causal.
void gpt2_layer(Session &k, const layers::Pass &p, const LayerW &L, bool causal, layers::LayerIO &io) {
    using namespace layers;
    const int M = io.M();
    const AttnW attn = L.attn("self_attn");
    layer_norm(k, L.norm("norm1"), io.x_in, io.n1, M);  // ln_1
    self_projections(k, p, attn, io.n1, io);            // attn.c_attn: Q|K|V
    self_attention(k, p, causal, io);                   // causal, 1/√head_dim
    attention_output(k, p, attn, io, io.x_in, io.x1);   // attn.c_proj, + residual
    layer_norm(k, L.norm("norm2"), io.x1, io.n3, M);    // ln_2
    feed_forward(k, p, L, io.n3, io.x1, io, io.x_out);  // mlp: c_fc, gelu_new, c_proj, + residual
}

void gpt2_describe(const Fields &, const Config &, Description &d) { d.layer = gpt2_layer; }

// GPT2Config: a decoder-only, pre-LN stack with learned positions, a final
// LayerNorm and the head tied to the token embedding.
Config gpt2(const Fields &f) {
    Config c;
    c.family = "gpt2";
    c.architecture = Architecture::Decoder;
    c.d_model = f.integer("n_embd", 768);
    c.num_heads = f.integer("n_head", 12);
    // (4 · n_embd in 64 bits: a width past int's range is refused below
    // with the model's other sizes, never an overflow here.)
    c.d_ff = f.integer("n_inner", (int)std::min<int64_t>(4 * (int64_t)c.d_model, INT32_MAX));
    c.num_encoder_layers = 0;
    c.num_decoder_layers = f.integer("n_layer", 12);
    c.src_vocab_size = 0;
    c.tgt_vocab_size = f.integer("vocab_size", 50257);
    c.max_positions = f.integer("n_positions", 1024);
    c.positional_encoding = Positional::Learned;
    c.norm_first = true;
    c.activation = activation(f, "activation_function", "gelu_new");
    c.layer_norm_eps = f.number("layer_norm_epsilon", 1e-5f);
    c.scale_embeddings = false;
    c.bos_id = f.integer("bos_token_id", 50256);
    c.eos_id = f.integer("eos_token_id", 50256);
    // GPT-2 has no padding token; padded rows are masked by length, so any
    // valid id serves.
    c.pad_id = f.integer("pad_token_id", c.eos_id);
    f.require("add_cross_attention", !f.boolean("add_cross_attention", false), "true");
    f.require("scale_attn_weights", f.boolean("scale_attn_weights", true), "false");
    f.require("scale_attn_by_inverse_layer_idx", !f.boolean("scale_attn_by_inverse_layer_idx", false), "true");
    return c;
}

// GPT2LMHeadModel (or GPT2Model: names without "transformer.").
Rules gpt2_rules(const std::string &p) {
    const std::string h = p + "h.{i}.";
    return {
        {"tgt_embed.weight", {How::Same, {p + "wte.weight"}}},
        {"tgt_pos.weight", {How::Same, {p + "wpe.weight"}}},
        {"decoder.layers.{i}.self_attn.in_proj_weight", {How::Transposed, {h + "attn.c_attn.weight"}}},
        {"decoder.layers.{i}.self_attn.in_proj_bias", {How::Same, {h + "attn.c_attn.bias"}}},
        {"decoder.layers.{i}.self_attn.out_proj.weight", {How::Transposed, {h + "attn.c_proj.weight"}}},
        {"decoder.layers.{i}.self_attn.out_proj.bias", {How::Same, {h + "attn.c_proj.bias"}}},
        {"decoder.layers.{i}.linear1.weight", {How::Transposed, {h + "mlp.c_fc.weight"}}},
        {"decoder.layers.{i}.linear1.bias", {How::Same, {h + "mlp.c_fc.bias"}}},
        {"decoder.layers.{i}.linear2.weight", {How::Transposed, {h + "mlp.c_proj.weight"}}},
        {"decoder.layers.{i}.linear2.bias", {How::Same, {h + "mlp.c_proj.bias"}}},
        {"decoder.layers.{i}.norm1.weight", {How::Same, {h + "ln_1.weight"}}},
        {"decoder.layers.{i}.norm1.bias", {How::Same, {h + "ln_1.bias"}}},
        {"decoder.layers.{i}.norm2.weight", {How::Same, {h + "ln_2.weight"}}},
        {"decoder.layers.{i}.norm2.bias", {How::Same, {h + "ln_2.bias"}}},
        {"decoder.norm.weight", {How::Same, {p + "ln_f.weight"}}},
        {"decoder.norm.bias", {How::Same, {p + "ln_f.bias"}}},
        {"generator.weight", {How::Same, {"lm_head.weight"}}},
    };
}

WeightRules gpt2_weights(Config &, const Fields &, const Has &has) {
    // Saved from GPT2LMHeadModel ("transformer.h.0...") or GPT2Model ("h.0...").
    return {gpt2_rules(has("transformer.wte.weight") ? "transformer." : ""), {}};
}

}  // namespace

const Family &gpt2_family() {
    static const Family f{"gpt2", gpt2, gpt2_weights, R"(^(transformer\.)?h\.\d+\.attn\.(bias|masked_bias)$)",
                          "byte_level_bpe", gpt2_describe};
    return f;
}

}  // namespace hf
}  // namespace halformer
