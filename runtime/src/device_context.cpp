#include "device_context.h"

#include "fault.h"
#include "halformer/error.h"
#include "halformer/kernel_error.h"

#include <algorithm>
#include <cstdlib>
#include <cstring>
#include <string>

namespace halformer {

thread_local DeviceContext *t_device = nullptr;

int opencl_base_alignment();  // device.cpp

namespace {

// A 1-D buffer of 4-byte words over [min, min + bytes) bytes (every tensor
// here is float32 or int32, so offsets and sizes are whole words; words let a
// buffer reach 8 GiB with Halide's 32-bit extents).
constexpr size_t kWord = 4;
constexpr size_t kMaxBytes = size_t(0x7fffffff) * kWord;

halide_buffer_t bytes_buffer(uint8_t *host, halide_dimension_t *dim, int64_t min, size_t bytes) {
    if (bytes > kMaxBytes || (size_t)min > kMaxBytes) {
        throw Error("a device buffer of " + std::to_string(bytes) + " bytes at offset " + std::to_string(min) +
                    " is past Halide's 8 GiB per-buffer limit (use a smaller batch or shorter sequences)");
    }
    halide_buffer_t b{};
    b.host = host;
    b.type = halide_type_t(halide_type_uint, 32);
    b.dimensions = 1;
    *dim = halide_dimension_t((int32_t)(min / (int64_t)kWord), (int32_t)((bytes + kWord - 1) / kWord), 1);
    b.dim = dim;
    return b;
}

// Bytes from the first to one past the last element a view addresses.
size_t span_bytes(const halide_buffer_t &b) {
    size_t hi = 1;
    for (int i = 0; i < b.dimensions; i++) {
        if (b.dim[i].extent > 0) hi += (size_t)(b.dim[i].extent - 1) * (size_t)b.dim[i].stride;
    }
    return hi * b.type.bytes();
}

}  // namespace

DeviceContext::DeviceContext(Device d) : device_(d) {
    if (d == Device::CPU) return;
    require_device(d);
    iface_ = device_interface(d);
    // OpenCL sub-buffers must start at CL_DEVICE_MEM_BASE_ADDR_ALIGN (1024
    // bits on PoCL, 4096 on NVIDIA's): ranges at other offsets go through a
    // copy. CUDA pointers can start anywhere.
    align_ = d == Device::OpenCL ? (size_t)opencl_base_alignment() : 1;
    // Tests force the copy path on every device with a larger alignment.
    if (const char *a = std::getenv("HALFORMER_DEVICE_ALIGN")) align_ = std::max<size_t>(align_, std::atol(a));
    const char *sync = std::getenv("HALFORMER_PROFILE_SYNC");
    profile_sync_ = sync && *sync && std::string(sync) != "0";
    // Buffers a kernel allocates for itself (a pipeline's intermediate
    // stages on the device: argmax's per-row partials, the prefill matmul's
    // transposed operands) come from Halide's pool of freed allocations
    // instead of a cuMemAlloc and a cuMemFree (which waits for the device)
    // every call. Halide keeps at most 32 unused ones, frees them when an
    // allocation fails, and rounds sizes up to their top 4 bits (about 4%
    // more device memory on average); ~DeviceContext gives them back.
    halide_reuse_device_allocations(nullptr, true);
}

DeviceContext::~DeviceContext() {
    release_bound();
    for (auto &kv : roots_) halide_device_free(nullptr, &kv.second->buf);
    for (auto &kv : weights_) halide_device_free(nullptr, &kv.second->buf);
    for (auto &kv : ints_) halide_device_free(nullptr, &kv.second->buf);
    // With reuse on, the frees above went to Halide's pool: give the memory
    // back to the device (another model, or another library, may want it).
    // Turning reuse off releases the pool; other contexts turn it on again.
    if (on_gpu()) {
        halide_reuse_device_allocations(nullptr, false);
        halide_reuse_device_allocations(nullptr, true);
    }
}

// The device copy of the int array at [host, host + span): one holding the
// same bytes if there is one, else a new one, uploaded. At most
// kMaxIntCopies are kept (the least recently bound, or one a kernel wrote,
// is freed first).
DeviceContext::IntCopy &DeviceContext::int_copy(const uint8_t *host, size_t span) {
    constexpr size_t kMaxIntCopies = 256;
    uint64_t hash = 1469598103934665603ULL;  // FNV-1a
    for (size_t i = 0; i < span; i++) hash = (hash ^ host[i]) * 1099511628211ULL;
    const auto key = std::make_pair(span, hash);
    for (auto [it, end] = ints_.equal_range(key); it != end; ++it) {
        IntCopy &c = *it->second;
        // (A copy bound to this call already is not shared: the kernel may
        // write one of the two.)
        if (!c.stale && !c.bound && std::memcmp(c.shadow.data(), host, span) == 0) {
            c.used = ++int_tick_;
            int_reuses_++;
            return c;
        }
    }
    if (ints_.size() >= kMaxIntCopies) {
        auto old = std::min_element(ints_.begin(), ints_.end(), [](auto &a, auto &b) {
            return (a.second->stale ? 0 : a.second->used) < (b.second->stale ? 0 : b.second->used);
        });
        halide_device_free(nullptr, &old->second->buf);
        ints_.erase(old);
    }
    auto c = std::make_unique<IntCopy>();
    c->bytes = span;
    c->buf = bytes_buffer(nullptr, &c->dim, 0, span);
    check(halide_device_malloc(nullptr, &c->buf, iface_), "allocating a device copy of a small array (token ids, lengths, factors)");
    c->buf.host = const_cast<uint8_t *>(host);
    c->buf.flags = halide_buffer_flag_host_dirty;
    const int rc = halide_copy_to_device(nullptr, &c->buf, iface_);
    c->buf.host = nullptr;
    c->buf.flags = 0;
    if (rc) {
        halide_device_free(nullptr, &c->buf);
        check(rc, "copying a small array (token ids, lengths, factors) to the device");
    }
    c->shadow.assign(host, host + span);
    c->used = ++int_tick_;
    int_uploads_++;
    return *ints_.emplace(key, std::move(c))->second;
}

void DeviceContext::check(int rc, const char *what) const {
    if (rc == 0) return;
    std::string msg = std::string(device_name(device_)) + ": " + what + " failed (code " + std::to_string(rc) + ")";
    std::string detail = take_kernel_error();
    if (!detail.empty()) msg += ": " + detail;
    if (rc == halide_error_code_out_of_memory || detail.find("OUT_OF_MEMORY") != std::string::npos ||
        detail.find("MEM_OBJECT_ALLOCATION_FAILURE") != std::string::npos ||
        detail.find("INVALID_BUFFER_SIZE") != std::string::npos) {
        msg += " (out of device memory)";
    }
    throw KernelError(msg, rc);
}

size_t DeviceContext::weight_bytes() const {
    size_t n = 0;
    for (auto &kv : weights_) n += kv.second->bytes;
    return n;
}

size_t DeviceContext::activation_bytes() const {
    size_t n = 0;
    for (auto &kv : roots_) n += kv.second->bytes;
    return n;
}

void DeviceContext::track(const void *host, size_t bytes) {
    if (!on_gpu()) return;
    auto r = std::make_unique<Root>();
    r->bytes = bytes;
    r->buf = bytes_buffer((uint8_t *)host, &r->dim, 0, bytes);
    check(fault_now(Fault::DeviceAlloc) ? injected("device allocation", halide_error_code_out_of_memory)
                                        : halide_device_malloc(nullptr, &r->buf, iface_),
          "allocating an activation buffer");
    roots_[(uintptr_t)host] = std::move(r);
}

void DeviceContext::untrack(const void *host) {
    auto it = roots_.find((uintptr_t)host);
    if (it == roots_.end()) return;
    halide_device_free(nullptr, &it->second->buf);
    roots_.erase(it);
}

DeviceContext::Root *DeviceContext::find(const void *p, size_t bytes, size_t *offset) {
    auto it = roots_.upper_bound((uintptr_t)p);
    if (it == roots_.begin()) return nullptr;
    --it;
    const uintptr_t begin = it->first;
    if ((uintptr_t)p + bytes > begin + it->second->bytes) return nullptr;
    *offset = (uintptr_t)p - begin;
    return it->second.get();
}

void DeviceContext::crop(const Root &r, size_t offset, size_t bytes, halide_buffer_t *out,
                         halide_dimension_t *dim) {
    *out = bytes_buffer(nullptr, dim, (int64_t)offset, bytes);
    check(halide_device_crop(nullptr, &r.buf, out), "making a device view");
    dim->min = 0;  // the crop's device handle already points at `offset`
}

// An int array not in a tracked range: bound to the device copy holding its
// bytes (int_copy). Both copies are current (neither dirty): the kernel
// reads the device's, and its checks of ids on the host (embedding, gather)
// read the host's. An empty view gets none (the kernel touches nothing).
void DeviceContext::bind_int(Bound &b, halide_buffer_t *buf, size_t span) {
    b.kind = Bound::Int;
    buf->flags = 0;
    bool empty = buf->host == nullptr;
    for (int i = 0; i < buf->dimensions; i++) empty = empty || buf->dim[i].extent <= 0;
    if (empty) return;
    b.ints = &int_copy(buf->host, span);
    b.ints->bound = true;
    b.span = span;
    crop(*b.ints, 0, span, &b.crop, &b.dim);
    buf->device = b.crop.device;
    buf->device_interface = iface_;
}

void DeviceContext::bind(halide_buffer_t *buf, bool by_bytes) {
    if (!on_gpu()) return;
    if (fault_now(Fault::Bind)) {
        throw Error(std::string(device_name(device_)) + ": injected failure binding a kernel argument");
    }
    Bound &b = bound_.emplace_back();
    b.view = buf;
    b.host = buf->host;
    const size_t span = span_bytes(*buf);
    size_t offset = 0;
    if (Root *r = find(buf->host, span, &offset)) {
        b.root = r;
        b.offset = offset;
        b.span = span;
        if (offset % align_ == 0) {
            b.kind = Bound::Crop;
            crop(*r, offset, span, &b.crop, &b.dim);
        } else {
            // A misaligned OpenCL range: run the kernel on a copy of it, and
            // copy the copy back after the call (outputs must land; inputs
            // come back unchanged).
            b.kind = Bound::Temp;
            b.crop = bytes_buffer(nullptr, &b.dim, 0, span);
            check(halide_device_malloc(nullptr, &b.crop, iface_), "allocating a device copy");
            halide_buffer_t src{};
            halide_dimension_t sd{};
            crop(*r, offset, span, &src, &sd);
            int rc = halide_buffer_copy(nullptr, &src, iface_, &b.crop);
            halide_device_release_crop(nullptr, &src);
            check(rc, "copying a device range");
        }
        buf->device = b.crop.device;
        buf->device_interface = iface_;
        buf->host = nullptr;
        buf->flags = 0;
    } else if (by_bytes) {
        bind_int(b, buf, span);
    } else {
        // A weight: uploaded on first use, then reused.
        auto key = std::make_pair((uintptr_t)buf->host, span);
        auto it = weights_.find(key);
        if (it == weights_.end()) {
            auto w = std::make_unique<Root>();
            w->bytes = span;
            w->buf = bytes_buffer(buf->host, &w->dim, 0, span);
            check(fault_now(Fault::DeviceAlloc) ? injected("device allocation", halide_error_code_out_of_memory)
                                                : halide_device_malloc(nullptr, &w->buf, iface_),
                  "uploading weights");
            w->buf.flags = halide_buffer_flag_host_dirty;
            int rc = fault_now(Fault::Upload) ? injected("upload", halide_error_code_copy_to_device_failed)
                                              : halide_copy_to_device(nullptr, &w->buf, iface_);
            if (rc) {
                halide_device_free(nullptr, &w->buf);  // the next call uploads it again
                check(rc, "uploading weights");
            }
            it = weights_.emplace(key, std::move(w)).first;
        }
        b.kind = Bound::Crop;
        crop(*it->second, 0, span, &b.crop, &b.dim);
        buf->device = b.crop.device;
        buf->device_interface = iface_;
        buf->host = nullptr;
        buf->flags = 0;
    }
}

void DeviceContext::sync_bound() {
    for (Bound &b : bound_) {
        if (b.view->device) {
            check(halide_device_sync(nullptr, b.view), "waiting for the device");
            return;
        }
    }
}

void DeviceContext::release_bound() { check(unbind(true), "copying back a device range"); }

void DeviceContext::abandon_bound() noexcept { unbind(false); }

int DeviceContext::unbind(bool copy_back) noexcept {
    int rc = 0;
    for (Bound &b : bound_) {
        switch (b.kind) {
        case Bound::Crop:
            if (b.crop.device) halide_device_release_crop(nullptr, &b.crop);
            break;
        case Bound::Temp: {
            if (!b.crop.device) break;
            if (copy_back && !rc) {
                // As crop() does, without throwing (bind checked the range).
                halide_dimension_t dd((int32_t)(b.offset / kWord), (int32_t)((b.span + kWord - 1) / kWord), 1);
                halide_buffer_t dst{};
                dst.type = halide_type_t(halide_type_uint, 32);
                dst.dimensions = 1;
                dst.dim = &dd;
                rc = halide_device_crop(nullptr, &b.root->buf, &dst);
                dd.min = 0;
                if (!rc) {
                    b.crop.flags = halide_buffer_flag_device_dirty;
                    rc = halide_buffer_copy(nullptr, &b.crop, iface_, &dst);
                    halide_device_release_crop(nullptr, &dst);
                }
            }
            halide_device_free(nullptr, &b.crop);
            break;
        }
        case Bound::Int:
            if (b.ints) b.ints->bound = false;
            if (!b.crop.device) break;
            if (b.view->flags & halide_buffer_flag_device_dirty) {
                // The kernel wrote it: the host gets the result, and no
                // later bind takes this copy for its old bytes.
                b.ints->stale = true;
                if (copy_back && !rc) {
                    b.crop.host = b.host;
                    b.crop.flags = halide_buffer_flag_device_dirty;
                    rc = halide_copy_to_host(nullptr, &b.crop);
                    b.crop.host = nullptr;
                }
            }
            halide_device_release_crop(nullptr, &b.crop);
            break;
        }
        b.view->device = 0;
        b.view->device_interface = nullptr;
        b.view->host = b.host;
        b.view->flags = 0;
    }
    bound_.clear();
    return rc;
}

void DeviceContext::transfer(const void *host, size_t bytes, bool to_device) {
    if (!on_gpu() || bytes == 0) return;
    size_t offset = 0;
    Root *r = find(host, bytes, &offset);
    if (!r) throw Error("internal: host/device transfer of an untracked range");
    halide_buffer_t c{};
    halide_dimension_t d{};
    crop(*r, offset, bytes, &c, &d);
    c.host = (uint8_t *)host;
    c.flags = to_device ? halide_buffer_flag_host_dirty : halide_buffer_flag_device_dirty;
    int rc = to_device ? halide_copy_to_device(nullptr, &c, iface_) : halide_copy_to_host(nullptr, &c);
    halide_device_release_crop(nullptr, &c);
    check(rc, to_device ? "copying to the device" : "copying results to the host");
}

void DeviceContext::copy(void *dst, const void *src, size_t bytes) {
    if (bytes == 0) return;
    if (!on_gpu()) {
        std::memcpy(dst, src, bytes);
        return;
    }
    size_t so = 0, dof = 0;
    Root *rs = find(src, bytes, &so), *rd = find(dst, bytes, &dof);
    if (!rs || !rd) throw Error("internal: device copy of an untracked range");
    halide_buffer_t s{}, d{};
    halide_dimension_t sd{}, dd{};
    crop(*rs, so, bytes, &s, &sd);
    crop(*rd, dof, bytes, &d, &dd);
    s.flags = halide_buffer_flag_device_dirty;
    int rc = halide_buffer_copy(nullptr, &s, iface_, &d);
    halide_device_release_crop(nullptr, &s);
    halide_device_release_crop(nullptr, &d);
    check(rc, "copying on the device");
}

}  // namespace halformer
