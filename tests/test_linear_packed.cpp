// The packed projections: pack_weights (hf_pack_f32/bf16/int8) and
// linear_packed (hf_linear_{f32,bf16,int8}[_dot][_act|_residual]) against double
// precision references. Two references each:
//   * the same quantization done here (bf16 rounding to nearest even; int8
//     steps max|·|/127 per block of 32 k, of each weight column and each
//     activation row), then exact double sums: only float32 summation
//     separates kernel and reference;
//   * plain float32 inputs: the error bound the format allows, per element.
// CPU only (x86; AVX512-BF16 / VNNI where the variant has them).
#include <cstring>

#include "reference.h"

#include "hf_linear_bf16.h"
#include "hf_linear_bf16_dot.h"
#include "hf_linear_bf16_dot_gelu.h"
#include "hf_linear_bf16_dot_gelu_tanh.h"
#include "hf_linear_bf16_dot_relu.h"
#include "hf_linear_bf16_dot_residual.h"
#include "hf_linear_bf16_gelu.h"
#include "hf_linear_bf16_gelu_tanh.h"
#include "hf_linear_bf16_relu.h"
#include "hf_linear_bf16_silu.h"
#include "hf_linear_bf16_dot_silu.h"
#include "hf_linear_int8_silu.h"
#include "hf_linear_int8_dot_silu.h"
#include "hf_linear_bf16_residual.h"
#include "hf_linear_int8.h"
#include "hf_linear_int8_offset.h"
#include "hf_linear_int8_dot.h"
#include "hf_linear_int8_dot_gelu.h"
#include "hf_linear_int8_dot_gelu_tanh.h"
#include "hf_linear_int8_dot_relu.h"
#include "hf_linear_int8_dot_residual.h"
#include "hf_linear_int8_gelu.h"
#include "hf_linear_int8_gelu_tanh.h"
#include "hf_linear_int8_relu.h"
#include "hf_linear_int8_residual.h"
#include "hf_pack_bf16.h"
#include "hf_linear_bf16_gelu_tanh_gated.h"
#include "hf_linear_bf16_dot_gelu_tanh_gated.h"
#include "hf_linear_bf16_silu_gated.h"
#include "hf_linear_bf16_dot_silu_gated.h"
#include "hf_linear_int8_gelu_tanh_gated.h"
#include "hf_linear_int8_dot_gelu_tanh_gated.h"
#include "hf_linear_int8_silu_gated.h"
#include "hf_linear_int8_dot_silu_gated.h"
#include "hf_pack_int8.h"
#include "hf_pack_q8_0.h"
#include "hf_pack_f32.h"
#include "hf_linear_f32.h"
#include "hf_linear_f32_dot.h"
#include "hf_linear_f32_relu.h"
#include "hf_linear_f32_dot_relu.h"
#include "hf_linear_f32_gelu.h"
#include "hf_linear_f32_dot_gelu.h"
#include "hf_linear_f32_gelu_tanh.h"
#include "hf_linear_f32_dot_gelu_tanh.h"
#include "hf_linear_f32_silu.h"
#include "hf_linear_f32_dot_silu.h"
#include "hf_linear_f32_residual.h"
#include "hf_linear_f32_dot_residual.h"
#include "hf_linear_f32_gelu_tanh_gated.h"
#include "hf_linear_f32_dot_gelu_tanh_gated.h"
#include "hf_linear_f32_silu_gated.h"
#include "hf_linear_f32_dot_silu_gated.h"

#include <gtest/gtest.h>

#include <cmath>
#include <cstdlib>
#include <cstring>
#include <string>

