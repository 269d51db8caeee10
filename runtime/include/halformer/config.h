// A model's config.json.
//
//   architecture        "encoder-decoder" (the paper) | "encoder" | "decoder"
//   d_model, num_heads, d_ff, num_encoder_layers, num_decoder_layers,
//   src_vocab_size, tgt_vocab_size, max_positions
//   positional_encoding "sinusoidal" (interleaved sin/cos, the paper) |
//                       "sinusoidal_concat" ([sin | cos] halves) | "learned"
//   norm_first          false: post-LN as in the paper; true: pre-LN
//   activation          "relu" | "gelu" | "gelu_tanh"
//   layer_norm_eps      (PyTorch's default 1e-5)
//   scale_embeddings    multiply embeddings by √d_model (section 3.4)
//   pad_id, bos_id, eos_id
//   tokenizer           optional: a SentencePiece model's file name inside the
//                       model directory ("tokenizer.model"); without it the
//                       model works with token ids only
//
// Fields an architecture does not use may be omitted (an encoder needs no
// decoder layers, bos or eos; a decoder-only model reads tgt_vocab_size and
// num_decoder_layers). A missing or out-of-range field is an Error naming it.
#pragma once

#include <cstdint>
#include <string>

namespace halformer {

enum class Architecture { EncoderDecoder, Encoder, Decoder };
enum class Positional { Sinusoidal, SinusoidalConcat, Learned };
enum class Act { ReLU, GELU, GELUTanh };

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

    bool has_encoder() const { return architecture != Architecture::Decoder; }
    bool has_decoder() const { return architecture != Architecture::Encoder; }
    int head_dim() const { return d_model / num_heads; }

    // The paper's base model (Table 3) with a shared 37000-token vocabulary.
    static Config base();
    // Parses config.json text; `what` names it in errors. Validates.
    static Config from_json(const std::string &text, const std::string &what);
    static Config from_file(const std::string &path);
    // Throws Error naming the first field out of range.
    void validate() const;
    std::string to_json() const;
};

}  // namespace halformer
