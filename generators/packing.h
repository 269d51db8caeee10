// The packed weight layout of the reduced-precision linears (linear_packed,
// pack_weights). Nothing here says how anything runs: it is the data format
// both generators and the runtime agree on.
//
// A weight matrix W [N, K] (nn.Linear layout) is stored as
//
//   wp(r, j, kk, p) = W[p·kPanel + j, kk·kf + r]      Halide dims, innermost first
//        r  ∈ [0, kf)        kf consecutive k of one output column
//        j  ∈ [0, kPanel)    the columns of one panel
//        kk ∈ [0, Kp / kf)   k in groups of kf
//        p  ∈ [0, Np / kPanel)
//
// with Kp = K rounded up to kf and Np = N rounded up to kPanel, padding zero.
// kf is how many products one lane of the target's dot-product instruction
// sums: 1 for float32, 2 for bfloat16 (vdpbf16ps), 4 for int8 (vpdpbusd). A
// panel's kf·kPanel values for one kk are contiguous, so the kernel reads
// each panel as one stream.
//
// int8 is quantized in blocks of kQBlock = 32 consecutive k of one output
// column (the layout of llama.cpp's Q8_0, whose files load as they are):
// W(n, k) ≈ scale(n, b)·q(n, k) with b = k / 32 and q ∈ [-127, 127]; Kp is K
// rounded up to 32. Each block has its own scale and its code sum
// colsum(n, b) = Σ_{k in b} q(n, k) (int16: |sum| ≤ 32·127), which the
// kernel needs where it feeds the activations to vpdpbusd as unsigned bytes
// q_x + 128 (the offset form). Both are stored panel by panel, as the
// weights are:
//
//   scale(j, b, p)  = the step of column p·kPanel + j over block b   float32
//   colsum(j, b, p) = its codes' sum                                  int16
//
// so a panel's scales for one block are one contiguous run of kPanel.
#pragma once

#include "Halide.h"

#include <map>
#include <string>

namespace halformer {

// Q4 (a GGUF Q4_0 tensor's blocks, kept 4-bit): W(n, k) = scale(n, b)·(q − 8)
// with q ∈ [0, 15] and b = k / 32, two codes a byte, as Q4_0 stores them:
// byte i of a block holds k = i (low nibble) and k = i + 16 (high), so
//
//   wp(r, j, g, p) = the byte of column p·kPanel + j holding k = b·32 + h·16 + e·4 + r
//                    (low nibble h = 0, high h = 1), with g = b·4 + e
//        r ∈ [0, 4), e ∈ [0, 4): the block's first 16 k in groups of 4
//
// (g runs over Kp / 8: half int8's groups), and scale(j, b, p) laid out as
// int8's but as the file stores it: the bits of an fp16 step (uint16), so a
// Q4_0 weight takes the file's 18 bytes per 32. There is no colsum: the
// kernel subtracts 8 · Σ_{k in b} q_x instead.
//
// Q4_1 (4-bit codes with a step and a minimum per block: a GGUF Q4_1
// tensor's blocks, and Q4_K's sub-blocks transcoded to them):
// W(n, k) = scale(n, b)·q + minimum(n, b), q ∈ [0, 15], the nibbles laid out
// as q4's, scale and minimum both fp16 bits laid out as q4's scale (20
// bytes per 32). The kernel adds minimum · Σ_{k in b} q_x.
enum class WeightFormat { F32, BF16, Int8, Q4, Q4_1 };

inline const std::map<std::string, WeightFormat> &weight_format_names() {
    static const std::map<std::string, WeightFormat> names = {
        {"f32", WeightFormat::F32}, {"bf16", WeightFormat::BF16}, {"int8", WeightFormat::Int8}, {"q4", WeightFormat::Q4},
        {"q4_1", WeightFormat::Q4_1}};
    return names;
}

constexpr int kPanel = 48;  // 3 AVX-512 vectors of 32-bit lanes
constexpr int kQBlock = 32;  // k per int8 scale (weights and activations)

// The 4-bit formats (two codes a byte, fp16 block steps).
inline bool is_q4(WeightFormat f) { return f == WeightFormat::Q4 || f == WeightFormat::Q4_1; }

inline int k_group(WeightFormat f) {
    return f == WeightFormat::F32 ? 1 : f == WeightFormat::BF16 ? 2 : 4;
}

inline Halide::Type packed_type(WeightFormat f) {
    return f == WeightFormat::F32    ? Halide::Float(32)
           : f == WeightFormat::BF16 ? Halide::BFloat(16)
           : is_q4(f)                ? Halide::UInt(8)
                                     : Halide::Int(8);
}

// Symmetric int8 quantization of v with step `scale`: round to nearest
// (ties to even), clamped to ±127.
inline Halide::Expr quantize_i8(Halide::Expr v, Halide::Expr scale) {
    using namespace Halide;
    return cast<int8_t>(clamp(round(v / scale), -127.0f, 127.0f));
}

// The same with the step's inverse (1 / step, computed once per step):
// round(v · inverse). The activations are quantized this way so that every
// kernel, however it vectorizes, gets the same codes (a division by a
// broadcast step may be lowered as a multiplication by its reciprocal).
inline Halide::Expr quantize_i8_by_inverse(Halide::Expr v, Halide::Expr inverse) {
    using namespace Halide;
    return cast<int8_t>(clamp(round(v * inverse), -127.0f, 127.0f));
}

// The step that maps the largest magnitude to 127 (1 for an all-zero row).
inline Halide::Expr int8_step(Halide::Expr absmax) {
    using namespace Halide;
    return select(absmax > 0.0f, absmax / 127.0f, 1.0f);
}

}  // namespace halformer
