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

#include <cstdint>
#include <map>
#include <mutex>
#include <memory>
#include <vector>

namespace halformer {

struct NormW {
    const float *g = nullptr, *b = nullptr;
    explicit operator bool() const { return g != nullptr; }
};
struct AttnW {
    const float *in_w = nullptr, *in_b = nullptr, *out_w = nullptr, *out_b = nullptr;
};
// One layer's tensors by the names the parameter table gives them within
// the layer (params.cpp): "self_attn.in_proj_weight", "linear1.weight",
// "norm1.weight", a family's own "q_norm.weight" or
// "experts.3.linear2.weight". The family's table declares which a layer
// has; a builder (hf/families/<name>.cpp) picks them by name for the ops
// it composes. The trainer's gradients are laid out the same way.
struct LayerW {
    std::map<std::string, const float *> tensors;
    // The tensor of that name, or null where the layer has none.
    const float *get(const std::string &name) const {
        auto it = tensors.find(name);
        return it == tensors.end() ? nullptr : it->second;
    }
    // A tensor the layer must have (an internal Error naming it otherwise).
    const float *need(const std::string &name) const {
        const float *t = get(name);
        if (!t) throw Error("internal: the layer has no tensor '" + name + "'");
        return t;
    }
    const float *&slot(const std::string &name) { return tensors[name]; }
    // An attention's projections (module "self_attn", "multihead_attn"):
    // in_proj_weight and _bias (Q|K|V's rows), out_proj.weight and .bias.
    AttnW attn(const std::string &module) const {
        return {get(module + ".in_proj_weight"), get(module + ".in_proj_bias"), get(module + ".out_proj.weight"),
                get(module + ".out_proj.bias")};
    }
    // A norm's gain (required) and bias (LayerNorm's; RMSNorm has none).
    NormW norm(const std::string &module) const { return {need(module + ".weight"), get(module + ".bias")}; }
};
// A stack's own tensors (embeddings, final norm, heads' parts) and its
// layers. Addressed by name too (slot()): the parameter table's name
// without the stack's prefix ("embed", "norm.weight", "head_transform.bias").
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
    // The stack's tensor of that key (an internal Error for an unknown one).
    const float *&slot(const std::string &key);
};

// One projection's weights packed for a reduced precision by hf_pack_*
// (generators/packing.h): panels of 48 columns, k in groups of kf.
struct PackedLinear {
    int N = 0, K = 0, Np = 0, groups = 0, kf = 0;
    // int8 precision, the weights a file's Q4_0 (q4) or Q4_1 / Q4_K (q4 and
    // minimum: q4_1) blocks kept 4-bit (packing.h).
    bool q4 = false, minimum = false;
    Scratch data;           // Np·groups·kf values of the format (bytes in float units)
    Scratch scale, colsum;  // int8: [Np, Kp/32] float32, int16; q4: scale [Np, Kp/32] fp16 (bytes in float units)
    Scratch mins;           // q4_1: [Np, Kp/32] fp16
};

// A token embedding table as a GGUF file's blocks (int8 precision: no
// float32 copy), read by hf_embedding_none_<format>.
struct EmbedRows {
    enum Format { Q8_0, Q4_0, Q4_1 } format = Q8_0;  // 34, 18, 20 bytes a block of 32
    int block_bytes = 34;
    std::vector<uint8_t> bytes;  // [V][D / 32][block_bytes]
};

// The packed projections of one precision, shared by a model's sessions:
// filled by Impl::prepack when the precision is set; Impl::pack finds one
// (or packs it, under the lock). embeds: the tables kept as blocks (null:
// none to keep, the float32 table runs), by their address.
struct PackCache {
    std::mutex mu;
    std::map<std::pair<const float *, int>, PackedLinear> map;
    std::map<const float *, std::unique_ptr<EmbedRows>> embeds;
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
    // The N rows of K values at `rows` (an address data() gave, or inside
    // one) as a quantized file holds them in Q8_0 (GGUF: per row K/32
    // blocks of 34 bytes, the rows one after another), when it does: the
    // int8 packing then takes the file's codes as they are. Empty where the
    // file has them in another type or the model changes them at load.
    virtual std::vector<uint8_t> q8_0(const float *rows, int N, int K) {
        (void)rows, (void)N, (void)K;
        return {};
    }
    // The same rows as the file's Q4_0 blocks (K/32 blocks of 18 bytes a
    // row), when it holds them so: int8 precision then keeps them 4-bit
    // (the q4 kernels). Empty otherwise.
    virtual std::vector<uint8_t> q4_0(const float *rows, int N, int K) {
        (void)rows, (void)N, (void)K;
        return {};
    }
    // As Q4_1 blocks (K/32 of 20 bytes a row), when the file holds them in
    // Q4_1 or Q4_K: int8 precision then keeps them 4-bit (the q4_1 kernels).
    virtual std::vector<uint8_t> q4_1(const float *rows, int N, int K) {
        (void)rows, (void)N, (void)K;
        return {};
    }
    // A projection's weight (a layer's 2-D tensor, the untied head). After
    // defer_quantized(), one whose values are all the file's Q8_0 codes may
    // come as an address with no values behind it yet: the int8 packing
    // reads the codes (q8_0), and whatever needs the float32 values calls
    // materialize() first (on the address or one inside its tensor), or
    // materialize_all(). Reading it before faults: never a silent zero.
    virtual const float *projection(const std::string &name) { return data(name); }
    // Done with the values at `rows` (an address data() or projection()
    // gave) for now: packed, they are read again only to pack anew. Where
    // they lie in a mapped file (a GGUF file's float32 tensors), its pages
    // may leave resident memory; touched again, they come back from the file.
    virtual void release(const float *rows) { (void)rows; }
    virtual void defer_quantized() {}
    virtual void materialize(const float *inside) { (void)inside; }
    virtual void materialize_all() {}
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
