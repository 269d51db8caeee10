#include "reference.h"
#include "kernels.h"
#include "halformer/kernel_error.h"

#include "hf_embedding.h"
#include "hf_embedding_concat.h"
#include "hf_embedding_learned.h"
#include "hf_embedding_learned_types.h"

HF_DECLARE(hf_embedding)
HF_DECLARE(hf_embedding_concat)
HF_DECLARE(hf_embedding_learned)
HF_DECLARE_GPU(hf_embedding_learned_types)

using ref::Buffer;
using EmbFn = int (*)(halide_buffer_t *, halide_buffer_t *, halide_buffer_t *, float, halide_buffer_t *);
using LearnedFn = int (*)(halide_buffer_t *, halide_buffer_t *, halide_buffer_t *, float, halide_buffer_t *,
                          halide_buffer_t *);

// Start positions of B sequences: sequence b starts at start + step·b
// (rows of one decoding batch at different positions).
Buffer<int32_t> starts(int B, int start, int step = 0) {
    Buffer<int32_t> s(B);
    for (int b = 0; b < B; b++) s(b) = start + step * b;
    return s;
}

Buffer<int32_t> random_tokens(int T, int B, int V, uint32_t seed) {
    Buffer<int32_t> t(T, B);
    std::mt19937 rng(seed);
    t.for_each_value([&](int32_t &x) { x = (int32_t)(rng() % V); });
    return t;
}

class EmbeddingTest : public OpTest<EmbFn> {};

TEST_P(EmbeddingTest, LookupScaleAndPositions) {
    const bool concat = GetParam().name.find("concat") != std::string::npos;
    uint32_t seed = 400;
    for (auto [V, D, T, B, start] : std::vector<std::tuple<int, int, int, int, int>>{
             {10, 4, 1, 1, 0}, {50, 37, 3, 2, 5}, {1000, 512, 17, 3, 0}, {300, 64, 129, 1, 1900}}) {
        Buffer<float> table = ref::random_buffer({D, V}, seed++);
        Buffer<int32_t> tok = random_tokens(T, B, V, seed++);
        Buffer<float> out(D, T, B);
        const float scale = std::sqrt((float)D);
        HF_CALL(GetParam().fn(tok, table, starts(B, start, 7), scale, out));
        ref::Array r({D, T, B});
        for (int b = 0; b < B; b++)
            for (int t = 0; t < T; t++)
                for (int d = 0; d < D; d++)
                    r(d, t, b) = (double)table(d, tok(t, b)) * scale +
                                 ref::positional(start + 7 * b + t, d, D, concat);
        EXPECT_LE(ref::rel_error(out, r), ref::kTolerance) << "V=" << V << " D=" << D << " T=" << T;
    }
}

TEST_P(EmbeddingTest, OutOfRangeTokenIsAnErrorAndWritesNothingWild) {
    Buffer<float> table = ref::random_buffer({8, 20}, 1), out(8, 4, 1);
    for (int bad : {20, -1, 1 << 30}) {
        Buffer<int32_t> tok(4, 1);
        tok.fill(3);
        tok(2, 0) = bad;
        out.fill(-7.0f);
        EXPECT_NE(GetParam().fn(tok, table, starts(1, 0), 1.0f, out), 0) << "token " << bad;
        if (GetParam().name == "hf_embedding") {
            // The hand schedule checks every id before it writes any row.
            EXPECT_NE(halformer::last_kernel_error().find("token id"), std::string::npos)
                << halformer::last_kernel_error();
            out.for_each_value([](float v) { EXPECT_EQ(v, -7.0f); });
        }
    }
}

TEST_P(EmbeddingTest, EverySequenceNeedsAStartPosition) {
    Buffer<float> table = ref::random_buffer({8, 20}, 1), out(8, 4, 3);
    Buffer<int32_t> tok(4, 3);
    tok.fill(3);
    out.fill(-7.0f);
    EXPECT_NE(GetParam().fn(tok, table, starts(2, 0), 1.0f, out), 0) << "3 sequences, 2 start positions";
    EXPECT_NE(halformer::last_kernel_error().find("start_pos"), std::string::npos) << halformer::last_kernel_error();
}

INSTANTIATE_TEST_SUITE_P(All, EmbeddingTest,
                         testing::ValuesIn(on_device(std::vector<Impl<EmbFn>>{
                             HF_IMPL3_NO_LI(hf_embedding), HF_IMPL3_NO_LI(hf_embedding_concat)})),
                         impl_name<EmbFn>);

// The seeds' worked example: d_model = 4, positions 0 and 1, with a zero
// table: PE0 = [0, 1, 0, 1], PE1 = [0.841, 0.540, 0.010, 0.999].
TEST(EmbeddingSeedExample, PositionalEncodingDModel4) {
    Buffer<float> table(4, 1), out(4, 2, 1);
    table.fill(0.0f);
    Buffer<int32_t> tok(2, 1);
    tok.fill(0);
    HF_CALL(HF_KERNEL(hf_embedding)(tok, table, starts(1, 0), 1.0f, out));
    const float pe0[4] = {0, 1, 0, 1};
    const float pe1[4] = {0.841f, 0.540f, 0.010f, 0.999f};
    for (int d = 0; d < 4; d++) {
        EXPECT_EQ(out(d, 0, 0), pe0[d]);
        EXPECT_NEAR(out(d, 1, 0), pe1[d], 0.001);  // the seed prints 3 decimals, truncated
        EXPECT_NEAR(out(d, 1, 0), ref::positional(1, d, 4, false), 1e-6);
    }
}

