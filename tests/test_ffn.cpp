#include "reference.h"
#include "kernels.h"

#include "hf_ffn.h"
#include "hf_ffn_gelu.h"
#include "hf_ffn_gelu_tanh.h"
#include "hf_ffn_fused.h"
#include "hf_ffn_residual.h"

HF_DECLARE_LI(hf_ffn)
HF_DECLARE_LI(hf_ffn_gelu)
HF_DECLARE_LI(hf_ffn_gelu_tanh)
HF_DECLARE_LI(hf_ffn_fused)
HF_DECLARE_LI(hf_ffn_residual)

using ref::Buffer;
using FfnFn = int (*)(halide_buffer_t *, halide_buffer_t *, halide_buffer_t *, halide_buffer_t *,
                      halide_buffer_t *, halide_buffer_t *);
using FfnResFn = int (*)(halide_buffer_t *, halide_buffer_t *, halide_buffer_t *, halide_buffer_t *,
                         halide_buffer_t *, halide_buffer_t *, halide_buffer_t *);

struct Shape { int M, D, F; };
const std::vector<Shape> kShapes = {{1, 16, 64}, {3, 37, 50}, {17, 64, 256}, {129, 48, 100}, {40, 512, 2048}};

std::string act_of(const std::string &name) {
    if (name.find("gelu_tanh") != std::string::npos) return "gelu_tanh";
    if (name.find("gelu") != std::string::npos) return "gelu";
    return "relu";
}

ref::Array reference(const Buffer<float> &x, const Buffer<float> &w1, const Buffer<float> &b1,
                     const Buffer<float> &w2, const Buffer<float> &b2, const std::string &act,
                     ref::Array *res) {
    auto h = ref::linear(ref::to_array(x), ref::to_array(w1), ref::to_array(b1), act, nullptr);
    return ref::linear(h, ref::to_array(w2), ref::to_array(b2), "none", res);
}

class FfnTest : public testing::TestWithParam<Impl<FfnFn>> {};

TEST_P(FfnTest, MatchesReference) {
    const std::string act = act_of(GetParam().name);
    uint32_t seed = 200;
    for (Shape s : kShapes) {
        Buffer<float> x = ref::random_buffer({s.D, s.M}, seed++, -2, 2);
        Buffer<float> w1 = ref::random_buffer({s.D, s.F}, seed++, -0.2f, 0.2f);
        Buffer<float> b1 = ref::random_buffer({s.F}, seed++);
        Buffer<float> w2 = ref::random_buffer({s.F, s.D}, seed++, -0.2f, 0.2f);
        Buffer<float> b2 = ref::random_buffer({s.D}, seed++), y(s.D, s.M);
        HF_CALL_OR_NEXT(GetParam().fn(x, w1, b1, w2, b2, y));
        EXPECT_LE(ref::rel_error(y, reference(x, w1, b1, w2, b2, act, nullptr)), ref::kTolerance)
            << "M=" << s.M << " D=" << s.D << " F=" << s.F;
    }
}

INSTANTIATE_TEST_SUITE_P(All, FfnTest,
                         testing::ValuesIn(on_device(std::vector<Impl<FfnFn>>{
                             HF_IMPL3(hf_ffn), HF_IMPL3(hf_ffn_gelu), HF_IMPL3(hf_ffn_gelu_tanh),
                             HF_IMPL3(hf_ffn_fused)})),
                         impl_name<FfnFn>);

class FfnResidualTest : public testing::TestWithParam<Impl<FfnResFn>> {};

TEST_P(FfnResidualTest, AddsResidual) {
    uint32_t seed = 300;
    for (Shape s : kShapes) {
        Buffer<float> x = ref::random_buffer({s.D, s.M}, seed++, -2, 2);
        Buffer<float> w1 = ref::random_buffer({s.D, s.F}, seed++, -0.2f, 0.2f);
        Buffer<float> b1 = ref::random_buffer({s.F}, seed++);
        Buffer<float> w2 = ref::random_buffer({s.F, s.D}, seed++, -0.2f, 0.2f);
        Buffer<float> b2 = ref::random_buffer({s.D}, seed++);
        Buffer<float> res = ref::random_buffer({s.D, s.M}, seed++, -4, 4), y(s.D, s.M);
        HF_CALL_OR_NEXT(GetParam().fn(x, w1, b1, w2, b2, res, y));
        auto rr = ref::to_array(res);
        EXPECT_LE(ref::rel_error(y, reference(x, w1, b1, w2, b2, "relu", &rr)), ref::kTolerance);
    }
}

INSTANTIATE_TEST_SUITE_P(All, FfnResidualTest,
                         testing::ValuesIn(on_device(std::vector<Impl<FfnResFn>>{HF_IMPL3(hf_ffn_residual)})),
                         impl_name<FfnResFn>);
