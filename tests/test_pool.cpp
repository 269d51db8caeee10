// pool (generators/pool_generator.cpp): one vector per sequence from
// time-major rows — the first position or the mean of the valid ones, plain
// or of unit L2 norm — against double-precision loops.
#include "reference.h"
#include "kernels.h"
#include "halformer/kernel_error.h"

#include "hf_pool_first.h"
#include "hf_pool_first_l2.h"
#include "hf_pool_mean.h"
#include "hf_pool_mean_l2.h"

HF_DECLARE_GPU(hf_pool_first)
HF_DECLARE_GPU(hf_pool_first_l2)
HF_DECLARE_GPU(hf_pool_mean)
HF_DECLARE_GPU(hf_pool_mean_l2)

using ref::Buffer;
using PoolFn = int (*)(halide_buffer_t *, halide_buffer_t *, halide_buffer_t *);

namespace {

// x (d, r, t): time-major rows of T positions × R sequences.
ref::Array reference(const Buffer<float> &x, const Buffer<int32_t> &lens, bool mean, bool l2) {
    const int D = x.dim(0).extent(), R = x.dim(1).extent();
    ref::Array out({D, R});
    for (int r = 0; r < R; r++) {
        double norm = 0;
        for (int d = 0; d < D; d++) {
            double v = 0;
            if (mean) {
                for (int t = 0; t < lens(r); t++) v += x(d, r, t);
                v /= lens(r);
            } else {
                v = x(d, r, 0);
            }
            out(d, r) = v;
            norm += v * v;
        }
        if (l2)
            for (int d = 0; d < D; d++) out(d, r) /= std::max(std::sqrt(norm), 1e-12);
    }
    return out;
}

}  // namespace

class PoolTest : public OpTest<PoolFn> {};

TEST_P(PoolTest, MatchesReference) {
    const std::string name = GetParam().name;
    const bool mean = name.find("mean") != std::string::npos, l2 = name.find("l2") != std::string::npos;
    uint32_t seed = 90;
    for (auto [D, R, T] : std::vector<std::tuple<int, int, int>>{{1, 1, 1}, {37, 3, 5}, {768, 8, 128}, {48, 2, 24}}) {
        Buffer<float> x = ref::random_buffer({D, R, T}, seed++, -3, 3);
        Buffer<int32_t> lens(R);
        for (int r = 0; r < R; r++) lens(r) = 1 + (int)((r * 7919u + seed) % (unsigned)T);
        lens(R - 1) = T;
        Buffer<float> out(D, R);
        HF_CALL(GetParam().fn(x, lens, out));
        EXPECT_LE(ref::rel_error(out, reference(x, lens, mean, l2)), ref::kTolerance) << "D=" << D << " R=" << R << " T=" << T;
    }
}

// Hostile: a strided view of a wider buffer (the runtime's activations are
// rows of a larger scratch), rows of ±1e30 and of zeros (the norm: no
// overflow in double, no division by zero), lengths outside [1, T] refused.
TEST_P(PoolTest, HostileValuesAndLengths) {
    const std::string name = GetParam().name;
    const bool mean = name.find("mean") != std::string::npos, l2 = name.find("l2") != std::string::npos;
    const int D = 20, R = 3, T = 4;
    Buffer<float> x(D, R, T);
    for (int t = 0; t < T; t++)
        for (int r = 0; r < R; r++)
            for (int d = 0; d < D; d++) x(d, r, t) = r == 0 ? 0.0f : r == 1 ? ((d + t) % 2 ? 1e30f : -1e30f) : d - 7.5f;
    Buffer<int32_t> lens(R);
    lens(0) = 2, lens(1) = 3, lens(2) = 4;
    Buffer<float> out(D, R);
    HF_CALL(GetParam().fn(x, lens, out));
    ref::Array want = reference(x, lens, mean, l2);
    for (int r = 0; r < R; r++)
        for (int d = 0; d < D; d++) {
            EXPECT_TRUE(std::isfinite(out(d, r))) << "r=" << r << " d=" << d;
            EXPECT_NEAR(out(d, r), want(d, r), 1e-6 * std::max(1.0, std::fabs(want(d, r)))) << "r=" << r << " d=" << d;
        }
    for (int bad : {0, T + 1, -3}) {
        lens(1) = bad;
        EXPECT_NE(GetParam().fn(x, lens, out), 0) << "length " << bad;
        EXPECT_NE(halformer::last_kernel_error().find("sequence length"), std::string::npos)
            << halformer::last_kernel_error();
    }
}

INSTANTIATE_TEST_SUITE_P(All, PoolTest,
                         testing::ValuesIn(on_device(std::vector<Impl<PoolFn>>{
                             {"hf_pool_first", HF_KERNEL(hf_pool_first)},
                             {"hf_pool_first_l2", HF_KERNEL(hf_pool_first_l2)},
                             {"hf_pool_mean", HF_KERNEL(hf_pool_mean)},
                             {"hf_pool_mean_l2", HF_KERNEL(hf_pool_mean_l2)}})),
                         impl_name<PoolFn>);
