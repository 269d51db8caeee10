// Internal: the memory the runtime hands its kernels. View (a
// halide_buffer_t over runtime-owned memory, bound to the device for one
// call), Scratch (grow-only buffers, shadowed on a GPU, charged to a
// MemoryBudget), and which kernel build a device calls (HF_PICK).
#pragma once

#include "device_context.h"
#include "fault.h"
#include "halformer/model.h"

#include <HalideRuntime.h>

#include <algorithm>
#include <atomic>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <memory>
#include <string>

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
    // The buffer as host memory, never bound to a device (a CPU kernel run
    // by a GPU session on data it brought to the host).
    halide_buffer_t *host() {
        buf.dim = dim;
        return &buf;
    }
    halide_buffer_t *get() {
        if (buf.device_interface) return &buf;
        buf.dim = dim;
        if (t_device && t_device->on_gpu()) t_device->bind(&buf, per_call_ || buf.type.code == halide_type_int);
        return &buf;
    }
    // Positions [begin, begin + extent) of dimension d, numbered from 0
    // (a chunk of queries, a prefix of keys).
    View slice(int d, int begin, int extent) const {
        View v = *this;
        v.buf.host += (ptrdiff_t)begin * dim[d].stride * buf.type.bytes();
        v.dim[d].extent = extent;
        return v;
    }
    // A float array of this call's own (not a weight): on a GPU bound by
    // its bytes, as int arrays are. A weight is uploaded once per address
    // and size; an array refilled at the same address each step would keep
    // its first step's values.
    View &per_call() {
        per_call_ = true;
        return *this;
    }

private:
    bool per_call_ = false;
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

// a·b·… in 64 bits; Error naming `what` on overflow.
inline int64_t checked_product(std::initializer_list<int64_t> xs, const char *what) {
    int64_t r = 1;
    for (int64_t x : xs) {
        if (x < 0 || __builtin_mul_overflow(r, x, &r)) throw Error(std::string(what) + ": sizes overflow 64 bits");
    }
    return r;
}

}  // namespace halformer