namespace {

using ref::Array;
using ref::Buffer;
constexpr int kPanel = 48;

#define SKIP_ON_DEVICE()                                                              \
    if (std::getenv("HALFORMER_DEVICE")) GTEST_SKIP() << "packed kernels are CPU only"

// float32 → bfloat16 → float32, rounding to nearest, ties to even.
float bf16_round(float v) {
    uint32_t b;
    std::memcpy(&b, &v, 4);
    b += 0x7fff + ((b >> 16) & 1);
    b &= 0xffff0000u;
    float r;
    std::memcpy(&r, &b, 4);
    return r;
}
float bf16_value(uint16_t h) {
    uint32_t b = (uint32_t)h << 16;
    float r;
    std::memcpy(&r, &b, 4);
    return r;
}
float int8_step(float absmax) { return absmax > 0 ? absmax / 127.0f : 1.0f; }
int quantize(float v, float step) {
    float q = std::nearbyint(v / step);  // ties to even, as Halide's round
    return (int)std::fmax(-127.0f, std::fmin(127.0f, q));
}
// The activations' codes: v times the step's inverse (packing.h).
int quantize_x(float v, float step) {
    const float inverse = 1.0f / step;
    float q = std::nearbyint(v * inverse);
    return (int)std::fmax(-127.0f, std::fmin(127.0f, q));
}

constexpr int kQBlock = 32;

struct Packed {
    int N, K, Np, groups, kf;
    Buffer<void> w;
    Buffer<float> scale;      // int8: (j, b, p)
    Buffer<int16_t> colsum;   // int8: (j, b, p)
    float step(int n, int k) const { return scale(n % kPanel, k / kQBlock, n / kPanel); }
    int sum(int n, int b) const { return colsum(n % kPanel, b, n / kPanel); }
};

enum class Fmt { F32, BF16, Int8 };
const char *fmt_name(Fmt f) { return f == Fmt::F32 ? "f32" : f == Fmt::BF16 ? "bf16" : "int8"; }

Packed pack(Buffer<float> w, Fmt fmt) {
    Packed p;
    p.K = w.dim(0).extent();
    p.N = w.dim(1).extent();
    p.kf = fmt == Fmt::Int8 ? 4 : fmt == Fmt::BF16 ? 2 : 1;
    p.Np = (p.N + kPanel - 1) / kPanel * kPanel;
    const int unit = fmt == Fmt::Int8 ? kQBlock : p.kf;
    p.groups = (p.K + unit - 1) / unit * unit / p.kf;
    halide_type_t t = fmt == Fmt::Int8   ? halide_type_t(halide_type_int, 8)
                      : fmt == Fmt::BF16 ? halide_type_t(halide_type_bfloat, 16)
                                         : halide_type_t(halide_type_float, 32);
    p.w = Buffer<void>(t, {p.kf, kPanel, p.groups, p.Np / kPanel});
    if (fmt == Fmt::Int8) {
        const int B = p.groups * p.kf / kQBlock;
        p.scale = Buffer<float>(kPanel, B, p.Np / kPanel);
        p.colsum = Buffer<int16_t>(kPanel, B, p.Np / kPanel);
        EXPECT_EQ(hf_pack_int8(w, p.w, p.scale, p.colsum), 0);
    } else if (fmt == Fmt::BF16) {
        EXPECT_EQ(hf_pack_bf16(w, p.w), 0);
    } else {
        EXPECT_EQ(hf_pack_f32(w, p.w), 0);
    }
    return p;
}

// The packed value of W[n, k] as a float (f32, bf16) or code (int8).
double packed_at(const Packed &p, int n, int k) {
    const size_t i = (size_t)k % p.kf + (size_t)p.kf * (n % kPanel) + (size_t)p.kf * kPanel * (k / p.kf) +
                     (size_t)p.kf * kPanel * p.groups * (n / kPanel);
    if (p.kf == 4) return ((const int8_t *)p.w.data())[i];
    if (p.kf == 1) return ((const float *)p.w.data())[i];
    return bf16_value(((const uint16_t *)p.w.data())[i]);
}

using Bf16Fn = int (*)(halide_buffer_t *, halide_buffer_t *, halide_buffer_t *, halide_buffer_t *);
using Bf16ResFn = int (*)(halide_buffer_t *, halide_buffer_t *, halide_buffer_t *, halide_buffer_t *,
                          halide_buffer_t *);
using Int8Fn = int (*)(halide_buffer_t *, halide_buffer_t *, halide_buffer_t *, halide_buffer_t *,
                       halide_buffer_t *, halide_buffer_t *);
using Int8ResFn = int (*)(halide_buffer_t *, halide_buffer_t *, halide_buffer_t *, halide_buffer_t *,
                          halide_buffer_t *, halide_buffer_t *, halide_buffer_t *);

struct Variant {
    std::string name, act;
    bool int8, residual;
    Fmt fmt() const { return int8 ? Fmt::Int8 : f32 ? Fmt::F32 : Fmt::BF16; }
    Bf16Fn bf16 = nullptr;
    Bf16ResFn bf16_res = nullptr;
    Int8Fn i8 = nullptr;
    Int8ResFn i8_res = nullptr;
    // The gated feed-forward's kernels (same arguments as the residual
    // ones): y = act(x·wᵀ + b)·gate, the gate in res's place.
    bool gated = false;
    // float32 weights (bf16's arguments, no rounding).
    bool f32 = false;
};

std::vector<Variant> variants() {
    std::vector<Variant> v;
    auto b = [&](const char *n, const char *act, Bf16Fn f) { v.push_back({n, act, false, false, f}); };
    auto br = [&](const char *n, Bf16ResFn f) { v.push_back({n, "none", false, true, nullptr, f}); };
    auto i = [&](const char *n, const char *act, Int8Fn f) { v.push_back({n, act, true, false, nullptr, nullptr, f}); };
    auto ir = [&](const char *n, Int8ResFn f) { v.push_back({n, "none", true, true, nullptr, nullptr, nullptr, f}); };
    b("hf_linear_bf16", "none", hf_linear_bf16);
    b("hf_linear_bf16_relu", "relu", hf_linear_bf16_relu);
    b("hf_linear_bf16_gelu", "gelu", hf_linear_bf16_gelu);
    b("hf_linear_bf16_gelu_tanh", "gelu_tanh", hf_linear_bf16_gelu_tanh);
    b("hf_linear_bf16_dot", "none", hf_linear_bf16_dot);
    b("hf_linear_bf16_dot_relu", "relu", hf_linear_bf16_dot_relu);
    b("hf_linear_bf16_dot_gelu", "gelu", hf_linear_bf16_dot_gelu);
    b("hf_linear_bf16_dot_gelu_tanh", "gelu_tanh", hf_linear_bf16_dot_gelu_tanh);
    b("hf_linear_bf16_silu", "silu", hf_linear_bf16_silu);
    b("hf_linear_bf16_dot_silu", "silu", hf_linear_bf16_dot_silu);
    br("hf_linear_bf16_residual", hf_linear_bf16_residual);
    br("hf_linear_bf16_dot_residual", hf_linear_bf16_dot_residual);
    i("hf_linear_int8", "none", hf_linear_int8);
    i("hf_linear_int8_offset", "none", hf_linear_int8_offset);
    i("hf_linear_int8_relu", "relu", hf_linear_int8_relu);
    i("hf_linear_int8_gelu", "gelu", hf_linear_int8_gelu);
    i("hf_linear_int8_gelu_tanh", "gelu_tanh", hf_linear_int8_gelu_tanh);
    i("hf_linear_int8_dot", "none", hf_linear_int8_dot);
    i("hf_linear_int8_dot_relu", "relu", hf_linear_int8_dot_relu);
    i("hf_linear_int8_dot_gelu", "gelu", hf_linear_int8_dot_gelu);
    i("hf_linear_int8_dot_gelu_tanh", "gelu_tanh", hf_linear_int8_dot_gelu_tanh);
    i("hf_linear_int8_silu", "silu", hf_linear_int8_silu);
    i("hf_linear_int8_dot_silu", "silu", hf_linear_int8_dot_silu);
    ir("hf_linear_int8_residual", hf_linear_int8_residual);
    ir("hf_linear_int8_dot_residual", hf_linear_int8_dot_residual);
    auto bg = [&](const char *n, const char *act, Bf16ResFn f) {
        v.push_back({n, act, false, true, nullptr, f});
        v.back().gated = true;
    };
    auto ig = [&](const char *n, const char *act, Int8ResFn f) {
        v.push_back({n, act, true, true, nullptr, nullptr, nullptr, f});
        v.back().gated = true;
    };
    bg("hf_linear_bf16_gelu_tanh_gated", "gelu_tanh", hf_linear_bf16_gelu_tanh_gated);
    bg("hf_linear_bf16_dot_gelu_tanh_gated", "gelu_tanh", hf_linear_bf16_dot_gelu_tanh_gated);
    bg("hf_linear_bf16_silu_gated", "silu", hf_linear_bf16_silu_gated);
    bg("hf_linear_bf16_dot_silu_gated", "silu", hf_linear_bf16_dot_silu_gated);
    ig("hf_linear_int8_gelu_tanh_gated", "gelu_tanh", hf_linear_int8_gelu_tanh_gated);
    ig("hf_linear_int8_dot_gelu_tanh_gated", "gelu_tanh", hf_linear_int8_dot_gelu_tanh_gated);
    ig("hf_linear_int8_silu_gated", "silu", hf_linear_int8_silu_gated);
    ig("hf_linear_int8_dot_silu_gated", "silu", hf_linear_int8_dot_silu_gated);
    const size_t f32_from = v.size();
    b("hf_linear_f32", "none", hf_linear_f32);
    b("hf_linear_f32_relu", "relu", hf_linear_f32_relu);
    b("hf_linear_f32_gelu", "gelu", hf_linear_f32_gelu);
    b("hf_linear_f32_gelu_tanh", "gelu_tanh", hf_linear_f32_gelu_tanh);
    b("hf_linear_f32_silu", "silu", hf_linear_f32_silu);
    b("hf_linear_f32_dot", "none", hf_linear_f32_dot);
    b("hf_linear_f32_dot_relu", "relu", hf_linear_f32_dot_relu);
    b("hf_linear_f32_dot_gelu", "gelu", hf_linear_f32_dot_gelu);
    b("hf_linear_f32_dot_gelu_tanh", "gelu_tanh", hf_linear_f32_dot_gelu_tanh);
    b("hf_linear_f32_dot_silu", "silu", hf_linear_f32_dot_silu);
    br("hf_linear_f32_residual", hf_linear_f32_residual);
    br("hf_linear_f32_dot_residual", hf_linear_f32_dot_residual);
    bg("hf_linear_f32_gelu_tanh_gated", "gelu_tanh", hf_linear_f32_gelu_tanh_gated);
    bg("hf_linear_f32_dot_gelu_tanh_gated", "gelu_tanh", hf_linear_f32_dot_gelu_tanh_gated);
    bg("hf_linear_f32_silu_gated", "silu", hf_linear_f32_silu_gated);
    bg("hf_linear_f32_dot_silu_gated", "silu", hf_linear_f32_dot_silu_gated);
    for (size_t i = f32_from; i < v.size(); i++) v[i].f32 = true;
    return v;
}

// Runs one variant; y must be [N, M].
int call(const Variant &v, Buffer<float> x, Packed &p, Buffer<float> b, Buffer<float> res,
         Buffer<float> &y) {
    if (v.int8) {
        return v.residual ? v.i8_res(x, p.w, p.scale, p.colsum, b, res, y) : v.i8(x, p.w, p.scale, p.colsum, b, y);
    }
    return v.residual ? v.bf16_res(x, p.w, b, res, y) : v.bf16(x, p.w, b, y);
}

struct Result {
    Array exact{{1}};   // the kernel's quantization, double sums
    Array plain{{1}};   // float32 inputs, double sums
    Array bound{{1}};   // per element: how far the format may move the plain result (pre-activation)
};

// References for y = act(x·wᵀ + b) [+ res] (gated: · res). The bound on
// how far the format moves the output: the pre-activation's, times the
// gate, times the activation's largest slope (GELU's tanh form and SiLU
// reach about 1.13, the others 1).
Result reference(const Variant &v, const Buffer<float> &x, const Buffer<float> &w, const Packed &p,
                 const Buffer<float> &b, const Buffer<float> &res) {
    const int K = x.dim(0).extent(), M = x.dim(1).extent(), N = w.dim(1).extent();
    Result r{Array({N, M}), Array({N, M}), Array({N, M})};
    for (int m = 0; m < M; m++) {
        // Each block's step of this row.
        std::vector<float> sx((K + kQBlock - 1) / kQBlock, 0.0f);
        for (int k = 0; k < K; k++) sx[k / kQBlock] = std::fmax(sx[k / kQBlock], std::fabs(x(k, m)));
        for (float &s : sx) s = int8_step(s);
        for (int n = 0; n < N; n++) {
            double exact = 0, plain = 0, bound = 0, block = 0;
            for (int k = 0; k < K; k++) {
                const double xv = x(k, m), wv = w(k, n);
                plain += xv * wv;
                if (v.int8) {
                    const double sxb = sx[k / kQBlock], sw = p.step(n, k);
                    block += (double)quantize_x(x(k, m), sx[k / kQBlock]) * packed_at(p, n, k);
                    bound += std::fabs(xv) * sw / 2 + std::fabs(wv) * sxb / 2 + sxb * sw / 4;
                    if (k % kQBlock == kQBlock - 1 || k == K - 1) {
                        exact += block * sxb * sw;
                        block = 0;
                    }
                } else if (v.f32) {
                    // float32 summation only: the worst case of K roundings
                    exact += xv * packed_at(p, n, k);
                    bound += std::fabs(xv * wv) * K * std::ldexp(1.0, -24);
                } else {
                    exact += (double)bf16_round(x(k, m)) * packed_at(p, n, k);
                    bound += std::fabs(xv * wv) * (2.0 / 256 + 1.0 / 65536);  // two roundings of 2^-8
                }
            }
            const double rv = v.residual && !v.gated ? res(n, m) : 0.0, gv = v.gated ? res(n, m) : 1.0;
            r.exact(n, m) = ref::activate(exact + b(n), v.act) * gv + rv;
            r.plain(n, m) = ref::activate(plain + b(n), v.act) * gv + rv;
            r.bound(n, m) = bound * std::fabs(gv) * (v.act == "gelu_tanh" || v.act == "silu" ? 1.13 : 1.0);
        }
    }
    return r;
}

void check(const Variant &v, int M, int K, int N, float xs, float ws, uint32_t seed) {
    Buffer<float> x = ref::random_buffer({K, M}, seed, -xs, xs);
    Buffer<float> w = ref::random_buffer({K, N}, seed + 1, -ws, ws);
    Buffer<float> b = ref::random_buffer({N}, seed + 2);
    Buffer<float> res = ref::random_buffer({N, M}, seed + 3);
    Packed p = pack(w, v.fmt());
    Buffer<float> y(N, M);
    ASSERT_EQ(call(v, x, p, b, res, y), 0) << v.name;
    Result r = reference(v, x, w, p, b, res);
    // Against the same quantization: float32 summation only.
    EXPECT_LE(ref::rel_error(y, r.exact), 2e-5) << v.name << " M=" << M << " K=" << K << " N=" << N;
    // Against float32 inputs: within the format's bound, element by element
    // (every activation here moves its input by at most the input's change).
    int bad = 0;
    for (int m = 0; m < M; m++) {
        for (int n = 0; n < N; n++) {
            const double d = std::fabs(y(n, m) - r.plain(n, m)), lim = r.bound(n, m) * 1.01 + 1e-4 * (1 + std::fabs(r.plain(n, m)));
            if (!(d <= lim) && bad++ < 3) {
                ADD_FAILURE() << v.name << " M=" << M << " K=" << K << " N=" << N << " y(" << n << ", " << m
                              << ") = " << y(n, m) << ", float32 reference " << r.plain(n, m) << ", bound " << lim;
            }
        }
    }
}

}  // namespace

