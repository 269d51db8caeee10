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
#include "hf_linear_dot_relu.h"
#include "hf_linear_dot_gelu.h"
#include "hf_linear_dot_gelu_tanh.h"
#include "hf_linear_dot_silu.h"
#include "hf_linear_tanh.h"
#include "hf_linear_gelu_tanh_gated.h"
#include "hf_linear_dot_gelu_tanh_gated.h"
#include "hf_linear_silu_gated.h"
#include "hf_linear_dot_silu_gated.h"

HF_DECLARE_LI(hf_linear)
HF_DECLARE_LI(hf_linear_relu)
HF_DECLARE_LI(hf_linear_gelu)
HF_DECLARE_LI(hf_linear_gelu_tanh)
HF_DECLARE_LI(hf_linear_dot)
HF_DECLARE_LI(hf_linear_residual)
HF_DECLARE_LI(hf_linear_dot_residual)
// The decode-shape FFN's first projection (runtime/src/model/forward.cpp): hand
// schedules only, no autoscheduled builds.
HF_DECLARE_GPU(hf_linear_dot_relu)
HF_DECLARE_GPU(hf_linear_dot_gelu)
HF_DECLARE_GPU(hf_linear_dot_gelu_tanh)
HF_DECLARE_GPU(hf_linear_dot_silu)
HF_DECLARE_GPU(hf_linear_tanh)  // BERT's pooler: hand schedule only
HF_DECLARE_GPU(hf_linear_gelu_tanh_gated)
HF_DECLARE_GPU(hf_linear_dot_gelu_tanh_gated)
HF_DECLARE_GPU(hf_linear_silu_gated)
HF_DECLARE_GPU(hf_linear_dot_silu_gated)

using ref::Buffer;
using LinearFn = int (*)(halide_buffer_t *, halide_buffer_t *, halide_buffer_t *, halide_buffer_t *);
using LinearResFn = int (*)(halide_buffer_t *, halide_buffer_t *, halide_buffer_t *,
                            halide_buffer_t *, halide_buffer_t *);

struct Shape { int M, K, N; };
// Rows 1, 3, 17, 129 (decode to prefill), K and N odd or not multiples of 16;
// 130 × 300: whole tiles of the autoscheduled builds (Adams2019: 64 rows ×
// 128 columns, Mullapudi2016: 256 columns) and a tail; the others are smaller
// than their tiles.
const std::vector<Shape> kShapes = {{1, 64, 48},  {3, 37, 100}, {17, 128, 33},  {129, 80, 96},
                                    {8, 512, 512}, {1, 512, 2048}, {130, 72, 300}};

std::string activation_of(const std::string &name) {
    for (const char *a : {"gelu_tanh", "gelu", "relu", "silu", "tanh"})
        if (name.find(a) != std::string::npos) return a;
    return "none";
}

class LinearTest : public OpTest<LinearFn> {};

TEST_P(LinearTest, MatchesReference) {
    const std::string act = activation_of(GetParam().name);
    uint32_t seed = 1;
    for (Shape s : kShapes) {
        Buffer<float> x = ref::random_buffer({s.K, s.M}, seed++, -2, 2);
        Buffer<float> w = ref::random_buffer({s.K, s.N}, seed++, -0.3f, 0.3f);
        Buffer<float> b = ref::random_buffer({s.N}, seed++);
        Buffer<float> y(s.N, s.M);
        HF_CALL(GetParam().fn(x, w, b, y));
        auto r = ref::linear(ref::to_array(x), ref::to_array(w), ref::to_array(b), act, nullptr);
        EXPECT_LE(ref::rel_error(y, r), ref::kTolerance)
            << "M=" << s.M << " K=" << s.K << " N=" << s.N << " act=" << act;
    }
}

