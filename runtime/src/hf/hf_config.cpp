// config.json of a Hugging Face directory → Config. Field names and
// defaults are transformers' (configuration_gpt2.py, configuration_marian.py):
// a minimal config.json gets what transformers would give it. Whatever a
// family's config can say that Halformer does not run (cross-attention in
// GPT-2, encoder and decoder of different widths, an activation with no
// kernel) is an Error naming the field and its value, never guessed.
#include "hf.h"

#include "halformer/error.h"

#include <algorithm>
#include <climits>
#include <cmath>
#include <cstdint>
#include <cstdlib>
#include <functional>
#include <map>

namespace halformer {
namespace hf {
namespace {

// Fields with transformers' defaults: an absent field or a null takes the
// default; a field of another JSON kind is an Error naming it.
struct Fields {
    const json::Value &root;
    const std::string &what;

    [[noreturn]] void fail(const std::string &msg) const { throw Error(what + ": " + msg); }
    const json::Value *get(const char *key, json::Value::Kind kind) const {
        const json::Value *v = root.find(key);
        if (!v || v->kind == json::Value::Kind::Null) return nullptr;
        if (v->kind != kind) {
            fail(std::string("field \"") + key + "\" must be " + json::kind_name(kind) + ", not " +
                 json::kind_name(v->kind));
        }
        return v;
    }
    int integer(const char *key, int fallback) const {
        const json::Value *v = get(key, json::Value::Kind::Number);
        if (!v) return fallback;
        if (std::floor(v->number) != v->number || std::fabs(v->number) > 2147483647.0) {
            fail(std::string("field \"") + key + "\" must be an integer, not " + std::to_string(v->number));
        }
        return (int)v->number;
    }
    float number(const char *key, float fallback) const {
        const json::Value *v = get(key, json::Value::Kind::Number);
        return v ? (float)v->number : fallback;
    }
    bool boolean(const char *key, bool fallback) const {
        const json::Value *v = get(key, json::Value::Kind::Bool);
        return v ? v->boolean : fallback;
    }
    std::string string(const char *key, const std::string &fallback) const {
        const json::Value *v = get(key, json::Value::Kind::String);
        return v ? v->string : fallback;
    }
    // The first of "architectures" ("" when absent): the model class saved.
    std::string architecture() const {
        const json::Value *a = get("architectures", json::Value::Kind::Array);
        return a && !a->array.empty() && a->array[0].is_string() ? a->array[0].string : "";
    }
    // A feature Halformer does not run: the field must keep the value that
    // means "off".
    void require(const char *key, bool ok, const std::string &value) const {
        if (!ok) fail(std::string("field \"") + key + "\" = " + value + " is not supported by Halformer");
    }
};

// transformers' ACT2FN names → the activations Halformer has kernels for.
Act activation_named(const Fields &f, const char *key, const std::string &name) {
    static const std::map<std::string, Act> known{
        {"relu", Act::ReLU},         {"gelu", Act::GELU},           {"gelu_new", Act::GELUTanh},
        {"gelu_fast", Act::GELUTanh}, {"gelu_pytorch_tanh", Act::GELUTanh},
        {"silu", Act::SiLU},         {"swish", Act::SiLU},
    };
    auto it = known.find(name);
    if (it == known.end()) {
        f.fail(std::string("field \"") + key + "\" = \"" + name +
               "\" is not supported by Halformer (relu, gelu, gelu_new, gelu_fast, gelu_pytorch_tanh, silu, swish)");
    }
    return it->second;
}
Act activation(const Fields &f, const char *key, const std::string &fallback) {
    return activation_named(f, key, f.string(key, fallback));
}

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

// MarianConfig: an encoder-decoder, post-LN, with sinusoidal positions in
// [sin | cos] halves, the head tied to the shared embedding plus
// final_logits_bias, the decoder started from decoder_start_token_id.
Config marian(const Fields &f) {
    Config c;
    c.family = "marian";
    c.architecture = Architecture::EncoderDecoder;
    c.d_model = f.integer("d_model", 1024);
    c.num_heads = f.integer("encoder_attention_heads", 16);
    c.d_ff = f.integer("encoder_ffn_dim", 4096);
    c.num_encoder_layers = f.integer("encoder_layers", 12);
    c.num_decoder_layers = f.integer("decoder_layers", 12);
    const int heads_dec = f.integer("decoder_attention_heads", 16), ffn_dec = f.integer("decoder_ffn_dim", 4096);
    f.require("decoder_attention_heads", heads_dec == c.num_heads,
              std::to_string(heads_dec) + " (encoder_attention_heads = " + std::to_string(c.num_heads) +
                  "; Halformer's stacks share one width)");
    f.require("decoder_ffn_dim", ffn_dec == c.d_ff,
              std::to_string(ffn_dec) + " (encoder_ffn_dim = " + std::to_string(c.d_ff) + ")");
    c.src_vocab_size = f.integer("vocab_size", 58101);
    c.tgt_vocab_size = f.integer("decoder_vocab_size", c.src_vocab_size);
    if (f.boolean("share_encoder_decoder_embeddings", true) && c.tgt_vocab_size != c.src_vocab_size) {
        f.fail("decoder_vocab_size = " + std::to_string(c.tgt_vocab_size) + " differs from vocab_size = " +
               std::to_string(c.src_vocab_size) + " with share_encoder_decoder_embeddings");
    }
    c.max_positions = f.integer("max_position_embeddings", 1024);
    c.positional_encoding = Positional::SinusoidalConcat;
    c.norm_first = f.boolean("normalize_before", false);
    f.require("normalize_before", !c.norm_first, "true");
    c.activation = activation(f, "activation_function", "gelu");
    c.layer_norm_eps = 1e-5f;
    c.scale_embeddings = f.boolean("scale_embedding", false);
    c.pad_id = f.integer("pad_token_id", 58100);
    c.eos_id = f.integer("eos_token_id", 0);
    c.bos_id = f.integer("decoder_start_token_id", c.pad_id);
    // MarianMTModel never generates pad (transformers sets its logit to
    // −inf while generating; OPUS-MT configs also say bad_words_ids [[pad]]).
    c.banned_ids = {c.pad_id};
    if (const json::Value *bad = f.get("bad_words_ids", json::Value::Kind::Array)) {
        for (auto &w : bad->array) {
            if (!w.is_array() || w.array.size() != 1 || !w.array[0].is_number()) {
                f.fail("bad_words_ids: only single-token entries are supported by Halformer");
            }
            const int id = (int)w.array[0].number;
            if (std::find(c.banned_ids.begin(), c.banned_ids.end(), id) == c.banned_ids.end()) c.banned_ids.push_back(id);
        }
    }
    f.require("normalize_embedding", !f.boolean("normalize_embedding", false), "true");
    f.require("add_final_layer_norm", !f.boolean("add_final_layer_norm", false), "true");
    return c;
}

// BertConfig: an encoder, post-LN, learned positions plus token types, a
// LayerNorm over the embeddings; the head from "architectures":
// BertForMaskedLM (or BertForPreTraining's files: its MLM head is read),
// BertForSequenceClassification (labels from id2label), BertModel (hidden
// states only).
Config bert(const Fields &f) {
    Config c;
    c.family = "bert";
    c.architecture = Architecture::Encoder;
    c.d_model = f.integer("hidden_size", 768);
    c.num_heads = f.integer("num_attention_heads", 12);
    c.d_ff = f.integer("intermediate_size", 3072);
    c.num_encoder_layers = f.integer("num_hidden_layers", 12);
    c.num_decoder_layers = 0;
    c.src_vocab_size = f.integer("vocab_size", 30522);
    c.tgt_vocab_size = 0;
    c.max_positions = f.integer("max_position_embeddings", 512);
    c.positional_encoding = Positional::Learned;
    c.norm_first = false;
    c.activation = activation(f, "hidden_act", "gelu");
    c.layer_norm_eps = f.number("layer_norm_eps", 1e-12f);
    c.scale_embeddings = false;
    c.pad_id = f.integer("pad_token_id", 0);
    c.bos_id = c.eos_id = -1;
    c.type_vocab_size = f.integer("type_vocab_size", 2);
    c.embedding_norm = true;
    const std::string pe = f.string("position_embedding_type", "absolute");
    f.require("position_embedding_type", pe == "absolute", "\"" + pe + "\"");
    f.require("is_decoder", !f.boolean("is_decoder", false), "true");
    f.require("add_cross_attention", !f.boolean("add_cross_attention", false), "true");
    const std::string arch = f.architecture();
    if (arch == "BertForMaskedLM" || arch == "BertForPreTraining") {
        c.encoder_head = EncoderHead::MaskedLM;
        // The head's transform runs the activation in a plain projection kernel.
        f.require("hidden_act", c.activation != Act::SiLU, "\"" + f.string("hidden_act", "") +
                                                               "\" with a masked-LM head (relu, gelu, gelu_new)");
    } else if (arch == "BertForSequenceClassification") {
        c.encoder_head = EncoderHead::Classifier;
        const json::Value *labels = f.get("id2label", json::Value::Kind::Object);
        const int n = labels ? (int)labels->object.size() : 2;
        c.labels.assign((size_t)n, "");
        for (int i = 0; i < n; i++) c.labels[(size_t)i] = "LABEL_" + std::to_string(i);
        if (labels) {
            for (auto &[key, name] : labels->object) {
                char *end = nullptr;
                const long i = std::strtol(key.c_str(), &end, 10);
                if (key.empty() || *end || i < 0 || i >= n || !name.is_string()) {
                    f.fail("id2label: entry \"" + key + "\" is not a label name under an id in [0, " +
                           std::to_string(n) + ")");
                }
                c.labels[(size_t)i] = name.string;
            }
        }
    } else if (!arch.empty() && arch != "BertModel") {
        f.fail("architectures: \"" + arch +
               "\" is not supported by Halformer (BertModel, BertForMaskedLM, BertForPreTraining, "
               "BertForSequenceClassification)");
    }
    return c;
}

// T5Config (T5ForConditionalGeneration): an encoder-decoder, pre-norm with
// RMSNorm, no biases, no embedding scale, positions as a learned bias per
// head by bucketed relative position (layer 0 of each stack holds the
// table), scores not scaled, heads of d_kv. feed_forward_proj "{act}" or
// "gated-{act}" ("gated-gelu" means gelu_new, as transformers reads it).
// The head: tied to the shared embedding (v1.0; the decoder's output is
// scaled by d_model^-0.5, folded into its final norm at load) or its own
// lm_head (tie_word_embeddings false: v1.1, flan).
Config t5(const Fields &f) {
    Config c;
    c.family = "t5";
    c.architecture = Architecture::EncoderDecoder;
    c.d_model = f.integer("d_model", 512);
    c.d_kv = f.integer("d_kv", 64);
    c.num_heads = f.integer("num_heads", 8);
    c.d_ff = f.integer("d_ff", 2048);
    c.num_encoder_layers = f.integer("num_layers", 6);
    c.num_decoder_layers = f.integer("num_decoder_layers", c.num_encoder_layers);
    c.src_vocab_size = c.tgt_vocab_size = f.integer("vocab_size", 32128);
    c.max_positions = f.integer("n_positions", 512);
    c.positional_encoding = Positional::Relative;
    c.relative_buckets = f.integer("relative_attention_num_buckets", 32);
    c.relative_max_distance = f.integer("relative_attention_max_distance", 128);
    c.norm_first = true;
    c.rms_norm = true;
    c.biases = false;
    c.attention_scale = 1.0f;
    const std::string proj = f.string("feed_forward_proj", "relu");
    const size_t dash = proj.find('-');
    const std::string kind = dash == std::string::npos ? "" : proj.substr(0, dash);
    const std::string act = dash == std::string::npos ? proj : proj.substr(dash + 1);
    if ((dash != std::string::npos && kind != "gated") || act.empty() || act.find('-') != std::string::npos) {
        f.fail("field \"feed_forward_proj\" = \"" + proj + "\" is not of the form {act} or gated-{act}");
    }
    c.gated_ffn = kind == "gated";
    c.activation = activation_named(f, "feed_forward_proj", proj == "gated-gelu" ? "gelu_new" : act);
    if (c.gated_ffn && c.activation != Act::GELUTanh && c.activation != Act::SiLU) {
        f.fail("field \"feed_forward_proj\" = \"" + proj +
               "\" is not supported by Halformer (gated: gated-gelu, gated-gelu_new, gated-silu)");
    }
    c.layer_norm_eps = f.number("layer_norm_epsilon", 1e-6f);
    c.scale_embeddings = false;
    c.tied_head = f.boolean("tie_word_embeddings", true);
    c.pad_id = f.integer("pad_token_id", 0);
    c.eos_id = f.integer("eos_token_id", 1);
    c.bos_id = f.integer("decoder_start_token_id", c.pad_id);
    f.require("is_encoder_decoder", f.boolean("is_encoder_decoder", true), "false");
    const std::string arch = f.architecture();
    if (!arch.empty() && arch != "T5ForConditionalGeneration") {
        f.fail("architectures: \"" + arch + "\" is not supported by Halformer (T5ForConditionalGeneration)");
    }
    return c;
}

const std::map<std::string, std::function<Config(const Fields &)>> &families() {
    static const std::map<std::string, std::function<Config(const Fields &)>> f{
        {"bert", bert}, {"gpt2", gpt2}, {"marian", marian}, {"t5", t5}};
    return f;
}

}  // namespace

bool is_family(const std::string &model_type) { return families().count(model_type) != 0; }

Config config_from_json(const json::Value &root, const std::string &what) {
    Fields f{root, what};
    const std::string type = f.string("model_type", "");
    auto it = families().find(type);
    if (it == families().end()) {
        std::string names;
        for (auto &kv : families()) names += (names.empty() ? "" : ", ") + kv.first;
        f.fail("model_type \"" + type + "\" is not supported by Halformer (supported: " + names + ")");
    }
    // Features of any family that Halformer does not run.
    for (const char *key : {"rope_scaling", "rotary_dim", "num_key_value_heads", "sliding_window", "alibi"}) {
        if (root.find(key) && root.find(key)->kind != json::Value::Kind::Null) {
            f.fail(std::string("field \"") + key + "\" is not supported by Halformer");
        }
    }
    Config c = it->second(f);
    try {
        c.validate();
    } catch (const Error &e) {
        throw Error(what + ": " + e.what());
    }
    return c;
}

}  // namespace hf
}  // namespace halformer
