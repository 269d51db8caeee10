// Internal: the Transformer's layers as thin sequences of kernel calls, one
// file per op kind with its forward and backward side by side (llm.c's
// pairs), shared by inference (prefill and decode, every precision) and by
// training:
//
//   embedding.cpp       tokens → D-wide rows (+ positions); backward: the table's gradient
//   norm.cpp            LayerNorm, LN(x + residual); backward of each
//   linear.cpp          Y = X·Wᵀ + b (decode and prefill shapes, packed precisions); backward
//   attention.cpp       Q|K|V projections, self (causal), cross and decode attention; backward
//   causal_chunks.h     a causal prefill's queries in chunks, each call over the keys it sees
//   residual.cpp        a sub-layer's output joining the residual stream (dropout, post-LN); backward
//   feed_forward.cpp    act(X·W1ᵀ + b1)·W2ᵀ + b2 (or gated: act(X·W1ᵀ)·(X·Wgᵀ)) joined to the stream; backward
//   output_head.cpp     the vocabulary projection (and log-softmax); the loss and its backward
//   transformer_layer.cpp  the layer: the sequence of the above, forward and backward, once
//
// Activations are time-major (row m = t·R + r for R sequences). Shapes in
// names: M rows, D = d_model, F = d_ff, H heads of dk (A = H·dk wide: D but
// for T5), T positions, R sequences, S source positions. Every function here only lays out views and
// calls kernels through Kernels::run, which checks each return code.
#pragma once

#include "../session.h"

