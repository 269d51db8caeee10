// Internal: the trainer's state (flat parameter, gradient and moment
// buffers; the parameter table; saved activations) and the kernels it calls.
#pragma once

#include "../model/session.h"
#include "halformer/train.h"

#include "../model/layers/layers.h"
#include "hf_adam.h"
#include "hf_axpy.h"
#include "hf_sum_squares.h"

#include <map>

HF_DEVICE_KERNELS(hf_adam)
HF_DEVICE_KERNELS(hf_axpy)
HF_DEVICE_KERNELS(hf_sum_squares)

namespace halformer {

using layers::ScalarOut;

// The pointer into `grads` that holds the gradient of the parameter at `p`
// (same offset); parameters that are not in the flat buffer (a tied head's
// zero bias) get the discard buffer.
struct GradMap {
    const float *params;
    size_t n;
    float *grads;
    float *discard;
    float *operator()(const float *p) const {
        if (p >= params && p < params + n) return grads + (p - params);
        return discard;
    }
};


// One tensor of the flat parameter buffer; a tied tensor shares its
// target's offset.
struct ParamEntry {
    std::string name;
    std::vector<int64_t> shape;
    size_t offset = 0;
    size_t numel() const {
        size_t n = 1;
        for (auto d : shape) n *= (size_t)d;
        return n;
    }
};

// A padded batch of one stack: tokens time-major [T][R], lengths.
struct Shape {
    int T = 0, R = 0, M = 0;
    const int32_t *tokens = nullptr;
    const int32_t *lens = nullptr;
};

// The activations one layer keeps for its backward pass.
struct LayerActs {
    const float *x_in = nullptr;
    float *n1, *qkv, *att, *y1, *x1, *n2, *qc, *attc, *y2, *x2, *n3, *z1, *h1, *y3, *x_out, *kv_mem;
    // Lays the buffers out from p (layer_floats() floats).
    void carve(float *p, const Shape &s, const Shape *mem, const Config &c) {
        const size_t MD = (size_t)s.M * c.d_model, MF = (size_t)s.M * c.d_ff;
        for (float **b : {&n1, &att, &y1, &x1, &n2, &qc, &attc, &y2, &x2, &n3, &y3, &x_out}) {
            *b = p;
            p += MD;
        }
        qkv = p;
        p += 3 * MD;
        z1 = p;
        p += MF;
        h1 = p;
        p += MF;
        kv_mem = p;
        (void)mem;
    }
};
inline size_t layer_floats_for(const Shape &s, const Shape *mem, const Config &c) {
    const size_t MD = (size_t)s.M * c.d_model, MF = (size_t)s.M * c.d_ff;
    return 12 * MD + 3 * MD + 2 * MF + (mem ? (size_t)mem->M * 2 * c.d_model : 0);
}

struct StackActs {
    Scratch arena;
    std::vector<LayerActs> layers;
    float *embedded = nullptr;
    const float *pre_norm = nullptr, *out = nullptr;
};

// Scratch of the backward pass ([M, ·] gradients of the current layer).
struct Backward {
    Scratch s_dx, s_spare, s_t1, s_t2, s_da, s_dqkv, s_dz, s_dqc, s_dkv_mem, s_dmem, s_dmem_spare, s_dhead;
    float *t1, *t2, *da, *dqkv, *dz, *dqc, *dkv_mem;
};

// A table's tied tensors: each name that shares an offset → the first name there.
std::map<std::string, std::string> aliases_of(const std::vector<ParamEntry> &table);

struct Trainer::Impl {
    // Declared first, destroyed last: it owns the DeviceContext every
    // Scratch below is shadowed by on a GPU.
    std::unique_ptr<Model> model;           // runs on `params`
    std::unique_ptr<Model::Impl> pending;   // the model until build() binds it
    Session *session = nullptr;             // the model's first session: the trainer's kernels run in it
    Config cfg;
    TrainOptions opt;
    std::vector<ParamEntry> table;
    std::map<std::string, size_t> index;  // name → table row
    size_t P = 0;                         // floats in each flat buffer
    Scratch params, grads, m1, m2, discard;
    Scratch grads_spare;  // the next micro-batch's gradients while `grads` holds a sum
    bool grads_dirty = false;
    StackW genc, gdec;             // the gradients, laid out as the weights
    const float *ggen_w = nullptr, *ggen_b = nullptr;  // written by the kernels through views
    int64_t steps = 0;        // optimizer steps taken
    int64_t micro_steps = 0;  // forward_backward calls (the dropout key)
    double last_norm = 0;
    StackActs enc_acts, dec_acts;
    Backward bw;
    Scratch logits;
    std::vector<int32_t> src_tok, tgt_tok, src_len, tgt_len, targets;

    Session &mi() { return *session; }
    DeviceContext &dev() { return *mi().dev; }
    size_t layer_floats(const Shape &s, const Shape *mem) const { return layer_floats_for(s, mem, cfg); }

    // Makes the device context (before any buffer is allocated: each
    // Scratch is shadowed on a GPU).
    void prepare(const Config &c, Device device);
    // Uploads the host copies of params, m1, m2 (filled by the caller) and
    // zeroes the gradients; builds the table and the Model over `params`,
    // then the gradient views.
    void build(const std::vector<ParamEntry> &entries);
    // Device → host copies of the flat buffers (before the host reads them).
    void fetch(Scratch &s) { dev().to_host(s.get(), P * sizeof(float)); }
    void bind_gradients();

    // The layers' pass: training kernels, dropout when `train`.
    layers::Pass pass(bool train) const;
    layers::LayerIO layer_io(LayerActs &a, const Shape &s, const float *memory, const Shape *mem, int tensor) const;
    const float *stack_forward(const StackW &w, StackActs &sa, const Shape &s, bool causal, const float *memory,
                               const Shape *mem, bool train, int tensor);
    void stack_backward(const StackW &w, const StackW &g, StackActs &sa, const Shape &s, bool causal,
                        const float *memory, const Shape *mem, float *dmem, float *dx, float *spare, int tensor);
    // One batch: its examples laid out (es, ds, tokens, targets), the
    // forward pass and the loss, with `train` the backward pass.
    StepStats run_batch(const std::vector<Example> &batch, bool train);
    void lay_out_batch(const std::vector<Example> &batch);
    void backward(const float *x, const float *dlogits);
    Shape es, ds;                    // the batch's encoder and decoder shapes
    const float *memory = nullptr;   // the encoder output of the batch
};

}  // namespace halformer
