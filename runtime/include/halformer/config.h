// A model's config.json.
//
//   architecture        "encoder-decoder" (the paper) | "encoder" | "decoder"
//   d_model, num_heads, d_ff, num_encoder_layers, num_decoder_layers,
//   src_vocab_size, tgt_vocab_size, max_positions
//   positional_encoding "sinusoidal" (interleaved sin/cos, the paper) |
//                       "sinusoidal_concat" ([sin | cos] halves) | "learned" |
//                       "relative" (T5: a bias on the attention scores by
//                       bucketed relative position, learned per head) |
//                       "rotary" (RoPE: queries and keys rotated by position,
//                       Llama; rope_theta, default 10000)
//   num_kv_heads        key/value heads (grouped-query attention; default
//                       num_heads, a divisor of it)
//   norm_first          false: post-LN as in the paper; true: pre-LN
//   activation          "relu" | "gelu" | "gelu_tanh" | "silu"
//   layer_norm_eps      (PyTorch's default 1e-5)
//   scale_embeddings    multiply embeddings by √d_model (section 3.4)
//   pad_id, bos_id, eos_id
//   tokenizer           optional: a SentencePiece model's file name inside the
//                       model directory ("tokenizer.model"); without it the
//                       model works with token ids only
//
// A config.json with "model_type" is a Hugging Face model's, read with
// transformers' field names and defaults (runtime/src/model/hf/hf_config.cpp).
//
// Fields an architecture does not use may be omitted (an encoder needs no
// decoder layers, bos or eos; a decoder-only model reads tgt_vocab_size and
// num_decoder_layers). A missing or out-of-range field is an Error naming it.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace halformer {

enum class Architecture { EncoderDecoder, Encoder, Decoder };
enum class Positional { Sinusoidal, SinusoidalConcat, Learned, Relative, Rotary };
enum class Act { ReLU, GELU, GELUTanh, SiLU };
// What an encoder-only model's head is: a projection of each position
// (Halformer's generator.*), BERT's masked-LM head (dense, activation,
// LayerNorm, then the projection tied to the token embedding), or BERT's
// sequence classifier (tanh pooler over the first position, then the
// projection onto the labels).
enum class EncoderHead { Projection, MaskedLM, Classifier };

const char *architecture_name(Architecture a);
const char *positional_name(Positional p);
const char *act_name(Act a);

