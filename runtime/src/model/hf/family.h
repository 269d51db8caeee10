// Internal: a Hugging Face model family as one entry. Everything Halformer
// knows of a transformers model_type lives in its file under families/:
// config.json → Config (transformers' field names and defaults), the rules
// that read its tensors under the parameter table's names (params.h), the
// tensors transformers keeps that no forward reads, and its tokenizer's
// kind. families.cpp lists them; nothing else names a family.
#pragma once

#include "../description.h"
#include "halformer/config.h"
#include "halformer/error.h"
#include "halformer/json.h"

#include <cmath>
#include <functional>
#include <map>
#include <memory>
#include <set>
#include <string>
#include <vector>

namespace halformer {
namespace hf {

// Fields with transformers' defaults: an absent field or a null takes the
// default; a field of another JSON kind is an Error naming it.
struct Fields {
    const json::Value &root;
    const std::string &what;
    // The keys a family's reader asked for (config_from_json refuses the
    // features no family reader took).
    std::shared_ptr<std::set<std::string>> read = std::make_shared<std::set<std::string>>();

    [[noreturn]] void fail(const std::string &msg) const { throw Error(what + ": " + msg); }
    const json::Value *get(const char *key, json::Value::Kind kind) const {
        read->insert(key);
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

// eos_token_id: one id, or a list (Llama 3's instruct models end at any of
// several): the first, the others into `more`; `fallback` when absent.
int eos_ids(const Fields &f, int fallback, std::vector<int32_t> &more);

// bad_words_ids (a list of token lists) into `banned`: single-token entries
// only (an Error naming the field for longer ones); each id once.
void add_bad_words(const Fields &f, std::vector<int> &banned);

// transformers' ACT2FN names → the activations Halformer has kernels for
// (an Error naming the field for one it has none for).
Act activation_named(const Fields &f, const char *key, const std::string &name);
Act activation(const Fields &f, const char *key, const std::string &fallback);

// How one tensor of ours comes from the file's: as it is, transposed
// (GPT-2's Conv1D keeps [in, out]), several stacked (separate Q, K and V
// projections → one in_proj), flattened, scaled once at load, or with its
// rows reordered once at load (Rows).
enum class How { Same, Transposed, Stacked, Flat, Scaled, Offset, Slice, Rows };
struct Rule {
    How how;
    std::vector<std::string> theirs;  // "{i}": the layer
    float factor = 1;                 // Scaled: times this; Offset: plus this (Gemma's 1 + w), once at load
    // Slice: `shape` values from element `first` of the file's tensor, read
    // in place (one expert of a fused [experts, ·, ·] tensor, a half of
    // fused gate|up rows).
    int64_t first = 0;
    std::vector<int64_t> shape;
    // Rows: row j of ours is row rows[j] of the file's tensor (its first
    // dimension; a permutation of them), times row_factors[j] where given.
    std::vector<int64_t> rows;
    std::vector<float> row_factors;
};
using Rules = std::map<std::string, Rule>;  // ours ("{i}": the layer) → theirs
void norm(Rules &r, const std::string &ours, const std::string &theirs);
// Whether the file holds a tensor of this name.
using Has = std::function<bool(const std::string &)>;
struct WeightRules {
    Rules rules;
    std::vector<std::string> ignore;  // the file's tensors this model does not read
};

struct Family {
    const char *model_type;
    Config (*config)(const Fields &);
    // The rules for the files at hand (config.json's fields in `f`); may
    // adjust cfg to what they hold.
    WeightRules (*weights)(Config &cfg, const Fields &f, const Has &has);
    // A regular expression: the file's tensors transformers keeps beside
    // the weights that no forward reads (buffers, unused heads).
    const char *unused;
    // The tokenizer's kind (text/hf_tokenizers.cpp): "byte_level_bpe",
    // "wordpiece", "marian", "t5", "llama" (tokenizer.model); "": ids only.
    const char *tokenizer;
    // The family's builder: what describe() cannot read off Config — the
    // layer sequence (Description::layer), per-layer windows and rope
    // tables, q/k norms, its own layer tensors — from config.json's
    // fields (those the config reader already checked). Every family has
    // one; Halformer's own configs (no model_type) run the Transformer
    // layer, layers/transformer_layer.cpp, which training runs too.
    void (*describe)(const Fields &f, const Config &c, Description &d) = nullptr;
};

// The family builder's part of describe(c) (hf_config.cpp): nothing for a
// Config that is not a Hugging Face family's.
void describe_family(const Config &c, Description &d);

// config.json's dtype ("torch_dtype" in transformers 4, "dtype" in 5):
// "float32", "bfloat16", "float16" ("" when absent).
std::string dtype_of(const Fields &f);
// x rounded to that dtype, as a scalar tensor of it would hold it.
float round_to_dtype(float x, const std::string &dtype);

// Every family, and the one of a model_type (null: none).
const std::vector<const Family *> &families();
const Family *find_family(const std::string &model_type);

}  // namespace hf
}  // namespace halformer
