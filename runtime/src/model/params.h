// Internal: the parameter table. Every tensor a model of a Config has, in
// one list: its name (PyTorch nn.Transformer's state_dict names), shape,
// initial values, whether a file must hold it, what it is tied to, and the
// slot of the weights the layers read it from. Loading (Model::Impl::bind),
// random weights (Model::random), training's flat parameter and gradient
// layout, its checkpoints and checkpoint averaging all read this table.
#pragma once

#include "halformer/config.h"

#include <cstdint>
#include <string>
#include <vector>

namespace halformer {

struct StackW;
struct LayerW;

enum class Init { Ones, Zeros, Embedding, Xavier };

// Where the layers find a tensor: a layer's, by its name within the layer
// (LayerW::tensors: "self_attn.in_proj_weight", "q_norm.weight"), a
// stack's own, by its key (StackW::slot: "embed", "norm.weight"), or the
// output head's ("generator.weight", "generator.bias").
struct Slot {
    enum Part { Encoder, Decoder, Head } part = Head;
    int layer = -1;  // -1: the stack's own tensors
    std::string key;
};

struct ParamSpec {
    std::string name;
    std::vector<int64_t> shape;  // a 0 dimension: any size (an encoder head's rows)
    Init init = Init::Zeros;
    Slot slot;
    bool required = true;  // a model file must hold it
    bool fresh = true;     // a new model (Model::random, Trainer::create) has it
    // A new model shares this tensor's storage ("src_embed.weight" for the
    // target embedding of one shared vocabulary, section 3.4); a file
    // without the tensor shares it too (the tied output projection).
    std::string tied_to;
    // Optional tensors present only in pairs: a final norm's bias needs its gain.
    std::string needs;
    // A bias vector a family's files do not have (T5): zeros when absent.
    bool zero_if_absent = false;
};

// The table of a model of `c`: an encoder-only model gets a head of
// `head_rows` rows when head_rows > 0, and a head of any rows (from its
// file) when head_rows is 0.
std::vector<ParamSpec> param_specs(const Config &c, int head_rows = 0);
// Fresh values of one tensor (deterministic per name and seed): Xavier-
// uniform matrices, embeddings of variance 1/d_model, unit gains, zero biases.
void init_param(const ParamSpec &spec, const Config &c, uint64_t seed, float *out);
int64_t numel(const std::vector<int64_t> &shape);

// The weights' pointer a spec's tensor goes to.
const float *&slot_of(StackW &enc, StackW &dec, const float *&head_w, const float *&head_b, const Slot &s);

}  // namespace halformer