class LearnedEmbeddingTest : public OpTest<LearnedFn> {};

// The first case is smaller than the autoscheduled builds' tiles (Adams2019:
// 256 features, 64 positions; Mullapudi2016: 16 positions), the second
// holds whole tiles.
struct LearnedCase { int V, D, T, B, P, start; };
const std::vector<LearnedCase> kLearnedCases = {{40, 24, 5, 2, 16, 7}, {50, 256, 64, 2, 80, 9}};

TEST_P(LearnedEmbeddingTest, AddsLearnedPositionsWithOffset) {
    uint32_t seed = 3;
    for (auto [V, D, T, B, P, start] : kLearnedCases) {
        Buffer<float> table = ref::random_buffer({D, V}, seed++), pos = ref::random_buffer({D, P}, seed++);
        Buffer<int32_t> tok = random_tokens(T, B, V, seed++);
        Buffer<float> out(D, T, B);
        HF_CALL(GetParam().fn(tok, table, starts(B, start, 2), 1.0f, pos, out));
        ref::Array r({D, T, B});
        for (int b = 0; b < B; b++)
            for (int t = 0; t < T; t++)
                for (int d = 0; d < D; d++) r(d, t, b) = (double)table(d, tok(t, b)) + pos(d, start + 2 * b + t);
        EXPECT_LE(ref::rel_error(out, r), ref::kTolerance) << "D=" << D << " T=" << T;
    }
}

TEST_P(LearnedEmbeddingTest, PositionPastTheTableIsAnError) {
    uint32_t seed = 3;
    for (auto [V, D, T, B, P, start] : kLearnedCases) {
        (void)start;
        Buffer<float> table = ref::random_buffer({D, V}, seed++), pos = ref::random_buffer({D, P}, seed++);
        Buffer<int32_t> tok(T, B);
        tok.fill(1);
        Buffer<float> out(D, T, B);
        HF_CALL(GetParam().fn(tok, table, starts(B, P - T), 1.0f, pos, out));  // the last T positions: fine
        // Only the last sequence one past the end.
        Buffer<int32_t> at = starts(B, P - T);
        at(B - 1) += 1;
        EXPECT_NE(GetParam().fn(tok, table, at, 1.0f, pos, out), 0) << "D=" << D << ": one past the end";
        EXPECT_NE(halformer::last_kernel_error().find("position"), std::string::npos)
            << halformer::last_kernel_error();
    }
}

INSTANTIATE_TEST_SUITE_P(All, LearnedEmbeddingTest,
                         testing::ValuesIn(on_device(std::vector<Impl<LearnedFn>>{
                             HF_IMPL3_NO_LI(hf_embedding_learned)})),
                         impl_name<LearnedFn>);

// BERT's embeddings: learned positions plus token types, each type id
// checked against the type table.
using TypesFn = int (*)(halide_buffer_t *, halide_buffer_t *, halide_buffer_t *, float, halide_buffer_t *, halide_buffer_t *,
                        halide_buffer_t *, halide_buffer_t *);
class TypedEmbeddingTest : public OpTest<TypesFn> {};

TEST_P(TypedEmbeddingTest, AddsPositionsAndTokenTypes) {
    uint32_t seed = 30;
    for (auto [V, D, T, B, P, start] : kLearnedCases) {
        const int Ty = 3;
        Buffer<float> table = ref::random_buffer({D, V}, seed++), pos = ref::random_buffer({D, P}, seed++);
        Buffer<float> types = ref::random_buffer({D, Ty}, seed++);
        Buffer<int32_t> tok = random_tokens(T, B, V, seed++), ty = random_tokens(T, B, Ty, seed++);
        Buffer<float> out(D, T, B);
        HF_CALL(GetParam().fn(tok, table, starts(B, start), 2.0f, pos, ty, types, out));
        ref::Array r({D, T, B});
        for (int b = 0; b < B; b++)
            for (int t = 0; t < T; t++)
                for (int d = 0; d < D; d++)
                    r(d, t, b) = (double)table(d, tok(t, b)) * 2.0 + pos(d, start + t) + types(d, ty(t, b));
        EXPECT_LE(ref::rel_error(out, r), ref::kTolerance) << "D=" << D << " T=" << T;
    }
}

TEST_P(TypedEmbeddingTest, TypeOutsideTheTableIsAnError) {
    Buffer<float> table = ref::random_buffer({8, 20}, 1), pos = ref::random_buffer({8, 16}, 2);
    Buffer<float> types = ref::random_buffer({8, 2}, 3), out(8, 4, 1);
    Buffer<int32_t> tok(4, 1);
    tok.fill(3);
    for (int bad : {2, -1, 1 << 30}) {
        Buffer<int32_t> ty(4, 1);
        ty.fill(1);
        ty(3, 0) = bad;
        EXPECT_NE(GetParam().fn(tok, table, starts(1, 0), 1.0f, pos, ty, types, out), 0) << "type " << bad;
        EXPECT_NE(halformer::last_kernel_error().find("token type"), std::string::npos)
            << halformer::last_kernel_error();
    }
}

INSTANTIATE_TEST_SUITE_P(All, TypedEmbeddingTest,
                         testing::ValuesIn(on_device(std::vector<Impl<TypesFn>>{
                             {"hf_embedding_learned_types", HF_KERNEL(hf_embedding_learned_types)}})),
                         impl_name<TypesFn>);
