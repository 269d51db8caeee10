// Internal: a model's weights as kernel-ready pointers (one struct per
// layer and stack, filled from the parameter table by ModelWeights::bind),
// their packed reduced-precision copies, and where they come from. Shared,
// read-only, by every session of a Model.
#pragma once

#include "halformer/build_info.h"
#include "halformer/chat.h"

#include "../buffers.h"
#include "description.h"
#include "halformer/safetensors.h"

#include <map>
#include <mutex>
#include <vector>

namespace halformer {

struct NormW {
    const float *g = nullptr, *b = nullptr;
    explicit operator bool() const { return g != nullptr; }
};
struct AttnW {
    const float *in_w = nullptr, *in_b = nullptr, *out_w = nullptr, *out_b = nullptr;
};
struct LayerW {
    AttnW self, cross;
    const float *w1 = nullptr, *b1 = nullptr, *w2 = nullptr, *b2 = nullptr;
    const float *wg = nullptr, *bg = nullptr;  // the gated feed-forward's second input projection
    NormW self_norm, cross_norm, ffn_norm;
    // The family's own tensors by name (Description::layer_tensors).
    std::map<std::string, const float *> named;
    // A named gain (an Error naming it where the layer has none).
    NormW norm(const std::string &key) const {
        auto it = named.find(key);
        if (it == named.end() || !it->second) throw Error("internal: the layer has no tensor '" + key + "'");
        return {it->second, nullptr};
    }
};
struct StackW {
    std::vector<LayerW> layers;
    NormW final_norm;
    const float *embed = nullptr, *pos = nullptr;
    int vocab = 0;
    // BERT (the encoder's): token types [types, D] and the embeddings'
    // LayerNorm; the masked-LM head's transform [D, D] and its LayerNorm;
    // the classifier's pooler [D, D].
    const float *types = nullptr;
    NormW embed_norm;
    const float *head_tw = nullptr, *head_tb = nullptr;
    NormW head_norm;
    const float *pool_w = nullptr, *pool_b = nullptr;
    // T5: the relative-position bias table [buckets, heads].
    const float *rel_bias = nullptr;
};

// One projection's weights packed for a reduced precision by hf_pack_*
// (generators/packing.h): panels of 48 columns, k in groups of kf.
struct PackedLinear {
    int N = 0, K = 0, Np = 0, groups = 0, kf = 0;
    Scratch data;          // Np·groups·kf values of the format (bytes in float units)
    Scratch scale, colsum; // int8: [Np] float32, [Np] int32
};

// The packed projections of one precision, shared by a model's sessions:
// filled by Impl::prepack when the precision is set; Impl::pack finds one
// (or packs it, under the lock).
struct PackCache {
    std::mutex mu;
    std::map<std::pair<const float *, int>, PackedLinear> map;
};

// Where tensors come from: a safetensors file or generated storage.
class TensorSource {
public:
    virtual ~TensorSource() = default;
    virtual bool has(const std::string &name) const = 0;
    virtual std::vector<int64_t> shape(const std::string &name) const = 0;
    virtual const float *data(const std::string &name) = 0;
    virtual std::vector<std::string> names() const = 0;
    virtual std::string where() const = 0;
    // How errors name one of our tensors: the file's own name(s) for it.
    virtual std::string origin(const std::string &name) const { return "'" + name + "'"; }
};

// What every session of a Model reads: the config, the tokenizer, the
// weights (owned by `source`) and their packed copies. Written only while no
// call runs (loading, Model::set_precision).
struct ModelWeights {
    Config cfg;
    Description desc;  // what the forward reads of the family (describe(cfg))
    std::shared_ptr<Tokenizer> tok;  // when cfg.tokenizer names one
    // A Hugging Face checkpoint's chat template (tokenizer_config.json's
    // chat_template, or chat_template.jinja), parsed at load; the strings it
    // reads (bos_token, eos_token); why there is none, or why it did not
    // parse (said when chat is asked for).
    std::shared_ptr<ChatTemplate> chat;
    std::map<std::string, std::string> chat_vars;
    std::string chat_missing;
    std::shared_ptr<TensorSource> source;
    StackW enc, dec;
    const float *gen_w = nullptr, *gen_b = nullptr;
    int gen_rows = 0;
    bool tied = false;
    int64_t params = 0;
    Scratch zero_bias;  // the head's bias when the file has none
    Scratch zeros;      // every bias vector a family's files lack (T5)
    // The head's bias for generation: cfg.banned_ids at -1e30 (null: none).
    const float *gen_b_decode = nullptr;
    Scratch decode_bias;
    Precision precision = Precision::FP32;
    // Which float32 projections run packed (packed.cpp), read once when the
    // model is made (HALFORMER_FP32_PACK, the CPU): None where the weights
    // change in place (the trainer's model).
    Fp32Packing fp32_pack = fp32_packing();
    // Packed copies of the projections' weights, by (W's address, rows).
    std::shared_ptr<PackCache> packs = std::make_shared<PackCache>();

    // Describes cfg, then resolves every tensor of the parameter table from
    // `source`, checking shapes.
    void bind();
};

}  // namespace halformer
