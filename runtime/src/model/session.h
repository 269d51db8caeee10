// Internal: a session, what one call of a Model runs in: its device
// context, activations, KV caches and profile, over the Model's shared
// weights (model_weights.h); the layers (layers/) call kernels through it.
// A Model keeps a pool of them (one per concurrent call). Not installed.
#pragma once

#include "model_weights.h"

#include <array>
#include <chrono>
#include <condition_variable>
#include <functional>
#include <map>
#include <mutex>

namespace halformer {

// Where a decoder layer's rows find their keys and values (Session::stack).
// cache_rows: rows of each time slot of a dense self-attention cache (0:
// the batch's rows); position t of row r is at cache row t·cache_rows + r.
// The paged cache (decode.cpp) instead: the cache is `pool_rows` rows of
// blocks of kPageRows rows; position t of row r is at cache row
// table[t / kPageRows] · kPageRows + t % kPageRows, table = block_table +
// r·table_stride (its block table; beams share their ancestors' blocks),
// the T·R new positions' K|V go to cache rows write_rows (time-major,
// distinct) from the layer's Q|K|V rows, and position s of source g of the encoder
// K|V (in the same cache) is found the same way through cross_table +
// g·cross_stride.
constexpr int kPageRows = 16;  // the _paged attention kernels' page (generators/CMakeLists.txt)
struct RowMap {
    int cache_rows = 0;
    const int32_t *block_table = nullptr;
    int table_stride = 0, pool_rows = 0;
    const int32_t *write_rows = nullptr;
    // A prefill chunk (T > 1): its keys gathered into `dense`, position t
    // of row r from cache row dense_rows[t·R + r].
    const int32_t *dense_rows = nullptr;
    float *dense = nullptr;
    const int32_t *cross_table = nullptr;
    int cross_stride = 0;
    // Each row's position at t = 0 where rows differ (a decoding step);
    // null: `start` for every row.
    const int32_t *row_pos = nullptr;
};

// Pads sequences to time-major [T][R] tokens (pad where a sequence is
// shorter) and their lengths; returns T.
int pad_time_major(const std::vector<const Sequence *> &seqs, int pad, std::vector<int32_t> &tokens,
                   std::vector<int32_t> &lens);

// A session: per call, everything but the weights. The layers' kernel
// runner: run() times each call, checks its return code and releases its
// device bindings.
class Session {
public:
    Session(std::shared_ptr<ModelWeights> weights, std::shared_ptr<MemoryBudget> budget);
    Session(const Session &) = delete;
    Session &operator=(const Session &) = delete;

    // The Model's weights (shared with its other sessions) and their config.
    std::shared_ptr<ModelWeights> w;
    const Config &cfg;
    const Description &desc;  // the family: what the layers read
    // Declared before every Scratch: destroyed after them.
    std::unique_ptr<DeviceContext> dev = std::make_unique<DeviceContext>();
    Device device() const { return dev->device(); }
    // Moves the activations to `d` (before any forward pass).
    void set_device(Device d);
    // Gives vector-held scratches (per-layer caches) the device context and
    // the budget.
    void attach(std::vector<Scratch> &v) {
        for (auto &s : v) {
            s.dev = dev.get();
            s.budget = budget.get();
        }
    }
    // Shared by the sessions: what their activations and caches may hold.
    std::shared_ptr<MemoryBudget> budget;
    // Points this session's scratches at its device context and budget.
    void wire();
    // Before a call allocates: its activations and caches, `floats` in all
    // (an estimate from its shapes), must fit in the budget beside what the
    // other sessions hold; else Error naming the sizes and `what`.
    void require_fits(int64_t floats, const std::string &what);
    // The one estimate of what a pass holds (logits, encode, generate), from
    // its shapes: per encoder position 6·D + F floats and per decoder layer
    // its cross K|V (2·D); per decoder row, per cached position and layer
    // the self K|V (2·D) and per position run 6·D + F; the outputs. Every
    // product 64-bit and checked (`label` names the call in an overflow);
    // require_fits with `what`.
    struct PassShapes {
        int64_t sources = 0, source_len = 0;  // the encoder's inputs and their positions
        int64_t rows = 0, positions = 0;      // the decoder's rows and the positions one call runs
        int64_t cache = 0;                    // the decoder's self K|V positions per row
        int64_t out_rows = 0, width = 0;      // the outputs: out_rows × width floats
    };
    void require_pass_fits(const PassShapes &p, const char *label, const std::string &what);
    // A new session over this one's weights (CPU): fresh buffers, the same
    // shared state.
    std::unique_ptr<Session> spawn() const;
    // Frees the activations and caches; returns the bytes freed.
    size_t release_buffers();
    const PackedLinear &pack(const float *weight, int N, int K);
    // The token embedding table at `table` (V × D) as the file's blocks, kept
    // once (int8 precision, a GGUF file's block types); null: the float32
    // table runs.
    const EmbedRows *embed_rows(const float *table, int V, int D);
    // Packs every projection the forward passes use (set_precision).
    void prepack();
    // Y[M, N] (row stride y_stride) = act(X·Wᵀ + b) [+ residual] in the
    // reduced precision: X [M, K] with row stride x_stride, W [N, K] (packed
    // on first use), residual with y's strides. act: null for none.
    void linear_packed(const char *name, const float *x, int M, int x_stride, const float *weight, int N, int K,
                     const float *bias, const Act *act, const float *residual, float *y, int y_stride);
    // The same with a gate: Y = act(X·Wᵀ + b)·gate (gate with y's strides;
    // act GELUTanh or SiLU), the gated feed-forward's first projection.
    void linear_packed_gated(const char *name, const float *x, int M, int x_stride, const float *weight, int N, int K,
                           const float *bias, Act act, const float *gate, float *y, int y_stride);
    // Whether an inference projection of M rows runs packed: a reduced
    // precision, or float32 as fp32_packing() says where the weights do not
    // change.
    bool packed(int M) const;
    // One packed kernel call (packed.cpp): kind picks the variant, extra is
    // the residual or the gate.
    void run_packed(const char *name, const float *x, int M, int x_stride, const float *weight, int N, int K,
                    const float *bias, int kind, const float *extra, float *y, int y_stride);
    Profile prof;
    std::vector<double> step_seconds;
    std::vector<int> step_rows;  // rows of the batch at each step of the last decode