// Hostile shapes and values: every extent 1, a single input feature or
// output, K and N just past a power of two, the decode rows 1..4 (the
// runtime's dot kernels run M ≤ 4 on a CPU, M ≤ 32 on a GPU), and products of ±1e3 · ±30 summed over
// up to a thousand features (pre-activations up to about ±3e5, where GELU
// saturates to x and to 0, and sums that cancel); the last shape holds whole
// tiles of the autoscheduled builds.
TEST_P(LinearTest, HostileShapesAndValues) {
    const std::string act = activation_of(GetParam().name);
    struct Case { Shape s; float x, w, b; };
    uint32_t seed = 700;
    for (Case c : std::vector<Case>{{{1, 1, 1}, 1, 1, 1},
                                    {{1, 1, 7}, 50, 3, 1},
                                    {{4, 1, 1}, 3, 3, 3},
                                    {{2, 1025, 3}, 1000, 30, 1},
                                    {{3, 5, 1031}, 1000, 30, 1000},
                                    {{4, 257, 129}, 1, 0.1f, 0.01f},
                                    {{65, 1000, 257}, 1000, 30, 100}}) {
        const Shape s = c.s;
        Buffer<float> x = ref::random_buffer({s.K, s.M}, seed++, -c.x, c.x);
        Buffer<float> w = ref::random_buffer({s.K, s.N}, seed++, -c.w, c.w);
        Buffer<float> b = ref::random_buffer({s.N}, seed++, -c.b, c.b);
        Buffer<float> y(s.N, s.M);
        y.fill(std::nanf(""));  // every output must be written
        HF_CALL(GetParam().fn(x, w, b, y));
        auto r = ref::linear(ref::to_array(x), ref::to_array(w), ref::to_array(b), act, nullptr);
        EXPECT_LE(ref::rel_error(y, r), ref::kTolerance)
            << "M=" << s.M << " K=" << s.K << " N=" << s.N << " |x|≤" << c.x << " act=" << act;
    }
}

// The rows of X read through a row stride wider than K, as the runtime's
// output head reads the last position of each sequence out of [T, R, D].
TEST_P(LinearTest, StridedInputRows) {
    const std::string act = activation_of(GetParam().name);
    uint32_t seed = 800;
    for (Shape s : std::vector<Shape>{{1, 32, 40}, {3, 37, 100}, {4, 64, 77}, {70, 48, 300}}) {
        const int stride = s.K * 3 + 5;
        Buffer<float> storage = ref::random_buffer({stride, s.M}, seed++, -2, 2);
        halide_dimension_t dims[2] = {{0, s.K, 1}, {0, s.M, stride}};
        Buffer<float> x(storage.data() + 2, 2, dims);
        Buffer<float> w = ref::random_buffer({s.K, s.N}, seed++, -0.3f, 0.3f);
        Buffer<float> b = ref::random_buffer({s.N}, seed++);
        Buffer<float> y(s.N, s.M);
        HF_CALL(GetParam().fn(x, w, b, y));
        auto r = ref::linear(ref::to_array(x.copy()), ref::to_array(w), ref::to_array(b), act, nullptr);
        EXPECT_LE(ref::rel_error(y, r), ref::kTolerance) << "M=" << s.M << " K=" << s.K << " N=" << s.N;
    }
}

INSTANTIATE_TEST_SUITE_P(
    All, LinearTest,
    testing::ValuesIn(on_device(std::vector<Impl<LinearFn>>{
        HF_IMPL3(hf_linear), HF_IMPL3(hf_linear_relu), HF_IMPL3(hf_linear_gelu),
        HF_IMPL3(hf_linear_gelu_tanh), HF_IMPL3(hf_linear_dot),
        {"hf_linear_dot_relu", HF_KERNEL(hf_linear_dot_relu)},
        {"hf_linear_dot_gelu", HF_KERNEL(hf_linear_dot_gelu)},
        {"hf_linear_dot_gelu_tanh", HF_KERNEL(hf_linear_dot_gelu_tanh)},
        {"hf_linear_dot_silu", HF_KERNEL(hf_linear_dot_silu)},
        {"hf_linear_tanh", HF_KERNEL(hf_linear_tanh)}})),
    impl_name<LinearFn>);

class LinearResidualTest : public OpTest<LinearResFn> {};

TEST_P(LinearResidualTest, AddsResidualAfterBias) {
    uint32_t seed = 100;
    for (Shape s : kShapes) {
        Buffer<float> x = ref::random_buffer({s.K, s.M}, seed++);
        Buffer<float> w = ref::random_buffer({s.K, s.N}, seed++, -0.3f, 0.3f);
        Buffer<float> b = ref::random_buffer({s.N}, seed++);
        Buffer<float> res = ref::random_buffer({s.N, s.M}, seed++, -5, 5);
        Buffer<float> y(s.N, s.M);
        HF_CALL(GetParam().fn(x, w, b, res, y));
        auto rr = ref::to_array(res);
        auto r = ref::linear(ref::to_array(x), ref::to_array(w), ref::to_array(b), "none", &rr);
        EXPECT_LE(ref::rel_error(y, r), ref::kTolerance) << "M=" << s.M << " N=" << s.N;
    }
}

