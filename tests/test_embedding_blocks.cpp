// embedding_blocks: a token table kept as a GGUF file's Q8_0, Q4_0 or Q4_1
// blocks (generators/embedding_blocks_generator.cpp), each row looked up and
// dequantized, checked against double-precision values written here from
// the formats' definitions (ggml's block layouts), on random blocks of both
// signs; a token id outside the vocabulary is an error, nothing written.
#include "reference.h"

#include "hf_embedding_none_q4_0.h"
#include "hf_embedding_none_q4_1.h"
#include "hf_embedding_none_q8_0.h"

#include <gtest/gtest.h>

#include <cmath>
#include <cstdlib>
#include <random>
#include <string>
#include <vector>

namespace {

using ref::Buffer;

#define SKIP_ON_DEVICE() \
    if (std::getenv("HALFORMER_DEVICE")) GTEST_SKIP() << "the block tables are CPU only"

double half_value(uint16_t h) {
    const int e = (h >> 10) & 0x1F, m = h & 0x3FF;
    const double v = e == 0 ? std::ldexp((double)m, -24) : std::ldexp((double)(1024 + m), e - 25);
    return (h & 0x8000) ? -v : v;
}

using Fn = int (*)(halide_buffer_t *, halide_buffer_t *, halide_buffer_t *, float, halide_buffer_t *);

struct Format {
    std::string name;
    int block_bytes;
    Fn fn;
};

// The value of element k of a row of blocks, by the format's definition.
double value(const Format &f, const uint8_t *row, int k) {
    const uint8_t *b = row + (k / 32) * f.block_bytes;
    const int l = k % 32;
    const double d = half_value(uint16_t(b[0] | b[1] << 8));
    if (f.name == "q8_0") return d * (int8_t)b[2 + l];
    const int head = f.name == "q4_1" ? 4 : 2;
    const int q = l < 16 ? (b[head + l] & 15) : (b[head + l - 16] >> 4);
    return f.name == "q4_1" ? d * q + half_value(uint16_t(b[2] | b[3] << 8)) : d * (q - 8);
}

std::vector<Format> formats() {
    return {{"q8_0", 34, hf_embedding_none_q8_0}, {"q4_0", 18, hf_embedding_none_q4_0}, {"q4_1", 20, hf_embedding_none_q4_1}};
}

// V rows of D / 32 random blocks: fp16 steps (and minimums) of either sign,
// |v| in [2^-10, 2^-4), random codes.
std::vector<uint8_t> random_blocks(const Format &f, int V, int D, uint32_t seed) {
    std::mt19937 rng(seed);
    std::vector<uint8_t> bytes((size_t)V * (D / 32) * f.block_bytes);
    for (size_t at = 0; at < bytes.size(); at += f.block_bytes) {
        for (int i = 0; i < f.block_bytes; i++) bytes[at + i] = uint8_t(rng());
        for (int h = 0; h < (f.name == "q4_1" ? 4 : 2); h += 2) {
            const uint16_t v = uint16_t((rng() % 2) << 15 | (5 + rng() % 6) << 10 | rng() % 1024);
            bytes[at + h] = uint8_t(v & 0xFF);
            bytes[at + h + 1] = uint8_t(v >> 8);
        }
    }
    return bytes;
}

TEST(EmbeddingBlocks, EveryFormatAgainstItsDefinition) {
    SKIP_ON_DEVICE();
    const int V = 37, D = 96, T = 5, B = 2;
    const float scale = 1.7f;
    uint32_t seed = 5;
    for (const Format &f : formats()) {
        SCOPED_TRACE(f.name);
        std::vector<uint8_t> bytes = random_blocks(f, V, D, seed++);
        const int row_bytes = D / 32 * f.block_bytes;
        Buffer<uint8_t> blocks(bytes.data(), {row_bytes, V});
        Buffer<int32_t> tokens(T, B), start(B);
        for (int b = 0; b < B; b++) {
            start(b) = 0;
            for (int t = 0; t < T; t++) tokens(t, b) = (t * 11 + b * 7 + (t == 0 ? V - 1 : 0)) % V;
        }
        Buffer<float> out(D, T, B);
        ASSERT_EQ(f.fn(tokens, blocks, start, scale, out), 0);
        for (int b = 0; b < B; b++) {
            for (int t = 0; t < T; t++) {
                const uint8_t *row = bytes.data() + (size_t)tokens(t, b) * row_bytes;
                for (int k = 0; k < D; k++) {
                    const double want = value(f, row, k) * scale;
                    ASSERT_NEAR(out(k, t, b), want, std::fabs(want) * 3e-7) << "b " << b << " t " << t << " k " << k;
                }
            }
        }
    }
}

// A token id outside [0, V) is refused before any row is written.
TEST(EmbeddingBlocks, BadIdsAreErrors) {
    SKIP_ON_DEVICE();
    const int V = 4, D = 64;
    for (const Format &f : formats()) {
        SCOPED_TRACE(f.name);
        std::vector<uint8_t> bytes = random_blocks(f, V, D, 9);
        Buffer<uint8_t> blocks(bytes.data(), {D / 32 * f.block_bytes, V});
        for (int bad : {-1, V, 1 << 30}) {
            Buffer<int32_t> tokens(3, 1), start(1);
            start(0) = 0;
            tokens(0, 0) = 1, tokens(1, 0) = bad, tokens(2, 0) = 2;
            Buffer<float> out(D, 3, 1);
            out.fill(-5.0f);
            EXPECT_NE(f.fn(tokens, blocks, start, 1.0f, out), 0) << "id " << bad;
            for (int k = 0; k < D; k++) ASSERT_EQ(out(k, 0, 0), -5.0f) << "a row written before the check";
        }
    }
}

}  // namespace
