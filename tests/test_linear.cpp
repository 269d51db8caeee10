#include "reference.h"
#include "kernels.h"
#include "halformer/kernel_error.h"

#include "hf_linear.h"
#include "hf_linear_relu.h"
#include "hf_linear_gelu.h"
#include "hf_linear_gelu_tanh.h"
#include "hf_linear_dot.h"
#include "hf_linear_residual.h"
#include "hf_linear_dot_residual.h"

HF_DECLARE_LI(hf_linear)
HF_DECLARE_LI(hf_linear_relu)
HF_DECLARE_LI(hf_linear_gelu)
HF_DECLARE_LI(hf_linear_gelu_tanh)
HF_DECLARE_LI(hf_linear_dot)
HF_DECLARE_LI(hf_linear_residual)
HF_DECLARE_LI(hf_linear_dot_residual)

using ref::Buffer;
using LinearFn = int (*)(halide_buffer_t *, halide_buffer_t *, halide_buffer_t *, halide_buffer_t *);
using LinearResFn = int (*)(halide_buffer_t *, halide_buffer_t *, halide_buffer_t *,
                            halide_buffer_t *, halide_buffer_t *);

struct Shape { int M, K, N; };
// Rows 1, 3, 17, 129 (decode to prefill), K and N odd or not multiples of 16.
const std::vector<Shape> kShapes = {{1, 64, 48},  {3, 37, 100}, {17, 128, 33},
                                    {129, 80, 96}, {8, 512, 512}, {1, 512, 2048}};

std::string activation_of(const std::string &name) {
    for (const char *a : {"gelu_tanh", "gelu", "relu"})
        if (name.find(a) != std::string::npos) return a;
    return "none";
}

class LinearTest : public testing::TestWithParam<Impl<LinearFn>> {};

TEST_P(LinearTest, MatchesReference) {
    const std::string act = activation_of(GetParam().name);
    uint32_t seed = 1;
    for (Shape s : kShapes) {
        Buffer<float> x = ref::random_buffer({s.K, s.M}, seed++, -2, 2);
        Buffer<float> w = ref::random_buffer({s.K, s.N}, seed++, -0.3f, 0.3f);
        Buffer<float> b = ref::random_buffer({s.N}, seed++);
        Buffer<float> y(s.N, s.M);
        HF_CALL_OR_NEXT(GetParam().fn(x, w, b, y));
        auto r = ref::linear(ref::to_array(x), ref::to_array(w), ref::to_array(b), act, nullptr);
        EXPECT_LE(ref::rel_error(y, r), ref::kTolerance)
            << "M=" << s.M << " K=" << s.K << " N=" << s.N << " act=" << act;
    }
}

INSTANTIATE_TEST_SUITE_P(
    All, LinearTest,
    testing::ValuesIn(on_device(std::vector<Impl<LinearFn>>{
        HF_IMPL3(hf_linear), HF_IMPL3(hf_linear_relu), HF_IMPL3(hf_linear_gelu),
        HF_IMPL3(hf_linear_gelu_tanh), HF_IMPL3(hf_linear_dot)})),
    impl_name<LinearFn>);

class LinearResidualTest : public testing::TestWithParam<Impl<LinearResFn>> {};

TEST_P(LinearResidualTest, AddsResidualAfterBias) {
    uint32_t seed = 100;
    for (Shape s : kShapes) {
        Buffer<float> x = ref::random_buffer({s.K, s.M}, seed++);
        Buffer<float> w = ref::random_buffer({s.K, s.N}, seed++, -0.3f, 0.3f);
        Buffer<float> b = ref::random_buffer({s.N}, seed++);
        Buffer<float> res = ref::random_buffer({s.N, s.M}, seed++, -5, 5);
        Buffer<float> y(s.N, s.M);
        HF_CALL_OR_NEXT(GetParam().fn(x, w, b, res, y));
        auto rr = ref::to_array(res);
        auto r = ref::linear(ref::to_array(x), ref::to_array(w), ref::to_array(b), "none", &rr);
        EXPECT_LE(ref::rel_error(y, r), ref::kTolerance) << "M=" << s.M << " N=" << s.N;
    }
}

INSTANTIATE_TEST_SUITE_P(All, LinearResidualTest,
                         testing::ValuesIn(on_device(std::vector<Impl<LinearResFn>>{
                             HF_IMPL3(hf_linear_residual), HF_IMPL3(hf_linear_dot_residual)})),
                         impl_name<LinearResFn>);

// GELU's erf is our own polynomial: check it across the range where it matters
// (large |x| saturates to relu / 0) against std::erf.
TEST(LinearActivation, GeluMatchesErfOverWideRange) {
    const int K = 1, N = 1, M = 2001;
    Buffer<float> x(K, M), w(K, N), b(N), y(N, M);
    for (int m = 0; m < M; m++) x(0, m) = -10.0f + 0.01f * m;
    w(0, 0) = 1.0f;
    b(0) = 0.0f;
    HF_CALL(HF_KERNEL(hf_linear_gelu)(x, w, b, y));
    for (int m = 0; m < M; m++) {
        double ref = ref::gelu(x(0, m));
        EXPECT_NEAR(y(0, m), ref, 1e-6 + 1e-6 * std::abs(ref)) << "x=" << x(0, m);
    }
}

// A shape mismatch (W's K smaller than X's) is an error, not a wild read.
TEST(LinearErrors, ShortWeightRowsAreAnError) {
    Buffer<float> x = ref::random_buffer({64, 4}, 1), w = ref::random_buffer({32, 16}, 2);
    Buffer<float> b(16), y(16, 4);
    const auto linear = HF_KERNEL(hf_linear);
    EXPECT_NE(linear(x, w, b, y), 0);
    EXPECT_NE(halformer::last_kernel_error().find("Input buffer w"), std::string::npos)
        << halformer::last_kernel_error();
}