// Packing: every value, the padding, the int8 scales and column sums.
TEST(PackWeights, LayoutScalesAndPadding) {
    SKIP_ON_DEVICE();
    for (Fmt fmt : {Fmt::F32, Fmt::BF16, Fmt::Int8}) {
        const bool int8 = fmt == Fmt::Int8;
        for (auto [K, N] : std::vector<std::pair<int, int>>{{1, 1}, {5, 49}, {64, 48}, {37, 100}}) {
            Buffer<float> w = ref::random_buffer({K, N}, 11 + K + N, -3, 3);
            if (N > 2) {
                for (int k = 0; k < K; k++) w(k, 2) = 0.0f;  // an all-zero column: step 1, codes 0
            }
            Packed p = pack(w, fmt);
            for (int n = 0; n < p.Np; n++) {
                int64_t sum = 0;
                for (int k = 0; k < p.groups * p.kf; k++) {
                    // int8: the block's step, max |W| / 127 over its 32 k (1 for zeros, the padding's too).
                    float amax = 0;
                    for (int kb = k / kQBlock * kQBlock; kb < (k / kQBlock + 1) * kQBlock && kb < K && n < N; kb++) {
                        amax = std::fmax(amax, std::fabs(w(kb, n)));
                    }
                    const float step = int8_step(amax);
                    if (int8) {
                        ASSERT_FLOAT_EQ(p.step(n, k), step) << "n=" << n << " k=" << k;
                    }
                    const double got = packed_at(p, n, k);
                    double want = 0;
                    if (n < N && k < K) want = int8 ? quantize(w(k, n), step) : fmt == Fmt::BF16 ? bf16_round(w(k, n)) : w(k, n);
                    ASSERT_EQ(got, want) << fmt_name(fmt) << " K=" << K << " N=" << N << " n=" << n
                                         << " k=" << k;
                    sum += (int64_t)got;
                    if (int8 && k % kQBlock == kQBlock - 1) {
                        ASSERT_EQ(p.sum(n, k / kQBlock), sum) << "n=" << n << " block " << k / kQBlock;
                        sum = 0;
                    }
                }
            }
        }
    }
}

