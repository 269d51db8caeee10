// q4: a GGUF Q4_0 tensor's blocks kept 4-bit (generators/packing.h), packed
// by hf_pack_q4_0 and run by hf_linear_q4* against activations quantized in
// blocks of 32 (generators/linear_packed_generator.cpp), checked against
// double-precision loops written here from the formats' definitions:
// W(n, k) = d(n, b)·(q(n, k) − 8) from the blocks as ggml lays them out
// (byte i of a block: k = i low nibble, k = i + 16 high), each block of a
// row of x quantized with step max |x| / 127 (codes round(x · (1 / step))),
// each block's products summed exactly, then rescaled and summed.
#include "reference.h"

#include "hf_linear_q4.h"
#include "hf_linear_q4_dot.h"
#include "hf_linear_q4_dot_gelu_tanh_gated.h"
#include "hf_linear_q4_dot_residual.h"
#include "hf_linear_q4_dot_silu_gated.h"
#include "hf_linear_q4_gelu_tanh_gated.h"
#include "hf_linear_q4_residual.h"
#include "hf_linear_q4_silu_gated.h"
#include "hf_pack_q4_0.h"

#include <gtest/gtest.h>

#include <cmath>
#include <cstdlib>
#include <cstring>
#include <random>
#include <string>
#include <vector>

namespace {

using ref::Array;
using ref::Buffer;
constexpr int kPanel = 48, kBlock = 32, kBlockBytes = 18;

#define SKIP_ON_DEVICE() \
    if (std::getenv("HALFORMER_DEVICE")) GTEST_SKIP() << "packed kernels are CPU only"

float half_value(uint16_t h) {
    const uint32_t e = (h >> 10) & 0x1F, m = h & 0x3FF;
    float v = e == 0 ? std::ldexp((float)m, -24) : std::ldexp((float)(1024 + m), (int)e - 25);
    return (h & 0x8000) ? -v : v;
}

// N rows of K / 32 Q4_0 blocks, random codes and steps of both signs (as
// ggml's quantizer makes them: d = the signed value of largest magnitude / -8).
struct Q4Weights {
    int N, K;
    std::vector<uint8_t> bytes;  // [N][K/32][18]
    uint16_t d_bits(int n, int b) const {
        const uint8_t *p = &bytes[((size_t)n * (K / kBlock) + b) * kBlockBytes];
        return uint16_t(p[0] | p[1] << 8);
    }
    int code(int n, int k) const {
        const uint8_t *p = &bytes[((size_t)n * (K / kBlock) + k / kBlock) * kBlockBytes + 2];
        const int i = k % kBlock;
        return i < 16 ? (p[i] & 15) : (p[i - 16] >> 4);
    }
    double value(int n, int k) const { return (double)half_value(d_bits(n, k / kBlock)) * (code(n, k) - 8); }
};

Q4Weights random_q4(int N, int K, uint32_t seed) {
    Q4Weights w{N, K, std::vector<uint8_t>((size_t)N * (K / kBlock) * kBlockBytes)};
    std::mt19937 rng(seed);
    for (size_t at = 0; at < w.bytes.size(); at += kBlockBytes) {
        // |d| in [2^-10, 2^-4), either sign: an fp16 normal.
        const uint16_t e = uint16_t(5 + rng() % 6), m = uint16_t(rng() % 1024), s = uint16_t(rng() % 2);
        const uint16_t h = uint16_t(s << 15 | e << 10 | m);
        w.bytes[at] = uint8_t(h & 0xFF);
        w.bytes[at + 1] = uint8_t(h >> 8);
        for (int i = 0; i < 16; i++) w.bytes[at + 2 + i] = uint8_t(rng());
    }
    return w;
}

struct Packed {
    Buffer<uint8_t> w;
    Buffer<float> scale;
};

Packed pack(const Q4Weights &q) {
    const int Np = (q.N + kPanel - 1) / kPanel * kPanel, B = q.K / kBlock;
    Buffer<uint8_t> blocks(const_cast<uint8_t *>(q.bytes.data()), {kBlockBytes, B, q.N});
    Packed p{Buffer<uint8_t>(4, kPanel, q.K / 8, Np / kPanel), Buffer<float>(kPanel, B, Np / kPanel)};
    EXPECT_EQ(hf_pack_q4_0(blocks, p.w, p.scale), 0);
    return p;
}

using PlainFn = int (*)(halide_buffer_t *, halide_buffer_t *, halide_buffer_t *, halide_buffer_t *, halide_buffer_t *);
using ExtraFn = int (*)(halide_buffer_t *, halide_buffer_t *, halide_buffer_t *, halide_buffer_t *, halide_buffer_t *,
                        halide_buffer_t *);
struct Variant {
    std::string name, act;
    PlainFn plain = nullptr;
    ExtraFn extra = nullptr;  // residual, or the gate (gated)
    bool gated = false;
};

std::vector<Variant> variants() {
    return {{"hf_linear_q4", "none", hf_linear_q4},
            {"hf_linear_q4_dot", "none", hf_linear_q4_dot},
            {"hf_linear_q4_residual", "none", nullptr, hf_linear_q4_residual},
            {"hf_linear_q4_dot_residual", "none", nullptr, hf_linear_q4_dot_residual},
            {"hf_linear_q4_silu_gated", "silu", nullptr, hf_linear_q4_silu_gated, true},
            {"hf_linear_q4_dot_silu_gated", "silu", nullptr, hf_linear_q4_dot_silu_gated, true},
            {"hf_linear_q4_gelu_tanh_gated", "gelu_tanh", nullptr, hf_linear_q4_gelu_tanh_gated, true},
            {"hf_linear_q4_dot_gelu_tanh_gated", "gelu_tanh", nullptr, hf_linear_q4_dot_gelu_tanh_gated, true}};
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
                long long sum = 0;
                for (int k = blk * kBlock; k < (blk + 1) * kBlock; k++) {
                    sum += (long long)quantize_x(x(k, m), sx[blk]) * (q.code(n, k) - 8);
                    p += (double)x(k, m) * q.value(n, k);
                    bd += std::fabs(q.value(n, k)) * sx[blk] / 2;
                }
                e += (double)sum * sx[blk] * half_value(q.d_bits(n, blk));
            }
            const double rv = v.extra && !v.gated ? extra(n, m) : 0.0, gv = v.gated ? extra(n, m) : 1.0;
            exact(n, m) = ref::activate(e + b(n), v.act) * gv + rv;
            plain(n, m) = ref::activate(p + b(n), v.act) * gv + rv;
            bound(n, m) = bd * std::fabs(gv) * (v.act == "none" ? 1.0 : 1.13);
        }
    }
}

