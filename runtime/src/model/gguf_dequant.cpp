// GGUF's tensor types as ggml lays out their blocks (ggml-common.h), and
// their dequantization to float32 (halformer/gguf.h: dequantize,
// dequantize_row, fp16_to_fp32, bf16_to_fp32). The file itself, its
// validation and metadata: gguf.cpp.
#include "halformer/error.h"
#include "halformer/gguf.h"

#include "gguf_internal.h"

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <string>
#include <vector>

namespace halformer {

using gguf_internal::bits_to_float;
using gguf_internal::dims_string;
using gguf_internal::kDequantizable;

float fp16_to_fp32(uint16_t h) {
    const uint32_t sign = uint32_t(h & 0x8000) << 16;
    const uint32_t exp = (h >> 10) & 0x1F;
    uint32_t man = h & 0x3FF;
    if (exp == 0x1F) return bits_to_float(sign | 0x7F800000u | man << 13);  // inf, NaN (payload kept)
    if (exp != 0) return bits_to_float(sign | (exp + 127 - 15) << 23 | man << 13);
    if (man == 0) return bits_to_float(sign);  // ±0
    // Subnormal: man × 2^-24. Shift the leading one up to bit 10, lowering
    // the exponent once a shift.
    uint32_t e = 127 - 15 + 1;
    while (!(man & 0x400)) {
        man <<= 1;
        e--;
    }
    return bits_to_float(sign | e << 23 | (man & 0x3FF) << 13);
}

float bf16_to_fp32(uint16_t h) { return bits_to_float(uint32_t(h) << 16); }

// The dequantizers follow ggml's dequantize_row_* (ggml-quants.c) operation
// for operation, in float32, so that the results are the same bits. Every
// product is exact in float32 (a half's 11 significant bits times a scale of
// at most 7 bits times a quant of at most 6 fit in 24), so at most the final
// addition rounds, and a fused multiply-add (where the compiler contracts
// one) gives the same bits too.
namespace {

inline uint16_t le16(const uint8_t *p) { return uint16_t(p[0] | p[1] << 8); }
inline float half_at(const uint8_t *p) { return fp16_to_fp32(le16(p)); }

// Block layouts (ggml-common.h), by byte offset in the block.
// Q4_0 (18 bytes, 32 values): d f16; qs[16], value j in qs[j] & 15 and
// value j + 16 in qs[j] >> 4; x = (q - 8) d.
void row_q4_0(const uint8_t *b, float *y, int64_t nb) {
    for (int64_t i = 0; i < nb; i++, b += 18, y += 32) {
        const float d = half_at(b);
        const uint8_t *qs = b + 2;
        for (int j = 0; j < 16; j++) {
            const int x0 = (qs[j] & 0x0F) - 8, x1 = (qs[j] >> 4) - 8;
            y[j] = x0 * d;
            y[j + 16] = x1 * d;
        }
    }
}

// Q4_1 (20 bytes): d f16, m f16, qs[16] as Q4_0; x = q d + m.
void row_q4_1(const uint8_t *b, float *y, int64_t nb) {
    for (int64_t i = 0; i < nb; i++, b += 20, y += 32) {
        const float d = half_at(b), m = half_at(b + 2);
        const uint8_t *qs = b + 4;
        for (int j = 0; j < 16; j++) {
            const int x0 = qs[j] & 0x0F, x1 = qs[j] >> 4;
            y[j] = x0 * d + m;
            y[j + 16] = x1 * d + m;
        }
    }
}

// Q5_0 (22 bytes): d f16, qh u32 (bit j: the fifth bit of value j), qs[16]
// as Q4_0; x = (q - 16) d.
void row_q5_0(const uint8_t *b, float *y, int64_t nb) {
    for (int64_t i = 0; i < nb; i++, b += 22, y += 32) {
        const float d = half_at(b);
        const uint32_t qh = uint32_t(b[2]) | uint32_t(b[3]) << 8 | uint32_t(b[4]) << 16 | uint32_t(b[5]) << 24;
        const uint8_t *qs = b + 6;
        for (int j = 0; j < 16; j++) {
            const int h0 = ((qh >> j) << 4) & 0x10, h1 = (qh >> (j + 12)) & 0x10;
            const int x0 = ((qs[j] & 0x0F) | h0) - 16, x1 = ((qs[j] >> 4) | h1) - 16;
            y[j] = x0 * d;
            y[j + 16] = x1 * d;
        }
    }
}

// Q5_1 (24 bytes): d f16, m f16, qh u32, qs[16]; x = q d + m.
void row_q5_1(const uint8_t *b, float *y, int64_t nb) {
    for (int64_t i = 0; i < nb; i++, b += 24, y += 32) {
        const float d = half_at(b), m = half_at(b + 2);
        const uint32_t qh = uint32_t(b[4]) | uint32_t(b[5]) << 8 | uint32_t(b[6]) << 16 | uint32_t(b[7]) << 24;
        const uint8_t *qs = b + 8;
        for (int j = 0; j < 16; j++) {
            const int h0 = ((qh >> j) << 4) & 0x10, h1 = (qh >> (j + 12)) & 0x10;
            const int x0 = (qs[j] & 0x0F) | h0, x1 = (qs[j] >> 4) | h1;
            y[j] = x0 * d + m;
            y[j + 16] = x1 * d + m;
        }
    }
}

// Q8_0 (34 bytes): d f16, qs[32] int8; x = q d.
void row_q8_0(const uint8_t *b, float *y, int64_t nb) {
    for (int64_t i = 0; i < nb; i++, b += 34, y += 32) {
        const float d = half_at(b);
        for (int j = 0; j < 32; j++) y[j] = (int8_t)b[2 + j] * d;
    }
}

// The K quants' 8 sub-block scales and mins, 6 bits each, packed in 12
// bytes: for j < 4 the low 6 bits of bytes j (scale) and j + 4 (min); for
// j >= 4 the nibbles of byte j + 4 (scale low, min high) with their top two
// bits in the top bits of bytes j - 4 (scale) and j (min).
inline void scale_min_k4(int j, const uint8_t *q, int &sc, int &m) {
    if (j < 4) {
        sc = q[j] & 63;
        m = q[j + 4] & 63;
    } else {
        sc = (q[j + 4] & 0xF) | ((q[j - 4] >> 6) << 4);
        m = (q[j + 4] >> 4) | ((q[j] >> 6) << 4);
    }
}

// Q4_K (144 bytes, 256 values in 8 sub-blocks of 32): d f16, dmin f16,
// scales[12], qs[128]. Each 64 values take 32 bytes of qs: the low nibbles
// are sub-block 2c, the high nibbles sub-block 2c + 1; x = d sc q - dmin m.
void row_q4_k(const uint8_t *b, float *y, int64_t nb) {
    for (int64_t i = 0; i < nb; i++, b += 144) {
        const float d = half_at(b), dmin = half_at(b + 2);
        const uint8_t *scales = b + 4, *q = b + 16;
        for (int c = 0; c < 4; c++, q += 32) {
            int sc, m;
            scale_min_k4(2 * c, scales, sc, m);
            const float d1 = d * sc, m1 = dmin * m;
            scale_min_k4(2 * c + 1, scales, sc, m);
            const float d2 = d * sc, m2 = dmin * m;
            for (int l = 0; l < 32; l++) *y++ = d1 * (q[l] & 0xF) - m1;
            for (int l = 0; l < 32; l++) *y++ = d2 * (q[l] >> 4) - m2;
        }
    }
}

// Q5_K (176 bytes): d f16, dmin f16, scales[12], qh[32], qs[128]: as Q4_K,
// with the fifth bit of the values of sub-block s in bit s of qh[l].
void row_q5_k(const uint8_t *b, float *y, int64_t nb) {
    for (int64_t i = 0; i < nb; i++, b += 176) {
        const float d = half_at(b), dmin = half_at(b + 2);
        const uint8_t *scales = b + 4, *qh = b + 16, *ql = b + 48;
        for (int c = 0; c < 4; c++, ql += 32) {
            int sc, m;
            scale_min_k4(2 * c, scales, sc, m);
            const float d1 = d * sc, m1 = dmin * m;
            scale_min_k4(2 * c + 1, scales, sc, m);
            const float d2 = d * sc, m2 = dmin * m;
            const uint8_t u1 = uint8_t(1 << (2 * c)), u2 = uint8_t(2 << (2 * c));
            for (int l = 0; l < 32; l++) *y++ = d1 * ((ql[l] & 0xF) + (qh[l] & u1 ? 16 : 0)) - m1;
            for (int l = 0; l < 32; l++) *y++ = d2 * ((ql[l] >> 4) + (qh[l] & u2 ? 16 : 0)) - m2;
        }
    }
}

// Q6_K (210 bytes, 256 values in 16 sub-blocks of 16): ql[128] (low 4 bits),
// qh[64] (high 2 bits), scales[16] int8, d f16; x = d sc (q - 32). Each 128
// values take 64 bytes of ql, 32 of qh and 8 scales.
void row_q6_k(const uint8_t *b, float *y, int64_t nb) {
    for (int64_t i = 0; i < nb; i++, b += 210) {
        const float d = half_at(b + 208);
        const uint8_t *ql = b, *qh = b + 128;
        const int8_t *sc = (const int8_t *)(b + 192);
        for (int n = 0; n < 2; n++, y += 128, ql += 64, qh += 32, sc += 8) {
            for (int l = 0; l < 32; l++) {
                const int is = l / 16;
                const int q1 = ((ql[l] & 0xF) | ((qh[l] >> 0) & 3) << 4) - 32;
                const int q2 = ((ql[l + 32] & 0xF) | ((qh[l] >> 2) & 3) << 4) - 32;
                const int q3 = ((ql[l] >> 4) | ((qh[l] >> 4) & 3) << 4) - 32;
                const int q4 = ((ql[l + 32] >> 4) | ((qh[l] >> 6) & 3) << 4) - 32;
                y[l] = d * sc[is] * q1;
                y[l + 32] = d * sc[is + 2] * q2;
                y[l + 64] = d * sc[is + 4] * q3;
                y[l + 96] = d * sc[is + 6] * q4;
            }
        }
    }
}

}  // namespace

void dequantize_row(GgmlType type, const uint8_t *src, float *dst, int64_t n) {
    if (!ggml_can_dequantize(type)) {
        throw Error(std::string("cannot dequantize type ") + ggml_type_name(type) + " (number " +
                    std::to_string((uint32_t)type) + "; " + kDequantizable + " can be)");
    }
    const int64_t block = ggml_block_size(type);
    if (n < 0 || n % block != 0) {
        throw Error("dequantize_row: " + std::to_string(n) + " values of " + ggml_type_name(type) +
                    " are not a whole number of its blocks of " + std::to_string(block));
    }
    const int64_t nb = n / block;
    switch (type) {
    case GgmlType::F32:
        for (int64_t k = 0; k < n; k++, src += 4) {
            dst[k] = bits_to_float(uint32_t(src[0]) | uint32_t(src[1]) << 8 | uint32_t(src[2]) << 16 |
                                   uint32_t(src[3]) << 24);
        }
        break;
    case GgmlType::F16:
        for (int64_t k = 0; k < n; k++) dst[k] = half_at(src + 2 * k);
        break;
    case GgmlType::BF16:
        for (int64_t k = 0; k < n; k++) dst[k] = bf16_to_fp32(le16(src + 2 * k));
        break;
    case GgmlType::Q4_0: row_q4_0(src, dst, nb); break;
    case GgmlType::Q4_1: row_q4_1(src, dst, nb); break;
    case GgmlType::Q5_0: row_q5_0(src, dst, nb); break;
    case GgmlType::Q5_1: row_q5_1(src, dst, nb); break;
    case GgmlType::Q8_0: row_q8_0(src, dst, nb); break;
    case GgmlType::Q4_K: row_q4_k(src, dst, nb); break;
    case GgmlType::Q5_K: row_q5_k(src, dst, nb); break;
    case GgmlType::Q6_K: row_q6_k(src, dst, nb); break;
    default: break;  // refused above
    }
}

uint16_t fp32_to_fp16(float f) {
    uint32_t x;
    std::memcpy(&x, &f, 4);
    const uint32_t sign = (x >> 16) & 0x8000, abs = x & 0x7FFFFFFF;
    if (abs >= 0x7F800000) return uint16_t(sign | 0x7C00 | (abs > 0x7F800000 ? 0x200 | ((abs >> 13) & 0x3FF) : 0));
    // The value as a multiple of 2^-24 (half's subnormal step) or with a
    // 10-bit mantissa, rounded to nearest, ties to even, by integer steps.
    const int e = int(abs >> 23) - 127;  // unbiased exponent
    if (e > 15) return uint16_t(sign | 0x7C00);  // past 65504 after rounding: infinity
    uint32_t mant = (abs & 0x7FFFFF) | 0x800000;
    int shift;  // bits of mant below half's last mantissa bit
    uint32_t base;
    if (e >= -14) {
        shift = 13;
        base = uint32_t(e + 15) << 10;
        mant &= 0x7FFFFF;  // the implicit bit is in base's exponent
    } else {
        if (e < -25) return uint16_t(sign);  // below half the smallest subnormal
        shift = 13 + (-14 - e);
        base = 0;
    }
    const uint32_t keep = mant >> shift, rest = mant & ((1u << shift) - 1), half = 1u << (shift - 1);
    uint32_t h = base + keep;
    if (rest > half || (rest == half && (keep & 1))) h++;  // may carry into the exponent: still right
    return uint16_t(sign | h);
}

bool requantize_row_q8_0(GgmlType type, const uint8_t *src, uint8_t *dst, int64_t n) {
    const bool exact = type == GgmlType::Q4_0 || type == GgmlType::Q5_0 || type == GgmlType::Q8_0;
    const bool scaled = type == GgmlType::Q4_1 || type == GgmlType::Q5_1 || type == GgmlType::Q4_K ||
                        type == GgmlType::Q5_K || type == GgmlType::Q6_K;
    if ((!exact && !scaled) || n % 32 != 0 || n % ggml_block_size(type) != 0) return false;
    std::vector<float> v((size_t)n);
    dequantize_row(type, src, v.data(), n);
    const size_t in_block = ggml_type_size(type);  // bytes of one of the type's blocks (32 values when exact)
    for (int64_t b = 0; b < n / 32; b++, dst += 34) {
        const float *x = v.data() + b * 32;
        uint16_t h;
        if (exact) {
            // The block's own step, its fp16 bits first: every value is the
            // step times a small integer, exactly (dequantize_row's product).
            h = le16(src + (size_t)b * in_block);
        } else {
            float amax = 0.0f;
            for (int k = 0; k < 32; k++) amax = std::max(amax, std::fabs(x[k]));
            h = fp32_to_fp16(amax / 127.0f);
        }
        const float d = fp16_to_fp32(h);
        dst[0] = uint8_t(h & 0xFF);
        dst[1] = uint8_t(h >> 8);
        for (int k = 0; k < 32; k++) {
            // (Q4_0's and Q5_0's step may be negative: ggml divides by the
            // value of largest magnitude, sign and all.)
            const float q = d != 0.0f && std::isfinite(d) ? std::nearbyint(x[k] / d) : 0.0f;
            dst[2 + k] = uint8_t(int8_t(std::max(-127.0f, std::min(127.0f, q))));
        }
    }
    return true;
}

bool transcode_row_q4_1(GgmlType type, const uint8_t *src, uint8_t *dst, int64_t n) {
    if (n <= 0 || n % ggml_block_size(type) != 0) return false;
    if (type == GgmlType::Q4_1) {
        std::copy(src, src + (size_t)(n / 32) * 20, dst);
        return true;
    }
    if (type != GgmlType::Q4_K) return false;
    for (int64_t i = 0; i < n / 256; i++, src += 144) {
        const float d = half_at(src), dmin = half_at(src + 2);
        const uint8_t *scales = src + 4, *q = src + 16;
        for (int s = 0; s < 8; s++, dst += 20) {
            // Sub-block s: the low nibbles of q[32·(s/2) ..] for even s, the
            // high ones for odd; Q4_1's byte l holds values l and l + 16.
            int sc, m;
            scale_min_k4(s, scales, sc, m);
            const float step = d * (float)sc, minimum = -(dmin * (float)m);
            const uint16_t hs = fp32_to_fp16(step), hm = fp32_to_fp16(minimum);
            if (!std::isfinite(fp16_to_fp32(hs)) || !std::isfinite(fp16_to_fp32(hm))) return false;
            dst[0] = uint8_t(hs & 0xFF), dst[1] = uint8_t(hs >> 8), dst[2] = uint8_t(hm & 0xFF), dst[3] = uint8_t(hm >> 8);
            const uint8_t *sub = q + 32 * (s / 2);
            const int shift = (s % 2) * 4;
            for (int l = 0; l < 16; l++) {
                dst[4 + l] = uint8_t(((sub[l] >> shift) & 0xF) | (((sub[l + 16] >> shift) & 0xF) << 4));
            }
        }
    }
    return true;
}

void dequantize(const GgufTensor &t, float *out) {
    const std::string what = "tensor '" + t.name + "'";
    if (!ggml_can_dequantize(t.type)) {
        throw Error(what + ": cannot dequantize type " + ggml_type_name(t.type) + " (" + kDequantizable + " can be)");
    }
    if (t.ne.empty()) throw Error(what + ": has no dimensions");
    const int64_t row = t.ne[0], block = ggml_block_size(t.type);
    if (row <= 0 || row % block != 0) {
        throw Error(what + ": ne[0] = " + std::to_string(row) + " is not a multiple of the block size " +
                    std::to_string(block) + " of " + ggml_type_name(t.type));
    }
    const int64_t rows = t.numel() / row;
    const size_t row_bytes = (size_t)(row / block) * ggml_type_size(t.type);
    if (rows <= 0 || (uint64_t)rows * row_bytes != t.bytes || !t.data) {
        throw Error(what + ": " + std::to_string(t.bytes) + " bytes do not hold " + dims_string(t.ne) + " of " +
                    ggml_type_name(t.type));
    }
    for (int64_t r = 0; r < rows; r++) dequantize_row(t.type, t.data + (size_t)r * row_bytes, out + r * row, row);
}

}  // namespace halformer
