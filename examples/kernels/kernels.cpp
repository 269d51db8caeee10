// Halformer's kernels on their own: one post-LN self-attention sub-layer,
// out = LayerNorm(x + Attention(x)·W_oᵀ), built from four kernel calls on the
// application's own Halide::Runtime::Buffers, each checked against plain
// double-precision loops. docs/kernels.md gives every kernel's arguments.
//
//   qkv = x·W_qkvᵀ + b_qkv          hf_linear               [M, 3D]
//   o   = attention(q, k, v)        hf_attention            q, k, v and o are
//                                                           strided views
//   a   = o·W_oᵀ + b_o              hf_linear               [M, D]
//   out = LayerNorm(a + x)          hf_layer_norm_residual  [M, D]
//
// Rows are m = b·T + t (B sequences of T positions); the second sequence
// is padded (kv_len < T): its keys past kv_len are masked.
#include "hf_attention.h"
#include "hf_layer_norm_residual.h"
#include "hf_linear.h"

#include <HalideBuffer.h>
#include <halformer/isa.h>
#include <halformer/kernel_error.h>

#include <cmath>
#include <cstdio>
#include <random>
#include <string>
#include <vector>

using Halide::Runtime::Buffer;

namespace {

constexpr int B = 2, T = 7, H = 4, dk = 16, D = H * dk, M = B * T;
const int kv_lens[B] = {T, 4};
int failures = 0;

void report(const char *stage, double err, double bound) {
    const bool ok = err <= bound;
    std::printf("%-28s max |error| %.2e (bound %.0e) %s\n", stage, err, bound, ok ? "ok" : "FAIL");
    if (!ok) failures++;
}

Buffer<float> random_buffer(std::mt19937 &rng, std::vector<int> extents, float range) {
    Buffer<float> b(extents);
    std::uniform_real_distribution<float> u(-range, range);
    b.for_each_value([&](float &v) { v = u(rng); });
    return b;
}

// Y = X·Wᵀ + b; X is [M, K] (Halide (k, m)), W is [N, K] as nn.Linear stores it.
void linear(Buffer<float> &x, Buffer<float> &w, Buffer<float> &bias, Buffer<float> &y) {
    halformer::check_kernel(hf_linear(x.raw_buffer(), w.raw_buffer(), bias.raw_buffer(), y.raw_buffer()),
                            "hf_linear");
}

double linear_error(const Buffer<float> &x, const Buffer<float> &w, const Buffer<float> &bias,
                    const Buffer<float> &y) {
    double err = 0;
    for (int m = 0; m < y.dim(1).extent(); m++)
        for (int n = 0; n < y.dim(0).extent(); n++) {
            double s = bias(n);
            for (int k = 0; k < x.dim(0).extent(); k++) s += (double)x(k, m) * w(k, n);
            err = std::max(err, std::abs(s - y(n, m)));
        }
    return err;
}

// A [B, H, T, dk] view (Halide (d, t, h, b)) of the columns [col, col + D)
// of a [M, width] matrix: head h is columns col + h·dk .. + dk, row b·T + t.
Buffer<float> heads(Buffer<float> &rows, int col) {
    const int width = rows.dim(0).extent();
    halide_dimension_t dims[4] = {{0, dk, 1}, {0, T, width}, {0, H, dk}, {0, B, T * width}};
    return Buffer<float>(rows.data() + col, 4, dims);
}

double attention_error(const Buffer<float> &q, const Buffer<float> &k, const Buffer<float> &v,
                       const Buffer<float> &o, float scale) {
    double err = 0;
    for (int b = 0; b < B; b++)
        for (int h = 0; h < H; h++)
            for (int i = 0; i < T; i++) {
                std::vector<double> p(kv_lens[b]);
                double mx = -1e300, sum = 0;
                for (int j = 0; j < kv_lens[b]; j++) {
                    double s = 0;
                    for (int d = 0; d < dk; d++) s += (double)q(d, i, h, b) * k(d, j, h, b);
                    mx = std::max(mx, p[j] = s * scale);
                }
                for (double &e : p) sum += (e = std::exp(e - mx));
                for (int d = 0; d < dk; d++) {
                    double out = 0;
                    for (int j = 0; j < kv_lens[b]; j++) out += p[j] / sum * v(d, j, h, b);
                    err = std::max(err, std::abs(out - o(d, i, h, b)));
                }
            }
    return err;
}

double layer_norm_error(const Buffer<float> &a, const Buffer<float> &x, const Buffer<float> &gamma,
                        const Buffer<float> &beta, float eps, const Buffer<float> &out) {
    double err = 0;
    for (int m = 0; m < M; m++) {
        double mean = 0, var = 0;
        for (int d = 0; d < D; d++) mean += (double)a(d, m) + x(d, m);
        mean /= D;
        for (int d = 0; d < D; d++) var += std::pow((double)a(d, m) + x(d, m) - mean, 2);
        const double inv = 1.0 / std::sqrt(var / D + eps);
        for (int d = 0; d < D; d++) {
            const double want = ((double)a(d, m) + x(d, m) - mean) * inv * gamma(d) + beta(d);
            err = std::max(err, std::abs(want - out(d, m)));
        }
    }
    return err;
}

// Bad input: the kernel returns a negative halide_error_code_t without
// reading or writing past any buffer, and check_kernel throws
// halformer::KernelError with that code and Halide's message.
void expect_error(const char *what, int want, Buffer<float> &x, halide_buffer_t *w, Buffer<float> &bias,
                  Buffer<float> &y) {
    int code = 0;
    try {
        halformer::check_kernel(hf_linear(x.raw_buffer(), w, bias.raw_buffer(), y.raw_buffer()), "hf_linear");
    } catch (const halformer::KernelError &e) {
        code = e.code();
        std::printf("%-28s KernelError %d: %s\n", what, code, e.what());
    }
    if (code != want) {
        std::printf("%-28s expected error %d, got %d: FAIL\n", what, want, code);
        failures++;
    }
}

void bad_input(Buffer<float> &x, Buffer<float> &bias) {
    Buffer<float> y(3 * D, M);
    Buffer<float> w_short(D - 1, 3 * D);  // K = D - 1: the product reads past it
    expect_error("a weight too narrow", halide_error_code_access_out_of_bounds, x, w_short.raw_buffer(), bias, y);
    Buffer<int32_t> w_int(D, 3 * D);
    expect_error("an int32 weight", halide_error_code_bad_type, x, w_int.raw_buffer(), bias, y);
    Buffer<float> w_3d(D, 3 * D, 1);
    expect_error("a 3-D weight", halide_error_code_bad_dimensions, x, w_3d.raw_buffer(), bias, y);
    Buffer<float> wide(2 * D, 3 * D);  // every other column: dimension 0 of stride 2
    halide_dimension_t strided[2] = {{0, D, 2}, {0, 3 * D, 2 * D}};
    Buffer<float> w_strided(wide.data(), 2, strided);
    expect_error("a weight of column stride 2", halide_error_code_constraint_violated, x, w_strided.raw_buffer(),
                 bias, y);
}

}  // namespace

