#include "reference.h"
#include "kernels.h"

#include "hf_logits_adjust.h"

#include <set>

HF_DECLARE(hf_logits_adjust)

using ref::Buffer;
using AdjustFn = int (*)(halide_buffer_t *, halide_buffer_t *, halide_buffer_t *, halide_buffer_t *,
                         halide_buffer_t *);

class LogitsAdjustTest : public OpTest<AdjustFn> {};

// Penalties (θ > 1 and < 1) on positive and negative logits, bans, and
// every other value copied bit for bit, at odd widths; the reference is a
// double-precision loop.
TEST_P(LogitsAdjustTest, PenalizesAndBansTheGivenEntries) {
    struct Case {
        int V, R, N;
    };
    uint32_t seed = 11;
    for (const Case &c : std::vector<Case>{{37, 3, 7}, {32000, 4, 64}, {5, 1, 5}, {1000, 9, 1}}) {
        Buffer<float> x = ref::random_buffer({c.V, c.R}, seed++), out(c.V, c.R);
        Buffer<int32_t> rows(c.N), ids(c.N);
        Buffer<float> factor(c.N);
        std::mt19937 rng(seed++);
        std::set<std::pair<int, int>> used;
        for (int e = 0; e < c.N;) {
            const int r = (int)(rng() % (uint32_t)c.R), v = (int)(rng() % (uint32_t)c.V);
            if (!used.insert({r, v}).second) continue;
            rows(e) = r;
            ids(e) = v;
            factor(e) = e % 3 == 0 ? 0.0f : e % 3 == 1 ? 1.7f : 0.6f;
            e++;
        }
        HF_CALL(GetParam().fn(x, rows, ids, factor, out));
        std::vector<double> want((size_t)c.V * c.R);
        for (int r = 0; r < c.R; r++)
            for (int v = 0; v < c.V; v++) want[(size_t)r * c.V + v] = x(v, r);
        for (int e = 0; e < c.N; e++) {
            double &w = want[(size_t)rows(e) * c.V + ids(e)];
            const double th = factor(e);
            w = th == 0 ? -1e30 : w > 0 ? w / th : w * th;
        }
        for (int r = 0; r < c.R; r++)
            for (int v = 0; v < c.V; v++) {
                const double w = want[(size_t)r * c.V + v];
                ASSERT_NEAR(out(v, r), w, 1e-6 * std::max(1.0, std::abs(w))) << "V=" << c.V << " v=" << v << " r=" << r;
            }
    }
}

// An entry's row or id out of range is an error that names it, and nothing
// is written.
TEST_P(LogitsAdjustTest, OutOfRangeEntryIsAnError) {
    Buffer<float> x = ref::random_buffer({8, 2}, 1), out(8, 2);
    Buffer<float> factor(2);
    factor.fill(2.0f);
    struct Bad {
        int row, id;
        const char *what;
    };
    for (const Bad &b : {Bad{2, 0, "row 2"}, Bad{-1, 0, "row -1"}, Bad{0, 8, "token id 8"}, Bad{1, -3, "token id -3"}}) {
        Buffer<int32_t> rows(2), ids(2);
        rows(0) = 0;
        ids(0) = 1;
        rows(1) = b.row;
        ids(1) = b.id;
        out.fill(42.0f);
        EXPECT_NE(GetParam().fn(x, rows, ids, factor, out), 0) << b.what;
        EXPECT_NE(halformer::last_kernel_error().find(b.what), std::string::npos) << halformer::last_kernel_error();
        out.for_each_value([](float v) { ASSERT_EQ(v, 42.0f); });
    }
}

INSTANTIATE_TEST_SUITE_P(All, LogitsAdjustTest,
                         testing::ValuesIn(on_device(std::vector<Impl<AdjustFn>>{
                             {"hf_logits_adjust", HF_KERNEL(hf_logits_adjust)}})),
                         impl_name<AdjustFn>);
