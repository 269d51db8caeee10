#include "reference.h"
#include "kernels.h"

#include "hf_rope.h"

#include <cmath>
#include <random>

HF_DECLARE(hf_rope)

using ref::Buffer;
using RopeFn = int (*)(halide_buffer_t *, halide_buffer_t *, halide_buffer_t *, halide_buffer_t *);

namespace {

// Heads of D dims in rows of `row` floats ([M, row]: a fused projection's
// rows, the heads starting at column `col`), seen as (i, p, h, m) with the
// pairs of transformers' rotate_half (i, i + D/2) or GPT-J's interleaved
// (2i, 2i + 1).
Buffer<float> pairs(Buffer<float> &rows, int col, int H, int D, bool interleaved) {
    const int half = D / 2, row = rows.dim(0).extent(), M = rows.dim(1).extent();
    halide_dimension_t dims[4] = {{0, half, interleaved ? 2 : 1},
                                  {0, 2, interleaved ? 1 : half},
                                  {0, H, D},
                                  {0, M, row}};
    return Buffer<float>(rows.data() + col, 4, dims);
}

// The reference: transformers' angle (position · θ in float32), then cos
// and sin of it in double.
double rotated(const Buffer<float> &x, const std::vector<int32_t> &pos, const std::vector<float> &theta, int i,
               int p, int h, int m) {
    const float a = (float)pos[m] * theta[i];
    const double c = std::cos((double)a), s = std::sin((double)a);
    const double x0 = x(i, 0, h, m), x1 = x(i, 1, h, m);
    return p == 0 ? x0 * c - x1 * s : x1 * c + x0 * s;
}

// Llama's frequencies: base^(−2i/D).
std::vector<float> frequencies(int D, double base) {
    std::vector<float> t(D / 2);
    for (int i = 0; i < D / 2; i++) t[i] = (float)std::pow(base, -2.0 * i / D);
    return t;
}

// Runs one case and compares every element; returns the largest error
// relative to the row's largest value.
void check(const Kernel<RopeFn> &fn, int M, int H, int D, bool interleaved, const std::vector<int32_t> &pos,
           double base, uint32_t seed) {
    const int row = (H + 3) * D;  // the heads inside wider rows (a fused Q|K|V projection)
    Buffer<float> in_rows = ref::random_buffer({row, M}, seed, -2, 2), out_rows(row, M);
    out_rows.fill(7.0f);
    Buffer<float> x = pairs(in_rows, D, H, D, interleaved), y = pairs(out_rows, D, H, D, interleaved);
    const std::vector<float> theta = frequencies(D, base);
    Buffer<int32_t> vpos(M);
    for (int m = 0; m < M; m++) vpos(m) = pos[m];
    Buffer<float> vtheta(D / 2);
    for (int i = 0; i < D / 2; i++) vtheta(i) = theta[i];
    HF_CALL(fn(x, vpos, vtheta, y));
    for (int m = 0; m < M; m++)
        for (int h = 0; h < H; h++)
            for (int p = 0; p < 2; p++)
                for (int i = 0; i < D / 2; i++) {
                    const double want = rotated(x, pos, theta, i, p, h, m);
                    ASSERT_NEAR(y(i, p, h, m), want, 2e-6 * 4) << "M=" << M << " H=" << H << " D=" << D
                        << (interleaved ? " interleaved" : " halves") << " pos=" << pos[m] << " i=" << i
                        << " p=" << p << " h=" << h << " m=" << m;
                }
    // Nothing outside the heads was written.
    for (int m = 0; m < M; m++)
        for (int c = 0; c < row; c++)
            if (c < D || c >= D + H * D) ASSERT_EQ(out_rows(c, m), 7.0f) << "column " << c << " of row " << m;
}

}  // namespace

class RopeTest : public OpTest<RopeFn> {};

// Random heads (Llama's 128 dims, Qwen2-small's 64, odd pair counts) at
// random positions, both pairings, inside wider rows.
TEST_P(RopeTest, MatchesReference) {
    std::mt19937 rng(5);
    uint32_t seed = 10;
    for (int D : {128, 64, 10, 2}) {
        for (bool interleaved : {false, true}) {
            const int M = 1 + (int)(rng() % 9), H = 1 + (int)(rng() % 5);
            std::vector<int32_t> pos(M);
            for (auto &p : pos) p = (int32_t)(rng() % 4096);
            check(GetParam().fn, M, H, D, interleaved, pos, 10000.0, seed++);
        }
    }
}

// Hostile positions: 0 (the identity), a long context's (Llama 3's 131072,
// half a million: angles of 1e5 radians and more) with Llama 3's base
// 500000, and a batch whose rows are at different positions (a decoding
// step: each row its own).
TEST_P(RopeTest, LongContextPositions) {
    check(GetParam().fn, 6, 4, 128, false, {0, 1, 8191, 131071, 500000, 2}, 500000.0, 40);
    check(GetParam().fn, 3, 2, 64, false, {131072, 0, 77}, 10000.0, 41);
    // A long prefill: 70,000 rows (more than CUDA's 65,535 blocks in grid y).
    std::vector<int32_t> many(70000);
    for (int m = 0; m < 70000; m++) many[m] = m;
    check(GetParam().fn, 70000, 1, 4, true, many, 10000.0, 44);
    // Position 0 leaves x as it is, bit for bit.
    Buffer<float> rows = ref::random_buffer({64, 2}, 42), out(64, 2);
    Buffer<float> x = pairs(rows, 0, 1, 64, false), y = pairs(out, 0, 1, 64, false);
    Buffer<int32_t> pos(2);
    pos.fill(0);
    Buffer<float> theta(32);
    theta.fill(0.5f);
    HF_CALL(GetParam().fn(x, pos, theta, y));
    for (int m = 0; m < 2; m++)
        for (int c = 0; c < 64; c++) ASSERT_EQ(out(c, m), rows(c, m)) << c;
}

// Frequencies or positions of the wrong count are errors that say so: too
// few, the buffer read past its end; too many, both counts.
TEST_P(RopeTest, WrongCountsAreErrors) {
    Buffer<float> rows = ref::random_buffer({32, 3}, 43), out(32, 3);
    Buffer<float> x = pairs(rows, 0, 2, 16, false), y = pairs(out, 0, 2, 16, false);  // 8 pairs, 3 rows
    struct Bad {
        int freqs, rows;
        std::string what;
    };
    for (const Bad &b : std::vector<Bad>{{7, 3, "Input buffer inv_freq is accessed at 7"},
                                         {9, 3, "inv_freq has 9 frequencies for heads of 8 pairs"},
                                         {8, 2, "Input buffer positions is accessed at 2"},
                                         {8, 4, "4 positions for 3 rows"}}) {
        Buffer<int32_t> pos(b.rows);
        pos.fill(1);
        Buffer<float> theta(b.freqs);
        theta.fill(1.0f);
        out.fill(7.0f);
        EXPECT_NE(GetParam().fn(x, pos, theta, y), 0) << b.what;
        EXPECT_NE(halformer::last_kernel_error().find(b.what), std::string::npos) << halformer::last_kernel_error();
        out.for_each_value([](float v) { ASSERT_EQ(v, 7.0f); });
    }
}

INSTANTIATE_TEST_SUITE_P(All, RopeTest,
                         testing::ValuesIn(on_device(std::vector<Impl<RopeFn>>{{"hf_rope", HF_KERNEL(hf_rope)}})),
                         impl_name<RopeFn>);
