#include "halformer/config.h"
#include "halformer/error.h"
#include "halformer/json.h"
#include "hf/hf.h"

#include <cmath>
#include <fstream>
#include <sstream>

namespace halformer {

const char *architecture_name(Architecture a) {
    switch (a) {
    case Architecture::EncoderDecoder: return "encoder-decoder";
    case Architecture::Encoder: return "encoder";
    case Architecture::Decoder: return "decoder";
    }
    return "?";
}
const char *positional_name(Positional p) {
    switch (p) {
    case Positional::Sinusoidal: return "sinusoidal";
    case Positional::SinusoidalConcat: return "sinusoidal_concat";
    case Positional::Learned: return "learned";
    case Positional::Relative: return "relative";
    case Positional::Rotary: return "rotary";
    }
    return "?";
}
const char *act_name(Act a) {
    switch (a) {
    case Act::ReLU: return "relu";
    case Act::GELU: return "gelu";
    case Act::GELUTanh: return "gelu_tanh";
    case Act::SiLU: return "silu";
    }
    return "?";
}

Config Config::base() { return Config{}; }

namespace {

struct Reader {
    const json::Value &root;
    const std::string &what;

    [[noreturn]] void fail(const std::string &msg) const { throw Error(what + ": " + msg); }
    const json::Value *get(const char *key, json::Value::Kind kind, bool required) const {
        const json::Value *v = root.find(key);
        if (!v) {
            if (required) fail(std::string("missing field \"") + key + "\"");
            return nullptr;
        }
        if (v->kind != kind) {
            fail(std::string("field \"") + key + "\" must be " + json::kind_name(kind) + ", not " +
                 json::kind_name(v->kind));
        }
        return v;
    }
    void integer(const char *key, int &out, bool required) const {
        const json::Value *v = get(key, json::Value::Kind::Number, required);
        if (!v) return;
        if (std::floor(v->number) != v->number || std::fabs(v->number) > 2147483647.0) {
            fail(std::string("field \"") + key + "\" must be an integer, not " + std::to_string(v->number));
        }
        out = (int)v->number;
    }
    void number(const char *key, float &out, bool required) const {
        const json::Value *v = get(key, json::Value::Kind::Number, required);
        if (v) out = (float)v->number;
    }
    void boolean(const char *key, bool &out, bool required) const {
        const json::Value *v = get(key, json::Value::Kind::Bool, required);
        if (v) out = v->boolean;
    }
    template <typename E>
    void choice(const char *key, E &out, std::initializer_list<std::pair<const char *, E>> options,
                bool required) const {
        const json::Value *v = get(key, json::Value::Kind::String, required);
        if (!v) return;
        std::string names;
        for (auto &o : options) {
            if (v->string == o.first) {
                out = o.second;
                return;
            }
            names += std::string(names.empty() ? "" : ", ") + "\"" + o.first + "\"";
        }
        fail(std::string("field \"") + key + "\" is \"" + v->string + "\"; expected one of " + names);
    }
};

}  // namespace

Config Config::from_json(const std::string &text, const std::string &what) {
    json::Value root = json::parse(text, what);
    if (!root.is_object()) throw Error(what + ": not a JSON object");
    if (root.find("model_type")) {
        Config c = hf::config_from_json(root, what);
        c.source = text;  // (what the family's builder reads: hf::describe_family)
        return c;
    }
    Reader r{root, what};
    Config c;
    r.choice("architecture", c.architecture,
             {{"encoder-decoder", Architecture::EncoderDecoder},
              {"encoder", Architecture::Encoder},
              {"decoder", Architecture::Decoder}},
             true);
    const bool enc = c.has_encoder(), dec = c.has_decoder();
    r.integer("d_model", c.d_model, true);
    r.integer("num_heads", c.num_heads, true);
    r.integer("d_ff", c.d_ff, true);
    c.num_encoder_layers = 0;
    c.num_decoder_layers = 0;
    r.integer("num_encoder_layers", c.num_encoder_layers, enc);
    r.integer("num_decoder_layers", c.num_decoder_layers, dec);
    c.src_vocab_size = 0;
    c.tgt_vocab_size = 0;
    r.integer("src_vocab_size", c.src_vocab_size, enc);
    r.integer("tgt_vocab_size", c.tgt_vocab_size, dec);
    r.integer("max_positions", c.max_positions, true);
    r.choice("positional_encoding", c.positional_encoding,
             {{"sinusoidal", Positional::Sinusoidal},
              {"sinusoidal_concat", Positional::SinusoidalConcat},
              {"learned", Positional::Learned},
              {"rotary", Positional::Rotary}},
             true);
    r.integer("num_kv_heads", c.num_kv_heads, false);
    r.number("rope_theta", c.rope_theta, false);
    r.boolean("norm_first", c.norm_first, false);
    r.choice("activation", c.activation,
             {{"relu", Act::ReLU}, {"gelu", Act::GELU}, {"gelu_tanh", Act::GELUTanh}, {"silu", Act::SiLU}}, false);
    r.number("layer_norm_eps", c.layer_norm_eps, false);
    r.boolean("scale_embeddings", c.scale_embeddings, false);
    r.integer("pad_id", c.pad_id, false);
    c.bos_id = c.eos_id = -1;
    r.integer("bos_id", c.bos_id, c.architecture == Architecture::EncoderDecoder);
    r.integer("eos_id", c.eos_id, false);
    if (const json::Value *v = r.get("tokenizer", json::Value::Kind::String, false)) c.tokenizer = v->string;
    try {
        c.validate();
    } catch (const Error &e) {
        throw Error(what + ": " + e.what());
    }
    return c;
}

Config Config::from_file(const std::string &path) {
    std::ifstream in(path, std::ios::binary);
    if (!in) throw Error(path + ": cannot open");
    std::stringstream ss;
    ss << in.rdbuf();
    return from_json(ss.str(), path);
}

namespace {

void need(bool ok, const std::string &msg) {
    if (!ok) throw Error(msg);
}

void range(const char *name, long v, long lo, long hi) {
    need(v >= lo && v <= hi, std::string("field \"") + name + "\" = " + std::to_string(v) + " is out of range [" +
                                 std::to_string(lo) + ", " + std::to_string(hi) + "]");
}

// Widths and heads: d_model, the heads (grouped-query included) and an
// encoder-decoder's decoder widths.
void validate_heads(const Config &c) {
    range("d_model", c.d_model, 1, 65536);
    range("num_heads", c.num_heads, 1, 1024);
    if (c.d_kv == 0) {
        need(c.d_model % c.num_heads == 0, "d_model = " + std::to_string(c.d_model) +
                                               " is not divisible by num_heads = " + std::to_string(c.num_heads));
    } else {
        range("d_kv", c.d_kv, 1, 65536);
    }
    if (c.decoder_num_heads != 0 || c.decoder_d_ff != 0) {
        need(c.architecture == Architecture::EncoderDecoder,
             "decoder_num_heads / decoder_d_ff: only an encoder-decoder has a decoder of its own widths");
        need(c.d_kv == 0 && c.num_kv_heads == 0, "decoder_num_heads: not with d_kv or num_kv_heads");
        if (c.decoder_num_heads != 0) {
            range("decoder_attention_heads", c.decoder_num_heads, 1, 1024);
            need(c.d_model % c.decoder_num_heads == 0, "d_model = " + std::to_string(c.d_model) +
                                                           " is not divisible by decoder_attention_heads = " +
                                                           std::to_string(c.decoder_num_heads));
        }
        if (c.decoder_d_ff != 0) range("decoder_ffn_dim", c.decoder_d_ff, 1, 1 << 20);
    }
    if (c.num_kv_heads != 0) {
        range("num_kv_heads", c.num_kv_heads, 1, c.num_heads);
        need(c.num_heads % c.num_kv_heads == 0, "num_heads = " + std::to_string(c.num_heads) +
                                                    " is not a multiple of num_kv_heads = " +
                                                    std::to_string(c.num_kv_heads));
    }
    range("d_ff", c.d_ff, 1, 1 << 20);
}

// Positions: rotary (and its scaling), relative buckets, sinusoids, the
// sliding window and the longest sequence.
void validate_positions(const Config &c) {
    if (c.positional_encoding == Positional::Rotary) {
        need(c.head_dim() % 2 == 0, "rotary positions need an even head_dim, not " + std::to_string(c.head_dim()));
        need(std::isfinite(c.rope_theta) && c.rope_theta > 1,
             "field \"rope_theta\" must be a number > 1, not " + std::to_string(c.rope_theta));
        const Config::RopeScaling &s = c.rope_scaling;
        if (s.kind != Config::RopeScaling::Kind::None) {
            need(std::isfinite(s.factor) && s.factor >= 1,
                 "rope_scaling: \"factor\" must be a number >= 1, not " + std::to_string(s.factor));
        }
        if (s.kind == Config::RopeScaling::Kind::Llama3) {
            need(std::isfinite(s.low_freq_factor) && std::isfinite(s.high_freq_factor) && s.low_freq_factor > 0 &&
                     s.high_freq_factor > s.low_freq_factor,
                 "rope_scaling: \"low_freq_factor\" = " + std::to_string(s.low_freq_factor) +
                     " and \"high_freq_factor\" = " + std::to_string(s.high_freq_factor) +
                     " must satisfy 0 < low < high");
            range("original_max_position_embeddings", s.original_max_positions, 1, 1 << 24);
        }
    }
    range("sliding_window", c.sliding_window, 0, 1 << 30);
    range("max_positions", c.max_positions, 1, 1 << 20);
    if (c.positional_encoding == Positional::Relative) {
        // An encoder's table is split in two halves (keys before and after
        // the query), each of at least two buckets.
        range("relative_attention_num_buckets", c.relative_buckets, c.has_encoder() ? 4 : 2, 1 << 16);
        // The log-spaced buckets start at half the exact ones.
        const int exact = c.relative_buckets / (c.has_decoder() ? 2 : 4);
        range("relative_attention_max_distance", c.relative_max_distance, exact + 1, 1 << 20);
    }
    if (c.positional_encoding == Positional::Sinusoidal || c.positional_encoding == Positional::SinusoidalConcat) {
        need(c.d_model % 2 == 0, "sinusoidal positional encoding needs an even d_model, not " +
                                     std::to_string(c.d_model));
    }
}

// Layers, vocabularies and the special token ids against them, and the
// decoding defaults.
void validate_vocab(const Config &c) {
    if (c.has_encoder()) {
        range("num_encoder_layers", c.num_encoder_layers, 1, 1024);
        range("src_vocab_size", c.src_vocab_size, 1, 1 << 24);
        range("pad_id", c.pad_id, 0, c.src_vocab_size - 1);
    }
    if (c.has_decoder()) {
        range("num_decoder_layers", c.num_decoder_layers, 1, 1024);
        range("tgt_vocab_size", c.tgt_vocab_size, 1, 1 << 24);
        range("pad_id", c.pad_id, 0, c.tgt_vocab_size - 1);
        if (c.eos_id != -1) range("eos_id", c.eos_id, 0, c.tgt_vocab_size - 1);
        range("forced_eos_token_id", c.forced_eos_id, -1, c.tgt_vocab_size - 1);
        for (int32_t id : c.stop_ids) range("eos_token_id", id, 0, c.tgt_vocab_size - 1);
    }
    if (c.architecture == Architecture::EncoderDecoder) range("bos_id", c.bos_id, 0, c.tgt_vocab_size - 1);
    range("num_beams", c.default_beams, 0, 1024);
    range("max_length", c.default_max_length, 0, 1 << 24);
}

}  // namespace

void Config::validate() const {
    validate_heads(*this);
    validate_positions(*this);
    validate_vocab(*this);
    need(std::isfinite(attention_scale) && attention_scale >= 0,
         "attention_scale must be a finite number >= 0, not " + std::to_string(attention_scale));
    need(tokenizer.find_first_not_of("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789._-") ==
                 std::string::npos && tokenizer != "." && tokenizer != "..",
         "field \"tokenizer\" must be a file name (letters, digits, . _ -) inside the model directory, not \"" +
             tokenizer + "\"");
    need(std::isfinite(layer_norm_eps) && layer_norm_eps > 0,
         "field \"layer_norm_eps\" must be a positive number, not " + std::to_string(layer_norm_eps));
}

std::string Config::to_json() const {
    std::ostringstream o;
    o << "{\n  \"architecture\": \"" << architecture_name(architecture) << "\",\n"
      << "  \"d_model\": " << d_model << ",\n  \"num_heads\": " << num_heads << ",\n"
      << "  \"d_ff\": " << d_ff << ",\n  \"num_encoder_layers\": " << num_encoder_layers << ",\n"
      << "  \"num_decoder_layers\": " << num_decoder_layers << ",\n"
      << "  \"src_vocab_size\": " << src_vocab_size << ",\n  \"tgt_vocab_size\": " << tgt_vocab_size
      << ",\n  \"max_positions\": " << max_positions << ",\n"
      << "  \"positional_encoding\": \"" << positional_name(positional_encoding) << "\",\n"
      << "  \"norm_first\": " << (norm_first ? "true" : "false") << ",\n"
      << "  \"activation\": \"" << act_name(activation) << "\",\n"
      << "  \"layer_norm_eps\": " << layer_norm_eps << ",\n"
      << "  \"scale_embeddings\": " << (scale_embeddings ? "true" : "false") << ",\n"
      << "  \"pad_id\": " << pad_id << ",\n  \"bos_id\": " << bos_id << ",\n  \"eos_id\": " << eos_id;
    if (num_kv_heads != 0) o << ",\n  \"num_kv_heads\": " << num_kv_heads;
    if (positional_encoding == Positional::Rotary) o << ",\n  \"rope_theta\": " << rope_theta;
    if (!tokenizer.empty()) o << ",\n  \"tokenizer\": \"" << tokenizer << "\"";
    o << "\n}\n";
    return o.str();
}

}  // namespace halformer
