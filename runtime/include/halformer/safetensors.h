// Reading (and writing) the safetensors format: an 8-byte little-endian header
// length N, N bytes of JSON {"name": {"dtype", "shape", "data_offsets":
// [begin, end]}, "__metadata__": {...}}, then the raw little-endian data.
//
// The file is read into memory once, when it is opened (not mapped: changing
// or truncating it afterwards cannot affect a loaded model). Every entry is
// validated when the file is opened
// (JSON, dtype, shape × dtype size = byte count, offsets inside the data, no
// two tensors overlapping); a problem throws halformer::Error naming the file
// and the tensor. F32 tensors are used in place when aligned; F16 and BF16
// (and unaligned F32) are converted to float32 once, on first use.
#pragma once

#include <cstddef>
#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <vector>

namespace halformer {

// Other: a dtype the file may hold in tensors that are never read (a
// Hugging Face file's I64 position ids, BOOL masks); reading one is an Error.
enum class DType { F32, F16, BF16, Other };
const char *dtype_name(DType t);

struct TensorInfo {
    std::string name;
    DType dtype = DType::F32;
    std::string dtype_text;  // as the header spells it
    std::vector<int64_t> shape;
    size_t begin = 0, end = 0;  // byte offsets into the data section
    int64_t numel() const;
};

std::string shape_string(const std::vector<int64_t> &shape);

class SafeTensors {
public:
    // Reads and validates `path`; throws halformer::Error. Tensors of
    // dtypes other than F32, F16 and BF16 are an Error, or with any_dtype
    // entries that f32() refuses.
    explicit SafeTensors(const std::string &path, bool any_dtype = false);
    ~SafeTensors();
    SafeTensors(const SafeTensors &) = delete;
    SafeTensors &operator=(const SafeTensors &) = delete;

    const std::string &path() const { return path_; }
    const std::vector<TensorInfo> &tensors() const { return tensors_; }
    const TensorInfo *find(const std::string &name) const;
    // The tensor as float32 (converted on first use, then kept).
    const float *f32(const TensorInfo &t);

private:
    std::string path_;
    int fd_ = -1;
    const uint8_t *map_ = nullptr;  // the whole file (64-byte aligned, owned)
    size_t size_ = 0;
    const uint8_t *data_ = nullptr;  // start of the data section
    std::vector<TensorInfo> tensors_;
    std::map<std::string, size_t> index_;
    std::map<std::string, std::unique_ptr<float[]>> converted_;
};

// Writes float32 tensors as a safetensors file (header padded to 8 bytes),
// stored as F32, or as F16 (rounded to nearest even; values past the F16
// range become ±inf, which the caller should have ruled out).
struct TensorRef {
    std::string name;
    std::vector<int64_t> shape;
    const float *data;
};
void write_safetensors(const std::string &path, const std::vector<TensorRef> &tensors,
                       DType dtype = DType::F32);
// float32 → IEEE half bits, round to nearest even.
uint16_t float_to_half(float f);

}  // namespace halformer
