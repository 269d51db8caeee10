// Internal to the GGUF reader (gguf.cpp: the file, its validation and its
// metadata; gguf_dequant.cpp: the tensor types' blocks and their
// dequantization): what both read.
#pragma once

#include <cstdint>
#include <cstring>
#include <string>
#include <vector>

namespace halformer::gguf_internal {

inline float bits_to_float(uint32_t bits) {
    float f;
    std::memcpy(&f, &bits, 4);
    return f;
}

// "[4096, 32000]": a tensor's dimensions in messages.
inline std::string dims_string(const std::vector<int64_t> &ne) {
    std::string s = "[";
    for (size_t k = 0; k < ne.size(); k++) s += (k ? ", " : "") + std::to_string(ne[k]);
    return s + "]";
}

// The types dequantize() reads, for messages.
inline constexpr const char *kDequantizable = "F32, F16, BF16, Q4_0, Q4_1, Q5_0, Q5_1, Q8_0, Q4_K, Q5_K and Q6_K";

}  // namespace halformer::gguf_internal
