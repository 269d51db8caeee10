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

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

namespace halformer {

class TensorSource;
class Gguf;

namespace hf {

// The tensors of a checkpoint's files under their own names (transformers'
// names, PyTorch shapes), as float32: a directory's safetensors, or a GGUF
// file's tensors under the names transformers gives them (gguf.cpp).
class TensorFiles {
public:
    virtual ~TensorFiles() = default;
    // The shape of the tensor of that name, or null where the files hold none.
    virtual const std::vector<int64_t> *shape(const std::string &name) const = 0;
    // Its values as float32 (converted once, then kept).
    virtual const float *f32(const std::string &name) = 0;
    virtual std::vector<std::string> names() const = 0;
    virtual std::string where() const = 0;
    // How the file itself names a tensor (a GGUF file: blk.3.attn_q.weight).
    virtual std::string spelled(const std::string &name) const { return name; }
    // Row `row` of a 2-D tensor the file holds in Q8_0 or another block
    // type (K/32 Q8_0 blocks of 34 bytes: a GGUF file's Q4_0, Q4_K, ...
    // transcoded, requantize_row_q8_0), in the order f32() gives its rows;
    // null for a plain type.
    virtual const uint8_t *q8_0_row(const std::string &name, int64_t row) const {
        (void)name, (void)row;
        return nullptr;
    }
    // Row `row` of a 2-D tensor the file holds in Q4_0 (K/32 blocks of 18
    // bytes: an fp16 step, 16 bytes of nibbles), as q8_0_row orders rows;
    // null for any other type.
    virtual const uint8_t *q4_0_row(const std::string &name, int64_t row) const {
        (void)name, (void)row;
        return nullptr;
    }
    // The same as Q4_1 blocks (K/32 of 20 bytes: fp16 d and m, 16 bytes of
    // nibbles as Q4_0's), for a tensor the file holds in Q4_1 or Q4_K
    // (transcode_row_q4_1); null for any other type.
    virtual const uint8_t *q4_1_row(const std::string &name, int64_t row) const {
        (void)name, (void)row;
        return nullptr;
    }
    // Whether q8_0_row gives that tensor's rows (without making them).
    virtual bool holds_q8_0(const std::string &name) const { return q8_0_row(name, 0) != nullptr; }
    // Done with the file's bytes of that tensor for now (a mapped file's
    // pages may leave resident memory; read again, they come back).
    virtual void evict(const std::string &name) const { (void)name; }
};

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
// The same over any files, with the config.json (`root`, named `what`) the
// family's rules read.
std::unique_ptr<TensorSource> open_weights(std::unique_ptr<TensorFiles> files, Config &cfg, const json::Value &root,
                                           const std::string &what);

// A GGUF file (llama.cpp's format) as a Hugging Face checkpoint: the
// config.json transformers would write for it, from the file's metadata
// (its architecture's keys, and the defaults llama.cpp assumes rather than
// stores), and its tensors under transformers' names, dequantized to
// float32 (Llama's Q and K rows back in transformers' order: llama.cpp's
// converter interleaves each head's halves). An architecture or a tensor
// Halformer has no family or name for is an Error naming it.
std::string gguf_config_json(const Gguf &g);
std::unique_ptr<TensorFiles> gguf_files(std::shared_ptr<Gguf> g);
// DIR/generation_config.json (where the checkpoint has one) over cfg: eos
// (one or a list), forced_eos_token_id, decoder_start_token_id,
// single-token bad_words_ids, num_beams and max_length.
void read_generation_config(const std::string &dir, Config &cfg);

}  // namespace hf
}  // namespace halformer