int main() {
    std::printf("kernel variant: %s\n", halformer::running_variant());
    std::mt19937 rng(7);
    Buffer<float> x = random_buffer(rng, {D, M}, 1.0f);
    Buffer<float> w_qkv = random_buffer(rng, {D, 3 * D}, 0.2f), b_qkv = random_buffer(rng, {3 * D}, 0.1f);
    Buffer<float> w_o = random_buffer(rng, {D, D}, 0.2f), b_o = random_buffer(rng, {D}, 0.1f);
    Buffer<float> gamma = random_buffer(rng, {D}, 1.0f), beta = random_buffer(rng, {D}, 0.5f);

    Buffer<float> qkv(3 * D, M);
    linear(x, w_qkv, b_qkv, qkv);
    report("hf_linear (QKV)", linear_error(x, w_qkv, b_qkv, qkv), 1e-5);

    // Attention reads Q, K and V in place inside qkv and writes O as heads
    // of the [M, D] rows the next projection takes.
    Buffer<float> q = heads(qkv, 0), k = heads(qkv, D), v = heads(qkv, 2 * D);
    Buffer<float> o_rows(D, M);
    Buffer<float> o = heads(o_rows, 0);
    Buffer<int32_t> kv_len(B);
    for (int b = 0; b < B; b++) kv_len(b) = kv_lens[b];
    const float scale = 1.0f / std::sqrt((float)dk);
    halformer::check_kernel(hf_attention(q.raw_buffer(), k.raw_buffer(), v.raw_buffer(), kv_len.raw_buffer(),
                                         /*q_offset=*/0, scale, o.raw_buffer()),
                            "hf_attention");
    report("hf_attention (strided)", attention_error(q, k, v, o, scale), 1e-5);

    Buffer<float> a(D, M);
    linear(o_rows, w_o, b_o, a);
    report("hf_linear (output)", linear_error(o_rows, w_o, b_o, a), 1e-5);

    Buffer<float> out(D, M);
    const float eps = 1e-5f;
    halformer::check_kernel(hf_layer_norm_residual(a.raw_buffer(), gamma.raw_buffer(), beta.raw_buffer(), eps,
                                                   x.raw_buffer(), out.raw_buffer()),
                            "hf_layer_norm_residual");
    report("hf_layer_norm_residual", layer_norm_error(a, x, gamma, beta, eps, out), 1e-5);

    bad_input(x, b_qkv);
    std::printf("%s\n", failures ? "FAILED" : "all checks passed");
    return failures ? 1 : 0;
}
