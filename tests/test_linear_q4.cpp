// q4 and q4_1: GGUF Q4_0 and Q4_1 tensors' blocks kept 4-bit
// (generators/packing.h), packed by hf_pack_q4_0 / hf_pack_q4_1 and run by
// hf_linear_q4* / hf_linear_q4_1* against activations quantized in blocks of
// 32 (generators/linear_packed_generator.cpp), checked against
// double-precision loops written here from the formats' definitions:
// W(n, k) = d(n, b)·(q(n, k) − 8) (Q4_0) or d(n, b)·q(n, k) + m(n, b) (Q4_1)
// from the blocks as ggml lays them out (byte i of a block: k = i low
// nibble, k = i + 16 high), each block of a row of x quantized with step
// max |x| / 127 (codes round(x · (1 / step))), each block's products summed
// exactly, then rescaled and summed.
#include "reference.h"

#include "hf_linear_q4.h"
#include "hf_linear_q4_dot.h"
#include "hf_linear_q4_dot_gelu_tanh_gated.h"
#include "hf_linear_q4_dot_residual.h"
#include "hf_linear_q4_dot_silu_gated.h"
#include "hf_linear_q4_gelu_tanh_gated.h"
#include "hf_linear_q4_residual.h"
#include "hf_linear_q4_silu_gated.h"
#include "hf_linear_q4_1.h"
#include "hf_linear_q4_1_dot.h"
#include "hf_linear_q4_1_dot_gelu_tanh_gated.h"
#include "hf_linear_q4_1_dot_residual.h"
#include "hf_linear_q4_1_dot_silu_gated.h"
#include "hf_linear_q4_1_gelu_tanh_gated.h"
#include "hf_linear_q4_1_residual.h"
#include "hf_linear_q4_1_silu_gated.h"
#include "hf_pack_q4_0.h"
#include "hf_pack_q4_1.h"

#include <gtest/gtest.h>

#include <cmath>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <random>
#include <string>
#include <vector>

