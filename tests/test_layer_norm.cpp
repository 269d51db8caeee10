#include "reference.h"
#include "kernels.h"

#include "hf_layer_norm.h"
#include "hf_layer_norm_residual.h"
#include "hf_rms_norm.h"
#include "hf_rms_norm_residual.h"
#include "hf_rms_norm_add.h"

HF_DECLARE_LI(hf_layer_norm)
HF_DECLARE_LI(hf_layer_norm_residual)
HF_DECLARE_GPU(hf_rms_norm)
HF_DECLARE_GPU(hf_rms_norm_residual)
HF_DECLARE_GPU(hf_rms_norm_add)

using ref::Buffer;
using LnFn = int (*)(halide_buffer_t *, halide_buffer_t *, halide_buffer_t *, float,
                     halide_buffer_t *);
using LnResFn = int (*)(halide_buffer_t *, halide_buffer_t *, halide_buffer_t *, float,
                        halide_buffer_t *, halide_buffer_t *);

// D not a multiple of 16 (37, 100) as well as the base model's 512.
const std::vector<std::pair<int, int>> kShapes = {{1, 1}, {37, 3}, {100, 17}, {512, 129}, {2, 5}};

class LayerNormTest : public OpTest<LnFn> {};

TEST_P(LayerNormTest, MatchesReference) {
    uint32_t seed = 21;
    for (auto [D, R] : kShapes) {
        Buffer<float> x = ref::random_buffer({D, R}, seed++, -3, 3);
        Buffer<float> g = ref::random_buffer({D}, seed++, 0.5f, 1.5f);
        Buffer<float> b = ref::random_buffer({D}, seed++), y(D, R);
        HF_CALL(GetParam().fn(x, g, b, 1e-5f, y));
        auto r = ref::layer_norm(ref::to_array(x), nullptr, ref::to_array(g), ref::to_array(b), 1e-5);
        EXPECT_LE(ref::rel_error(y, r), ref::kTolerance) << "D=" << D << " R=" << R;
    }
}

// Rows with a large mean and a tiny spread: E[x²] − E[x]² would cancel
// completely (1000² ± 20 in fp32 has an ulp of 64: the variance would come
// out 0 or negative, a 100% error). What remains is fp32's own limit: the
// mean of ~1000 is a float with an ulp of 6e-5, against a spread of 0.006,
// so about 0.3% is the best any fp32 kernel can do here.
TEST_P(LayerNormTest, LargeMeanSmallVariance) {
    const int D = 64;
    uint32_t seed = 5;
    for (int R : {4, 64}) {  // 64: whole tiles of the autoscheduled builds
        Buffer<float> x = ref::random_buffer({D, R}, seed++, -0.01f, 0.01f), g(D), b(D), y(D, R);
        x.for_each_value([](float &v) { v += 1000.0f; });
        g.fill(1.0f);
        b.fill(0.0f);
        HF_CALL(GetParam().fn(x, g, b, 1e-12f, y));
        auto r = ref::layer_norm(ref::to_array(x), nullptr, ref::to_array(g), ref::to_array(b), 1e-12);
        EXPECT_LE(ref::rel_error(y, r), 1e-2) << "R=" << R;
    }
}

// eps matters when the row is constant: output is β exactly.
TEST_P(LayerNormTest, ConstantRowGivesBeta) {
    // 64 × 64: whole tiles of the autoscheduled builds
    for (auto [D, R] : std::vector<std::pair<int, int>>{{48, 1}, {64, 64}}) {
        Buffer<float> x(D, R), g(D), b = ref::random_buffer({D}, 9), y(D, R);
        for (int r = 0; r < R; r++)
            for (int d = 0; d < D; d++) x(d, r) = 3.0f + r;
        g.fill(2.0f);
        HF_CALL(GetParam().fn(x, g, b, 1e-5f, y));
        for (int r = 0; r < R; r++)
            for (int d = 0; d < D; d++) EXPECT_FLOAT_EQ(y(d, r), b(d)) << "row " << r;
    }
}

INSTANTIATE_TEST_SUITE_P(All, LayerNormTest,
                         testing::ValuesIn(on_device(std::vector<Impl<LnFn>>{HF_IMPL3(hf_layer_norm)})),
                         impl_name<LnFn>);

class LayerNormResidualTest : public OpTest<LnResFn> {};

TEST_P(LayerNormResidualTest, AddThenNorm) {
    uint32_t seed = 31;
    for (auto [D, R] : kShapes) {
        Buffer<float> x = ref::random_buffer({D, R}, seed++, -3, 3);
        Buffer<float> res = ref::random_buffer({D, R}, seed++, -3, 3);
        Buffer<float> g = ref::random_buffer({D}, seed++, 0.5f, 1.5f);
        Buffer<float> b = ref::random_buffer({D}, seed++), y(D, R);
        HF_CALL(GetParam().fn(x, g, b, 1e-6f, res, y));
        auto rr = ref::to_array(res);
        auto r = ref::layer_norm(ref::to_array(x), &rr, ref::to_array(g), ref::to_array(b), 1e-6);
        EXPECT_LE(ref::rel_error(y, r), ref::kTolerance) << "D=" << D << " R=" << R;
    }
}