namespace halformer {
namespace layers {

// Builds without the training kernels (HALFORMER_TRAINING=OFF, arm64)
// compile the backward halves out; a training pass there is an error.
#ifdef HALFORMER_HAS_TRAINING
constexpr bool kHasTraining = true;
#else
constexpr bool kHasTraining = false;
#endif
[[noreturn]] inline void no_training() { throw Error("this build has no training kernels (HALFORMER_TRAINING=OFF)"); }

// The session that runs the kernels (device, profile, scratch, precision).
using Kernels = Session;

// How a pass runs. Inference: fused kernels, decode shapes for few rows,
// the model's precision. Training: every activation the backward pass reads
// is kept, and dropout (probability `dropout`, 0 when evaluating) masks each
// sub-layer's output and the embedding sums, keyed by (seed, step, tensor).
struct Pass {
    bool train = false;
    float dropout = 0;
    int seed = 0, step = 0;
};

// A [rows, cols] row-major matrix with a row stride.
struct Mat {
    const float *p;
    int rows, cols, stride;
};

// --- embedding.cpp
// Row r's tokens are at positions start + t, or row_start[r] + t where
// given (rows of one decoding batch at different positions).
void embed(Kernels &k, const StackW &s, const int32_t *tokens, int T, int R, int start, float *x,
           const int32_t *row_start = nullptr);
void embed_backward(Kernels &k, const StackW &w, const StackW &g, const int32_t *tokens, int T, int R,
                    const float *dx);

// --- norm.cpp (D-wide rows; RMSNorm where the description says so)
// M rows of `width` floats (0: D; a head's queries: head_dim).
void layer_norm(Kernels &k, const NormW &n, const float *x, float *out, int M, int width = 0);
// out = LN(x + res)
void add_layer_norm(Kernels &k, const NormW &n, const float *x, const float *res, float *out, int M);
// out = res + Norm(x): a sub-layer's output normalized, then joined to the
// stream (OLMo 2's and Gemma's post-norms; RMSNorm).
void norm_add(Kernels &k, const NormW &n, const float *x, const float *res, float *out, int M);
// dx = d LN(x)/dx · dy (out), gradients of the gain and bias added to gn.
void layer_norm_backward(Kernels &k, const NormW &n, const NormW &gn, const float *x, const float *dy, float *dx,
                         int M);
// dx += d LN(x)/dx · dy
void layer_norm_backward_acc(Kernels &k, const NormW &n, const NormW &gn, const float *x, const float *dy,
                             float *dx, int M);
// d(x + res) of out = LN(x + res)
void add_layer_norm_backward(Kernels &k, const NormW &n, const NormW &gn, const float *x, const float *res,
                             const float *dy, float *dx, int M);

// --- linear.cpp
// Up to this many rows a float32 projection uses the decode shape class
// (one-row register blocks): measured 2026-11-22 (bench/kernels_bench.cpp),
// 1 × 512 → 2048 runs at 29 GB/s with it against 21 GB/s with the prefill
// blocks; at 4 rows they tie; at 32 the prefill blocks are 1.8× faster.
constexpr int kDotRows = 4;
// On a GPU the decode kernels (schedules/linear_schedule.h,
// schedule_dot_matmul_gpu: W read once, along k, at any row count) serve up
// to this many rows; the prefill kernel transposes W and X into buffers of
// their own on every call, which costs about 40/M of the matmul's time
// (5× at 8 rows).
constexpr int kGpuDotRows = 32;
// The rows up to which a projection on this device uses the decode kernels.
inline int dot_rows(Device d) { return d == Device::CPU ? kDotRows : kGpuDotRows; }
// How a projection picks its kernel: Auto uses the decode kernels up to
// dot_rows rows, Prefill never does.
enum class Shape { Auto, Prefill };
// y[M, N] (row stride y_stride) = act(x·Wᵀ + b) [+ residual (y's strides)]:
// W [N, x.cols]. Inference passes run in the model's precision; training
// passes in float32 with the prefill kernel.
void linear(Kernels &k, const Pass &p, const char *name, const Mat &x, const float *w, const float *b, int N,
            float *y, int y_stride, const float *residual = nullptr, Shape shape = Shape::Auto);
// y[M, N] = act(x·Wᵀ + b) in float32: the heads' projections (BERT's
// masked-LM transform with the model's activation, its pooler's tanh).
enum class HeadAct { ReLU, GELU, GELUTanh, Tanh };
HeadAct head_act(Act a);  // Error for an activation with no such kernel
void linear_act(Kernels &k, const char *name, const Mat &x, const float *w, const float *b, int N, float *y,
                HeadAct act);
// dx[M, K] = dy[M, N]·W (acc: added to dx's old values).
void linear_backward_data(Kernels &k, const float *dy, int N, const float *w, int K, float *dx, int M, bool acc);
// dW += dyᵀ·x, db += Σ dy.
void linear_backward_weight(Kernels &k, const float *dy, int N, const float *x, int K, float *dw, float *db, int M);

// --- where a layer's inputs, outputs and saved activations live
struct CrossMemory {
    const float *memory = nullptr;  // the encoder output [S·Rm, D] (training: K|V computed from it)
    const float *kv = nullptr;      // its K|V [S·Rm, 2D] (inference: computed once per batch)
    const int32_t *len = nullptr;   // valid source positions per source
    int S = 0, rows = 0;            // positions and sources of memory
    int group = 1;                  // rows of the batch per source (beam search)
};
struct LayerIO {
    int T = 0, R = 0, start = 0;  // T new positions of R rows from position `start`
    const float *x_in = nullptr;
    // Inference points several of these at one scratch buffer; training
    // gives each its own (the backward pass reads them).
    float *n1 = nullptr, *n2 = nullptr, *n3 = nullptr;  // pre-LN inputs of the sub-layers
    float *q = nullptr;                  // the fused [M, A + 2K] Q|K|V (self_projections)
    float *kv = nullptr;                 // self K|V: the paged cache, or q + A (a pass over whole sequences)
    int kv_stride = 0, cache_rows = 0;   // K|V row stride, rows of the cache
    // The stack's heads and feed-forward width (Description::dims); null:
    // the description's own (a model whose stacks do not differ).
    const Description::StackDims *dims = nullptr;
    int ffn_width(const Description &d) const { return dims ? dims->d_ff : d.d_ff; }
    // Rotary positions: row m's position, and the unrotated Q|K [M, A + K]
    // (apart, Q [M, A] then K [M, K], where the family normalizes them,
    // into qk_normed); the layer's frequencies (null: the description's
    // inv_freq).
    const int32_t *positions = nullptr;
    float *rope_in = nullptr, *qk_normed = nullptr;
    const std::vector<float> *inv_freq = nullptr;
    // The layer's sliding window: each query sees its `window` most recent
    // keys, itself included (0: every key).
    int window = 0;
    const int32_t *kv_len = nullptr;     // valid keys per row
    float *att = nullptr, *qc = nullptr, *attc = nullptr, *kv_mem = nullptr;
    float *y1 = nullptr, *y2 = nullptr, *y3 = nullptr;    // sub-layer outputs before the join
    float *x1 = nullptr, *x2 = nullptr, *x_out = nullptr;  // the residual stream after each
    float *z1 = nullptr, *h1 = nullptr;  // training: the FFN's pre-activation and activation
    Scratch *hidden = nullptr;           // inference: the FFN's hidden rows where needed
    // A mixture of experts' scratch: router scores, weights and ids, the
    // routed rows and the experts' outputs; and whether this layer's FFN
    // is one (Description::LayerSpec::moe).
    struct MoeScratch {
        Scratch *logits = nullptr, *weights = nullptr, *ids = nullptr, *x = nullptr, *y = nullptr;
    } moe;
    bool moe_layer = false;
    CrossMemory cross;
    RowMap rows;
    // T5: the stack's relative-position bias table (position_bias), read
    // by its self-attention; null: none.
    const float *pos_bias = nullptr;
    int tensor = 0;  // dropout key of the layer
    int M() const { return T * R; }
};

// --- attention.cpp
// The self-attention's in_proj rows [A + 2K, D] as the inference passes
// project them: (first row, rows) of each projection, in order. Q|K|V at
// once; rotary: Q|K (rotated together) then V. Prepacking packs these.
using ProjectionRows = std::pair<int, int>;
std::vector<ProjectionRows> self_projection_rows(const Description &d);
// The self-attention sub-layer's Q|K|V from `in` into io.q (rotary: Q and
// K turned by position, io.positions); in the paged cache the new
// positions' K|V then go to their rows.
void self_projections(Kernels &k, const Pass &p, const AttnW &w, const float *in, LayerIO &io);
void self_attention(Kernels &k, const Pass &p, bool causal, LayerIO &io);
// The same in steps, for a family that works on Q and K between the
// projection and the rotation (Description::qk_norm):
// Q [M, A] and K [M, K] unrotated and apart, V into its columns of io.q;
struct QK {
    float *q, *k;
};
QK project_qkv(Kernels &k, const Pass &p, const AttnW &w, const float *in, LayerIO &io);
// Q and K normalized into io.qk_normed: per head of head_dim (`per_head`)
// or over each row's whole width, by the gains qn and kn;
QK qk_norm(Kernels &k, const NormW &qn, const NormW &kn, const QK &x, bool per_head, LayerIO &io);
// then turned by position into io.q, and the new K|V to the paged cache.
void rotate_qk(Kernels &k, const QK &x, LayerIO &io);
// out[M, D] = att·Woᵀ + bo [+ res]: the attention's output projection.
void attention_output(Kernels &k, const Pass &p, const AttnW &w, const LayerIO &io, const float *res, float *out);
// Q from `in`, then attention over the encoder memory's K|V (io.attc);
void cross_attention(Kernels &k, const Pass &p, const AttnW &w, const float *in, LayerIO &io);
// out[M, D] = attc·Woᵀ + bo [+ res]: its output projection.
void cross_attention_output(Kernels &k, const Pass &p, const AttnW &w, const LayerIO &io, const float *res,
                            float *out);
// Whether the layer attends to an encoder's memory (a decoder layer of an
// encoder-decoder model).
inline bool has_memory(const LayerIO &io) { return io.cross.memory || io.cross.kv; }
// T5: a stack's bias table [H, 2R+1] by relative position −R..R (R =
// relative_max_distance; beyond ±R the buckets are those of ±R), made once
// per stack and call from its rel_bias weights; encoder bidirectional,
// decoder causal. position_bias_size: its floats.
void position_bias(Kernels &k, const StackW &s, bool causal, float *out);
size_t position_bias_size(const Description &d);
// K|V of the encoder memory for one decoder layer (rows A..3A of in_proj).
void memory_kv(Kernels &k, const Pass &p, const AttnW &w, const float *memory, int rows, float *out);
// Gradients of both: dq and dk|dv from d(att) (see transformer_layer.cpp).
struct AttnGrad {
    float *dq;
    int dq_stride;
    float *dkv;
    int dkv_stride;
};
void self_attention_backward(Kernels &k, bool causal, const LayerIO &io, const float *datt, const AttnGrad &g);
void cross_attention_backward(Kernels &k, const LayerIO &io, const float *datt, const AttnGrad &g);

// --- residual.cpp
// out = dropout(y) + res (pre-LN) or LN(dropout(y) + res) (post-LN); y is
// masked in place.
void join(Kernels &k, const Pass &p, float *y, const float *res, float *out, const NormW &n, int M, int tensor);
// An attention sub-layer's output projection and its join: out = join(att·Woᵀ + bo, res).
void project_join(Kernels &k, const Pass &p, const AttnW &w, const float *att, const float *res, float *y,
                  float *out, const NormW &n, int M, int tensor);
// out = dropout(y) [+ res] with the pass's mask (a copy when p = 0 and no res).
void dropout(Kernels &k, const Pass &p, float *y, const float *res, float *out, int M, int N, int tensor);

// --- feed_forward.cpp
// out = join(act(in·W1ᵀ + b1)·W2ᵀ + b2, res), n the join's norm (post-LN).
void feed_forward_join(Kernels &k, const Pass &p, const LayerW &L, const NormW &n, const float *in, const float *res,
                       LayerIO &io);
// out = FFN(in) [+ res] (inference; res null: the sub-layer's output alone).
void feed_forward(Kernels &k, const Pass &p, const LayerW &L, const float *in, const float *res, LayerIO &io,
                  float *out);
// The layer's linear1, linear_gate, linear2 (weights and biases; null
// where none). The same for M rows with explicit weights (a layer's, or one expert's;
// F wide), the hidden rows in `hidden`.
struct FfnW {
    const float *w1, *b1, *wg, *bg, *w2, *b2;
    int F;
};
FfnW ffn_weights(const Description &d, const LayerW &L, const LayerIO &io);
void feed_forward(Kernels &k, const Pass &p, const FfnW &f, const float *in, int M, const float *res, Scratch &hidden,
                  float *out);

// --- moe.cpp
// out = res + Σ_j w_j · expert_j(in) over each token's top_k experts
// (Description::moe): the router's projection, hf_moe_route, the tokens
// grouped by expert on the host (ids only), each chosen expert's gated
// FFN over its tokens (a decoding step reads only the chosen experts'
// weights), then hf_moe_combine.
void moe(Kernels &k, const Pass &p, const LayerW &L, const float *in, const float *res, LayerIO &io, float *out);
// From dy (the gradient of y3 after dropout): W2, b2, act'(z1), W1, b1;
// d in → din (acc: added).
void feed_forward_backward(Kernels &k, const LayerW &L, const LayerW &G, const LayerIO &io, const float *in,
                           const float *dy, float *dz, float *din, bool acc);

// --- output_head.cpp
// out[R, D]: one vector per sequence of x (T positions of R rows, time-major)
// — its first position, or the mean of its lens[r] valid ones — of unit L2
// norm with `normalize`.
void pool(Kernels &k, const float *x, int T, int R, const int32_t *lens, bool mean, bool normalize, float *out);
// out[R, N] = softmax of each row of x.
void softmax(Kernels &k, const float *x, int R, int N, float *out);
// out[R, N] = log-softmax of each row of x.
void log_softmax(Kernels &k, const float *x, int R, int N, float *out);
// out[R, V] = x with n entries changed: the logit of ids[e] in row rows[e]
// divided by factor[e] where positive, multiplied where negative, −1e30
// where factor[e] = 0 (hf_logits_adjust; host arrays).
void logits_adjust(Kernels &k, const float *x, int R, int V, const int32_t *rows, const int32_t *ids,
                   const float *factor, int n, float *out);
// --- rows.cpp
// out[i] = src[idx[i]] for i < n (rows of width W; src has rows_in).
void gather_rows(Kernels &k, const float *src, int W, int rows_in, const int32_t *idx, int n, float *out);
// out[idx[i]] = src[i] for i < n, in place (out has rows_out rows; the
// indices distinct); every other row of out keeps what it holds. src's
// rows lie `stride` floats apart (0: W).
void scatter_rows(Kernels &k, const float *src, int W, int n, const int32_t *idx, float *out, int rows_out,
                  int stride = 0);
// The 8 largest probabilities of each row's softmax and their ids
// (best first; probs[R, N] scratch): values[R, 8], ids[R, 8].
void top8(Kernels &k, const float *x, int R, int N, float *probs, float *values, int32_t *ids);
struct HeadW {
    const float *w = nullptr, *b = nullptr;  // [rows, D], [rows]
    int rows = 0;
};
// out[M, rows] = x·Wᵀ + b, or its log-softmax (x: M rows of stride row_stride).
void project(Kernels &k, const HeadW &h, const float *x, int M, int row_stride, float *out, bool log_softmax);
// A 0-D kernel output (a loss, a count, a sum) read on the host.
template <typename T>
struct ScalarOut {
    T value{};
    halide_buffer_t buf{};
    ScalarOut() {
        buf.host = (uint8_t *)&value;
        buf.type = halide_type_of<T>();
        buf.dimensions = 0;
    }
    halide_buffer_t *get() { return &buf; }
    // On a GPU the kernel leaves the value on the device: copy it back, free it.
    T read() {
        if (buf.device) {
            halide_copy_to_host(nullptr, &buf);
            halide_device_free(nullptr, &buf);
        }
        return value;
    }
};
struct Loss {
    double sum = 0;     // label-smoothed cross-entropy summed over counted targets
    int64_t count = 0;  // targets not -1
};
// Training's head: logits[M, rows] = x·Wᵀ + b, the loss over targets[M]
// (-1: no loss), and d loss / d logits in place of the logits.
Loss head_loss(Kernels &k, const HeadW &h, const float *x, int M, const int32_t *targets, float label_smoothing,
               float *logits);
// From d logits: dx[M, D] = dlogits·W; the head's gradients added to g.
void head_backward(Kernels &k, const HeadW &h, const HeadW &g, const float *x, int M, const float *dlogits,
                   float *dx);

// --- transformer_layer.cpp
void layer_forward(Kernels &k, const Pass &p, const LayerW &L, bool causal, LayerIO &io);
// Every layer of a stack, in order: the one loop that inference (the
// encoder, teacher-forced logits, prefill chunks, decoding steps:
// Session::stack) and training's forward (train/stack_passes.cpp) run.
// io_for(l) lays out layer l's LayerIO over the caller's memory (shared
// scratch and the KV cache; training's saved activations), the layer runs,
// and done(l, io) moves the stream on.
template <typename IoFor, typename Done>
void stack_forward(Kernels &k, const Pass &p, const StackW &w, bool causal, IoFor &&io_for, Done &&done) {
    for (size_t l = 0; l < w.layers.size(); l++) {
        LayerIO io = io_for(l);
        // The family's builder, or the Transformer layer.
        if (k.desc.layer) {
            k.desc.layer(k, p, w.layers[l], causal, io);
        } else {
            layer_forward(k, p, w.layers[l], causal, io);
        }
        done(l, io);
    }
}
// Scratch of the backward pass ([M, ·] gradients of the current layer).
struct BackwardBuffers {
    float *t1, *t2, *da, *dqkv, *dz, *dqc, *dkv_mem;
};
// dx holds d x_out on entry and d x_in on return (dx and spare may swap);
// d memory is added to dmem.
void layer_backward(Kernels &k, const Pass &p, const LayerW &L, const LayerW &G, const LayerIO &io, bool causal,
                    const BackwardBuffers &b, float *dmem, float *&dx, float *&spare);

}  // namespace layers
}  // namespace halformer