    // Activations and caches (grow-only).
    // On a GPU each is shadowed on the device, where its contents live:
    // kernels write them, DeviceContext::to_host reads them back. Data the
    // host writes for a kernel (token ids, lengths) goes in plain vectors.
    // kv_stage: the sources' cross-attention K|V before they go to their
    // cache rows;
    // last_rows: the prefill's last position of each row, across chunks.
    // rope_in: the unrotated Q|K of a rotary model's layer; qk_normed:
    // them normalized (Description::qk_norm).
    Scratch x0, x1, h, q, a, y, ffn_hidden, head_tmp, kv_tmp, enc_out, logits, topv, topi, pos_bias, kv_stage,
        last_rows, rope_in, qk_normed;
    // A mixture of experts' router scores, weights and ids, routed rows and
    // the experts' outputs (layers/moe.cpp).
    Scratch moe_logits, moe_weights, moe_ids, moe_x, moe_y;
    std::vector<Scratch> self_kv, cross_kv;
    // Every scratch above but the per-layer caches.
    std::array<Scratch *, 23> activations() {
        return {&x0,       &x1,         &h,        &q,        &a,       &y,       &ffn_hidden, &head_tmp,
                &kv_tmp,   &enc_out,    &logits,   &topv,     &topi,    &pos_bias, &kv_stage,  &last_rows,
                &rope_in,  &qk_normed,  &moe_logits, &moe_weights, &moe_ids, &moe_x, &moe_y};
    }
    // Rotary: each row's position in a layer call (m = t·R + r), built by stack().
    std::vector<int32_t> positions;
    // f(Scratch &) for each activation and each layer's caches.
    template <typename F>
    void each_scratch(F &&f) {
        for (Scratch *s : activations()) f(*s);
        for (auto *v : {&self_kv, &cross_kv}) {
            for (Scratch &s : *v) f(s);
        }
    }

    // Calls one kernel, timing it and checking its return code. Whatever
    // happens in the call (a kernel error, a failed device binding, an
    // exception), the device bindings of its views are released before
    // run returns or throws: none outlives the views it points to.
    template <typename F>
    void run(const char *name, F &&call) {
        auto t0 = std::chrono::steady_clock::now();
        if (dev->bindings() != 0) {
            throw Error(std::string("internal: ") + std::to_string(dev->bindings()) +
                        " device bindings outlived their call (before kernel " + name + ")");
        }
        int rc;
        try {
            rc = call();
            if (rc == 0 && fault_now(Fault::Kernel)) rc = injected("a kernel", halide_error_code_generic_error);
            if (rc == 0 && dev->profile_sync()) dev->sync_bound();
        } catch (...) {
            dev->abandon_bound();
            throw;
        }
        dev->release_bound();
        auto &k = prof[name];
        k.seconds += std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
        k.calls++;
        check_kernel(rc, name);
    }