// A GGUF Q8_0 tensor's blocks (fp16 step d, then 32 codes per 34 bytes, rows
// one after another) packed as the file holds them: every code and step
// where the int8 layout puts it, zero codes past the rows, the blocks' code
// sums; and the int8 kernel on them equals the reference on the values
// they stand for (d · q), the extreme codes -128 and 127 included.
TEST(PackWeights, Q8_0BlocksAsTheFileHoldsThem) {
    SKIP_ON_DEVICE();
    for (auto [K, N] : std::vector<std::pair<int, int>>{{32, 1}, {64, 49}, {256, 100}}) {
        const int B = K / kQBlock;
        std::vector<uint8_t> file((size_t)N * B * 34);
        std::vector<float> d((size_t)N * B);
        std::vector<int> code((size_t)N * K);
        uint32_t state = 12345u + (uint32_t)(K * 7 + N);
        auto next = [&] { return state = state * 1664525u + 1013904223u; };
        for (int n = 0; n < N; n++) {
            for (int b = 0; b < B; b++) {
                // A normal fp16 step: sign 0, exponent 5..20, any mantissa.
                const uint16_t e = (uint16_t)(5 + next() % 16), mant = (uint16_t)(next() % 1024);
                const uint16_t bits = (uint16_t)(e << 10 | mant);
                d[(size_t)n * B + b] = std::ldexp(1.0f + mant / 1024.0f, e - 15);
                uint8_t *blk = &file[((size_t)n * B + b) * 34];
                blk[0] = (uint8_t)(bits & 0xff);
                blk[1] = (uint8_t)(bits >> 8);
                for (int i = 0; i < kQBlock; i++) {
                    int q = (int)(next() % 256) - 128;
                    if (n == 0 && b == 0) q = i % 2 ? 127 : -128;  // the extremes
                    code[(size_t)n * K + b * kQBlock + i] = q;
                    blk[2 + i] = (uint8_t)(int8_t)q;
                }
            }
        }
        Packed p;
        p.K = K;
        p.N = N;
        p.kf = 4;
        p.Np = (N + kPanel - 1) / kPanel * kPanel;
        p.groups = K / 4;
        p.w = Buffer<void>(halide_type_t(halide_type_int, 8), {4, kPanel, p.groups, p.Np / kPanel});
        p.scale = Buffer<float>(kPanel, B, p.Np / kPanel);
        p.colsum = Buffer<int16_t>(kPanel, B, p.Np / kPanel);
        Buffer<uint8_t> blocks(file.data(), {34, B, N});
        ASSERT_EQ(hf_pack_q8_0(blocks, p.w, p.scale, p.colsum), 0);
        Buffer<float> wf(K, N);  // the values the blocks stand for
        for (int n = 0; n < p.Np; n++) {
            for (int b = 0; b < B; b++) {
                int sum = 0;
                for (int i = 0; i < kQBlock; i++) {
                    const int k = b * kQBlock + i, want = n < N ? code[(size_t)n * K + k] : 0;
                    ASSERT_EQ(packed_at(p, n, k), want) << "K=" << K << " n=" << n << " k=" << k;
                    sum += want;
                    if (n < N) wf(k, n) = d[(size_t)n * B + b] * (float)want;
                }
                ASSERT_EQ(p.step(n, b * kQBlock), n < N ? d[(size_t)n * B + b] : 1.0f) << "n=" << n << " b=" << b;
                ASSERT_EQ(p.sum(n, b), sum) << "n=" << n << " b=" << b;
            }
        }
        // The products on those codes: as the reference sums them.
        for (const Variant &v : variants()) {
            if (!v.int8 || v.residual || v.act != "none") continue;
            const int M = 3;
            Buffer<float> x = ref::random_buffer({K, M}, 40 + K, -2, 2), bias = ref::random_buffer({N}, 41), y(N, M);
            ASSERT_EQ(call(v, x, p, bias, y, y), 0) << v.name;
            Result r = reference(v, x, wf, p, bias, y);
            EXPECT_LE(ref::rel_error(y, r.exact), 2e-5) << v.name << " K=" << K << " N=" << N;
        }
    }
}

