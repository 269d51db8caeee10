// Row invariance: a row-wise kernel gives each row the same bits whatever
// other rows the call holds. The runtime batches requests into one call
// (a decoding step's rows, an encoder's padded sources), so a kernel whose
// sums for a row depend on the call's row count, or on the rows beside it,
// makes an answer depend on the batch (tests/runtime/test_batch_invariance.cpp).
// Each kernel runs on M rows, then on one row of them alone (and on a few
// rows), and the outputs must be bitwise equal.
#include "reference.h"
#include "kernels.h"

#include "hf_attention.h"
#include "hf_attention_causal_decode.h"
#include "hf_attention_decode.h"
#include "hf_ffn.h"
#include "hf_layer_norm.h"
#include "hf_layer_norm_residual.h"
#include "hf_linear.h"
#include "hf_linear_f32.h"
#include "hf_linear_f32_dot.h"
#include "hf_linear_f32_relu.h"
#include "hf_linear_f32_residual.h"
#include "hf_linear_f32_dot_relu.h"
#include "hf_linear_f32_dot_residual.h"
#include "hf_linear_relu.h"
#include "hf_linear_residual.h"
#include "hf_log_softmax.h"
#include "hf_log_softmax_mask.h"
#include "hf_pack_f32.h"
#include "hf_softmax.h"
#include "hf_softmax_mask.h"

#include <gtest/gtest.h>

#include <cmath>
#include <cstring>

HF_DECLARE_GPU(hf_attention)
HF_DECLARE_GPU(hf_attention_causal_decode)
HF_DECLARE_GPU(hf_attention_decode)
HF_DECLARE_GPU(hf_ffn)
HF_DECLARE_GPU(hf_layer_norm)
HF_DECLARE_GPU(hf_layer_norm_residual)
HF_DECLARE_GPU(hf_linear)
HF_DECLARE_GPU(hf_linear_relu)
HF_DECLARE_GPU(hf_linear_residual)
HF_DECLARE_GPU(hf_log_softmax)
HF_DECLARE_GPU(hf_log_softmax_mask)
HF_DECLARE_GPU(hf_softmax)
HF_DECLARE_GPU(hf_softmax_mask)

using ref::Buffer;

