// Internal: what Gemma 2's and Gemma 3's families share (families/gemma2.cpp,
// gemma3.cpp): the config reader's Gemma parts (hidden_activation, no
// biases, pad 0), the scores' and embeddings' scales, and the norms' gains
// (the files hold w, the norms multiply by 1 + w: made once at load).
#pragma once

#include "llama_like.h"

#include <cmath>

namespace halformer {
namespace hf {

// llama_like with Gemma's fields: the gated feed-forward's activation from
// hidden_activation (hidden_act, where a config has it, is an older name
// transformers no longer reads), attention_bias, pad_token_id 0.
inline Config gemma_like(const Fields &f, const LlamaDefaults &d) {
    Config c = llama_like(f, d);
    c.activation = activation(f, "hidden_activation", "gelu_pytorch_tanh");
    if (c.activation != Act::GELUTanh && c.activation != Act::SiLU) {
        f.fail("field \"hidden_activation\" is not supported by Halformer in a gated feed-forward");
    }
    (void)f.string("hidden_act", "");
    c.qkv_bias = c.out_bias = f.boolean("attention_bias", false);
    c.ffn_bias = false;
    c.pad_id = f.integer("pad_token_id", 0);
    return c;
}

// Scores × query_pre_attn_scalar^-½; embeddings × √hidden_size as a tensor
// of the model's dtype holds it (Gemma*ScaledWordEmbedding).
inline void gemma_scales(const Fields &f, const Config &c, float query_pre_attn_scalar, Description &d) {
    d.attention_scale = 1.0f / std::sqrt(query_pre_attn_scalar);
    d.enc_dims.scale = d.dec_dims.scale = d.attention_scale;
    d.embedding_scale = round_to_dtype(std::sqrt((float)c.d_model), dtype_of(f));
}

// LlamaForCausalLM's names, every norm a 1 + w gain: the four of each layer
// (input, post-attention, pre- and post-feed-forward) and the final one.
inline WeightRules gemma_weights(Config &cfg, const Fields &f, const Has &has) {
    WeightRules w = llama_weights(cfg, f, has);
    const std::string ours = "decoder.layers.{i}.", theirs = "model.layers.{i}.";
    auto gain = [&](const std::string &o, const std::string &t) { w.rules[o] = {How::Offset, {t}, 1.0f}; };
    gain(ours + "norm1.weight", theirs + "input_layernorm.weight");
    gain(ours + "post_attention_norm.weight", theirs + "post_attention_layernorm.weight");
    gain(ours + "norm2.weight", theirs + "pre_feedforward_layernorm.weight");
    gain(ours + "post_ffn_norm.weight", theirs + "post_feedforward_layernorm.weight");
    gain("decoder.norm.weight", "model.norm.weight");
    return w;
}

}  // namespace hf
}  // namespace halformer