    // One inference pass of a stack's layers over time-major activations
    // (row m = t·R + r): T new positions of R rows from position `start`.
    // self_kv(l): layer l's self-attention K|V cache (2D, cache_rows, ≥
    // start+T), time-major (cache_rows 0: R); the R rows write their new
    // positions at cache rows 0..R-1. kv_len: valid keys per row;
    // cross_kv(l)/cross_len/S: the encoder's K|V, or no cross_kv.
    // rows: where the rows' keys and values are (RowMap). With its paged
    // cache (block tables), self_kv and cross_kv are the same cache, `start`
    // is the position of the chunk's first query (T > 1: every row's; T = 1:
    // the furthest row's, each row's keys ending at its kv_len), and
    // cross_group: rows per source (beam search: the beams of a source are
    // consecutive rows and read its K|V as that many queries of one
    // sequence; T must then be 1), cross_len one entry per source.
    struct StackPass {
        int T = 0, R = 0, start = 0;
        std::function<float *(size_t)> self_kv;
        const int32_t *kv_len = nullptr;
        std::function<const float *(size_t)> cross_kv;
        const int32_t *cross_len = nullptr;
        int S = 0, cross_group = 1;
        RowMap rows;
        const float *pos_bias = nullptr;  // T5: stack_bias()
    };
    // The stream is in x on entry and on return (x_alt: the spare it moves
    // through).
    void stack(const StackW &s, bool causal, float *&x, float *&x_alt, const StackPass &pass);
    // T5: the stack's relative-position bias table (layers::position_bias)
    // in pos_bias; null for other families.
    const float *stack_bias(const StackW &s, bool causal);
    // Runs a stack; result in x0 (returns the pointer).
    float *encoder(const std::vector<Sequence> &src, int S, std::vector<int32_t> &lens);
    void final_norm(const NormW &n, float *x, int M);
    // (decoding: the head's bias with the ids generation must never pick at
    // -1e30: Config::banned_ids.)
    void project(const float *x, int M, int row_stride, float *out, bool log_softmax, bool decoding = false);

    void check_tokens(const std::vector<Sequence> &seqs, int vocab, const char *what,
                      int extra_positions) const;
    // Generation over a prefix (decode.cpp: decoding/scheduler.h over this
    // session's kernels; the policies in decoding/), to the end, or a turn
    // at a time: start_decode() allocates, each step() runs a turn (false
    // once every input is done), results() then.
    struct Decoding {
        virtual ~Decoding() = default;
        virtual bool step() = 0;
        virtual std::vector<std::vector<Hypothesis>> results() = 0;
    };
    std::unique_ptr<Decoding> start_decode(const std::vector<Sequence> &inputs, const GenerateOptions &opt);
    // inputs: sources (encoder-decoder: the decoder starts from bos and
    // opt.target_prefix) or prompts; opt.max_new_tokens_each has one limit
    // per input.
    std::vector<std::vector<Hypothesis>> decode(const std::vector<Sequence> &inputs, const GenerateOptions &opt);
};

// A Model: its weights and its first session (the one a Trainer runs on).
struct Model::Impl {
    std::shared_ptr<ModelWeights> w;
    std::unique_ptr<Session> first;
};

// A Model's sessions: the first and those spawned when calls overlap, up to
// max_sessions; and what returned calls leave behind.
struct Model::Pool {
    std::mutex mu;
    std::condition_variable freed;
    Session *primary = nullptr;
    std::vector<Session *> idle;
    std::vector<std::unique_ptr<Session>> spawned;
    int sessions = 1, max_sessions = 1, busy = 0;
    Profile prof;
    std::vector<double> step_seconds;
    std::vector<int> step_rows;

    explicit Pool(Session &first);
    Session &acquire();
    // Folds the session's profile (and with steps, its step times) into
    // the pool's and makes it idle.
    void release(Session &s, bool steps);
    // Throws Error naming `what` if a call is running.
    void require_idle(const char *what);
};

// One call's session: taken from the pool, given back when it ends.
class Lease {
public:
    Lease(Model::Pool &pool, bool steps = false) : pool_(pool), s_(pool.acquire()), steps_(steps) {}
    ~Lease() { pool_.release(s_, steps_); }
    Lease(const Lease &) = delete;
    Lease &operator=(const Lease &) = delete;
    Session &operator*() { return s_; }

private:
    Model::Pool &pool_;
    Session &s_;
    bool steps_;
};

}  // namespace halformer
