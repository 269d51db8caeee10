// Internal: Hugging Face model directories as transformers saves them
// (config.json with "model_type", model.safetensors or its shards, the
// tokenizer files), read into Halformer's own Config and parameter names.
//
//   family.h        what a family is: one entry per transformers model_type
//                   (families/<name>.cpp, listed in families.cpp) giving its
//                   config.json reader, weight rules, unused tensors and
//                   tokenizer kind
//   hf_config.cpp   config.json → Config through the family's reader (an
//                   unsupported model_type or feature is an Error naming
//                   it); generation_config.json over it
//   hf_weights.cpp  the files → a TensorSource under the parameter table's
//                   names by the family's rules: fused Q|K|V built from
//                   separate projections, GPT-2's Conv1D weights transposed
//                   once at load, tied tensors the file omits, buffers and
//                   unused heads ignored
#pragma once

#include "halformer/config.h"
#include "halformer/json.h"

#include <memory>
#include <string>

namespace halformer {

class TensorSource;

namespace hf {

// The families read: transformers' model_type values.
bool is_family(const std::string &model_type);
// config.json of a Hugging Face directory (root has "model_type") → Config,
// with Config::family set; `what` names the file in errors.
Config config_from_json(const json::Value &root, const std::string &what);
// The weights of `dir` (model.safetensors, or the shards that
// model.safetensors.index.json lists) under the parameter table's names.
// A directory with only pytorch_model.bin is an Error saying how to save
// safetensors. May adjust cfg to what the files hold (a Marian file with
// its position tables: they are used as they are).
std::unique_ptr<TensorSource> open_weights(const std::string &dir, Config &cfg);
// DIR/generation_config.json (where the checkpoint has one) over cfg: eos
// (one or a list), forced_eos_token_id, decoder_start_token_id,
// single-token bad_words_ids, num_beams and max_length.
void read_generation_config(const std::string &dir, Config &cfg);

}  // namespace hf
}  // namespace halformer
