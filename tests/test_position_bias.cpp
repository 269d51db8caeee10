// position_bias (T5's relative-position bias table) against transformers'
// bucket formula evaluated independently here: in double precision, and in
// float32 the way transformers evaluates it (its log in float32). The
// fixtures' PyTorch-made buckets (tests/fixtures/hf/t5_*/golden.json,
// "t5_buckets") agree with the double-precision formula at every position
// they list (their "float64_differs" lists are empty), and the T5 golden
// logits (tests/runtime) check the table inside the model.
#include "reference.h"
#include "kernels.h"

#include "hf_position_bias.h"
#include "hf_position_bias_causal.h"

HF_DECLARE_GPU(hf_position_bias)
HF_DECLARE_GPU(hf_position_bias_causal)

using ref::Buffer;
using PosBiasFn = int (*)(halide_buffer_t *, int32_t, halide_buffer_t *);

namespace {

// transformers' T5Attention._relative_position_bucket; `f32`: its log and
// division in float32, as torch computes them.
int bucket(int rel, bool bidirectional, int num_buckets, int max_distance, bool f32) {
    int b = 0, n;
    if (bidirectional) {
        num_buckets /= 2;
        if (rel > 0) b += num_buckets;
        n = std::abs(rel);
    } else {
        n = -std::min(rel, 0);
    }
    const int exact = num_buckets / 2;
    if (n < exact) return b + n;
    int large;
    if (f32) {
        const float ratio = (float)std::log((double)max_distance / exact);
        large = exact + (int)(std::log((float)n / (float)exact) / ratio * (float)(num_buckets - exact));
    } else {
        large = exact + (int)(std::log((double)n / exact) / std::log((double)max_distance / exact) *
                              (num_buckets - exact));
    }
    return b + std::min(large, num_buckets - 1);
}

}  // namespace

class PositionBiasTest : public OpTest<PosBiasFn> {};

// Every relative position in [−R, R] for the tables of t5-small (32, 128),
// the T5 test fixtures (16, 128) and (32, 24), and a small one (8, 20); R
// past max_distance (saturated buckets) and short of it. Each bucket of
// each head holds a distinct value, so a wrong bucket or head shows.
TEST_P(PositionBiasTest, BucketsOfEveryRelativePosition) {
    const bool bidirectional = GetParam().name.find("causal") == std::string::npos;
    const int H = 3;
    for (auto [nb, md] : std::vector<std::pair<int, int>>{{32, 128}, {16, 128}, {32, 24}, {8, 20}}) {
        Buffer<float> w(H, nb);
        for (int b = 0; b < nb; b++)
            for (int h = 0; h < H; h++) w(h, b) = (float)(b + 100 * h);
        for (int R : {md + 7, 10}) {
            Buffer<float> out(2 * R + 1, H);
            out.set_min({-R, 0});
            out.fill(std::nanf(""));
            HF_CALL(GetParam().fn(w, md, out));
            int differs = 0;
            for (int h = 0; h < H; h++) {
                for (int n = -R; n <= R; n++) {
                    const int want = bucket(n, bidirectional, nb, md, false);
                    differs += want != bucket(n, bidirectional, nb, md, true);
                    ASSERT_EQ(out(n, h), (float)(want + 100 * h))
                        << "buckets " << nb << " max_distance " << md << " relative position " << n << " head " << h;
                }
            }
            EXPECT_EQ(differs, 0) << "float32 and float64 buckets differ: the reference needs transformers' rounding";
        }
    }
}

INSTANTIATE_TEST_SUITE_P(All, PositionBiasTest,
                         testing::ValuesIn(on_device(std::vector<Impl<PosBiasFn>>{
                             {"hf_position_bias", HF_KERNEL(hf_position_bias)},
                             {"hf_position_bias_causal", HF_KERNEL(hf_position_bias_causal)}})),
                         impl_name<PosBiasFn>);