// The residual at ±1e4 against a projection of about ±1, extents of 1, the
// decode rows: the sum keeps the small part.
TEST_P(LinearResidualTest, HostileShapesAndValues) {
    uint32_t seed = 900;
    for (Shape s : std::vector<Shape>{{1, 1, 1}, {4, 1, 9}, {1, 1025, 3}, {2, 33, 1031}, {65, 129, 300}}) {
        Buffer<float> x = ref::random_buffer({s.K, s.M}, seed++, -1, 1);
        Buffer<float> w = ref::random_buffer({s.K, s.N}, seed++, -1.0f / s.K, 1.0f / s.K);
        Buffer<float> b = ref::random_buffer({s.N}, seed++);
        Buffer<float> res = ref::random_buffer({s.N, s.M}, seed++, -1e4f, 1e4f);
        Buffer<float> y(s.N, s.M);
        y.fill(std::nanf(""));
        HF_CALL(GetParam().fn(x, w, b, res, y));
        auto rr = ref::to_array(res);
        auto r = ref::linear(ref::to_array(x), ref::to_array(w), ref::to_array(b), "none", &rr);
        EXPECT_LE(ref::rel_error(y, r), ref::kTolerance) << "M=" << s.M << " K=" << s.K << " N=" << s.N;
        // The projection alone, to well within its own size: y − res against
        // the reference without the residual.
        auto p = ref::linear(ref::to_array(x), ref::to_array(w), ref::to_array(b), "none", nullptr);
        double worst = 0, scale = 0;
        for (int m = 0; m < s.M; m++)
            for (int n = 0; n < s.N; n++) {
                worst = std::max(worst, std::abs(((double)y(n, m) - res(n, m)) - p(n, m)));
                scale = std::max(scale, std::abs(p(n, m)));
            }
        EXPECT_LE(worst, 1e-3 * (1.0 + scale))
            << "M=" << s.M << " N=" << s.N << ": the projection lost under the residual";
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

// The gated feed-forward's first projection (T5 v1.1): y = act(x·Wᵀ + b)·gate,
// on the shapes above, hostile values (pre-activations of ±3e4, gates of
// ±1e3 and 0) and a strided gate (rows of a wider buffer).
class LinearGatedTest : public OpTest<LinearResFn> {};

static void check_gated(const Kernel<LinearResFn> &fn, const std::string &act, Shape s, float xr, float gr,
                        uint32_t seed, int gate_stride = 0) {
    Buffer<float> x = ref::random_buffer({s.K, s.M}, seed, -xr, xr);
    Buffer<float> w = ref::random_buffer({s.K, s.N}, seed + 1, -0.3f, 0.3f);
    Buffer<float> b = ref::random_buffer({s.N}, seed + 2);
    const int gs = gate_stride ? gate_stride : s.N;
    Buffer<float> storage = ref::random_buffer({gs, s.M}, seed + 3, -gr, gr);
    if (s.M > 1) storage(0, 1) = 0.0f;
    halide_dimension_t dims[2] = {{0, s.N, 1}, {0, s.M, gs}};
    Buffer<float> gate(storage.data(), 2, dims), y(s.N, s.M);
    y.fill(std::nanf(""));
    HF_CALL(fn(x, w, b, gate, y));
    ref::Array r = ref::linear(ref::to_array(x), ref::to_array(w), ref::to_array(b), act, nullptr);
    ref::Array g = ref::to_array(gate.copy());
    for (size_t k = 0; k < r.v.size(); k++) r.v[k] *= g.v[k];
    EXPECT_LE(ref::rel_error(y, r), ref::kTolerance) << "M=" << s.M << " K=" << s.K << " N=" << s.N << " act=" << act;
}

TEST_P(LinearGatedTest, ActivationTimesGate) {
    const std::string act = activation_of(GetParam().name);
    uint32_t seed = 900;
    for (Shape s : kShapes) check_gated(GetParam().fn, act, s, 2, 2, seed += 4);
    check_gated(GetParam().fn, act, {3, 1000, 129}, 1000, 1000, seed += 4);
    check_gated(GetParam().fn, act, {5, 64, 40}, 2, 2, seed += 4, 97);
}

INSTANTIATE_TEST_SUITE_P(All, LinearGatedTest,
                         testing::ValuesIn(on_device(std::vector<Impl<LinearResFn>>{
                             {"hf_linear_gelu_tanh_gated", HF_KERNEL(hf_linear_gelu_tanh_gated)},
                             {"hf_linear_dot_gelu_tanh_gated", HF_KERNEL(hf_linear_dot_gelu_tanh_gated)},
                             {"hf_linear_silu_gated", HF_KERNEL(hf_linear_silu_gated)},
                             {"hf_linear_dot_silu_gated", HF_KERNEL(hf_linear_dot_silu_gated)}})),
                         impl_name<LinearResFn>);
