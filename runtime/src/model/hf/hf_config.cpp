// config.json of a Hugging Face directory → Config. Field names and
// defaults are transformers' (configuration_gpt2.py, configuration_marian.py):
// a minimal config.json gets what transformers would give it. Whatever a
// family's config can say that Halformer does not run (cross-attention in
// GPT-2, encoder and decoder of different widths, an activation with no
// kernel) is an Error naming the field and its value, never guessed.
#include "family.h"
#include "hf.h"

#include "halformer/error.h"
#include "halformer/files.h"

#include <fstream>
#include <sstream>

#include <algorithm>
#include <climits>
#include <cmath>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <map>

namespace halformer {
namespace hf {

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

void add_bad_words(const Fields &f, std::vector<int> &banned) {
    const json::Value *bad = f.get("bad_words_ids", json::Value::Kind::Array);
    if (!bad) return;
    for (auto &w : bad->array) {
        if (!w.is_array() || w.array.size() != 1 || !w.array[0].is_number()) {
            f.fail("bad_words_ids: only single-token entries are supported by Halformer");
        }
        const int id = (int)w.array[0].number;
        if (std::find(banned.begin(), banned.end(), id) == banned.end()) banned.push_back(id);
    }
}

int eos_ids(const Fields &f, int fallback, std::vector<int32_t> &more) {
    const json::Value *v = f.root.find("eos_token_id");
    f.read->insert("eos_token_id");
    if (!v || !v->is_array()) return f.integer("eos_token_id", fallback);
    more.clear();
    for (size_t k = 0; k < v->array.size(); k++) {
        const json::Value &id = v->array[k];
        if (!id.is_number() || id.number != std::floor(id.number) || id.number < 0 || id.number > 2147483647.0) {
            f.fail("field \"eos_token_id\": entry " + std::to_string(k) + " is not a token id");
        }
        if (k > 0) more.push_back((int32_t)id.number);
    }
    if (v->array.empty()) f.fail("field \"eos_token_id\" is an empty list");
    return (int)v->array[0].number;
}

void read_generation_config(const std::string &dir, Config &c) {
    const std::string path = dir + "/generation_config.json";
    if (!files::exists(path)) return;
    std::ifstream in(path, std::ios::binary);
    std::stringstream text;
    text << in.rdbuf();
    const json::Value root = json::parse(text.str(), path);
    if (!root.is_object()) throw Error(path + ": not a JSON object");
    const Fields f{root, path};
    // (generation_config.json's ids win over config.json's, as transformers' generate() reads them.)
    if (root.find("eos_token_id")) c.eos_id = eos_ids(f, c.eos_id, c.stop_ids);
    c.forced_eos_id = f.integer("forced_eos_token_id", c.forced_eos_id);
    if (c.architecture == Architecture::EncoderDecoder) c.bos_id = f.integer("decoder_start_token_id", c.bos_id);
    add_bad_words(f, c.banned_ids);
    c.default_beams = f.integer("num_beams", c.default_beams);
    c.default_max_length = f.integer("max_length", c.default_max_length);
    try {
        c.validate();
    } catch (const Error &e) {
        throw Error(path + ": " + e.what());
    }
}

bool is_family(const std::string &model_type) { return find_family(model_type) != nullptr; }

void describe_family(const Config &c, Description &d) {
    if (c.source.empty() || c.family.empty()) return;
    const Family *family = find_family(c.family);
    if (!family || !family->describe) return;
    const std::string what = "config.json (" + c.family + ")";
    const json::Value root = json::parse(c.source, what);
    family->describe(Fields{root, what}, c, d);
}

std::string dtype_of(const Fields &f) { return f.string("dtype", f.string("torch_dtype", "")); }

float round_to_dtype(float x, const std::string &dtype) {
    uint32_t u;
    std::memcpy(&u, &x, 4);
    if (dtype == "bfloat16") {
        u = (u + 0x7FFFu + ((u >> 16) & 1u)) & 0xFFFF0000u;  // round to nearest even
        std::memcpy(&x, &u, 4);
        return x;
    }
    if (dtype == "float16" && std::isfinite(x) && x != 0) {
        // 11 significant bits (fewer below 2^-14, the subnormal halves),
        // rounded to nearest even (the default rounding mode).
        int e = 0;
        std::frexp(x, &e);
        const int bits = e < -13 ? 11 - (-13 - e) : 11;
        if (bits <= 0) return std::copysign(0.0f, x);
        const float scale = std::ldexp(1.0f, bits - e);
        const float r = std::nearbyint(x * scale) / scale;
        return std::fabs(r) > 65504.0f ? std::copysign(INFINITY, x) : r;
    }
    return x;
}

Config config_from_json(const json::Value &root, const std::string &what) {
    Fields f{root, what};
    const std::string type = f.string("model_type", "");
    const Family *family = find_family(type);
    if (!family) {
        std::string names;
        for (const Family *k : families()) names += (names.empty() ? "" : ", ") + std::string(k->model_type);
        f.fail("model_type \"" + type + "\" is not supported by Halformer (supported: " + names + ")");
    }
    Config c = family->config(f);
    // The builder's reading, once here, so that its errors come at load.
    if (family->describe) {
        Description d;
        family->describe(f, c, d);
    }
    // Generation settings any family's config.json may hold.
    if (!f.read->count("forced_eos_token_id")) c.forced_eos_id = f.integer("forced_eos_token_id", -1);
    // Features of other families that this one's reader does not take.
    for (const char *key : {"rope_scaling", "rope_parameters", "rotary_dim", "num_key_value_heads", "sliding_window",
                            "alibi"}) {
        if (!f.read->count(key) && root.find(key) && root.find(key)->kind != json::Value::Kind::Null) {
            f.fail(std::string("field \"") + key + "\" is not supported by Halformer for model_type \"" + type + "\"");
        }
    }
    try {
        c.validate();
    } catch (const Error &e) {
        throw Error(what + ": " + e.what());
    }
    return c;
}

}  // namespace hf
}  // namespace halformer