namespace {

// A kernel call as one argument (the macros would split its commas).
template <typename K, typename... A>
int call(const K &kernel, A &&...args) {
    return kernel(std::forward<A>(args)...);
}

// Row r of a [W, M] buffer as a [W, 1] one.
Buffer<float> row(const Buffer<float> &b, int r) {
    Buffer<float> o(b.dim(0).extent(), 1);
    for (int i = 0; i < b.dim(0).extent(); i++) o(i, 0) = b(i, r);
    return o;
}

// Rows [r0, r1) of a [W, M] buffer.
Buffer<float> rows(const Buffer<float> &b, int r0, int r1) {
    Buffer<float> o(b.dim(0).extent(), r1 - r0);
    for (int r = r0; r < r1; r++)
        for (int i = 0; i < b.dim(0).extent(); i++) o(i, r - r0) = b(i, r);
    return o;
}

// Row r of `all` against row k of `some`, bit for bit.
::testing::AssertionResult same_row(const Buffer<float> &all, int r, const Buffer<float> &some, int k) {
    for (int i = 0; i < all.dim(0).extent(); i++) {
        float a = all(i, r), b = some(i, k);
        if (std::memcmp(&a, &b, sizeof a) != 0) {
            return ::testing::AssertionFailure() << "row " << r << " column " << i << ": " << a << " in the batch, "
                                                 << b << " apart (differ by " << (a - b) << ")";
        }
    }
    return ::testing::AssertionSuccess();
}

// The row counts a batch takes: one decode row, a few, a register block's
// tail, many.
const int kRows[] = {2, 3, 4, 5, 9, 21, 64};

// f(x_rows) → y_rows for any number of rows: every row of a call on M rows
// equals the same row computed alone and within the first rows.
template <typename F>
void expect_row_invariant(int W, F &&f, const char *what) {
    for (int M : kRows) {
        Buffer<float> x = ref::random_buffer({W, M}, 100 + M, -2, 2);
        Buffer<float> all = f(x);
        for (int r : {0, M / 2, M - 1}) {
            Buffer<float> one = f(row(x, r));
            EXPECT_TRUE(same_row(all, r, one, 0)) << what << ", M=" << M << " against 1 row";
        }
        const int few = std::max(1, M / 3);
        Buffer<float> part = f(rows(x, 0, few));
        for (int r = 0; r < few; r++) EXPECT_TRUE(same_row(all, r, part, r)) << what << ", M=" << M << " against " << few;
    }
}

TEST(RowInvariance, LayerNorm) {
    for (int D : {128, 100}) {
        Buffer<float> g = ref::random_buffer({D}, 1, 0.5f, 1.5f), b = ref::random_buffer({D}, 2);
        expect_row_invariant(D, [&](Buffer<float> x) -> Buffer<float> {
            Buffer<float> y(D, x.dim(1).extent());
            EXPECT_EQ(call(HF_KERNEL(hf_layer_norm), x, g, b, 1e-5f, y), 0);
            return y;
        }, "layer_norm");
        expect_row_invariant(D, [&](Buffer<float> x) -> Buffer<float> {
            Buffer<float> res(D, x.dim(1).extent()), y(D, x.dim(1).extent());
            for (int r = 0; r < x.dim(1).extent(); r++)
                for (int i = 0; i < D; i++) res(i, r) = 0.25f * x(i, r) + 0.5f;
            EXPECT_EQ(call(HF_KERNEL(hf_layer_norm_residual), x, g, b, 1e-5f, res, y), 0);
            return y;
        }, "layer_norm_residual");
    }
}

// A decoding step's log-probabilities over the vocabulary, and attention's
// softmax: a row's exp and sums must not depend on the rows beside it. With
// rows handed to threads 8 at a time (the hand value until 2026-11-28), LLVM
// contracted the loops of a whole task of 8 rows and of a shorter one
// differently: a decoding step of 8 rows or more gave other bits than the
// same row alone (found on an AVX2 Zen 3 with hand schedules; the Zen 4's
// tuned record handed out 1 row at a time). Now every row is a task.
TEST(RowInvariance, SoftmaxAndLogSoftmax) {
    for (int N : {1000, 37}) {
        for (bool log : {false, true}) {
            expect_row_invariant(N, [&](Buffer<float> x) -> Buffer<float> {
                // (logits of a few units: the scale of a model's)
                Buffer<float> z(N, x.dim(1).extent()), y(N, x.dim(1).extent());
                for (int r = 0; r < x.dim(1).extent(); r++)
                    for (int i = 0; i < N; i++) z(i, r) = 3.0f * x(i, r);
                EXPECT_EQ(log ? call(HF_KERNEL(hf_log_softmax), z, y) : call(HF_KERNEL(hf_softmax), z, y), 0);
                return y;
            }, log ? "log_softmax" : "softmax");
            expect_row_invariant(N, [&](Buffer<float> x) -> Buffer<float> {
                const int M = x.dim(1).extent();
                Buffer<float> mask(N, M), y(N, M);
                for (int r = 0; r < M; r++)
                    for (int i = 0; i < N; i++) mask(i, r) = (i * 7 + (int)(x(0, r) * 100)) % 5 == 0 ? -INFINITY : 0.0f;
                EXPECT_EQ(log ? call(HF_KERNEL(hf_log_softmax_mask), x, mask, y)
                              : call(HF_KERNEL(hf_softmax_mask), x, mask, y), 0);
                return y;
            }, log ? "log_softmax_mask" : "softmax_mask");
        }
    }
}

// The prefill blocks across row counts. (hf_linear_dot, the one-row
// dot-product kernel on W as stored, sums in lanes and is not row-invariant
// against them: the runtime's float32 steps that must agree with prefill
// run packed, PackedStepsAgreeWithPrefill.)
TEST(RowInvariance, Linear) {
    const int K = 128;
    for (int N : {384, 100}) {
        Buffer<float> w = ref::random_buffer({K, N}, 3), b = ref::random_buffer({N}, 4);
        expect_row_invariant(K, [&](Buffer<float> x) -> Buffer<float> {
            Buffer<float> y(N, x.dim(1).extent());
            EXPECT_EQ(call(HF_KERNEL(hf_linear), x, w, b, y), 0);
            return y;
        }, "linear");
    }
}

// A CPU whose float32 prefill stays on W as stored (AVX2: too few registers
// for the 48-wide panel's row blocks; Fp32Packing::Steps) runs the steps of
// up to 4 rows on the packed copy (hf_linear_f32_dot for one row,
// hf_linear_f32 for 2-4) and more rows on W as stored (hf_linear): all sum
// each output's products in k order from zero, so a row's bits are the same
// on every path, plain, with an activation and with a residual.
TEST(RowInvariance, PackedStepsAgreeWithPrefill) {
    if (std::getenv("HALFORMER_DEVICE")) GTEST_SKIP() << "packed kernels are CPU only";
    const int K = 128, kPanel = 48;
    for (int N : {384, 100}) {
        Buffer<float> w = ref::random_buffer({K, N}, 3), b = ref::random_buffer({N}, 4);
        const int Np = (N + kPanel - 1) / kPanel * kPanel;
        Buffer<float> packed(1, kPanel, K, Np / kPanel);
        ASSERT_EQ(hf_pack_f32(w, packed), 0);
        for (int variant = 0; variant < 3; variant++) {
            expect_row_invariant(K, [&](Buffer<float> x) -> Buffer<float> {
                const int M = x.dim(1).extent();
                Buffer<float> y(N, M), res(N, M);
                for (int r = 0; r < M; r++)
                    for (int n = 0; n < N; n++) res(n, r) = 0.5f * x(n % K, r) - 0.25f;
                if (M == 1) {
                    if (variant == 0) EXPECT_EQ(hf_linear_f32_dot(x, packed, b, y), 0);
                    if (variant == 1) EXPECT_EQ(hf_linear_f32_dot_relu(x, packed, b, y), 0);
                    if (variant == 2) EXPECT_EQ(hf_linear_f32_dot_residual(x, packed, b, res, y), 0);
                } else if (M <= 4) {
                    if (variant == 0) EXPECT_EQ(hf_linear_f32(x, packed, b, y), 0);
                    if (variant == 1) EXPECT_EQ(hf_linear_f32_relu(x, packed, b, y), 0);
                    if (variant == 2) EXPECT_EQ(hf_linear_f32_residual(x, packed, b, res, y), 0);
                } else {
                    if (variant == 0) EXPECT_EQ(call(HF_KERNEL(hf_linear), x, w, b, y), 0);
                    if (variant == 1) EXPECT_EQ(call(HF_KERNEL(hf_linear_relu), x, w, b, y), 0);
                    if (variant == 2) EXPECT_EQ(call(HF_KERNEL(hf_linear_residual), x, w, b, res, y), 0);
                }
                return y;
            }, variant == 0 ? "linear / packed step" : variant == 1 ? "relu / packed step" : "residual / packed step");
        }
    }
}

TEST(RowInvariance, FeedForward) {
    const int D = 128, F = 256;
    Buffer<float> w1 = ref::random_buffer({D, F}, 5), b1 = ref::random_buffer({F}, 6);
    Buffer<float> w2 = ref::random_buffer({F, D}, 7), b2 = ref::random_buffer({D}, 8);
    expect_row_invariant(D, [&](Buffer<float> x) -> Buffer<float> {
        Buffer<float> y(D, x.dim(1).extent());
        EXPECT_EQ(call(HF_KERNEL(hf_ffn), x, w1, b1, w2, b2, y), 0);
        return y;
    }, "ffn");
}

// Attention over B sequences (padded to the longest, masked by length):
// sequence b's output alone equals its output in the batch.
TEST(RowInvariance, AttentionOverPaddedSequences) {
    const int dk = 32, H = 4;
    for (int B : {2, 3, 9}) {
        const int T = 7;
        Buffer<float> q = ref::random_buffer({dk, T, H, B}, 9), k = ref::random_buffer({dk, T, H, B}, 10),
                      v = ref::random_buffer({dk, T, H, B}, 11), o(dk, T, H, B);
        Buffer<int32_t> len(B);
        for (int b = 0; b < B; b++) len(b) = 1 + (b * 5) % T;
        const float scale = 0.17f;
        EXPECT_EQ(call(HF_KERNEL(hf_attention), q, k, v, len, 0, scale, o), 0);
        for (int b = 0; b < B; b++) {
            const int L = len(b);
            Buffer<float> q1(dk, L, H, 1), k1(dk, L, H, 1), v1(dk, L, H, 1), o1(dk, L, H, 1);
            Buffer<int32_t> len1(1);
            len1(0) = L;
            for (int h = 0; h < H; h++)
                for (int t = 0; t < L; t++)
                    for (int d = 0; d < dk; d++) {
                        q1(d, t, h, 0) = q(d, t, h, b);
                        k1(d, t, h, 0) = k(d, t, h, b);
                        v1(d, t, h, 0) = v(d, t, h, b);
                    }
            EXPECT_EQ(call(HF_KERNEL(hf_attention), q1, k1, v1, len1, 0, scale, o1), 0);
            int bad = 0;
            for (int h = 0; h < H; h++)
                for (int t = 0; t < L; t++)
                    for (int d = 0; d < dk; d++) {
                        float a = o(d, t, h, b), c = o1(d, t, h, 0);
                        bad += std::memcmp(&a, &c, sizeof a) != 0;
                    }
            EXPECT_EQ(bad, 0) << "B=" << B << " sequence " << b << " (length " << L << " of " << T << ")";
        }
    }
}

// A decoding step's row beside a much longer one: the call's keys are the
// longest row's (2000: 125 of the hand schedule's blocks of 16), the short
// row's own call has fewer (40, 300, 700: 3, 19, 44 blocks). LLVM
// vectorized the combination over blocks where it could reassociate it, so
// the short row's sums took another order in the batch than alone (every
// one of these failed; generators/attention_generator.cpp now sums it in
// strict float).
TEST(RowInvariance, DecodingRowBesideALongerOne) {
    const int dk = 32, H = 2, T = 2000;
    for (int L : {40, 300, 700})
    for (bool causal : {true, false}) {
        // (The causal kernel with its window input at 0: every key.)
        auto fn = [causal](Buffer<float> &q, Buffer<float> &k, Buffer<float> &v, Buffer<int32_t> &len, int offset,
                           float scale, Buffer<float> &o) {
            return causal ? call(HF_KERNEL(hf_attention_causal_decode), q, k, v, len, offset, scale, 0, o)
                          : call(HF_KERNEL(hf_attention_decode), q, k, v, len, offset, scale, o);
        };
        Buffer<float> q = ref::random_buffer({dk, 1, H, 2}, 21), k = ref::random_buffer({dk, T, H, 2}, 22),
                      v = ref::random_buffer({dk, T, H, 2}, 23), o(dk, 1, H, 2);
        Buffer<int32_t> len(2);
        len(0) = T;
        len(1) = L;
        const float scale = 0.17f;
        EXPECT_EQ(call(fn, q, k, v, len, T - 1, scale, o), 0);
        Buffer<float> q1(dk, 1, H, 1), k1(dk, L, H, 1), v1(dk, L, H, 1), o1(dk, 1, H, 1);
        Buffer<int32_t> len1(1);
        len1(0) = L;
        for (int h = 0; h < H; h++) {
            for (int d = 0; d < dk; d++) q1(d, 0, h, 0) = q(d, 0, h, 1);
            for (int t = 0; t < L; t++)
                for (int d = 0; d < dk; d++) {
                    k1(d, t, h, 0) = k(d, t, h, 1);
                    v1(d, t, h, 0) = v(d, t, h, 1);
                }
        }
        EXPECT_EQ(call(fn, q1, k1, v1, len1, L - 1, scale, o1), 0);
        int bad = 0;
        for (int h = 0; h < H; h++)
            for (int d = 0; d < dk; d++) {
                float a = o(d, 0, h, 1), c = o1(d, 0, h, 0);
                bad += std::memcmp(&a, &c, sizeof a) != 0;
            }
        EXPECT_EQ(bad, 0) << "the row of " << L << " keys beside one of " << T;
    }
}

}  // namespace