namespace {

using ref::Array;
using ref::Buffer;
constexpr int kPanel = 48, kBlock = 32;

#define SKIP_ON_DEVICE() \
    if (std::getenv("HALFORMER_DEVICE")) GTEST_SKIP() << "packed kernels are CPU only"

float half_value(uint16_t h) {
    const uint32_t e = (h >> 10) & 0x1F, m = h & 0x3FF;
    float v = e == 0 ? std::ldexp((float)m, -24) : std::ldexp((float)(1024 + m), (int)e - 25);
    return (h & 0x8000) ? -v : v;
}

// A random fp16 normal, |v| in [2^-10, 2^-4), either sign.
uint16_t random_half(std::mt19937 &rng) {
    const uint16_t e = uint16_t(5 + rng() % 6), m = uint16_t(rng() % 1024), s = uint16_t(rng() % 2);
    return uint16_t(s << 15 | e << 10 | m);
}

// N rows of K / 32 Q4_0 blocks (18 bytes: d, 16 bytes of nibbles) or Q4_1
// blocks (20 bytes: d, m, the nibbles), random codes, steps and minimums of
// both signs (ggml's Q4_0 quantizer makes d = the signed value of largest
// magnitude / -8).
struct Q4Weights {
    int N, K;
    bool with_min;
    std::vector<uint8_t> bytes;  // [N][K/32][18 | 20]
    int block_bytes() const { return with_min ? 20 : 18; }
    const uint8_t *block(int n, int b) const { return &bytes[((size_t)n * (K / kBlock) + b) * block_bytes()]; }
    uint16_t d_bits(int n, int b) const { return uint16_t(block(n, b)[0] | block(n, b)[1] << 8); }
    uint16_t m_bits(int n, int b) const { return with_min ? uint16_t(block(n, b)[2] | block(n, b)[3] << 8) : 0; }
    int code(int n, int k) const {
        const uint8_t *p = block(n, k / kBlock) + (with_min ? 4 : 2);
        const int i = k % kBlock;
        return i < 16 ? (p[i] & 15) : (p[i - 16] >> 4);
    }
    double value(int n, int k) const {
        const double d = half_value(d_bits(n, k / kBlock));
        return with_min ? d * code(n, k) + half_value(m_bits(n, k / kBlock)) : d * (code(n, k) - 8);
    }
};

Q4Weights random_q4(int N, int K, uint32_t seed, bool with_min) {
    Q4Weights w{N, K, with_min, {}};
    w.bytes.resize((size_t)N * (K / kBlock) * w.block_bytes());
    std::mt19937 rng(seed);
    for (size_t at = 0; at < w.bytes.size(); at += w.block_bytes()) {
        const int head = with_min ? 4 : 2;
        for (int h = 0; h < head; h += 2) {
            const uint16_t v = random_half(rng);
            w.bytes[at + h] = uint8_t(v & 0xFF);
            w.bytes[at + h + 1] = uint8_t(v >> 8);
        }
        for (int i = 0; i < 16; i++) w.bytes[at + head + i] = uint8_t(rng());
    }
    return w;
}

struct Packed {
    Buffer<uint8_t> w;
    Buffer<uint16_t> scale, mins;  // fp16 bits; mins: q4_1 only
};

Packed pack(const Q4Weights &q) {
    const int Np = (q.N + kPanel - 1) / kPanel * kPanel, B = q.K / kBlock;
    Buffer<uint8_t> blocks(const_cast<uint8_t *>(q.bytes.data()), {q.block_bytes(), B, q.N});
    Packed p{Buffer<uint8_t>(4, kPanel, q.K / 8, Np / kPanel), Buffer<uint16_t>(kPanel, B, Np / kPanel),
             Buffer<uint16_t>(kPanel, B, Np / kPanel)};
    EXPECT_EQ(q.with_min ? hf_pack_q4_1(blocks, p.w, p.scale, p.mins) : hf_pack_q4_0(blocks, p.w, p.scale), 0);
    return p;
}

using Buf = halide_buffer_t *;
struct Variant {
    std::string name, act;
    bool with_min = false;
    bool has_extra = false;  // residual, or the gate (gated)
    bool gated = false;
    std::function<int(Buf, Packed &, Buf, Buf, Buf)> run;  // (x, packed, bias, extra, y)
};

// The kernel of one kind for both formats, called with the buffers its format takes.
template <typename Q4, typename Q41>
std::vector<Variant> both(const std::string &suffix, const std::string &act, bool extra, bool gated, Q4 q4, Q41 q41) {
    return {{"hf_linear_q4" + suffix, act, false, extra, gated, q4}, {"hf_linear_q4_1" + suffix, act, true, extra, gated, q41}};
}

std::vector<Variant> variants() {
    std::vector<Variant> v;
    auto add = [&](std::vector<Variant> two) { v.insert(v.end(), two.begin(), two.end()); };
    add(both("", "none", false, false, [](Buf x, Packed &p, Buf b, Buf, Buf y) { return hf_linear_q4(x, p.w, p.scale, b, y); },
             [](Buf x, Packed &p, Buf b, Buf, Buf y) { return hf_linear_q4_1(x, p.w, p.scale, p.mins, b, y); }));
    add(both("_dot", "none", false, false,
             [](Buf x, Packed &p, Buf b, Buf, Buf y) { return hf_linear_q4_dot(x, p.w, p.scale, b, y); },
             [](Buf x, Packed &p, Buf b, Buf, Buf y) { return hf_linear_q4_1_dot(x, p.w, p.scale, p.mins, b, y); }));
    add(both("_residual", "none", true, false,
             [](Buf x, Packed &p, Buf b, Buf e, Buf y) { return hf_linear_q4_residual(x, p.w, p.scale, b, e, y); },
             [](Buf x, Packed &p, Buf b, Buf e, Buf y) { return hf_linear_q4_1_residual(x, p.w, p.scale, p.mins, b, e, y); }));
    add(both("_dot_residual", "none", true, false,
             [](Buf x, Packed &p, Buf b, Buf e, Buf y) { return hf_linear_q4_dot_residual(x, p.w, p.scale, b, e, y); },
             [](Buf x, Packed &p, Buf b, Buf e, Buf y) {
                 return hf_linear_q4_1_dot_residual(x, p.w, p.scale, p.mins, b, e, y);
             }));
    add(both("_silu_gated", "silu", true, true,
             [](Buf x, Packed &p, Buf b, Buf e, Buf y) { return hf_linear_q4_silu_gated(x, p.w, p.scale, b, e, y); },
             [](Buf x, Packed &p, Buf b, Buf e, Buf y) {
                 return hf_linear_q4_1_silu_gated(x, p.w, p.scale, p.mins, b, e, y);
             }));
    add(both("_dot_silu_gated", "silu", true, true,
             [](Buf x, Packed &p, Buf b, Buf e, Buf y) { return hf_linear_q4_dot_silu_gated(x, p.w, p.scale, b, e, y); },
             [](Buf x, Packed &p, Buf b, Buf e, Buf y) {
                 return hf_linear_q4_1_dot_silu_gated(x, p.w, p.scale, p.mins, b, e, y);
             }));
    add(both("_gelu_tanh_gated", "gelu_tanh", true, true,
             [](Buf x, Packed &p, Buf b, Buf e, Buf y) { return hf_linear_q4_gelu_tanh_gated(x, p.w, p.scale, b, e, y); },
             [](Buf x, Packed &p, Buf b, Buf e, Buf y) {
                 return hf_linear_q4_1_gelu_tanh_gated(x, p.w, p.scale, p.mins, b, e, y);
             }));
    add(both("_dot_gelu_tanh_gated", "gelu_tanh", true, true,
             [](Buf x, Packed &p, Buf b, Buf e, Buf y) {
                 return hf_linear_q4_dot_gelu_tanh_gated(x, p.w, p.scale, b, e, y);
             },
             [](Buf x, Packed &p, Buf b, Buf e, Buf y) {
                 return hf_linear_q4_1_dot_gelu_tanh_gated(x, p.w, p.scale, p.mins, b, e, y);
             }));
    return v;
}

int quantize_x(float v, float step) {
    const float inverse = 1.0f / step;
    const float q = std::nearbyint(v * inverse);
    return (int)std::fmax(-127.0f, std::fmin(127.0f, q));
}

// exact: the kernel's quantization with double sums; plain: float32 x
// against the weights' values (what 4-bit codes and int8 activations
// approximate), with the bound that quantization allows.
void reference(const Variant &v, const Buffer<float> &x, const Q4Weights &q, const Buffer<float> &b,
               const Buffer<float> &extra, Array &exact, Array &plain, Array &bound) {
    const int K = q.K, M = x.dim(1).extent();
    for (int m = 0; m < M; m++) {
        std::vector<float> sx(K / kBlock, 0.0f);
        for (int k = 0; k < K; k++) sx[k / kBlock] = std::fmax(sx[k / kBlock], std::fabs(x(k, m)));
        for (float &s : sx) s = s > 0 ? s / 127.0f : 1.0f;
        for (int n = 0; n < q.N; n++) {
            double e = 0, p = 0, bd = 0;
            for (int blk = 0; blk < K / kBlock; blk++) {
                long long sum = 0, xsum = 0;
                for (int k = blk * kBlock; k < (blk + 1) * kBlock; k++) {
                    const int qx = quantize_x(x(k, m), sx[blk]);
                    sum += (long long)qx * (q.code(n, k) - (q.with_min ? 0 : 8));
                    xsum += qx;
                    p += (double)x(k, m) * q.value(n, k);
                    bd += std::fabs(q.value(n, k)) * sx[blk] / 2;
                }
                e += (double)sum * sx[blk] * half_value(q.d_bits(n, blk)) +
                     (double)xsum * sx[blk] * half_value(q.m_bits(n, blk));
            }
            const double rv = v.has_extra && !v.gated ? extra(n, m) : 0.0, gv = v.gated ? extra(n, m) : 1.0;
            exact(n, m) = ref::activate(e + b(n), v.act) * gv + rv;
            plain(n, m) = ref::activate(p + b(n), v.act) * gv + rv;
            bound(n, m) = bd * std::fabs(gv) * (v.act == "none" ? 1.0 : 1.13);
        }
    }
}

void check(const Variant &v, int M, int K, int N, uint32_t seed) {
    SCOPED_TRACE(v.name + " M=" + std::to_string(M) + " K=" + std::to_string(K) + " N=" + std::to_string(N));
    const Q4Weights q = random_q4(N, K, seed, v.with_min);
    Packed p = pack(q);
    Buffer<float> x = ref::random_buffer({K, M}, seed + 1, -2.0f, 2.0f);
    Buffer<float> b = ref::random_buffer({N}, seed + 2);
    Buffer<float> extra = ref::random_buffer({N, M}, seed + 3);
    Buffer<float> y(N, M);
    const int rc = v.run(x, p, b, extra, y);
    ASSERT_EQ(rc, 0);
    Array exact({N, M}), plain({N, M}), bound({N, M});
    reference(v, x, q, b, extra, exact, plain, bound);
    EXPECT_LE(ref::rel_error(y, exact), 2e-5) << "against the same quantization, double sums";
    int bad = 0;
    for (int m = 0; m < M; m++) {
        for (int n = 0; n < N; n++) {
            const double d = std::fabs(y(n, m) - plain(n, m)), lim = bound(n, m) * 1.01 + 1e-4 * (1 + std::fabs(plain(n, m)));
            if (!(d <= lim) && bad++ < 3) ADD_FAILURE() << "y(" << n << ", " << m << ") = " << y(n, m) << ", float " << plain(n, m);
        }
    }
}

TEST(LinearQ4, EveryVariantAgainstDoubleLoops) {
    SKIP_ON_DEVICE();
    uint32_t seed = 100;
    for (const Variant &v : variants()) {
        // Decode (1 row), a few rows, a register block and its tail; a
        // panel exactly, a panel's tail, several panels; one block of k,
        // several.
        for (auto [M, K, N] : {std::tuple<int, int, int>{1, 32, 48}, {1, 256, 50}, {3, 64, 96}, {7, 512, 130},
                               {17, 96, 48}, {40, 128, 200}}) {
            check(v, M, K, N, seed++);
        }
    }
}

// The layout hf_pack_q4_0 and hf_pack_q4_1 write: each byte where
// packing.h says, the padding past N a zero weight (code 8, step 0, minimum
// 0), each block's step (and minimum) its fp16 bits.
TEST(LinearQ4, PackingLayout) {
    SKIP_ON_DEVICE();
    for (bool with_min : {false, true}) {
        SCOPED_TRACE(with_min ? "q4_1" : "q4");
        const Q4Weights q = random_q4(50, 64, 7, with_min);
        Packed p = pack(q);
        ASSERT_EQ(p.w.dim(3).extent(), 2);
        for (int n = 0; n < 96; n++) {
            for (int k = 0; k < 64; k++) {
                const int blk = k / 32, i = k % 32, h = i / 16, e = (i % 16) / 4, r = i % 4;
                const uint8_t byte = p.w(r, n % kPanel, blk * 4 + e, n / kPanel);
                const int code = h ? byte >> 4 : byte & 15;
                ASSERT_EQ(code, n < 50 ? q.code(n, k) : 8) << "n " << n << " k " << k;
            }
            for (int blk = 0; blk < 2; blk++) {
                ASSERT_EQ(p.scale(n % kPanel, blk, n / kPanel), n < 50 ? q.d_bits(n, blk) : 0) << "n " << n;
                if (with_min) ASSERT_EQ(p.mins(n % kPanel, blk, n / kPanel), n < 50 ? q.m_bits(n, blk) : 0) << "n " << n;
            }
        }
    }
}

// Hostile activations: all zeros (step 1, every code 0), one huge value in
// a block of tiny ones, values at a block's ±127 edge.
TEST(LinearQ4, HostileActivations) {
    SKIP_ON_DEVICE();
    for (int which : {2, 3}) {  // hf_linear_q4_dot, hf_linear_q4_1_dot
        const Variant v = variants()[which];
        SCOPED_TRACE(v.name);
        const int K = 96, N = 48;
        const Q4Weights q = random_q4(N, K, 11, v.with_min);
        Packed p = pack(q);
        Buffer<float> b(N), extra(N, 1), y(N, 1);
        b.fill(0.0f);
        extra.fill(0.0f);
        for (int kind = 0; kind < 3; kind++) {
            Buffer<float> x(K, 1);
            for (int k = 0; k < K; k++) x(k, 0) = kind == 0 ? 0.0f : kind == 1 ? (k == 5 ? 1e6f : 1e-3f) : (k % 2 ? 127.0f : -127.0f);
            ASSERT_EQ(v.run(x, p, b, extra, y), 0);
            Array exact({N, 1}), plain({N, 1}), bound({N, 1});
            reference(v, x, q, b, extra, exact, plain, bound);
            EXPECT_LE(ref::rel_error(y, exact), 2e-5) << "kind " << kind;
            if (kind == 0) {
                for (int n = 0; n < N; n++) EXPECT_EQ(y(n, 0), 0.0f);
            }
        }
    }
}

}  // namespace