// Every variant on decode and prefill shapes, K and N odd or off the panel
// and group sizes.
TEST(LinearPacked, MatchesReferences) {
    SKIP_ON_DEVICE();
    struct S { int M, K, N; };
    uint32_t seed = 100;
    for (const Variant &v : variants()) {
        for (S s : std::vector<S>{{1, 64, 48}, {3, 37, 100}, {17, 128, 33}, {10, 1, 1}, {129, 80, 96}, {2, 1025, 3}, {40, 512, 130}}) {
            check(v, s.M, s.K, s.N, 2.0f, 0.3f, seed += 4);
        }
    }
}

// Hostile values: large magnitudes (products of ±1e3 · ±30 over a thousand
// features), one huge activation in a row of small ones (int8: the row's
// step is set by it and the small ones quantize to 0, within the bound), a
// row of zeros, and a single feature.
TEST(LinearPacked, HostileValues) {
    SKIP_ON_DEVICE();
    for (const Variant &v : variants()) {
        check(v, 5, 1000, 70, 1000.0f, 30.0f, 900);
        check(v, 1, 1, 7, 50.0f, 3.0f, 901);
        // One outlier per row, and a zero row.
        const int M = 4, K = 96, N = 50;
        Buffer<float> x = ref::random_buffer({K, M}, 902, -0.01f, 0.01f);
        for (int m = 0; m < M; m++) x(m * 7, m) = 500.0f;
        for (int k = 0; k < K; k++) x(k, 3) = 0.0f;
        Buffer<float> w = ref::random_buffer({K, N}, 903, -1, 1);
        Buffer<float> b = ref::random_buffer({N}, 904), res = ref::random_buffer({N, M}, 905), y(N, M);
        Packed p = pack(w, v.fmt());
        ASSERT_EQ(call(v, x, p, b, res, y), 0);
        Result r = reference(v, x, w, p, b, res);
        EXPECT_LE(ref::rel_error(y, r.exact), 2e-5) << v.name;
        for (int n = 0; n < N; n++) {
            // The zero row gives exactly act(bias) [+ residual].
            const double want = v.gated ? ref::activate(b(n), v.act) * res(n, 3)
                                        : ref::activate(b(n), v.act) + (v.residual ? res(n, 3) : 0.0);
            EXPECT_NEAR(y(n, 3), want, 1e-6 * (1 + std::fabs(want))) << v.name << " n=" << n;
        }
    }
}

