// GGUF files (halformer/gguf.h): the mapping, the header's validation and
// the metadata's accessors; the tensor types' blocks and dequantization are
// gguf_dequant.cpp's.
#include "halformer/gguf.h"
#include "halformer/error.h"

#include "gguf_internal.h"

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <fstream>
#include <limits>

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

namespace halformer {

using gguf_internal::bits_to_float;
using gguf_internal::dims_string;

namespace {

// ggml's type traits (ggml.c): values per block and bytes per block.
struct GgmlTypeInfo {
    GgmlType type;
    const char *name;
    int64_t block;
    size_t size;
};
constexpr GgmlTypeInfo kTypes[] = {
    {GgmlType::F32, "F32", 1, 4},           {GgmlType::F16, "F16", 1, 2},
    {GgmlType::Q4_0, "Q4_0", 32, 18},       {GgmlType::Q4_1, "Q4_1", 32, 20},
    {GgmlType::Q5_0, "Q5_0", 32, 22},       {GgmlType::Q5_1, "Q5_1", 32, 24},
    {GgmlType::Q8_0, "Q8_0", 32, 34},       {GgmlType::Q8_1, "Q8_1", 32, 36},
    {GgmlType::Q2_K, "Q2_K", 256, 84},      {GgmlType::Q3_K, "Q3_K", 256, 110},
    {GgmlType::Q4_K, "Q4_K", 256, 144},     {GgmlType::Q5_K, "Q5_K", 256, 176},
    {GgmlType::Q6_K, "Q6_K", 256, 210},     {GgmlType::Q8_K, "Q8_K", 256, 292},
    {GgmlType::IQ2_XXS, "IQ2_XXS", 256, 66}, {GgmlType::IQ2_XS, "IQ2_XS", 256, 74},
    {GgmlType::IQ3_XXS, "IQ3_XXS", 256, 98}, {GgmlType::IQ1_S, "IQ1_S", 256, 50},
    {GgmlType::IQ4_NL, "IQ4_NL", 32, 18},   {GgmlType::IQ3_S, "IQ3_S", 256, 110},
    {GgmlType::IQ2_S, "IQ2_S", 256, 82},    {GgmlType::IQ4_XS, "IQ4_XS", 256, 136},
    {GgmlType::I8, "I8", 1, 1},             {GgmlType::I16, "I16", 1, 2},
    {GgmlType::I32, "I32", 1, 4},           {GgmlType::I64, "I64", 1, 8},
    {GgmlType::F64, "F64", 1, 8},           {GgmlType::IQ1_M, "IQ1_M", 256, 56},
    {GgmlType::BF16, "BF16", 1, 2},         {GgmlType::TQ1_0, "TQ1_0", 256, 54},
    {GgmlType::TQ2_0, "TQ2_0", 256, 66},    {GgmlType::MXFP4, "MXFP4", 32, 17},
    {GgmlType::NVFP4, "NVFP4", 64, 36},     {GgmlType::Q1_0, "Q1_0", 128, 18},
    {GgmlType::Q2_0, "Q2_0", 64, 18},
};

const GgmlTypeInfo *ggml_type_info(uint32_t t) {
    for (const auto &i : kTypes) {
        if ((uint32_t)i.type == t) return &i;
    }
    return nullptr;
}


// A nested array deeper than this is refused (llama.cpp writes none; the
// bound keeps a hostile file from recursing without end).
constexpr int kMaxArrayDepth = 8;
// The most array elements the metadata may hold in all. Each takes a
// GgufValue (about 100 bytes) however few bytes it has in the file; the
// largest tokenizers (a quarter million tokens, their scores, types and
// merges) hold a few million.
constexpr uint64_t kMaxArrayElements = uint64_t(1) << 24;

// The fewest bytes an element of each value type takes in the file, to
// check a count against the bytes left before allocating for it. (Strings:
// their length; arrays: element type and count.)
size_t min_value_bytes(GgufType t) {
    switch (t) {
    case GgufType::UINT8:
    case GgufType::INT8:
    case GgufType::BOOL: return 1;
    case GgufType::UINT16:
    case GgufType::INT16: return 2;
    case GgufType::UINT32:
    case GgufType::INT32:
    case GgufType::FLOAT32: return 4;
    case GgufType::UINT64:
    case GgufType::INT64:
    case GgufType::FLOAT64:
    case GgufType::STRING: return 8;
    case GgufType::ARRAY: return 12;
    }
    return 1;
}

bool known_value_type(uint32_t t) { return t <= (uint32_t)GgufType::FLOAT64; }

// Bytes of the file, read little-endian with bounds checks; `what` (and
// `part`) name the field for the message when it runs past the end.
struct GgufReader {
    const std::string &file;
    const uint8_t *p;
    size_t size;
    size_t pos = 0;
    uint64_t elements = 0;  // array elements read so far

