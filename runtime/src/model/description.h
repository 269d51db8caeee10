// Internal: what differs between the Transformer's families, as data. A
// family is a Description (describe() makes one from config.json); the
// layers (layers/), the parameter table (params.h) and the forward passes
// read its fields and branch on nothing else. A new family adds a describe()
// for its config and, where it needs one, the kernel its new value calls
// (a norm kind, an activation, a position kind).
#pragma once

#include "halformer/config.h"

#include <string>
#include <vector>

namespace halformer {

class Session;
struct LayerW;
namespace layers {
struct Pass;
struct LayerIO;
}  // namespace layers

struct Description {
    // The stacks: an encoder, a decoder, and whether the decoder attends to
    // the encoder's output.
    bool encoder = false, decoder = false, cross_attention = false;
    int encoder_layers = 0, decoder_layers = 0;
    // Dimensions: query heads of head_dim each, attn_width = heads ×
    // head_dim wide (d_model unless a family says otherwise: T5's d_kv,
    // Llama's head_dim); kv_heads key and value heads (grouped-query
    // attention: fewer, query head h reading h / (heads / kv_heads)),
    // keys and values kv_width = kv_heads × head_dim wide each.
    int d_model = 0, heads = 0, d_ff = 0, max_positions = 0;
    int head_dim = 0, attn_width = 0, kv_heads = 0, kv_width = 0;
    // What may differ between the stacks (Marian: the decoder's heads and
    // feed-forward width; attn_width and kv_width are every stack's):
    // the layers read their stack's. The fields above are the encoder's
    // (a decoder-only model's: its decoder's).
    struct StackDims {
        int heads = 0, head_dim = 0, kv_heads = 0, d_ff = 0;
        float scale = 1.0f;  // the attention scores' scale
    };
    StackDims enc_dims, dec_dims;
    const StackDims &dims(bool decoder) const { return decoder ? dec_dims : enc_dims; }
    int max_d_ff() const { return enc_dims.d_ff > dec_dims.d_ff ? enc_dims.d_ff : dec_dims.d_ff; }
    // The attention scores' scale: 1/√head_dim (the paper), 1 (T5).
    float attention_scale = 1.0f;
    int src_vocab = 0, tgt_vocab = 0;
    // Each sub-layer: LayerNorm after its residual join (the paper) or
    // before the sub-layer; the feed-forward network's activation.
    enum class NormPlace { After, Before } norm_place = NormPlace::After;
    float norm_eps = 1e-5f;
    // LayerNorm, or RMSNorm (T5: no mean, no bias).
    enum class NormKind { Layer, RMS } norm_kind = NormKind::Layer;
    Act activation = Act::ReLU;
    // The gated feed-forward (T5 v1.1): act(x·W1ᵀ)·(x·Wgᵀ), then W2.
    bool gated_ffn = false;
    // Which projections have bias vectors (absent ones read zeros): Q|K|V
    // (Qwen2: these only), the attention's output, the feed-forward's (T5,
    // Llama: none).
    bool qkv_bias = true, out_bias = true, ffn_bias = true;
    // A stack ends in its own LayerNorm (a new pre-LN model has one; a
    // loaded model has one where its file does).
    bool final_norms = false;
    // Embeddings: times a scale (√d_model in the paper), plus positions.
    float embedding_scale = 1.0f;
    Positional position = Positional::Sinusoidal;
    // Positional::Relative (T5): each stack's self-attention adds a learned
    // bias per head by bucketed relative position; the encoder's buckets
    // are bidirectional, the decoder's causal.
    int relative_buckets = 0, relative_max_distance = 0;
    // Positional::Rotary: each head's query and key rotated by position
    // after the projections; pair i (dimensions i, i + head_dim/2) turns
    // by position × inv_freq[i] (rope_theta's frequencies, rope_scaling
    // applied; float32 as transformers computes them). A frequency of 0
    // leaves its pair as it is: a partial rotary (Phi-3's
    // partial_rotary_factor) is a table whose last pairs are 0, with the
    // heads' dimensions reordered at load to match (hf/families/phi3.cpp).
    std::vector<float> inv_freq;
    // Mistral: a query attends only the sliding_window most recent keys
    // (0: every key).
    int sliding_window = 0;
    // BERT: token types added to the embeddings, and a LayerNorm after them.
    int token_types = 0;
    bool embedding_norm = false;
    // An encoder-only model's head (config.h: EncoderHead); the masked-LM
    // head's transform uses `activation` and `norm_eps`.
    EncoderHead encoder_head = EncoderHead::Projection;
    // The head's rows in a new model's table: a decoder's output
    // projection is tied to its embedding; an encoder has a head only when
    // asked (head_rows), of any rows when loaded.
    // --- What a family's builder (hf/families/<name>.cpp) says beyond
    // Config, read from its config.json by the family's describe().
    // The sequence of ops one layer runs (the family's builder, for every
    // stack: bert_layer, t5_layer, llama_layer...); null: the Transformer
    // layer (layers/transformer_layer.cpp) of Halformer's own configs, the
    // one training runs forward and backward.
    using Builder = void (*)(Session &k, const layers::Pass &p, const LayerW &L, bool causal, layers::LayerIO &io);
    Builder layer = nullptr;
    // Per decoder layer, as data: its self-attention's sliding window (0:
    // every key) and which rope table turns its queries and keys (0:
    // inv_freq; t > 0: rope_tables[t - 1]). Empty: every layer
    // {sliding_window, 0}.
    struct LayerSpec {
        int window = 0, rope = 0;
        bool moe = false;  // the feed-forward is the mixture of experts below
    };
    std::vector<LayerSpec> layer_specs;
    std::vector<std::vector<float>> rope_tables;
    LayerSpec spec(int l) const {
        return (size_t)l < layer_specs.size() ? layer_specs[(size_t)l] : LayerSpec{sliding_window, 0};
    }
    const std::vector<float> &rope_table(int t) const { return t == 0 ? inv_freq : rope_tables.at((size_t)t - 1); }
    // Rows at a position >= from turn by rope_table(table) instead of
    // their layer's, row by row (Phi-3's longrope: the long factors past
    // original_max_position_embeddings). from 0: none.
    struct RopeSwitch {
        int from = 0, table = 0;
    } rope_long;
    // Queries and keys normalized before their rotation: per head of
    // head_dim (Qwen3, Gemma 3) or over their whole width (OLMo 2). The
    // projections then write Q and K apart (self_projection_rows).
    enum class QkNorm { None, Head, Width } qk_norm = QkNorm::None;
    // Tensors of each layer beyond the Transformer layer's, by name
    // ("q_norm": decoder.layers.{i}.q_norm.weight), `width` floats each:
    // gains, ones in a new model.
    struct LayerTensor {
        std::string key;
        int width = 0;
    };
    std::vector<LayerTensor> layer_tensors;
    // A mixture of experts (Mixtral, Qwen3-MoE), in the layers whose spec
    // says moe: a router [experts, D] picks top_k experts per token (their
    // softmax weights renormalized over the k or not), each a gated
    // feed-forward of d_ff (its own, not the dense layers').
    struct Moe {
        int experts = 0, top_k = 0, d_ff = 0;
        bool renormalize = true;
    } moe;
    // Gemma 2's soft-caps (0: none): each attention score s becomes
    // cap·tanh(s/cap) after its scale, and so does each logit.
    float attn_softcap = 0, logit_softcap = 0;

    bool norm_before() const { return norm_place == NormPlace::Before; }
    bool rms() const { return norm_kind == NormKind::RMS; }
    bool rotary() const { return position == Positional::Rotary; }
};

// The description of a model of config.json's kind (nn.Transformer's
// families: encoder-decoder, encoder-only, decoder-only).
Description describe(const Config &c);
// RoPE's inv_freq of a rotary config: head_dim / 2 frequencies.
std::vector<float> rope_frequencies(const Config &c);

}  // namespace halformer
