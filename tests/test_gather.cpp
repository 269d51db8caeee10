#include "reference.h"
#include "kernels.h"

#include "hf_gather_rows.h"
#include "hf_scatter_rows.h"

#include <algorithm>
#include <numeric>
#include <random>

HF_DECLARE(hf_gather_rows)
HF_DECLARE(hf_scatter_rows)

using ref::Buffer;
using GatherFn = int (*)(halide_buffer_t *, halide_buffer_t *, halide_buffer_t *);

class GatherTest : public OpTest<GatherFn> {};

// Beam reorders (a permutation, a beam copied twice, identity) and the
// repetition of each sentence's rows for its beams (R_out > R_in), at odd
// widths; every value must be the source value, bit for bit.
TEST_P(GatherTest, PicksRowsPerTimeStep) {
    struct Case {
        int W, R_in, T;
        std::vector<int32_t> idx;
    };
    for (const Case &c : std::vector<Case>{{64, 4, 7, {2, 0, 3, 1}},
                                           {33, 4, 5, {1, 1, 3, 0}},
                                           {1, 3, 1, {0, 1, 2}},
                                           {1024, 2, 3, {0, 0, 0, 1, 1, 1}},
                                           {17, 5, 129, {4, 3, 2, 1, 0}}}) {
        Buffer<float> src = ref::random_buffer({c.W, c.R_in, c.T}, 7 + c.W);
        const int R = (int)c.idx.size();
        Buffer<int32_t> idx(R);
        for (int j = 0; j < R; j++) idx(j) = c.idx[j];
        Buffer<float> out(c.W, R, c.T);
        HF_CALL(GetParam().fn(src, idx, out));
        for (int t = 0; t < c.T; t++)
            for (int j = 0; j < R; j++)
                for (int w = 0; w < c.W; w++)
                    ASSERT_EQ(out(w, j, t), src(w, c.idx[j], t)) << "w=" << w << " j=" << j << " t=" << t;
    }
}

// An index outside the source rows is an error that names it, and nothing
// is written.
TEST_P(GatherTest, OutOfRangeIndexIsAnError) {
    Buffer<float> src = ref::random_buffer({8, 3, 2}, 1), out(8, 2, 2);
    out.fill(42.0f);
    for (int32_t bad : {3, -1}) {
        Buffer<int32_t> idx(2);
        idx(0) = 0;
        idx(1) = bad;
        EXPECT_NE(GetParam().fn(src, idx, out), 0) << bad;
        EXPECT_NE(halformer::last_kernel_error().find("row index " + std::to_string(bad)), std::string::npos)
            << halformer::last_kernel_error();
        out.for_each_value([](float v) { ASSERT_EQ(v, 42.0f); });
    }
}

INSTANTIATE_TEST_SUITE_P(All, GatherTest,
                         testing::ValuesIn(on_device(std::vector<Impl<GatherFn>>{
                             {"hf_gather_rows", HF_KERNEL(hf_gather_rows)}})),
                         impl_name<GatherFn>);

// Scatter: the paged KV cache's write. Each source row lands at its own
// destination, bit for bit; every other row keeps what it held. Widths
// with vector tails, 1 row, rows in reverse, a decode step's 64 rows into a
// cache of 4096.
using ScatterFn = int (*)(halide_buffer_t *, halide_buffer_t *, halide_buffer_t *);

class ScatterTest : public OpTest<ScatterFn> {};

TEST_P(ScatterTest, WritesEachRowAtItsPlace) {
    struct Case {
        int W, N, R;
    };
    uint32_t seed = 70;
    for (const Case &c : std::vector<Case>{{64, 4, 16}, {33, 7, 7}, {1, 1, 3}, {1536, 64, 4096}, {17, 130, 300}}) {
        Buffer<float> src = ref::random_buffer({c.W, c.N}, seed++);
        Buffer<float> out = ref::random_buffer({c.W, c.R}, seed++), before = out.copy();
        std::vector<int32_t> dest(c.R);
        std::iota(dest.begin(), dest.end(), 0);
        std::shuffle(dest.begin(), dest.end(), std::mt19937(seed++));
        dest.resize(c.N);
        Buffer<int32_t> idx(c.N);
        for (int i = 0; i < c.N; i++) idx(i) = dest[i];
        HF_CALL(GetParam().fn(src, idx, out));
        std::vector<int> from(c.R, -1);
        for (int i = 0; i < c.N; i++) from[dest[i]] = i;
        for (int r = 0; r < c.R; r++)
            for (int w = 0; w < c.W; w++)
                ASSERT_EQ(out(w, r), from[r] < 0 ? before(w, r) : src(w, from[r]))
                    << "W=" << c.W << " r=" << r << " w=" << w << " (from " << from[r] << ")";
    }
}

// A destination outside the buffer is an error that names it, and no row
// is written.
TEST_P(ScatterTest, OutOfRangeIndexIsAnError) {
    Buffer<float> src = ref::random_buffer({8, 3}, 1), out(8, 5);
    for (int32_t bad : {5, -1}) {
        out.fill(42.0f);
        Buffer<int32_t> idx(3);
        idx(0) = 0;
        idx(1) = 4;
        idx(2) = bad;
        EXPECT_NE(GetParam().fn(src, idx, out), 0) << bad;
        EXPECT_NE(halformer::last_kernel_error().find("row index " + std::to_string(bad)), std::string::npos)
            << halformer::last_kernel_error();
        out.for_each_value([](float v) { ASSERT_EQ(v, 42.0f); });
    }
}

INSTANTIATE_TEST_SUITE_P(All, ScatterTest,
                         testing::ValuesIn(on_device(std::vector<Impl<ScatterFn>>{
                             {"hf_scatter_rows", HF_KERNEL(hf_scatter_rows)}})),
                         impl_name<ScatterFn>);
