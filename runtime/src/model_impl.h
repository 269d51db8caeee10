// Internal: the model's weights as kernel-ready pointers, its buffers, and
// the helpers that call kernels. Not installed.
#pragma once

#include "device_context.h"
#include "fault.h"
#include "halformer/model.h"
#include "halformer/safetensors.h"

#include <HalideRuntime.h>

#include <chrono>
#include <array>
#include <atomic>
#include <condition_variable>
#include <cstdio>
#include <cstdint>
#include <cstdlib>
#include <functional>
#include <map>
#include <mutex>

// The kernel to call on the model's device: hf_x, hf_x_cuda or hf_x_opencl.
// HF_DEVICE_KERNELS(hf_x) declares the GPU builds (same signature).
#ifdef HALFORMER_HAS_GPU
#define HF_DEVICE_KERNELS(base) extern "C" decltype(base) base##_opencl, base##_cuda;
#define HF_PICK(dev, base) \
    ((dev) == ::halformer::Device::CUDA ? base##_cuda : (dev) == ::halformer::Device::OpenCL ? base##_opencl : base)
#else
#define HF_DEVICE_KERNELS(base)
#define HF_PICK(dev, base) base
#endif

namespace halformer {

// The device context of the Model being run on this thread (set by
// DeviceScope in each public entry point); null or CPU: views stay on the host.
extern thread_local DeviceContext *t_device;
struct DeviceScope {
    DeviceContext *saved;
    explicit DeviceScope(DeviceContext *d) : saved(t_device) { t_device = d; }
    ~DeviceScope() { t_device = saved; }
};

// A float32 (or int32) halide_buffer_t over memory the runtime owns, with
// explicit (extent, stride) per dimension, innermost first.
struct View {
    halide_buffer_t buf{};
    halide_dimension_t dim[5]{};
    View(const void *data, std::initializer_list<std::pair<int, int>> dims, bool int32 = false)
        : View(data, dims, int32 ? halide_type_t(halide_type_int, 32) : halide_type_t(halide_type_float, 32)) {}
    View(const void *data, std::initializer_list<std::pair<int, int>> dims, halide_type_t type) {
        buf.host = (uint8_t *)data;
        buf.type = type;
        int k = 0;
        for (auto &d : dims) dim[k++] = halide_dimension_t(0, d.first, d.second);
        buf.dimensions = k;
    }
    // The buffer to pass to a kernel: on a GPU, bound to the device memory
    // behind its host address until the kernel call returns (Impl::run).
    // A view passed twice to one kernel (an in-place output) is bound once.
    halide_buffer_t *get() {
        if (buf.device_interface) return &buf;
        buf.dim = dim;
        if (t_device && t_device->on_gpu()) t_device->bind(&buf, buf.type.code == halide_type_int);
        return &buf;
    }
};

// The bytes a Model's sessions may hold in activations and caches
// (Model::set_memory_budget), shared by its sessions: a Scratch takes its
// growth from it before allocating, and gives it back when freed.
struct MemoryBudget {
    std::atomic<int64_t> used{0};
    std::atomic<int64_t> limit{INT64_MAX};
    // Throws Error (nothing allocated) when `bytes` more do not fit.
    void take(int64_t bytes) {
        const int64_t now = used.fetch_add(bytes) + bytes;
        if (now > limit.load()) {
            used.fetch_sub(bytes);
            throw Error("memory budget: " + mib(bytes) + " more activations and caches do not fit (" + mib(now - bytes) +
                        " held by this model's calls, budget " + mib(limit.load()) +
                        "; a smaller batch, shorter inputs or --max-memory)");
        }
    }
    void give(int64_t bytes) { used.fetch_sub(bytes); }
    static std::string mib(int64_t bytes) {
        char b[48];
        std::snprintf(b, sizeof b, "%.1f MiB", (double)bytes / (1 << 20));
        return b;
    }
};

// Grow-only 64-byte-aligned scratch: allocated once per shape, reused. With
// a device context on a GPU, the host memory is shadowed by device memory of
// the same size (its contents live there; the host copy is filled only by
// DeviceContext::to_host). With a budget, its bytes count against it.
class Scratch {
public:
    Scratch() = default;
    Scratch(Scratch &&o) noexcept : dev(o.dev), budget(o.budget), ptr_(std::move(o.ptr_)), cap_(o.cap_) { o.cap_ = 0; }
    Scratch &operator=(Scratch &&o) noexcept {
        if (this != &o) {
            release();
            dev = o.dev;
            budget = o.budget;
            ptr_ = std::move(o.ptr_);
            cap_ = o.cap_;
            o.cap_ = 0;
        }
        return *this;
    }
    ~Scratch() { release(); }
    DeviceContext *dev = nullptr;
    MemoryBudget *budget = nullptr;
    // A buffer of at least n floats. If it must grow and cannot (no memory,
    // past the budget, past size_t), throws Error and keeps the buffer it
    // had (and its device shadow).
    float *need(size_t n) {
        if (n > cap_) {
            void *p = nullptr;
            const bool inject = fault_now(Fault::HostAlloc);
            const size_t floats = std::max<size_t>(n, 16);
            if (inject || n > (size_t)(INT64_MAX / (int64_t)sizeof(float)) - 16) {
                throw Error(std::string(inject ? "injected failure: " : "") + "out of memory allocating " +
                            std::to_string(n) + " floats");
            }
            const int64_t grow = (int64_t)(floats * sizeof(float) - bytes());  // the old one is freed below
            if (budget) budget->take(grow);
            if (posix_memalign(&p, 64, floats * sizeof(float)) != 0) {
                if (budget) budget->give(grow);
                throw Error("out of memory allocating " + MemoryBudget::mib((int64_t)(floats * sizeof(float))));
            }
            std::unique_ptr<float, Free> fresh((float *)p);
            try {
                if (dev) dev->track(p, floats * sizeof(float));
            } catch (...) {
                if (budget) budget->give(grow);
                throw;
            }
            if (dev && ptr_) dev->untrack(ptr_.get());
            ptr_ = std::move(fresh);
            cap_ = n;
        }
        return ptr_.get();
    }
    float *get() const { return ptr_.get(); }
    size_t capacity() const { return cap_; }
    // Bytes allocated (what the budget is charged).
    size_t bytes() const { return ptr_ ? std::max<size_t>(cap_, 16) * sizeof(float) : 0; }
    // Frees the buffer (the next need() allocates again); returns its bytes.
    size_t release() {
        if (!ptr_) return 0;
        const size_t bytes = this->bytes();
        if (dev) dev->untrack(ptr_.get());
        if (budget) budget->give((int64_t)bytes);
        ptr_.reset();
        cap_ = 0;
        return bytes;
    }

private:
    struct Free {
        void operator()(float *p) const { std::free(p); }
    };
    std::unique_ptr<float, Free> ptr_;
    size_t cap_ = 0;
};

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
    NormW self_norm, cross_norm, ffn_norm;
};
struct StackW {
    std::vector<LayerW> layers;
    NormW final_norm;
    const float *embed = nullptr, *pos = nullptr;
    int vocab = 0;
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
};

// a·b·… in 64 bits; Error naming `what` on overflow.
inline int64_t checked_product(std::initializer_list<int64_t> xs, const char *what) {
    int64_t r = 1;
    for (int64_t x : xs) {
        if (x < 0 || __builtin_mul_overflow(r, x, &r)) throw Error(std::string(what) + ": sizes overflow 64 bits");
    }
    return r;
}

// Where a decoder layer's rows find their keys and values (Impl::layer).
// cache_rows: rows of the self-attention cache (0: the batch's rows).
// kv_rows (T = 1, causal): row kv_rows[r·kv_rows_stride + t] of the cache
// holds position t of row r, else row r. cross_rows (with cross_group):
// source g of the call is source cross_rows[g·S] of the encoder K|V, which
// holds cross_sources of them (the sources still in the batch).
struct RowMap {
    int cache_rows = 0;
    const int32_t *kv_rows = nullptr;
    int kv_rows_stride = 0;
    const int32_t *cross_rows = nullptr;
    int cross_sources = 0;
};

// A Model's state is split in two. Shared by every session, read-only while
// calls run: cfg, tok, source (owns the weights), enc/dec/gen_* (pointers
// into it), params, precision and packs. Per session: everything else (the
// device context, scratch, caches, profile, step times). The Model's first
// Impl owns what is shared; spawn() makes another session over it.
struct Model::Impl {
    Config cfg;
    std::shared_ptr<Tokenizer> tok;  // when cfg.tokenizer names one
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
    std::shared_ptr<MemoryBudget> budget = std::make_shared<MemoryBudget>();
    // Points this session's scratches at its device context and budget.
    void wire();
    // Before a call allocates: its activations and caches, `floats` in all
    // (an estimate from its shapes), must fit in the budget beside what the
    // other sessions hold; else Error naming the sizes and `what`.
    void require_fits(int64_t floats, const std::string &what);
    std::shared_ptr<TensorSource> source;
    // A new session over this one's weights (CPU): fresh buffers, the same
    // shared state.
    std::unique_ptr<Impl> spawn() const;
    // Frees the activations and caches; returns the bytes freed.
    size_t release_buffers();
    StackW enc, dec;
    const float *gen_w = nullptr, *gen_b = nullptr;
    int gen_rows = 0;
    bool tied = false;
    int64_t params = 0;
    Scratch zero_bias;
    Precision precision = Precision::FP32;
    // Packed copies of the projections' weights, by (W's address, rows).
    std::shared_ptr<PackCache> packs = std::make_shared<PackCache>();
    const PackedLinear &pack(const float *w, int N, int K);
    // Packs every projection the forward passes use (set_precision).
    void prepack();
    // Y[M, N] (row stride y_stride) = act(X·Wᵀ + b) [+ residual] in the
    // reduced precision: X [M, K] with row stride x_stride, W [N, K] (packed
    // on first use), residual with y's strides. act: null for none.
    void linear_lowp(const char *name, const float *x, int M, int x_stride, const float *w, int N, int K,
                     const float *bias, const Act *act, const float *residual, float *y, int y_stride);
    bool lowp() const { return precision != Precision::FP32; }
    Profile prof;
    std::vector<double> step_seconds;
    std::vector<int> step_rows;  // rows of the batch at each step of the last decode

    // Activations and caches (grow-only).
    // On a GPU each is shadowed on the device, where its contents live:
    // kernels write them, DeviceContext::to_host reads them back. Data the
    // host writes for a kernel (token ids, lengths) goes in plain vectors.
    Scratch x0, x1, h, q, a, y, ffn_hidden, head_tmp, kv_tmp, enc_out, logits, topv, topi;
    std::vector<Scratch> self_kv, cross_kv;
    // Every scratch above but the per-layer caches.
    std::array<Scratch *, 13> activations() {
        return {&x0, &x1, &h, &q, &a, &y, &ffn_hidden, &head_tmp, &kv_tmp, &enc_out, &logits, &topv, &topi};
    }
    // f(Scratch &) for each activation and each layer's caches.
    template <typename F>
    void each_scratch(F &&f) {
        for (Scratch *s : activations()) f(*s);
        for (auto *v : {&self_kv, &cross_kv}) {
            for (Scratch &s : *v) f(s);
        }
    }

    void bind();  // resolves every tensor of cfg from `source`, validating shapes

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

    // Stack forward passes over time-major activations (row m = t·R + r).
    // One layer over T new positions of R rows, starting at position `start`.
    // kv: this layer's self-attention K|V cache (2D, cache_rows, ≥ start+T),
    // time-major (cache_rows 0: R); the R rows write their new positions at
    // cache rows 0..R-1. kv_len: valid keys per row; cross_mem/cross_len/S:
    // the encoder's K|V or null.
    // kv_rows (T = 1, causal): row kv_rows[r·kv_rows_stride + t] of the
    // cache holds position t of row r (beam search, or rows that moved when
    // finished inputs left the batch), else row r.
    // cross_group: rows per source in cross_mem (beam search: the beams of a
    // source are consecutive rows and read one copy of its K|V, as that many
    // queries of one sequence); cross_mem then has R / cross_group rows and
    // cross_len one entry per source. T must be 1 when cross_group > 1.
    // rows: where the rows' keys and values are (RowMap).
    void layer(const LayerW &L, bool causal, float *&x, float *&x_alt, int T, int R, int start,
               float *kv, const int32_t *kv_len, const float *cross_mem, const int32_t *cross_len,
               int S, int cross_group = 1, const RowMap &rows = {});
    // Runs a stack; result in x0 (returns the pointer).
    float *encoder(const std::vector<Sequence> &src, int S, std::vector<int32_t> &lens);
    void final_norm(const NormW &n, float *x, int M);
    void project(const float *x, int M, int row_stride, float *out, bool log_softmax);

    void check_tokens(const std::vector<Sequence> &seqs, int vocab, const char *what,
                      int extra_positions) const;
    std::vector<std::vector<Hypothesis>> decode(const std::vector<Sequence> &prefix,
                                                const float *memory, int S,
                                                const std::vector<int32_t> &src_lens,
                                                const GenerateOptions &opt, int max_new);
};

// A Model's sessions: the first (the Model's Impl) and those spawned when
// calls overlap, up to max_sessions; and what returned calls leave behind.
struct Model::Pool {
    std::mutex mu;
    std::condition_variable freed;
    Impl *primary = nullptr;
    std::vector<Impl *> idle;
    std::vector<std::unique_ptr<Impl>> spawned;
    int sessions = 1, max_sessions = 1, busy = 0;
    Profile prof;
    std::vector<double> step_seconds;
    std::vector<int> step_rows;

    explicit Pool(Impl &first);
    Impl &acquire();
    // Folds the session's profile (and with steps, its step times) into
    // the pool's and makes it idle.
    void release(Impl &s, bool steps);
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
    Model::Impl &operator*() { return s_; }

private:
    Model::Pool &pool_;
    Model::Impl &s_;
    bool steps_;
};

}  // namespace halformer
