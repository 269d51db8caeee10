// Internal: what the Llama-style decoders' families share (llama.cpp reads
// them for Llama, Mistral and Qwen2; Qwen3, Gemma 3 and OLMo 2 build on
// them): config.json's common fields, rope, per-layer windows, and
// LlamaForCausalLM's tensor names.
#pragma once

#include "../family.h"

#include <functional>

namespace halformer {
namespace hf {

// A family's defaults where its configuration class differs.
struct LlamaDefaults {
    const char *model_type, *architecture;
    int vocab, hidden, intermediate, layers, heads, kv_heads, max_positions, bos, eos;
    bool tied;
    int head_dim;  // 0: hidden / heads
    // The family reads partial_rotary_factor and rope type "longrope"
    // itself (Phi-3): rope() lets them pass.
    bool family_rope = false;
};

// Decoder-only, pre-norm RMSNorm, gated feed-forward (hidden_act),
// rotary positions (rope below), grouped-query attention: the fields every
// Llama-style config.json has, with `d`'s defaults.
Config llama_like(const Fields &f, const LlamaDefaults &d);
// rope_theta and rope_scaling (transformers 4), or rope_parameters (5):
// c's rope_theta and rope_scaling. Where rope_parameters gives one per kind
// of layer, layer_type's ("full_attention", "sliding_attention").
// family_rope: partial_rotary_factor and "longrope" are the family's to
// read (c's rope then holds rope_theta only).
void rope(const Fields &f, Config &c, const char *layer_type = "full_attention", bool family_rope = false);
// Whether rope_parameters gives one per kind of layer.
bool rope_per_layer_type(const Fields &f);
// Which layers slide: config.json's layer_types ("sliding_attention" or
// "full_attention" each; transformers 5 and late 4.x), else rule(layer).
std::vector<bool> sliding_layers(const Fields &f, int layers, const std::function<bool(int)> &rule);
// Qwen2's, Qwen3's and Qwen3-MoE's windows, per layer: with
// use_sliding_window, sliding_window (4096) on the layers from
// max_window_layers (28) on, or as layer_types says; 0 elsewhere.
std::vector<int> qwen_windows(const Fields &f, int layers);
// LlamaForCausalLM's names: model.embed_tokens, model.layers.{i}.self_attn
// q/k/v/o_proj, mlp gate/up/down_proj, input_layernorm,
// post_attention_layernorm, model.norm, lm_head.
WeightRules llama_weights(Config &cfg, const Fields &f, const Has &has);

// Llama's decoder layer (LlamaDecoderLayer): pre-norm RMSNorm, the
// self-attention with rotary Q|K and the layer's window, the gated
// feed-forward, each joined to the stream (Mistral's, Qwen2's, Phi-3's).
void llama_layer(Session &k, const layers::Pass &p, const LayerW &L, bool causal, layers::LayerIO &io);

// Qwen3's attention half (Qwen3Attention, Qwen3-MoE's too): input norm,
// Q, K, V apart, each head's query and key RMS-normalized (q_norm, k_norm),
// rotary, attention, o_proj, + residual (io.x1). families/qwen3.cpp.
void qwen3_attention(Session &k, const layers::Pass &p, const LayerW &L, bool causal, layers::LayerIO &io);

// (The rotary tables transformers before 4.31 saved per layer.)
constexpr const char *kRotaryBuffers = R"(^model\.layers\.\d+\.self_attn\.rotary_emb\.inv_freq$)";

}  // namespace hf
}  // namespace halformer
