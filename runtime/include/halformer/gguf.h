// Reading GGUF, llama.cpp's model file format (versions 2 and 3, which share
// one layout), and dequantizing its tensors to float32.
//
// The layout, every number little-endian:
//   "GGUF", version u32, tensor_count u64, kv_count u64;
//   kv_count metadata entries: key (u64 length + bytes), value type u32, value;
//   tensor_count tensor infos: name (u64 length + bytes), n_dims u32 (1..4),
//   n_dims dims u64 (GGML order: ne[0] is the innermost, contiguous one),
//   ggml type u32, offset u64 (from the start of the data section);
//   padding to `general.alignment` (a u32 entry; 32 when absent), then the
//   data section. A value is a scalar (u8, i8, u16, i16, u32, i32, f32, bool
//   as one byte, u64, i64, f64), a string (u64 length + bytes) or an array
//   (element type u32, count u64, the elements; arrays may hold arrays).
//
// The file is mapped read-only (MAP_PRIVATE) and stays mapped while the Gguf
// lives, so a tensor's data can be read in place. (A mapping cannot protect a
// reader from the file being truncated under it, which raises SIGBUS: model
// files are not rewritten while a model is loaded from them.)
//
// Everything is validated when the file is opened; each problem throws
// halformer::Error naming the file and the field: the magic and version (1 is
// refused, as is a big-endian file); truncation anywhere; counts and lengths
// checked against the bytes left before anything is allocated for them
// (and arrays nested at most 8 deep, holding at most 2^24 elements in all);
// unknown value types and ggml types (by number); duplicate keys and tensor
// names; an alignment that is not a power of two; dims of 0 or whose product
// overflows int64; rows (ne[0]) that are not a whole number of the type's
// blocks; offsets not a multiple of the alignment, data past the end of the
// file, and tensors overlapping one another.
#pragma once

#include <cstddef>
#include <cstdint>
#include <map>
#include <string>
#include <utility>
#include <vector>

namespace halformer {

// The tensor types of ggml (ggml.h's enum ggml_type; the numbers are the
// file's). Types ggml has removed (4, 5, 31..33, 36..38) are unknown here,
// as in ggml.
enum class GgmlType : uint32_t {
    F32 = 0,
    F16 = 1,
    Q4_0 = 2,
    Q4_1 = 3,
    Q5_0 = 6,
    Q5_1 = 7,
    Q8_0 = 8,
    Q8_1 = 9,
    Q2_K = 10,
    Q3_K = 11,
    Q4_K = 12,
    Q5_K = 13,
    Q6_K = 14,
    Q8_K = 15,
    IQ2_XXS = 16,
    IQ2_XS = 17,
    IQ3_XXS = 18,
    IQ1_S = 19,
    IQ4_NL = 20,
    IQ3_S = 21,
    IQ2_S = 22,
    IQ4_XS = 23,
    I8 = 24,
    I16 = 25,
    I32 = 26,
    I64 = 27,
    F64 = 28,
    IQ1_M = 29,
    BF16 = 30,
    TQ1_0 = 34,
    TQ2_0 = 35,
    MXFP4 = 39,
    NVFP4 = 40,
    Q1_0 = 41,
    Q2_0 = 42,
};

// "F32", "Q4_K", ... (gguf-py's spelling); "unknown" for a number ggml
// does not define.
const char *ggml_type_name(GgmlType t);
// Whether ggml defines the number (a file's type field is checked with it).
bool ggml_type_known(uint32_t t);
// Values per block (1 for the plain types, 32 for Q8_0, 256 for the K
// quants) and bytes per block; 0 for an unknown type.
int64_t ggml_block_size(GgmlType t);
size_t ggml_type_size(GgmlType t);
// Whether dequantize_row() reads the type: F32, F16, BF16, Q4_0, Q4_1, Q5_0,
// Q5_1, Q8_0, Q4_K, Q5_K and Q6_K.
bool ggml_can_dequantize(GgmlType t);

// The metadata value types (gguf.h's enum gguf_type).
enum class GgufType : uint32_t {
    UINT8 = 0,
    INT8 = 1,
    UINT16 = 2,
    INT16 = 3,
    UINT32 = 4,
    INT32 = 5,
    FLOAT32 = 6,
    BOOL = 7,
    STRING = 8,
    ARRAY = 9,
    UINT64 = 10,
    INT64 = 11,
    FLOAT64 = 12,
};
const char *gguf_type_name(GgufType t);  // "UINT8", ..., "FLOAT64"

// One metadata value. Each type fills one field: the signed integer types
// i64, the unsigned ones u64, FLOAT32 and FLOAT64 f64 (a FLOAT32 widened
// exactly), BOOL boolean, STRING str, ARRAY elem_type and array.
struct GgufValue {
    GgufType type = GgufType::UINT8;
    int64_t i64 = 0;
    uint64_t u64 = 0;
    double f64 = 0;
    bool boolean = false;
    std::string str;
    GgufType elem_type = GgufType::UINT8;
    std::vector<GgufValue> array;

    bool is_integer() const;  // UINT8..INT64, not BOOL
    bool is_float() const;    // FLOAT32, FLOAT64
};

struct GgufTensor {
    std::string name;
    std::vector<int64_t> ne;  // GGML order: ne[0] is the contiguous dimension
    GgmlType type = GgmlType::F32;
    uint64_t offset = 0;      // from the start of the data section
    size_t bytes = 0;
    const uint8_t *data = nullptr;  // in the mapping (or the caller's buffer)
    int64_t numel() const;
};

class Gguf {
public:
    // Maps and validates `path`; throws halformer::Error.
    explicit Gguf(const std::string &path);
    // Validates a GGUF file held in memory (not copied: it must outlive the
    // Gguf); `name` stands for the file in messages.
    Gguf(const uint8_t *data, size_t size, std::string name);
    ~Gguf();
    Gguf(const Gguf &) = delete;
    Gguf &operator=(const Gguf &) = delete;