void check(const Variant &v, int M, int K, int N, uint32_t seed) {
    SCOPED_TRACE(v.name + " M=" + std::to_string(M) + " K=" + std::to_string(K) + " N=" + std::to_string(N));
    const Q4Weights q = random_q4(N, K, seed);
    Packed p = pack(q);
    Buffer<float> x = ref::random_buffer({K, M}, seed + 1, -2.0f, 2.0f);
    Buffer<float> b = ref::random_buffer({N}, seed + 2);
    Buffer<float> extra = ref::random_buffer({N, M}, seed + 3);
    Buffer<float> y(N, M);
    const int rc = v.plain ? v.plain(x, p.w, p.scale, b, y) : v.extra(x, p.w, p.scale, b, extra, y);
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

// The layout hf_pack_q4_0 writes: each byte where packing.h says, the
// padding past N a zero weight (code 8), each block's step its fp16 d.
TEST(LinearQ4, PackingLayout) {
    SKIP_ON_DEVICE();
    const Q4Weights q = random_q4(50, 64, 7);
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
            const float s = p.scale(n % kPanel, blk, n / kPanel);
            if (n < 50) ASSERT_EQ(s, half_value(q.d_bits(n, blk))) << "n " << n;
            else ASSERT_EQ(s, 0.0f);
        }
    }
}

// Hostile activations: all zeros (step 1, every code 0), one huge value in
// a block of tiny ones, values at a block's ±127 edge.
TEST(LinearQ4, HostileActivations) {
    SKIP_ON_DEVICE();
    const Variant v = variants()[1];  // hf_linear_q4_dot
    const int K = 96, N = 48;
    const Q4Weights q = random_q4(N, K, 11);
    Packed p = pack(q);
    Buffer<float> b(N), extra(N, 1), y(N, 1);
    b.fill(0.0f);
    extra.fill(0.0f);
    for (int kind = 0; kind < 3; kind++) {
        Buffer<float> x(K, 1);
        for (int k = 0; k < K; k++) x(k, 0) = kind == 0 ? 0.0f : kind == 1 ? (k == 5 ? 1e6f : 1e-3f) : (k % 2 ? 127.0f : -127.0f);
        ASSERT_EQ(v.plain(x, p.w, p.scale, b, y), 0);
        Array exact({N, 1}), plain({N, 1}), bound({N, 1});
        reference(v, x, q, b, extra, exact, plain, bound);
        EXPECT_LE(ref::rel_error(y, exact), 2e-5) << "kind " << kind;
        if (kind == 0) {
            for (int n = 0; n < N; n++) EXPECT_EQ(y(n, 0), 0.0f);
        }
    }
}

}  // namespace
