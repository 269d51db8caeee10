// config.json of a Hugging Face directory → Config. Field names and
// defaults are transformers' (configuration_gpt2.py, configuration_marian.py):
// a minimal config.json gets what transformers would give it. Whatever a
// family's config can say that Halformer does not run (cross-attention in
// GPT-2, encoder and decoder of different widths, an activation with no
// kernel) is an Error naming the field and its value, never guessed.
#include "family.h"
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

bool is_family(const std::string &model_type) { return find_family(model_type) != nullptr; }

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