    size_t left() const { return size - pos; }
    [[noreturn]] void fail(const std::string &msg) const { throw Error(file + ": " + msg); }
    void need(size_t n, const std::string &what, const char *part) const {
        if (n > left()) {
            fail("truncated: " + what + part + " at byte " + std::to_string(pos) + " needs " + std::to_string(n) +
                 " bytes but the file ends at byte " + std::to_string(size));
        }
    }
    uint64_t uint(size_t n, const std::string &what, const char *part = "") {
        need(n, what, part);
        uint64_t v = 0;
        for (size_t k = n; k-- > 0;) v = v << 8 | p[pos + k];
        pos += n;
        return v;
    }
    uint32_t u32(const std::string &what, const char *part = "") { return (uint32_t)uint(4, what, part); }
    uint64_t u64(const std::string &what, const char *part = "") { return uint(8, what, part); }
    std::string str(const std::string &what) {
        const uint64_t n = u64(what, " length");
        if (n > left()) {
            fail(what + ": length " + std::to_string(n) + " at byte " + std::to_string(pos - 8) +
                 " is past the end of the file (" + std::to_string(left()) + " bytes left)");
        }
        std::string s((const char *)p + pos, (size_t)n);
        pos += (size_t)n;
        return s;
    }
};

GgufValue read_value(GgufReader &r, GgufType type, const std::string &what, int depth) {
    GgufValue v;
    v.type = type;
    switch (type) {
    case GgufType::UINT8: v.u64 = r.uint(1, what); break;
    case GgufType::UINT16: v.u64 = r.uint(2, what); break;
    case GgufType::UINT32: v.u64 = r.uint(4, what); break;
    case GgufType::UINT64: v.u64 = r.uint(8, what); break;
    case GgufType::INT8: v.i64 = (int8_t)(uint8_t)r.uint(1, what); break;
    case GgufType::INT16: v.i64 = (int16_t)(uint16_t)r.uint(2, what); break;
    case GgufType::INT32: v.i64 = (int32_t)(uint32_t)r.uint(4, what); break;
    case GgufType::INT64: v.i64 = (int64_t)r.uint(8, what); break;
    case GgufType::FLOAT32: v.f64 = bits_to_float((uint32_t)r.uint(4, what)); break;
    case GgufType::FLOAT64: {
        const uint64_t bits = r.uint(8, what);
        std::memcpy(&v.f64, &bits, 8);
        break;
    }
    case GgufType::BOOL: v.boolean = r.uint(1, what) != 0; break;  // as ggml: any nonzero byte
    case GgufType::STRING: v.str = r.str(what); break;
    case GgufType::ARRAY: {
        if (depth >= kMaxArrayDepth) {
            r.fail(what + ": arrays nested more than " + std::to_string(kMaxArrayDepth) + " deep");
        }
        const uint32_t et = r.u32(what, " element type");
        if (!known_value_type(et)) r.fail(what + ": unknown array element type " + std::to_string(et));
        v.elem_type = (GgufType)et;
        const uint64_t n = r.u64(what, " element count");
        const size_t min = min_value_bytes(v.elem_type);
        if (n > r.left() / min) {
            r.fail(what + ": array count " + std::to_string(n) + " of " + gguf_type_name(v.elem_type) + " (at least " +
                   std::to_string(min) + (min == 1 ? " byte" : " bytes") + " each) runs past the end of the file (" +
                   std::to_string(r.left()) + " bytes left)");
        }
        if (n > kMaxArrayElements - r.elements) {
            r.fail(what + ": array count " + std::to_string(n) + " takes the metadata's arrays past " +
                   std::to_string(kMaxArrayElements) + " elements in all");
        }
        r.elements += n;
        v.array.reserve((size_t)n);
        const std::string element = what + " element";
        for (uint64_t k = 0; k < n; k++) v.array.push_back(read_value(r, v.elem_type, element, depth + 1));
        break;
    }
    }
    return v;
}

}  // namespace

const char *ggml_type_name(GgmlType t) {
    const GgmlTypeInfo *i = ggml_type_info((uint32_t)t);
    return i ? i->name : "unknown";
}
bool ggml_type_known(uint32_t t) { return ggml_type_info(t) != nullptr; }
int64_t ggml_block_size(GgmlType t) {
    const GgmlTypeInfo *i = ggml_type_info((uint32_t)t);
    return i ? i->block : 0;
}
size_t ggml_type_size(GgmlType t) {
    const GgmlTypeInfo *i = ggml_type_info((uint32_t)t);
    return i ? i->size : 0;
}
bool ggml_can_dequantize(GgmlType t) {
    switch (t) {
    case GgmlType::F32:
    case GgmlType::F16:
    case GgmlType::BF16:
    case GgmlType::Q4_0:
    case GgmlType::Q4_1:
    case GgmlType::Q5_0:
    case GgmlType::Q5_1:
    case GgmlType::Q8_0:
    case GgmlType::Q4_K:
    case GgmlType::Q5_K:
    case GgmlType::Q6_K: return true;
    default: return false;
    }
}

const char *gguf_type_name(GgufType t) {
    switch (t) {
    case GgufType::UINT8: return "UINT8";
    case GgufType::INT8: return "INT8";
    case GgufType::UINT16: return "UINT16";
    case GgufType::INT16: return "INT16";
    case GgufType::UINT32: return "UINT32";
    case GgufType::INT32: return "INT32";
    case GgufType::FLOAT32: return "FLOAT32";
    case GgufType::BOOL: return "BOOL";
    case GgufType::STRING: return "STRING";
    case GgufType::ARRAY: return "ARRAY";
    case GgufType::UINT64: return "UINT64";
    case GgufType::INT64: return "INT64";
    case GgufType::FLOAT64: return "FLOAT64";
    }
    return "unknown";
}

bool GgufValue::is_integer() const {
    switch (type) {
    case GgufType::UINT8:
    case GgufType::INT8:
    case GgufType::UINT16:
    case GgufType::INT16:
    case GgufType::UINT32:
    case GgufType::INT32:
    case GgufType::UINT64:
    case GgufType::INT64: return true;
    default: return false;
    }
}
bool GgufValue::is_float() const { return type == GgufType::FLOAT32 || type == GgufType::FLOAT64; }

int64_t GgufTensor::numel() const {
    int64_t n = 1;
    for (auto d : ne) n *= d;
    return n;
}

Gguf::Gguf(const std::string &path) : name_(path) {
    const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
    if (fd < 0) throw Error(path + ": cannot open: " + std::strerror(errno));
    struct stat st;
    if (fstat(fd, &st) != 0 || !S_ISREG(st.st_mode)) {
        ::close(fd);
        throw Error(path + ": not a regular file");
    }
    size_ = (size_t)st.st_size;
    if (size_ > 0) {
        void *m = ::mmap(nullptr, size_, PROT_READ, MAP_PRIVATE, fd, 0);
        const int err = errno;
        ::close(fd);
        if (m == MAP_FAILED) throw Error(path + ": cannot map " + std::to_string(size_) + " bytes: " + std::strerror(err));
        map_ = m;
        map_size_ = size_;
        data_ = (const uint8_t *)m;
    } else {
        ::close(fd);
    }
    try {
        parse();
    } catch (...) {
        if (map_) ::munmap(map_, map_size_);
        map_ = nullptr;
        throw;
    }
}

Gguf::Gguf(const uint8_t *data, size_t size, std::string name) : name_(std::move(name)), data_(data), size_(size) {
    parse();
}

void Gguf::evict() const {
    if (map_) ::madvise(map_, map_size_, MADV_DONTNEED);
}

void Gguf::evict(const GgufTensor &t) const {
    if (!map_ || !t.data || t.bytes == 0) return;
    const uintptr_t page = (uintptr_t)sysconf(_SC_PAGESIZE), from = (uintptr_t)t.data, to = from + t.bytes;
    const uintptr_t first = (from + page - 1) / page * page, last = to / page * page;
    if (last > first) ::madvise((void *)first, last - first, MADV_DONTNEED);
}

Gguf::~Gguf() {
    if (map_) ::munmap(map_, map_size_);
}

void Gguf::parse() {
    GgufReader r{name_, data_, size_};
    if (size_ < 4 || std::memcmp(data_, "GGUF", 4) != 0) {
        r.fail(size_ < 4 ? "truncated: " + std::to_string(size_) + " bytes, shorter than the magic \"GGUF\""
                         : std::string("bad magic: not a GGUF file (it does not start with \"GGUF\")"));
    }
    r.pos = 4;
    version_ = r.u32("version");
    if (version_ != 2 && version_ != 3) {
        // A big-endian file's version reads as 0x02000000 or 0x03000000 here.
        if ((version_ & 0xFFFF) == 0 && (version_ >> 24) >= 1 && (version_ >> 24) <= 3) {
            r.fail("version " + std::to_string(version_) + " is version " + std::to_string(version_ >> 24) +
                   " byte-swapped: a big-endian GGUF file, which is not supported (convert it to little-endian)");
        }
        if (version_ == 1) r.fail("version 1 (GGUFv1) is no longer supported (versions 2 and 3 are)");
        r.fail("version " + std::to_string(version_) + " is not supported (versions 2 and 3 are)");
    }
    const uint64_t tensor_count = r.u64("tensor_count");
    const uint64_t kv_count = r.u64("kv_count");
    // Each entry takes at least this much of the file: a KV a non-empty key
    // (length + 1 byte), its type and a 1-byte value; a tensor info its name
    // length, n_dims, one dim, the type and the offset.
    constexpr size_t min_kv = 8 + 1 + 4 + 1, min_tensor = 8 + 4 + 8 + 4 + 8;
    if (kv_count > r.left() / min_kv) {
        r.fail("kv_count " + std::to_string(kv_count) + " (at least " + std::to_string(min_kv) +
               " bytes each) runs past the end of the file (" + std::to_string(r.left()) + " bytes follow the header)");
    }
    if (tensor_count > r.left() / min_tensor) {
        r.fail("tensor_count " + std::to_string(tensor_count) + " (at least " + std::to_string(min_tensor) +
               " bytes each) runs past the end of the file (" + std::to_string(r.left()) +
               " bytes follow the header)");
    }

    metadata_.reserve((size_t)kv_count);
    for (uint64_t k = 0; k < kv_count; k++) {
        const std::string where = "metadata key " + std::to_string(k);
        std::string key = r.str(where);
        if (key.empty()) r.fail(where + " is empty");
        if (key_index_.count(key)) r.fail("duplicate metadata key '" + key + "'");
        const std::string what = "metadata '" + key + "'";
        const uint32_t type = r.u32(what, " value type");
        if (!known_value_type(type)) r.fail(what + ": unknown value type " + std::to_string(type));
        GgufValue v = read_value(r, (GgufType)type, what, 0);
        key_index_[key] = metadata_.size();
        metadata_.emplace_back(std::move(key), std::move(v));
    }

    if (const GgufValue *a = find("general.alignment")) {
        if (a->type != GgufType::UINT32) {
            r.fail(std::string("metadata 'general.alignment' must be UINT32, not ") + gguf_type_name(a->type));
        }
        if (a->u64 == 0 || (a->u64 & (a->u64 - 1)) != 0) {
            r.fail("metadata 'general.alignment' is " + std::to_string(a->u64) + ", not a power of two");
        }
        alignment_ = a->u64;
    }

    if (tensor_count > r.left() / min_tensor) {
        r.fail("tensor_count " + std::to_string(tensor_count) + " (at least " + std::to_string(min_tensor) +
               " bytes each) runs past the end of the file (" + std::to_string(r.left()) +
               " bytes follow the metadata)");
    }
    tensors_.reserve((size_t)tensor_count);
    for (uint64_t k = 0; k < tensor_count; k++) {
        GgufTensor t;
        t.name = r.str("tensor " + std::to_string(k) + " name");
        const std::string what = "tensor '" + t.name + "'";
        if (tensor_index_.count(t.name)) r.fail("duplicate tensor name '" + t.name + "'");
        const uint32_t n_dims = r.u32(what, " n_dims");
        if (n_dims < 1 || n_dims > 4) r.fail(what + ": n_dims " + std::to_string(n_dims) + " is not in 1..4");
        int64_t numel = 1;
        for (uint32_t d = 0; d < n_dims; d++) {
            const uint64_t n = r.u64(what + " ne[" + std::to_string(d) + "]");
            if (n == 0) r.fail(what + ": dimension ne[" + std::to_string(d) + "] is 0");
            if (n > (uint64_t)std::numeric_limits<int64_t>::max() ||
                numel > std::numeric_limits<int64_t>::max() / (int64_t)n) {
                r.fail(what + ": dimensions overflow int64 at ne[" + std::to_string(d) + "] = " + std::to_string(n));
            }
            numel *= (int64_t)n;
            t.ne.push_back((int64_t)n);
        }
        const uint32_t type = r.u32(what, " type");
        const GgmlTypeInfo *info = ggml_type_info(type);
        if (!info) r.fail(what + ": unknown ggml type " + std::to_string(type));
        t.type = info->type;
        if (t.ne[0] % info->block != 0) {
            r.fail(what + ": ne[0] = " + std::to_string(t.ne[0]) + " is not a multiple of the block size " +
                   std::to_string(info->block) + " of " + info->name);
        }
        const uint64_t blocks = (uint64_t)numel / (uint64_t)info->block;
        if (blocks > std::numeric_limits<size_t>::max() / info->size) {
            r.fail(what + ": " + dims_string(t.ne) + " of " + info->name + " is too large to address");
        }
        t.bytes = (size_t)blocks * info->size;
        t.offset = r.u64(what, " offset");
        if (t.offset % alignment_ != 0) {
            r.fail(what + ": offset " + std::to_string(t.offset) + " is not a multiple of the alignment " +
                   std::to_string(alignment_));
        }
        tensor_index_[t.name] = tensors_.size();
        tensors_.push_back(std::move(t));
    }

    // The data section starts at the header's end, rounded up to the alignment.
    const uint64_t start = ((uint64_t)r.pos + alignment_ - 1) / alignment_ * alignment_;
    data_offset_ = (size_t)std::min<uint64_t>(start, size_);
    const uint64_t data_size = size_ - data_offset_;
    for (auto &t : tensors_) {
        if (t.offset > data_size || t.bytes > data_size - t.offset) {
            r.fail("tensor '" + t.name + "': offset " + std::to_string(t.offset) + " + " + std::to_string(t.bytes) +
                   " bytes is past the end of the file (" + std::to_string(size_) + " bytes, data from byte " +
                   std::to_string(start) + ")");
        }
        t.data = data_ + data_offset_ + t.offset;
    }
    std::vector<const GgufTensor *> by_offset;
    for (auto &t : tensors_) by_offset.push_back(&t);
    std::sort(by_offset.begin(), by_offset.end(),
              [](const GgufTensor *a, const GgufTensor *b) { return a->offset < b->offset; });
    for (size_t k = 1; k < by_offset.size(); k++) {
        const GgufTensor &a = *by_offset[k - 1], &b = *by_offset[k];
        if (b.offset < a.offset + a.bytes) {
            r.fail("tensors '" + a.name + "' (offset " + std::to_string(a.offset) + ", " + std::to_string(a.bytes) +
                   " bytes) and '" + b.name + "' (offset " + std::to_string(b.offset) + ") overlap");
        }
    }
}

std::vector<std::string> Gguf::keys() const {
    std::vector<std::string> out;
    out.reserve(metadata_.size());
    for (const auto &kv : metadata_) out.push_back(kv.first);
    return out;
}

const GgufValue *Gguf::find(const std::string &key) const {
    auto it = key_index_.find(key);
    return it == key_index_.end() ? nullptr : &metadata_[it->second].second;
}

const GgufTensor *Gguf::find_tensor(const std::string &name) const {
    auto it = tensor_index_.find(name);
    return it == tensor_index_.end() ? nullptr : &tensors_[it->second];
}

const GgufValue &Gguf::need(const std::string &key, const char *expected) const {
    const GgufValue *v = find(key);
    if (!v) throw Error(name_ + ": metadata '" + key + "' is missing (expected " + expected + ")");
    return *v;
}

void Gguf::wrong_type(const std::string &key, const GgufValue &v, const char *expected) const {
    std::string actual = gguf_type_name(v.type);
    if (v.type == GgufType::ARRAY) actual += std::string(" of ") + gguf_type_name(v.elem_type);
    throw Error(name_ + ": metadata '" + key + "': expected " + expected + ", found " + actual);
}

namespace {
constexpr const char *kString = "a STRING", *kInteger = "an integer", *kNumber = "a number (float or integer)",
                     *kBool = "a BOOL", *kStrings = "an ARRAY of STRING",
                     *kNumbers = "an ARRAY of numbers (float or integer)";

bool is_numeric(GgufType t) {
    GgufValue v;
    v.type = t;
    return v.is_integer() || v.is_float();
}
double as_double(const GgufValue &v) {
    if (v.is_float()) return v.f64;
    switch (v.type) {
    case GgufType::INT8:
    case GgufType::INT16:
    case GgufType::INT32:
    case GgufType::INT64: return (double)v.i64;
    default: return (double)v.u64;
    }
}
}  // namespace

std::string Gguf::string(const std::string &key) const {
    const GgufValue &v = need(key, kString);
    if (v.type != GgufType::STRING) wrong_type(key, v, kString);
    return v.str;
}
std::string Gguf::string(const std::string &key, const std::string &fallback) const {
    return has(key) ? string(key) : fallback;
}

int64_t Gguf::integer(const std::string &key) const {
    const GgufValue &v = need(key, kInteger);
    if (!v.is_integer()) wrong_type(key, v, kInteger);
    switch (v.type) {
    case GgufType::INT8:
    case GgufType::INT16:
    case GgufType::INT32:
    case GgufType::INT64: return v.i64;
    default:
        if (v.u64 > (uint64_t)std::numeric_limits<int64_t>::max()) {
            throw Error(name_ + ": metadata '" + key + "': " + gguf_type_name(v.type) + " " + std::to_string(v.u64) +
                        " does not fit in int64");
        }
        return (int64_t)v.u64;
    }
}
int64_t Gguf::integer(const std::string &key, int64_t fallback) const { return has(key) ? integer(key) : fallback; }

double Gguf::number(const std::string &key) const {
    const GgufValue &v = need(key, kNumber);
    if (!is_numeric(v.type)) wrong_type(key, v, kNumber);
    return as_double(v);
}
double Gguf::number(const std::string &key, double fallback) const { return has(key) ? number(key) : fallback; }

bool Gguf::boolean(const std::string &key) const {
    const GgufValue &v = need(key, kBool);
    if (v.type != GgufType::BOOL) wrong_type(key, v, kBool);
    return v.boolean;
}
bool Gguf::boolean(const std::string &key, bool fallback) const { return has(key) ? boolean(key) : fallback; }

std::vector<std::string> Gguf::strings(const std::string &key) const {
    const GgufValue &v = need(key, kStrings);
    if (v.type != GgufType::ARRAY || v.elem_type != GgufType::STRING) wrong_type(key, v, kStrings);
    std::vector<std::string> out;
    out.reserve(v.array.size());
    for (const auto &e : v.array) out.push_back(e.str);
    return out;
}
std::vector<std::string> Gguf::strings(const std::string &key, const std::vector<std::string> &fallback) const {
    return has(key) ? strings(key) : fallback;
}

std::vector<double> Gguf::numbers(const std::string &key) const {
    const GgufValue &v = need(key, kNumbers);
    if (v.type != GgufType::ARRAY || !is_numeric(v.elem_type)) wrong_type(key, v, kNumbers);
    std::vector<double> out;
    out.reserve(v.array.size());
    for (const auto &e : v.array) out.push_back(as_double(e));
    return out;
}
bool is_gguf_file(const std::string &path) {
    std::ifstream in(path, std::ios::binary);
    char magic[4] = {};
    return in.read(magic, 4) && std::memcmp(magic, "GGUF", 4) == 0;
}

std::vector<double> Gguf::numbers(const std::string &key, const std::vector<double> &fallback) const {
    return has(key) ? numbers(key) : fallback;
}

}  // namespace halformer