    const std::string &name() const { return name_; }  // the path, or the buffer's name
    uint32_t version() const { return version_; }
    uint64_t alignment() const { return alignment_; }
    size_t data_offset() const { return data_offset_; }  // where the data section starts in the file
    size_t size() const { return size_; }

    // Metadata. The typed accessors throw an Error naming the key when it is
    // missing or of another type; those with a fallback return it when the
    // key is missing (a key of the wrong type is still an Error).
    std::vector<std::string> keys() const;  // in file order
    bool has(const std::string &key) const { return find(key) != nullptr; }
    const GgufValue *find(const std::string &key) const;
    std::string string(const std::string &key) const;
    std::string string(const std::string &key, const std::string &fallback) const;
    // Any integer type; an UINT64 past INT64_MAX is an Error.
    int64_t integer(const std::string &key) const;
    int64_t integer(const std::string &key, int64_t fallback) const;
    // FLOAT32, FLOAT64 or any integer type.
    double number(const std::string &key) const;
    double number(const std::string &key, double fallback) const;
    bool boolean(const std::string &key) const;
    bool boolean(const std::string &key, bool fallback) const;
    // An array of strings.
    std::vector<std::string> strings(const std::string &key) const;
    std::vector<std::string> strings(const std::string &key, const std::vector<std::string> &fallback) const;
    // An array of floats or integers (as double: a 64-bit integer past 2^53
    // is rounded).
    std::vector<double> numbers(const std::string &key) const;
    std::vector<double> numbers(const std::string &key, const std::vector<double> &fallback) const;

    // Tensors, in file order.
    const std::vector<GgufTensor> &tensors() const { return tensors_; }
    const GgufTensor *find_tensor(const std::string &name) const;

    // Lets the system drop the mapped file's pages from this process's
    // resident memory (once its tensors have been packed): what is read
    // again comes back from the file. Nothing for a buffer's Gguf.
    void evict() const;
    // The same for the whole pages inside one tensor's bytes.
    void evict(const GgufTensor &t) const;

private:
    void parse();
    const GgufValue &need(const std::string &key, const char *expected) const;
    [[noreturn]] void wrong_type(const std::string &key, const GgufValue &v, const char *expected) const;

    std::string name_;
    const uint8_t *data_ = nullptr;
    size_t size_ = 0;
    void *map_ = nullptr;  // the mapping, when the Gguf opened a file
    size_t map_size_ = 0;
    uint32_t version_ = 0;
    uint64_t alignment_ = 32;
    size_t data_offset_ = 0;
    std::vector<std::pair<std::string, GgufValue>> metadata_;
    std::map<std::string, size_t> key_index_;
    std::vector<GgufTensor> tensors_;
    std::map<std::string, size_t> tensor_index_;
};

// Whether `path` is a readable file that starts as GGUF files do ("GGUF").
bool is_gguf_file(const std::string &path);

// All t.numel() values of the tensor into `out`, row by row (ne[0] values a
// row), exactly as ggml's dequantize_row_* computes them. A type
// ggml_can_dequantize() refuses is an Error naming the type and the tensor.
void dequantize(const GgufTensor &t, float *out);
// n values (a whole number of the type's blocks) from src to dst.
void dequantize_row(GgmlType type, const uint8_t *src, float *dst, int64_t n);

// n values (a whole number of the type's blocks and of 32) of a block type
// from src as Q8_0 blocks in dst (n / 32 blocks of 34 bytes: an fp16 step d,
// then 32 int8 codes; a value is d · code): Q8_0 as it is; Q4_0 and Q5_0,
// whose blocks are a step times integers in [-16, 15], exactly (their own
// step, those integers as the codes); the types with a minimum or scales
// of their own (Q4_1, Q5_1, Q4_K, Q5_K, Q6_K) from their values, each 32
// with the step max |x| / 127 (in fp16), codes rounded to nearest. What
// int8's kernels read (docs/gguf.md). false, writing nothing, for another
// type (the plain ones) or an n that does not divide.
bool requantize_row_q8_0(GgmlType type, const uint8_t *src, uint8_t *dst, int64_t n);

// n values (a whole number of the type's blocks) of Q4_1 or Q4_K from src as
// Q4_1 blocks in dst (n / 32 blocks of 20 bytes: fp16 d and m, then 16 bytes
// whose byte l holds code l in its low nibble and code l + 16 in its high
// one; a value is d · code + m): what the q4_1 kernels read (docs/gguf.md).
// Q4_1 as it is; Q4_K's sub-blocks with their codes as they are, each
// sub-block's step d·sc and minimum −dmin·m rounded to fp16 (to nearest: a
// relative 2^-11 at most, against the codes' own 1/30 of the range). false,
// writing nothing past what it wrote, for another type, an n that does not
// divide, or a step or minimum past fp16's range.
bool transcode_row_q4_1(GgmlType type, const uint8_t *src, uint8_t *dst, int64_t n);

// IEEE half and bfloat16 bits to float32, exactly (subnormals, infinities
// and NaN payloads kept); float32 to half, rounded to nearest (ties to even).
float fp16_to_fp32(uint16_t h);
float bf16_to_fp32(uint16_t h);
uint16_t fp32_to_fp16(float f);

}  // namespace halformer