// int8's two forms of products (schedules/linear_packed_schedule.h) give
// the same exact sums: the target's form (hf_linear_int8: the sign form
// without VNNI) equals the offset form (hf_linear_int8_offset) bit for bit,
// on random inputs and on the extreme codes, where every product is
// ±127·127 and the sign form's vpmaddubsw adds pairs of 127·(~127) =
// -16,256 (-32,512: its largest int16 pair; the offset form's unsigned
// q + 128 would saturate there at 2·255·127). The one-row kernel
// (hf_linear_int8_dot) takes the same form and must agree too.
TEST(LinearPacked, Int8FormsAgreeBitForBit) {
    SKIP_ON_DEVICE();
    auto same = [](const Buffer<float> &a, const Buffer<float> &b, const std::string &what) {
        int bad = 0;
        for (int m = 0; m < a.dim(1).extent(); m++) {
            for (int n = 0; n < a.dim(0).extent(); n++) {
                if (std::memcmp(&a(n, m), &b(n, m), sizeof(float)) != 0 && bad++ < 3) {
                    ADD_FAILURE() << what << ": y(" << n << ", " << m << ") " << a(n, m) << " against the offset form's "
                                  << b(n, m);
                }
            }
        }
    };
    struct S { int M, K, N; };
    uint32_t seed = 700;
    for (S s : std::vector<S>{{1, 64, 48}, {3, 37, 100}, {9, 1025, 50}, {130, 512, 96}}) {
        Buffer<float> x = ref::random_buffer({s.K, s.M}, seed++, -3, 3), w = ref::random_buffer({s.K, s.N}, seed++, -1, 1);
        Buffer<float> b = ref::random_buffer({s.N}, seed++), y(s.N, s.M), y_offset(s.N, s.M);
        Packed p = pack(w, Fmt::Int8);
        ASSERT_EQ(hf_linear_int8(x, p.w, p.scale, p.colsum, b, y), 0);
        ASSERT_EQ(hf_linear_int8_offset(x, p.w, p.scale, p.colsum, b, y_offset), 0);
        same(y, y_offset, "random M=" + std::to_string(s.M) + " K=" + std::to_string(s.K));
        if (s.M == 1) {
            ASSERT_EQ(hf_linear_int8_dot(x, p.w, p.scale, p.colsum, b, y), 0);
            same(y, y_offset, "one-row kernel, random K=" + std::to_string(s.K));
        }
    }
    // Extreme codes: row m's signs agree with every weight's (m even) or
    // oppose them (m odd), all magnitudes equal, so every code is ±127.
    const int M = 4, K = 300, N = 96;
    Buffer<float> x(K, M), w(K, N), b(N), y(N, M), y_offset(N, M);
    for (int k = 0; k < K; k++) {
        const float sgn = (k * 7 % 3) == 0 ? -1.0f : 1.0f;
        for (int n = 0; n < N; n++) w(k, n) = sgn * 0.5f;
        for (int m = 0; m < M; m++) x(k, m) = (m % 2 ? -sgn : sgn) * 2.0f;
    }
    b.fill(0.0f);
    Packed p = pack(w, Fmt::Int8);
    ASSERT_EQ(hf_linear_int8(x, p.w, p.scale, p.colsum, b, y), 0);
    ASSERT_EQ(hf_linear_int8_offset(x, p.w, p.scale, p.colsum, b, y_offset), 0);
    same(y, y_offset, "extreme codes");
    for (int m = 0; m < M; m++) {
        Buffer<float> xm(K, 1), ym(N, 1), om(N, 1);
        for (int k = 0; k < K; k++) xm(k, 0) = x(k, m);
        for (int n = 0; n < N; n++) om(n, 0) = y_offset(n, m);
        ASSERT_EQ(hf_linear_int8_dot(xm, p.w, p.scale, p.colsum, b, ym), 0);
        same(ym, om, "one-row kernel, extreme codes, row " + std::to_string(m));
    }
    for (int m = 0; m < M; m++) {
        for (int n = 0; n < N; n++) {
            // K products of ±127·127, rescaled by (2/127)·(0.5/127): ±K.
            ASSERT_NEAR(y(n, m), m % 2 ? -K : K, 1e-3 * K) << "y(" << n << ", " << m << ")";
        }
    }
}
