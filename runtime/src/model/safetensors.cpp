#include "halformer/safetensors.h"
#include "halformer/error.h"
#include "halformer/json.h"

#include <algorithm>
#include <functional>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <map>
#include <fstream>

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

namespace halformer {
namespace {

// The bytes of one element: F32, F16 and BF16, and the dtypes a file may
// hold in tensors nobody reads (Hugging Face files keep I64 position ids
// and BOOL masks beside the weights); 0: not a safetensors dtype.
size_t element_size(const std::string &d) {
    static const std::map<std::string, size_t> sizes{
        {"F32", 4}, {"F16", 2}, {"BF16", 2}, {"F64", 8}, {"I64", 8}, {"U64", 8}, {"I32", 4}, {"U32", 4},
        {"I16", 2}, {"U16", 2}, {"I8", 1},   {"U8", 1},  {"BOOL", 1}, {"F8_E4M3", 1}, {"F8_E5M2", 1}};
    auto it = sizes.find(d);
    return it == sizes.end() ? 0 : it->second;
}

float half_to_float(uint16_t h) {
    uint32_t sign = uint32_t(h & 0x8000) << 16;
    uint32_t exp = (h >> 10) & 0x1F;
    uint32_t man = h & 0x3FF;
    uint32_t bits;
    if (exp == 0) {
        if (man == 0) {
            bits = sign;
        } else {  // subnormal: renormalise
            int e = -1;
            do {
                e++;
                man <<= 1;
            } while (!(man & 0x400));
            bits = sign | uint32_t(127 - 15 - e) << 23 | (man & 0x3FF) << 13;
        }
    } else if (exp == 31) {
        bits = sign | 0x7F800000u | man << 13;
    } else {
        bits = sign | (exp - 15 + 127) << 23 | man << 13;
    }
    float f;
    std::memcpy(&f, &bits, 4);
    return f;
}

float bf16_to_float(uint16_t h) {
    uint32_t bits = uint32_t(h) << 16;
    float f;
    std::memcpy(&f, &bits, 4);
    return f;
}

bool as_size(const json::Value &v, uint64_t &out) {
    if (!v.is_number() || v.number < 0 || v.number > 9.0e15 || std::floor(v.number) != v.number) {
        return false;
    }
    out = (uint64_t)v.number;
    return true;
}

}  // namespace

const char *dtype_name(DType t) {
    switch (t) {
    case DType::F32: return "F32";
    case DType::F16: return "F16";
    case DType::BF16: return "BF16";
    case DType::Other: return "other";
    }
    return "?";
}

int64_t TensorInfo::numel() const {
    int64_t n = 1;
    for (auto d : shape) n *= d;
    return n;
}

std::string shape_string(const std::vector<int64_t> &shape) {
    std::string s = "[";
    for (size_t i = 0; i < shape.size(); i++) s += (i ? ", " : "") + std::to_string(shape[i]);
    return s + "]";
}

namespace {

[[noreturn]] void file_error(const std::string &path, const std::string &msg) { throw Error(path + ": " + msg); }

// The whole file into 64-byte-aligned memory, not mapped: a model file that
// is truncated or rewritten after loading cannot take a running model down
// (a mapped page past a truncated end raises SIGBUS).
void read_whole(const std::string &path, int fd, size_t size, uint8_t *buf) {
    size_t got = 0;
    while (got < size) {
        const ssize_t r = ::pread(fd, buf + got, size - got, (off_t)got);
        if (r < 0 && errno == EINTR) continue;
        if (r < 0) file_error(path, std::string("cannot read: ") + std::strerror(errno));
        if (r == 0) {
            file_error(path, "truncated while being read: " + std::to_string(got) + " of " + std::to_string(size) +
                                 " bytes");
        }
        got += (size_t)r;
    }
}

DType parse_dtype(const std::string &d, bool any_dtype, const std::function<void(const std::string &)> &bad) {
    if (d == "F32") return DType::F32;
    if (d == "F16") return DType::F16;
    if (d == "BF16") return DType::BF16;
    const bool is_known = element_size(d) != 0;
    if (!is_known || !any_dtype) {
        bad(std::string(is_known ? "dtype " : "unknown dtype ") + d + " is not supported (F32, F16 and BF16 are)");
    }
    return DType::Other;
}

// One header entry: dtype, shape and data offsets inside the data section.
TensorInfo parse_entry(const std::string &path, const std::string &name, const json::Value &e, size_t data_size,
                       bool any_dtype) {
    auto bad = [&](const std::string &msg) { file_error(path, "tensor '" + name + "': " + msg); };
    if (!e.is_object()) bad("entry is not a JSON object");
    const json::Value *dt = e.find("dtype"), *sh = e.find("shape"), *off = e.find("data_offsets");
    if (!dt || !dt->is_string()) bad("missing \"dtype\" string");
    if (!sh || !sh->is_array()) bad("missing \"shape\" array");
    if (!off || !off->is_array() || off->array.size() != 2) bad("missing \"data_offsets\" [begin, end]");
    TensorInfo t;
    t.name = name;
    t.dtype = parse_dtype(dt->string, any_dtype, bad);
    t.dtype_text = dt->string;
    uint64_t numel = 1;
    for (auto &x : sh->array) {
        uint64_t v;
        if (!as_size(x, v)) bad("shape entries must be non-negative integers");
        if (v != 0 && numel > (uint64_t(1) << 40) / v) bad("shape is too large");
        numel *= v;
        t.shape.push_back((int64_t)v);
    }
    uint64_t b, en;
    if (!as_size(off->array[0], b) || !as_size(off->array[1], en) || b > en) {
        bad("data_offsets must be integers with begin <= end");
    }
    if (en > data_size) {
        bad("data_offsets [" + std::to_string(b) + ", " + std::to_string(en) + "] go past the end of the data (" +
            std::to_string(data_size) + " bytes; is the file truncated?)");
    }
    const size_t esize = element_size(dt->string);
    if (en - b != numel * esize) {
        bad("data_offsets hold " + std::to_string(en - b) + " bytes but shape " + shape_string(t.shape) + " of " +
            dt->string + " needs " + std::to_string(numel * esize));
    }
    t.begin = (size_t)b;
    t.end = (size_t)en;
    return t;
}

void check_overlaps(const std::string &path, const std::vector<TensorInfo> &tensors) {
    std::vector<const TensorInfo *> by_offset;
    for (auto &t : tensors) {
        if (t.end > t.begin) by_offset.push_back(&t);
    }
    std::sort(by_offset.begin(), by_offset.end(),
              [](const TensorInfo *a, const TensorInfo *b) { return a->begin < b->begin; });
    for (size_t k = 1; k < by_offset.size(); k++) {
        if (by_offset[k]->begin < by_offset[k - 1]->end) {
            file_error(path, "tensors '" + by_offset[k - 1]->name + "' and '" + by_offset[k]->name +
                                 "' overlap in the data section");
        }
    }
}

}  // namespace

SafeTensors::SafeTensors(const std::string &path, bool any_dtype) : path_(path) {
    fd_ = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
    if (fd_ < 0) file_error(path_, std::string("cannot open: ") + std::strerror(errno));
    struct stat st;
    if (fstat(fd_, &st) != 0 || !S_ISREG(st.st_mode)) {
        ::close(fd_);
        fd_ = -1;
        file_error(path_, "not a regular file");
    }
    size_ = (size_t)st.st_size;
    try {
        if (size_ < 8) file_error(path_, "truncated: " + std::to_string(size_) + " bytes, shorter than the 8-byte header length");
        uint8_t *buf = (uint8_t *)std::aligned_alloc(64, (size_ + 63) / 64 * 64);
        if (!buf) file_error(path_, "cannot allocate " + std::to_string(size_) + " bytes to read it");
        map_ = buf;
        read_whole(path_, fd_, size_, buf);
        ::close(fd_);
        fd_ = -1;
        uint64_t n = 0;
        for (int k = 7; k >= 0; k--) n = n << 8 | map_[k];
        if (n > size_ - 8) {
            file_error(path_, "truncated: the header length says " + std::to_string(n) + " bytes of JSON but only " +
                                  std::to_string(size_ - 8) + " follow");
        }
        if (n > (100u << 20)) file_error(path_, "header of " + std::to_string(n) + " bytes is larger than 100 MiB");
        json::Value root = json::parse(std::string((const char *)map_ + 8, (size_t)n), path_ + " header");
        if (!root.is_object()) file_error(path_, "header is not a JSON object");
        data_ = map_ + 8 + n;
        for (auto &[name, entry] : root.object) {
            if (name == "__metadata__") continue;
            tensors_.push_back(parse_entry(path_, name, entry, size_ - 8 - n, any_dtype));
            index_[name] = tensors_.size() - 1;
        }
        check_overlaps(path_, tensors_);
    } catch (...) {
        std::free((void *)map_);
        if (fd_ >= 0) ::close(fd_);
        map_ = nullptr;
        fd_ = -1;
        throw;
    }
}

SafeTensors::~SafeTensors() {
    std::free((void *)map_);
    if (fd_ >= 0) ::close(fd_);
}

const TensorInfo *SafeTensors::find(const std::string &name) const {
    auto it = index_.find(name);
    return it == index_.end() ? nullptr : &tensors_[it->second];
}

const float *SafeTensors::f32(const TensorInfo &t) {
    if (t.dtype == DType::Other) {
        file_error(path_, "tensor '" + t.name + "': dtype " + t.dtype_text + " is not supported (F32, F16 and BF16 are)");
    }
    const uint8_t *src = data_ + t.begin;
    if (t.dtype == DType::F32 && (uintptr_t)src % alignof(float) == 0) return (const float *)src;
    auto &slot = converted_[t.name];
    if (slot) return slot.get();
    const size_t n = (size_t)t.numel();
    slot.reset(new float[n ? n : 1]);
    float *dst = slot.get();
    if (t.dtype == DType::F32) {
        std::memcpy(dst, src, n * 4);
    } else {
        for (size_t k = 0; k < n; k++) {
            uint16_t h = uint16_t(src[2 * k] | src[2 * k + 1] << 8);
            dst[k] = t.dtype == DType::F16 ? half_to_float(h) : bf16_to_float(h);
        }
    }
    return dst;
}

uint16_t float_to_half(float f) {
    uint32_t x;
    std::memcpy(&x, &f, 4);
    const uint32_t sign = (x >> 16) & 0x8000u;
    uint32_t mag = x & 0x7fffffffu;
    if (mag >= 0x7f800000u) return uint16_t(sign | 0x7c00u | (mag > 0x7f800000u ? 0x200u : 0));  // inf, NaN
    if (mag >= 0x477ff000u) return uint16_t(sign | 0x7c00u);  // rounds past 65504: inf
    if (mag < 0x38800000u) {
        // Subnormal half (or zero): shift the 24-bit significand, rounding to nearest even.
        if (mag < 0x33000000u) return uint16_t(sign);
        const uint32_t e = mag >> 23, m = (mag & 0x7fffffu) | 0x800000u;
        const uint32_t shift = 126 - e;  // 14..24
        uint32_t h = m >> shift;
        const uint32_t rem = m & ((1u << shift) - 1), half = 1u << (shift - 1);
        if (rem > half || (rem == half && (h & 1))) h++;
        return uint16_t(sign | h);
    }
    // Normal: rebias the exponent, round the 13 dropped bits to nearest even.
    uint32_t h = ((mag - 0x38000000u) >> 13);
    const uint32_t rem = mag & 0x1fffu;
    if (rem > 0x1000u || (rem == 0x1000u && (h & 1))) h++;
    return uint16_t(sign | h);
}

void write_safetensors(const std::string &path, const std::vector<TensorRef> &tensors, DType dtype) {
    if (dtype == DType::BF16) throw Error(path + ": writing BF16 is not supported");
    const int64_t esize = dtype == DType::F16 ? 2 : 4;
    const char *dname = dtype == DType::F16 ? "F16" : "F32";
    std::string header = "{";
    size_t offset = 0;
    for (size_t k = 0; k < tensors.size(); k++) {
        const auto &t = tensors[k];
        int64_t n = 1;
        for (auto d : t.shape) n *= d;
        std::string shape;
        for (size_t i = 0; i < t.shape.size(); i++) shape += (i ? "," : "") + std::to_string(t.shape[i]);
        header += (k ? "," : "") + json::quote(t.name) + ":{\"dtype\":\"" + dname + "\",\"shape\":[" + shape +
                  "],\"data_offsets\":[" + std::to_string(offset) + "," +
                  std::to_string(offset + n * esize) + "]}";
        offset += n * esize;
    }
    header += "}";
    while (header.size() % 8) header += ' ';
    std::ofstream out(path, std::ios::binary | std::ios::trunc);
    if (!out) throw Error(path + ": cannot write");
    uint64_t len = header.size();
    for (int k = 0; k < 8; k++) out.put(char(len >> (8 * k)));
    out.write(header.data(), header.size());
    for (const auto &t : tensors) {
        int64_t n = 1;
        for (auto d : t.shape) n *= d;
        if (dtype == DType::F16) {
            std::vector<uint16_t> h((size_t)n);
            for (int64_t i = 0; i < n; i++) h[(size_t)i] = float_to_half(t.data[i]);
            out.write((const char *)h.data(), n * 2);
        } else {
            out.write((const char *)t.data, n * 4);
        }
    }
    if (!out) throw Error(path + ": write failed");
}

}  // namespace halformer
