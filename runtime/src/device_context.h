// Internal: the device memory behind a Model's buffers.
//
// The runtime lays out its activations as host addresses (Scratch buffers)
// and views into them (View). On a GPU those host buffers are only an address
// space: each Scratch is shadowed by one device allocation of the same size,
// and a View of host address p is bound, for one kernel call, to the device
// memory at the same offset. Weights (any other float array) are uploaded on
// their first use and stay on the device. Small int arrays (tokens, lengths,
// positions, block tables) are kept on the device by their contents: an
// array whose bytes equal one uploaded before binds that copy (a decoding
// step binds the same lengths and tables for every layer, from arrays built
// anew: one upload each a step, no device allocation or free per call).
// Nothing is copied
// back to the host unless the runtime asks (to_host): logits, top-k and
// returned hidden states.
#pragma once

#include "halformer/device.h"

#include <HalideRuntime.h>

#include <cstdint>
#include <deque>
#include <map>
#include <memory>
#include <utility>
#include <vector>

namespace halformer {

class DeviceContext {
public:
    explicit DeviceContext(Device d = Device::CPU);
    ~DeviceContext();
    DeviceContext(const DeviceContext &) = delete;
    DeviceContext &operator=(const DeviceContext &) = delete;

    Device device() const { return device_; }
    bool on_gpu() const { return iface_ != nullptr; }

    // A Scratch's host range gets (or loses) its device shadow.
    void track(const void *host, size_t bytes);
    void untrack(const void *host);

    // Binds a kernel argument (buf.host = a host address, dims set) to device
    // memory until release_bound(). by_bytes: a small array of a call's own
    // (token ids, lengths, block tables, a step's penalty factors), bound to
    // a device copy found by its bytes, uploaded when they are new (and
    // copied back if the kernel wrote it). Otherwise a range outside the
    // tracked activations is a weight: uploaded once per address and size.
    void bind(halide_buffer_t *buf, bool by_bytes);
    // After a kernel call: copies back fallback copies, releases crops.
    // Every binding is undone even when a copy fails (then it throws).
    void release_bound();
    // After a call that threw (in bind or in the kernel): undoes every
    // binding without copying anything back; never throws.
    void abandon_bound() noexcept;
    // Bindings not yet released (0 between kernel calls).
    size_t bindings() const { return bound_.size(); }
    // Waits for the kernels launched so far (GPU kernels run asynchronously:
    // without this a kernel's timing is its launch). Call before release_bound.
    void sync_bound();
    // HALFORMER_PROFILE_SYNC=1: the runtime syncs after every kernel so that
    // `halformer demo`/`bench` per-kernel times are real (costs throughput).
    bool profile_sync() const { return profile_sync_; }

    // Device memory held: weights uploaded, activation buffers.
    size_t weight_bytes() const;
    size_t activation_bytes() const;
    // Int arrays uploaded so far (bind's is_int), and the binds that found
    // their device copy current (no upload).
    size_t int_uploads() const { return int_uploads_; }
    size_t int_reuses() const { return int_reuses_; }

    // Device → host shadow (so host code can read it there), and back
    // (tests; the runtime's data reaches the device through kernels).
    void to_host(const void *host, size_t bytes) { transfer(host, bytes, false); }
    void to_device(const void *host, size_t bytes) { transfer(host, bytes, true); }
    // Copies bytes between tracked ranges (memcpy on the CPU).
    void copy(void *dst, const void *src, size_t bytes);

private:
    struct Root {
        size_t bytes;
        halide_buffer_t buf{};
        halide_dimension_t dim{};
    };
    // An int array's device copy and the bytes uploaded to it.
    struct IntCopy : Root {
        std::vector<uint8_t> shadow;
        uint64_t used = 0;   // for evicting the least recently bound
        bool stale = false;  // a kernel wrote it: no longer equals `shadow`
        bool bound = false;  // bound to the call being made (not shared within a call)
    };
    struct Bound {
        halide_buffer_t *view;
        uint8_t *host;
        enum Kind { Crop, Temp, Int } kind = Crop;
        halide_buffer_t crop{};  // Crop, Int: the 1-D crop; Temp: the temp buffer
        halide_dimension_t dim{};
        const Root *root = nullptr;
        IntCopy *ints = nullptr;  // Int
        size_t offset = 0, span = 0;
    };
    IntCopy &int_copy(const uint8_t *host, size_t span);
    void bind_int(Bound &b, halide_buffer_t *buf, size_t span);
    // The tracked root containing [p, p + bytes), and p's byte offset in it.
    Root *find(const void *p, size_t bytes, size_t *offset);
    void crop(const Root &r, size_t offset, size_t bytes, halide_buffer_t *out, halide_dimension_t *dim);
    void check(int rc, const char *what) const;
    void transfer(const void *host, size_t bytes, bool to_device);
    int unbind(bool copy_back) noexcept;  // release_bound / abandon_bound; the first error code

    Device device_;
    const halide_device_interface_t *iface_ = nullptr;
    bool profile_sync_ = false;
    size_t align_ = 1;  // byte alignment a device sub-range must have (OpenCL)
    std::map<uintptr_t, std::unique_ptr<Root>> roots_;
    std::map<std::pair<uintptr_t, size_t>, std::unique_ptr<Root>> weights_;
    std::multimap<std::pair<size_t, uint64_t>, std::unique_ptr<IntCopy>> ints_;  // by (bytes, hash)
    uint64_t int_tick_ = 0;
    size_t int_uploads_ = 0, int_reuses_ = 0;
    std::deque<Bound> bound_;  // a deque: its elements never move (their buffers point into them)
};

}  // namespace halformer