INSTANTIATE_TEST_SUITE_P(All, LayerNormResidualTest,
                         testing::ValuesIn(on_device(std::vector<Impl<LnResFn>>{
                             HF_IMPL3(hf_layer_norm_residual)})),
                         impl_name<LnResFn>);

// RMSNorm (T5LayerNorm): no mean subtracted, no bias; with and without the
// residual. Random rows, rows with a large mean (which RMSNorm keeps: the
// mean is part of the scale), and an all-zero row (eps alone: 0, not NaN).
// (Like transformers' T5LayerNorm, the squares are summed in fp32.)
using RmsFn = int (*)(halide_buffer_t *, halide_buffer_t *, float, halide_buffer_t *);
using RmsResFn = int (*)(halide_buffer_t *, halide_buffer_t *, float, halide_buffer_t *, halide_buffer_t *);

TEST(RmsNorm, MatchesReference) {
    for (auto fn : on_device(std::vector<Impl<RmsFn>>{{"hf_rms_norm", HF_KERNEL(hf_rms_norm)}})) {
        uint32_t seed = 61;
        for (auto [D, R] : kShapes) {
            Buffer<float> x = ref::random_buffer({D, R}, seed++, -3, 3), g = ref::random_buffer({D}, seed++, 0.5f, 1.5f);
            Buffer<float> y(D, R);
            HF_CALL(fn.fn(x, g, 1e-6f, y));
            auto r = ref::rms_norm(ref::to_array(x), nullptr, ref::to_array(g), 1e-6);
            EXPECT_LE(ref::rel_error(y, r), ref::kTolerance) << fn.name << " D=" << D << " R=" << R;
        }
        // A large mean, and a zero row.
        Buffer<float> x = ref::random_buffer({64, 3}, 7, -0.01f, 0.01f), g(64), y(64, 3);
        for (int d = 0; d < 64; d++) {
            x(d, 0) += 1000.0f;
            x(d, 2) = 0.0f;
        }
        g.fill(1.0f);
        HF_CALL(fn.fn(x, g, 1e-6f, y));
        auto r = ref::rms_norm(ref::to_array(x), nullptr, ref::to_array(g), 1e-6);
        EXPECT_LE(ref::rel_error(y, r), ref::kTolerance) << fn.name;
        for (int d = 0; d < 64; d++) EXPECT_EQ(y(d, 2), 0.0f) << "zero row";
    }
}

TEST(RmsNorm, ResidualAddedFirst) {
    for (auto fn : on_device(std::vector<Impl<RmsResFn>>{{"hf_rms_norm_residual", HF_KERNEL(hf_rms_norm_residual)}})) {
        uint32_t seed = 71;
        for (auto [D, R] : kShapes) {
            Buffer<float> x = ref::random_buffer({D, R}, seed++, -3, 3), res = ref::random_buffer({D, R}, seed++, -3, 3);
            Buffer<float> g = ref::random_buffer({D}, seed++, 0.5f, 1.5f), y(D, R);
            HF_CALL(fn.fn(x, g, 1e-6f, res, y));
            auto rr = ref::to_array(res);
            auto r = ref::rms_norm(ref::to_array(x), &rr, ref::to_array(g), 1e-6);
            EXPECT_LE(ref::rel_error(y, r), ref::kTolerance) << fn.name << " D=" << D << " R=" << R;
        }
    }
}

// The post-norm join (OLMo 2, Gemma): y = residual + RMSNorm(x), the
// residual NOT inside the norm — against the double-precision norm of x
// alone plus the residual, and the residual left out of the statistics (a
// residual of a large mean must not change the scale).
TEST(RmsNorm, NormThenAdd) {
    for (auto fn : on_device(std::vector<Impl<RmsResFn>>{{"hf_rms_norm_add", HF_KERNEL(hf_rms_norm_add)}})) {
        uint32_t seed = 81;
        for (auto [D, R] : kShapes) {
            Buffer<float> x = ref::random_buffer({D, R}, seed++, -3, 3), res = ref::random_buffer({D, R}, seed++, -3, 3);
            Buffer<float> g = ref::random_buffer({D}, seed++, 0.5f, 1.5f), y(D, R);
            for (int r = 0; r < R; r++) res(0, r) += 100.0f * (r % 3);  // (a large residual: outside the norm)
            HF_CALL(fn.fn(x, g, 1e-6f, res, y));
            ref::Array want = ref::rms_norm(ref::to_array(x), nullptr, ref::to_array(g), 1e-6);
            const ref::Array rr = ref::to_array(res);
            for (size_t k = 0; k < want.v.size(); k++) want.v[k] += rr.v[k];
            EXPECT_LE(ref::rel_error(y, want), ref::kTolerance) << fn.name << " D=" << D << " R=" << R;
        }
    }
}