struct Config {
    Architecture architecture = Architecture::EncoderDecoder;
    int d_model = 512;
    int num_heads = 8;
    int d_ff = 2048;
    int num_encoder_layers = 6;
    int num_decoder_layers = 6;
    int src_vocab_size = 37000;
    int tgt_vocab_size = 37000;
    int max_positions = 1024;
    Positional positional_encoding = Positional::Sinusoidal;
    bool norm_first = false;
    Act activation = Act::ReLU;
    float layer_norm_eps = 1e-5f;
    bool scale_embeddings = true;
    int pad_id = 0;
    int bos_id = 1;
    int eos_id = 2;
    std::string tokenizer;  // "" or a file name in the model directory
    // "" for Halformer's own config.json; a Hugging Face directory's
    // model_type ("gpt2", "marian") when the config came from one
    // (runtime/src/model/hf/: transformers' names, defaults and tensor layout).
    std::string family;
    // That directory's config.json text ("" for Halformer's own): the
    // family's builder reads there whatever its layers need beyond the
    // fields of this struct (runtime/src/model/hf/families/: a window per layer,
    // q/k norms, post-norms), so no family adds a field here.
    std::string source;
    // BERT: token-type (segment) embeddings of type_vocab_size rows (0: none),
    // a LayerNorm over the embeddings, the head's kind, and the labels of a
    // classifier (id2label; label i of row i).
    int type_vocab_size = 0;
    bool embedding_norm = false;
    EncoderHead encoder_head = EncoderHead::Projection;
    std::vector<std::string> labels;
    // Ids generation never picks (their logits at -1e30 while decoding;
    // logits() is unchanged): Marian's pad, config.json's single-token
    // bad_words_ids.
    std::vector<int> banned_ids;
    // A checkpoint's generation settings (Hugging Face: config.json, then
    // its generation_config.json over it), used where a call's options do
    // not say otherwise: the id every hypothesis ends with at the length
    // limit (forced_eos_token_id; -1: none), ids that end a hypothesis as
    // eos_id does (eos_token_id given as a list: Llama 3's), and the
    // defaults of the beam and of the length (num_beams; max_length, the
    // decoder's tokens counting its start or the prompt; 0: not given).
    int forced_eos_id = -1;
    std::vector<int32_t> stop_ids;
    int default_beams = 0, default_max_length = 0;
    // T5: heads of d_kv dimensions (0: d_model / num_heads; heads × d_kv
    // may differ from d_model), attention scores not scaled (attention_scale
    // 1; 0: 1/√head_dim), RMSNorm instead of LayerNorm, the gated
    // feed-forward act(x·W0ᵀ)·(x·W1ᵀ), no bias vectors, and the relative
    // positions' buckets.
    int d_kv = 0;
    float attention_scale = 0;
    bool rms_norm = false;
    bool gated_ffn = false;
    bool biases = true;
    int relative_buckets = 32;
    int relative_max_distance = 128;
    // T5's tie_word_embeddings: the head is the shared embedding (scaled
    // input, v1.0) or a tensor of its own (v1.1).
    bool tied_head = true;
    // Grouped-query attention: num_kv_heads key/value heads (0: num_heads),
    // query head h reading key/value head h / (num_heads / num_kv_heads).
    int num_kv_heads = 0;
    // An encoder-decoder whose decoder has heads or a feed-forward width of
    // its own (Marian's decoder_attention_heads, decoder_ffn_dim; the same
    // d_model): 0, the encoder's (num_heads, d_ff).
    int decoder_num_heads = 0, decoder_d_ff = 0;
    // Which projections have bias vectors where `biases` is true: Q, K, V
    // (Qwen2 has these only), the attention's output, the feed-forward's.
    bool qkv_bias = true, out_bias = true, ffn_bias = true;
    // Positional::Rotary: RoPE with base rope_theta over each head's
    // head_dim dimensions, paired as transformers' rotate_half (i, i + d/2),
    // its frequencies rescaled by `rope_scaling`.
    struct RopeScaling {
        enum class Kind { None, Linear, Llama3 } kind = Kind::None;
        float factor = 1;
        // Llama 3: frequencies of wavelength past original_max_positions /
        // low_freq_factor divided by factor, under original_max_positions /
        // high_freq_factor kept, smoothly blended between.
        float low_freq_factor = 1, high_freq_factor = 4;
        int original_max_positions = 8192;
    };
    float rope_theta = 10000;
    RopeScaling rope_scaling;
    // Mistral: each query attends the sliding_window most recent keys
    // (itself included); 0: all of them.
    int sliding_window = 0;

    bool has_encoder() const { return architecture != Architecture::Decoder; }
    bool has_decoder() const { return architecture != Architecture::Encoder; }
    int head_dim() const { return d_kv > 0 ? d_kv : d_model / num_heads; }
    int kv_heads() const { return num_kv_heads > 0 ? num_kv_heads : num_heads; }
    // The width of the attention's queries (and outputs): heads × head_dim;
    // of its keys, and of its values: kv_heads × head_dim.
    int attention_width() const { return num_heads * head_dim(); }
    int kv_width() const { return kv_heads() * head_dim(); }

    // The paper's base model (Table 3) with a shared 37000-token vocabulary.
    static Config base();
    // Parses config.json text; `what` names it in errors. Validates.
    static Config from_json(const std::string &text, const std::string &what);
    static Config from_file(const std::string &path);
    // Throws Error naming the first field out of range.
    void validate() const;
    // Halformer's own config.json (what training checkpoints write; from_json
    // reads it back to an equal text). For a Hugging Face family's Config a
    // summary only: the family's fields stay in the checkpoint's config.json.
    std::string to_json() const;
};

}  // namespace halformer
