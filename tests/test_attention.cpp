#include "reference.h"
#include "kernels.h"

#include <cstring>
#include <type_traits>

#include "hf_attention.h"
#include "hf_attention_causal.h"
#include "hf_attention_causal_decode.h"
#include "hf_attention_decode.h"
#include "hf_attention_causal_decode_paged.h"
#include "hf_attention_decode_paged.h"
#include "hf_attention_bias.h"
#include "hf_attention_causal_bias.h"
#include "hf_attention_causal_decode_bias.h"
#include "hf_attention_causal_decode_paged_bias.h"
#include "hf_attention_causal_window_softcap.h"
#include "hf_attention_causal_decode_window_softcap.h"

HF_DECLARE_LI(hf_attention)
HF_DECLARE_LI(hf_attention_causal)
HF_DECLARE_GPU(hf_attention_causal_decode)
HF_DECLARE(hf_attention_decode)
HF_DECLARE_GPU(hf_attention_causal_decode_paged)
HF_DECLARE_GPU(hf_attention_decode_paged)
HF_DECLARE_GPU(hf_attention_bias)
HF_DECLARE_GPU(hf_attention_causal_bias)
HF_DECLARE_GPU(hf_attention_causal_decode_bias)
HF_DECLARE_GPU(hf_attention_causal_decode_paged_bias)
HF_DECLARE_GPU(hf_attention_causal_window_softcap)
HF_DECLARE_GPU(hf_attention_causal_decode_window_softcap)

using ref::Buffer;
using AttnFn = int (*)(halide_buffer_t *, halide_buffer_t *, halide_buffer_t *, halide_buffer_t *,
                       int32_t, float, halide_buffer_t *);
using WindowFn = int (*)(halide_buffer_t *, halide_buffer_t *, halide_buffer_t *, halide_buffer_t *, int32_t, float,
                         int32_t, halide_buffer_t *);

// The causal kernels take a sliding window at run time (0: every key). The
// suites that run them beside the non-causal kernels call them with 0
// through this, every build of each: hand (CPU and GPU), autoscheduled.
template <WindowFn F>
int window0(halide_buffer_t *q, halide_buffer_t *k, halide_buffer_t *v, halide_buffer_t *len, int32_t offset,
            float scale, halide_buffer_t *o) {
    return F(q, k, v, len, offset, scale, 0, o);
}
#ifdef HALFORMER_TEST_GPU
#define WINDOW0_KERNEL(base) Kernel<AttnFn>{window0<base>, window0<base##_opencl>, window0<base##_cuda>}
#else
#define WINDOW0_KERNEL(base) Kernel<AttnFn>{window0<base>, nullptr, nullptr}
#endif
#ifdef HALFORMER_TEST_AUTOSCHEDULED
#define WINDOW0_CPU(fn) Kernel<AttnFn>{window0<fn>, nullptr, nullptr}
#ifdef HALFORMER_TEST_GPU
#define WINDOW0_LI(base) , {#base "_li2018", Kernel<AttnFn>{nullptr, window0<base##_li2018_opencl>, \
                                                        window0<base##_li2018_cuda>, window0<base>}}
#else
#define WINDOW0_LI(base)
#endif
#define WINDOW0_IMPL3(base) {#base, WINDOW0_KERNEL(base)}, {#base "_adams2019", WINDOW0_CPU(base##_adams2019)}, \
    {#base "_mullapudi2016", WINDOW0_CPU(base##_mullapudi2016)} WINDOW0_LI(base)
#else
#define WINDOW0_IMPL3(base) {#base, WINDOW0_KERNEL(base)}
#endif

struct Case {
    int B, H, Tq, Tkv, dk;
    std::vector<int> kv_len;  // empty: all Tkv
    int q_offset;
    float range;  // inputs uniform in ±range
    int Hkv = 0;  // key/value heads (grouped-query attention); 0: H
};

bool is_causal(const std::string &name) { return name.find("causal") != std::string::npos; }

// A case's random q, k, v (inputs in ±range) and key lengths.
struct Inputs {
    Buffer<float> q, k, v;
    std::vector<int> lens;
    Buffer<int32_t> len;
    Inputs(const Case &c, uint32_t seed)
        : q(ref::random_buffer({c.dk, c.Tq, c.H, c.B}, seed, -c.range, c.range)),
          k(ref::random_buffer({c.dk, c.Tkv, c.Hkv ? c.Hkv : c.H, c.B}, seed + 1, -c.range, c.range)),
          v(ref::random_buffer({c.dk, c.Tkv, c.Hkv ? c.Hkv : c.H, c.B}, seed + 2)),
          lens(c.kv_len.empty() ? std::vector<int>(c.B, c.Tkv) : c.kv_len),
          len(c.B) {
        for (int b = 0; b < c.B; b++) len(b) = lens[b];
    }
};

void run_case(const Kernel<AttnFn> &fn, bool causal, const Case &c, uint32_t seed, double tol = ref::kTolerance) {
    Inputs in(c, seed);
    Buffer<float> o(c.dk, c.Tq, c.H, c.B);
    const float scale = 1.0f / std::sqrt((float)c.dk);
    HF_CALL(fn(in.q, in.k, in.v, in.len, c.q_offset, scale, o));
    auto r = ref::attention(ref::to_array(in.q), ref::to_array(in.k), ref::to_array(in.v), in.lens, c.q_offset,
                            scale, causal);
    EXPECT_LE(ref::rel_error(o, r), tol) << "B=" << c.B << " H=" << c.H << " Hkv=" << c.Hkv << " Tq=" << c.Tq
                                         << " Tkv=" << c.Tkv << " dk=" << c.dk;
}

class AttentionTest : public OpTest<AttnFn> {};

// Self-attention over T = 1, 3, 17, 129 with head dims 32, 64, 80 and 128
// (Llama's, Mistral's: the widest of the families; a GPU block stages its
// queries and a chunk of keys in shared memory, and ops.cuda_limits checks
// that they fit).
TEST_P(AttentionTest, SelfAttention) {
    const bool causal = is_causal(GetParam().name);
    uint32_t seed = 40;
    for (int T : {1, 3, 17, 129})
        for (int dk : {32, 64, 80, 128}) run_case(GetParam().fn, causal, {2, 3, T, T, dk, {}, 0, 1.f}, seed += 3);
}

// Wide heads: the CPU builds take any size; a GPU build whose block would
// need more than 48 KiB of shared memory refuses the call with an error
// that names the head size (a launch past the limit would fail with CUDA's
// bare "invalid value") and computes it right where it fits. 152 dims fit
// the default tile (260 bytes a dim plus 8 KiB: 47,712 bytes): a GPU build
// must run them, and ops.cuda_limits checks the launch against the limit;
// 256 do not.
TEST_P(AttentionTest, WideHeadsRightOrRefusedByName) {
    const bool causal = is_causal(GetParam().name);
    for (int dk : {152, 256})
        for (int T : {1, 40}) {
            const Case c{1, 2, T, T, dk, {}, 0, 1.f};
            Inputs in(c, 500 + T + dk);
            Buffer<float> o(c.dk, c.Tq, c.H, c.B);
            const float scale = 1.0f / std::sqrt((float)dk);
            const int rc = GetParam().fn(in.q, in.k, in.v, in.len, 0, scale, o);
            if (rc != 0 && dk == 256 && test_device() != TestDevice::CPU) {
                EXPECT_NE(halformer::last_kernel_error().find("heads of 256 dims need"), std::string::npos)
                    << halformer::last_kernel_error();
                continue;
            }
            ASSERT_EQ(rc, 0) << "dk=" << dk << " T=" << T << ": " << halformer::last_kernel_error();
            auto r = ref::attention(ref::to_array(in.q), ref::to_array(in.k), ref::to_array(in.v), in.lens, 0, scale,
                                    causal);
            EXPECT_LE(ref::rel_error(o, r), ref::kTolerance) << "dk=" << dk << " T=" << T;
        }
}

// Key padding: each sequence of the batch has its own length, one has none
// (its rows must be zeros, not NaN).
TEST_P(AttentionTest, KeyPaddingAndFullyMaskedSequence) {
    const bool causal = is_causal(GetParam().name);
    run_case(GetParam().fn, causal, {4, 2, 17, 17, 64, {17, 9, 1, 0}, 0, 1.f}, 70);
    run_case(GetParam().fn, causal, {3, 2, 129, 129, 32, {129, 65, 100}, 0, 1.f}, 75);
    // full tiles of the autoscheduled builds (Li2018: 64 head features and keys)
    // and a tail
    run_case(GetParam().fn, causal, {3, 2, 70, 70, 64, {70, 0, 33}, 0, 1.f}, 77);
}

// Cross-attention: queries and keys of different lengths (longer keys than a
// block, and shorter).
TEST_P(AttentionTest, CrossAttention) {
    const bool causal = is_causal(GetParam().name);
    run_case(GetParam().fn, causal, {2, 4, 7, 150, 64, {150, 77}, 143, 1.f}, 80);
    run_case(GetParam().fn, causal, {1, 2, 33, 5, 80, {}, 0, 1.f}, 83);
}

// Incremental decoding: a few new queries against a cache of L keys, offset
// so that the last query sees every key.
TEST_P(AttentionTest, IncrementalDecoding) {
    const bool causal = is_causal(GetParam().name);
    for (int L : {1, 2, 64, 65, 200}) {
        for (int Tq : {1, 3, 32}) {  // 32: at least Adams2019's query tile
            if (Tq > L) continue;
            run_case(GetParam().fn, causal, {2, 8, Tq, L, 64, {}, L - Tq, 1.f}, 90 + L + Tq);
        }
    }
}

// Grouped-query attention (Llama 2 70B, Llama 3, Mistral, Qwen2): 8 query
// heads over 4, 2 and 1 key/value heads (1: multi-query), self-attention and
// decoding steps; each query head must read its own group's keys (the
// reference maps h to h / (H / Hkv)). Heads that do not divide are an error
// that says so.
TEST_P(AttentionTest, GroupedQueryHeads) {
    const bool causal = is_causal(GetParam().name);
    uint32_t seed = 300;
    for (int Hkv : {4, 2, 1}) {
        run_case(GetParam().fn, causal, {2, 8, 17, 17, 64, {17, 9}, 0, 1.f, Hkv}, seed += 3);
        run_case(GetParam().fn, causal, {2, 8, 1, 70, 32, {70, 41}, 69, 1.f, Hkv}, seed += 3);
        run_case(GetParam().fn, causal, {1, 8, 3, 130, 64, {}, 127, 1.f, Hkv}, seed += 3);
    }
    Inputs in({1, 6, 4, 4, 32, {}, 0, 1.f, 4}, 7);
    Buffer<float> o(32, 4, 6, 1);
    EXPECT_NE(GetParam().fn(in.q, in.k, in.v, in.len, 0, 0.2f, o), 0) << "6 query heads over 4 key heads ran";
    EXPECT_NE(halformer::last_kernel_error().find("6 query heads are not a whole multiple of the 4 key heads"),
              std::string::npos)
        << halformer::last_kernel_error();
}

// Scores of about ±1e4 (inputs ±100·√(dk)/…): max subtraction keeps exp in range.
TEST_P(AttentionTest, HugeScoresDoNotOverflow) {
    const bool causal = is_causal(GetParam().name);
    run_case(GetParam().fn, causal, {1, 2, 17, 17, 64, {}, 0, 35.f}, 120, 1e-4);
    run_case(GetParam().fn, causal, {1, 2, 65, 65, 64, {}, 0, 35.f}, 121, 1e-4);  // the autoscheduled builds' tiles
}

// Q, K, V and O as strided views into one fused [B·T, 3·D] projection, as
// the runtime passes them: no copies.
TEST_P(AttentionTest, StridedViewsIntoFusedQKV) {
    const bool causal = is_causal(GetParam().name);
    // 9 × 32: smaller than the autoscheduled builds' tiles; 33 and 65 × 64: full
    // tiles (Adams2019: 32 queries; Li2018: 64 keys and head features) and a tail
    for (auto shape : std::vector<std::pair<int, int>>{{9, 32}, {33, 32}, {65, 64}}) {
        const int T = shape.first, dk = shape.second;  // plain locals: the lambda below captures them
        const int B = 2, H = 4, D = H * dk;
        Buffer<float> qkv = ref::random_buffer({3 * D, T * B}, 130 + T);
        auto view = [&](int which) {
            halide_dimension_t dims[4] = {{0, dk, 1}, {0, T, 3 * D}, {0, H, dk}, {0, B, 3 * D * T}};
            return Buffer<float>(qkv.data() + which * D, 4, dims);
        };
        Buffer<float> q = view(0), k = view(1), v = view(2);
        Buffer<float> out(D, T * B);
        halide_dimension_t odims[4] = {{0, dk, 1}, {0, T, D}, {0, H, dk}, {0, B, D * T}};
        Buffer<float> o(out.data(), 4, odims);
        Buffer<int32_t> len(B);
        len.fill(T);
        const float scale = 1.0f / std::sqrt((float)dk);
        HF_CALL(GetParam().fn(q, k, v, len, 0, scale, o));
        auto r = ref::attention(ref::to_array(q.copy()), ref::to_array(k.copy()), ref::to_array(v.copy()),
                                std::vector<int>(B, T), 0, scale, causal);
        EXPECT_LE(ref::rel_error(o.copy(), r), ref::kTolerance) << "T=" << T << " dk=" << dk;
    }
}

// Positions [begin, begin + extent) of dimension 1 of a (d, t, h, b)
// buffer, numbered from 0: a chunk of queries, a prefix of keys.
static Buffer<float> positions(Buffer<float> &b, int begin, int extent) {
    halide_dimension_t d[4];
    for (int i = 0; i < 4; i++) d[i] = b.raw_buffer()->dim[i];
    d[1].extent = extent;
    return Buffer<float>(b.data() + (size_t)begin * d[1].stride, 4, d);
}

// A causal prefill run as the runtime runs it (runtime/src/model/layers/
// causal_chunks.h): a call per chunk of queries over only the keys that
// chunk sees, q_offset moved to the chunk's first query. The rows must be
// the bits of one call over all keys: blocks of keys past the chunk's
// last query add exactly nothing. Chunks of any length, not only the
// runtime's multiples of 32; key padding, grouped heads, and new queries
// after cached ones.
TEST(AttentionCausalChunks, AreTheSameBitsAsOneCall) {
    const auto fn = WINDOW0_KERNEL(hf_attention_causal);
    // (The third: 1100 keys are 17 blocks of the hand schedule's 64, and
    // from 16 blocks LLVM vectorized the combination over blocks where it
    // could reassociate it: the chunks' calls, with fewer blocks, summed in
    // another order. The tuner's check found it: tools/tune/measure.cpp.)
    const Case cases[] = {{2, 4, 300, 300, 64, {300, 170}, 0, 1.f, 2},
                          {1, 2, 150, 300, 32, {}, 150, 1.f},
                          {1, 2, 1100, 1100, 16, {}, 0, 1.f}};
    uint32_t seed = 600;
    for (const Case &c : cases) {
        Inputs in(c, seed += 3);
        Buffer<float> whole(c.dk, c.Tq, c.H, c.B), chunked(c.dk, c.Tq, c.H, c.B);
        const float scale = 1.0f / std::sqrt((float)c.dk);
        HF_CALL(fn(in.q, in.k, in.v, in.len, c.q_offset, scale, whole));
        chunked.fill(-7.0f);
        for (auto [begin, end] : {std::pair{0, 40}, {40, 41}, {41, 100}, {100, c.Tq}}) {
            const int keys = c.q_offset + end;
            Buffer<float> q = positions(in.q, begin, end - begin), o = positions(chunked, begin, end - begin);
            Buffer<float> k = positions(in.k, 0, keys), v = positions(in.v, 0, keys);
            HF_CALL(fn(q, k, v, in.len, c.q_offset + begin, scale, o));
        }
        EXPECT_EQ(std::memcmp(whole.data(), chunked.data(), whole.size_in_bytes()), 0)
            << "Tq=" << c.Tq << " Tkv=" << c.Tkv << " q_offset=" << c.q_offset
            << ": the chunks' rows differ in their bits from one call's";
    }
}

INSTANTIATE_TEST_SUITE_P(All, AttentionTest,
                         testing::ValuesIn(on_device(std::vector<Impl<AttnFn>>{
                             HF_IMPL3(hf_attention), WINDOW0_IMPL3(hf_attention_causal),
                             {"hf_attention_decode", HF_KERNEL(hf_attention_decode)},
                             {"hf_attention_causal_decode", WINDOW0_KERNEL(hf_attention_causal_decode)}})),
                         impl_name<AttnFn>);

// Small heads (dk = 8, 12: the test models' sizes) against short caches, one
// and several new queries, as the runtime's decoding steps call it: smaller
// than every autoscheduled build's tiles (Adams2019: 32 head features and 32
// queries; Mullapudi2016: 16 keys; Li2018: 64 head features and 64 keys),
// which serve them through their guarded tails.
class AttentionSmallHeadsTest : public OpTest<AttnFn> {};


TEST_P(AttentionSmallHeadsTest, SmallHeadsShortCaches) {
    const bool causal = is_causal(GetParam().name);
    for (int dk : {8, 12}) {
        for (int L : {1, 5, 17}) {
            run_case(GetParam().fn, causal, {1, 4, 1, L, dk, {}, L - 1, 1.f}, 150 + L + dk);
            run_case(GetParam().fn, causal, {3, 2, 1, L, dk, {L, 1, L}, L - 1, 1.f}, 160 + L + dk);
        }
    }
}

INSTANTIATE_TEST_SUITE_P(All, AttentionSmallHeadsTest,
                         testing::ValuesIn(on_device(std::vector<Impl<AttnFn>>{
                             HF_IMPL3(hf_attention), WINDOW0_IMPL3(hf_attention_causal),
                             {"hf_attention_decode", HF_KERNEL(hf_attention_decode)},
                             {"hf_attention_causal_decode", WINDOW0_KERNEL(hf_attention_causal_decode)}})),
                         impl_name<AttnFn>);

// The seeds' worked example: 3 tokens, d_k = 4, scale 1/√4. The seed's
// softmax weights for token 1 (0.27, 0.27, 0.46) are right to two decimals,
// but its printed output rows are not: 0.27·V1 + 0.27·V2 + 0.46·V3 = 5.76,
// and exactly 0.2741·1 + 0.2741·5 + 0.4519·9 = 5.7112 (not 5.38); its third
// row of Q·Kᵀ is also miscomputed (Q3·K1 = 2, not 1). So this test checks the
// weights the seed gives and the exact outputs, computed by hand:
//   row 1: 5.7112 6.7112 7.7112 8.7112   row 2: 4.3962 …   row 3: 4.2029 …
TEST(AttentionSeedExample, ThreeTokens) {
    const float Q[3][4] = {{1, 0, 1, 0}, {0, 1, 0, 1}, {1, 1, 0, 0}};
    const float K[3][4] = {{1, 1, 0, 0}, {0, 0, 1, 1}, {1, 0, 1, 0}};
    const float V[3][4] = {{1, 2, 3, 4}, {5, 6, 7, 8}, {9, 10, 11, 12}};
    Buffer<float> q(4, 3, 1, 1), k(4, 3, 1, 1), v(4, 3, 1, 1), o(4, 3, 1, 1);
    for (int t = 0; t < 3; t++)
        for (int d = 0; d < 4; d++) {
            q(d, t, 0, 0) = Q[t][d];
            k(d, t, 0, 0) = K[t][d];
            v(d, t, 0, 0) = V[t][d];
        }
    Buffer<int32_t> len(1);
    len(0) = 3;
    HF_CALL(HF_KERNEL(hf_attention)(q, k, v, len, 0, 0.5f, o));
    const double expected[3] = {5.7112, 4.3962, 4.2029};
    for (int t = 0; t < 3; t++)
        for (int d = 0; d < 4; d++) EXPECT_NEAR(o(d, t, 0, 0), expected[t] + d, 1e-4) << t << "," << d;

    // The seed's softmax weights for token 1: with V = one-hot rows the
    // output row is the weight row itself.
    Buffer<float> eye(4, 3, 1, 1), w(4, 3, 1, 1);
    eye.fill(0.0f);
    for (int t = 0; t < 3; t++) eye(t, t, 0, 0) = 1.0f;
    HF_CALL(HF_KERNEL(hf_attention)(q, k, eye, len, 0, 0.5f, w));
    // (exactly 0.2741, 0.2741, 0.4519: the seed rounds the last up to 0.46 so
    // that its row sums to 1)
    EXPECT_NEAR(w(0, 0, 0, 0), 0.27, 0.005);
    EXPECT_NEAR(w(1, 0, 0, 0), 0.27, 0.005);
    EXPECT_NEAR(w(2, 0, 0, 0), 0.46, 0.01);
}

// Attention through block tables (the paged KV cache): k and v are a pool
// of blocks of kPage rows; sequence b reads key t from row
// table(t / kPage, b) · kPage + t % kPage, against the reference on the keys
// as each sequence sees them. Blocks repeat (beams sharing their
// ancestors'), tables are longer than the keys, one entry is out of the
// pool (read clamped to its last block), one sequence has no valid key,
// rows that no valid key reads hold NaN;
// head sizes 64 and 80 (a vector tail); 1, 5, 16, 17 and 33 keys (within a
// block, a whole one, one past, three blocks); Tq queries per sequence.
using PagedFn = int (*)(halide_buffer_t *, halide_buffer_t *, halide_buffer_t *, halide_buffer_t *, int32_t, float,
                        halide_buffer_t *, halide_buffer_t *);
using PagedBiasFn = int (*)(halide_buffer_t *, halide_buffer_t *, halide_buffer_t *, halide_buffer_t *, int32_t, float,
                            halide_buffer_t *, halide_buffer_t *, halide_buffer_t *);
using PagedWindowFn = int (*)(halide_buffer_t *, halide_buffer_t *, halide_buffer_t *, halide_buffer_t *, int32_t,
                              float, halide_buffer_t *, int32_t, halide_buffer_t *);
constexpr int kPage = 16;  // the _paged kernels' page (generators/CMakeLists.txt)

// A T5-style bias table: H heads over relative positions −R..R (dim 0's
// min −R), and the reference's view of it (clamped beyond ±R).
struct BiasTable {
    Buffer<float> buf;
    ref::RelBias fn;
    BiasTable(int H, int R, uint32_t seed, float range = 3.f) {
        buf = ref::random_buffer({2 * R + 1, H}, seed, -range, range);
        buf.set_min({-R, 0});
        for (int h = 0; h < H; h++) {
            fn.push_back([this, h, R](int rel) { return (double)buf(std::clamp(rel, -R, R), h); });
        }
    }
};

template <typename Fn>
static void check_paged(Kernel<Fn> fn, bool causal, int Tq, int pool_blocks, uint32_t seed, int window = 0) {
    constexpr bool biased = std::is_same_v<Fn, PagedBiasFn>, windowed = std::is_same_v<Fn, PagedWindowFn>;
    for (int dk : {64, 80}) {
        for (int L : {1, 5, 16, 17, 33}) {
            const int B = 6, H = 3, rows_in_pool = pool_blocks * kPage, NB = (L + kPage - 1) / kPage + 1;
            Buffer<float> q = ref::random_buffer({dk, Tq, H, B}, seed++, -2, 2);
            // (The pool's position dimension: any stride, here a real one.)
            Buffer<float> k = ref::random_buffer({dk, L, H, rows_in_pool}, seed++, -2, 2);
            Buffer<float> v = ref::random_buffer({dk, L, H, rows_in_pool}, seed++);
            Buffer<int32_t> table(NB, B), len(B);
            std::mt19937 rng(seed++);
            for (int b = 0; b < B; b++) {
                for (int n = 0; n < NB; n++) table(n, b) = (int)(rng() % pool_blocks);
                len(b) = b == 4 ? 0 : L - (b % 2);
            }
            table(0, 5) = pool_blocks + 1000;  // out of the pool: its last block
            auto row = [&](int t, int b) {
                return std::clamp(table(t / kPage, b), 0, pool_blocks - 1) * kPage + t % kPage;
            };
            // Rows no valid key reads hold NaN (as never-written cache rows
            // may): a masked key must add nothing.
            std::vector<char> used((size_t)L * rows_in_pool, 0);
            for (int b = 0; b < B; b++)
                for (int t = 0; t < len(b); t++) used[(size_t)t * rows_in_pool + row(t, b)] = 1;
            for (int r = 0; r < rows_in_pool; r++)
                for (int t = 0; t < L; t++)
                    if (!used[(size_t)t * rows_in_pool + r])
                        for (int h = 0; h < H; h++)
                            for (int d = 0; d < dk; d++) k(d, t, h, r) = v(d, t, h, r) = std::nanf("");
            // The keys and values as sequence b sees them (masked ones 0).
            Buffer<float> kl(dk, L, H, B), vl(dk, L, H, B);
            for (int b = 0; b < B; b++)
                for (int h = 0; h < H; h++)
                    for (int t = 0; t < L; t++)
                        for (int d = 0; d < dk; d++) {
                            kl(d, t, h, b) = t < len(b) ? k(d, t, h, row(t, b)) : 0.0f;
                            vl(d, t, h, b) = t < len(b) ? v(d, t, h, row(t, b)) : 0.0f;
                        }
            std::vector<int> lens(B);
            for (int b = 0; b < B; b++) lens[b] = len(b);
            Buffer<float> o(dk, Tq, H, B);
            const float scale = 1.0f / std::sqrt((float)dk);
            const int q_offset = causal ? L - Tq : 0;
            BiasTable bias(H, 4, seed++);
            if constexpr (biased) {
                HF_CALL(fn(q, k, v, len, q_offset, scale, table, bias.buf, o));
            } else if constexpr (windowed) {
                HF_CALL(fn(q, k, v, len, q_offset, scale, table, window, o));
            } else {
                HF_CALL(fn(q, k, v, len, q_offset, scale, table, o));
            }
            auto r = ref::attention(ref::to_array(q), ref::to_array(kl), ref::to_array(vl), lens, q_offset, scale,
                                    causal, biased ? &bias.fn : nullptr, window);
            EXPECT_LE(ref::rel_error(o, r), ref::kTolerance) << "dk=" << dk << " L=" << L << " window=" << window;
        }
    }
}

// Beam search's self-attention: a hypothesis reads the blocks it shares
// with its ancestors.
TEST(AttentionPaged, ReadsKeysThroughBlockTables) {
    check_paged(HF_KERNEL(hf_attention_causal_decode_paged), true, 1, 7, 900);
}

// Cross-attention: the beams of a source (2 queries) read its encoder K|V
// through its blocks, among those of other sources.
TEST(AttentionPaged, ReadsTheSourcesBlocks) {
    check_paged(HF_KERNEL(hf_attention_decode_paged), false, 2, 9, 950);
}

// A table shorter than the keys is refused, not read past.
TEST(AttentionPaged, ATableShorterThanTheKeysIsRefused) {
    const int dk = 64, L = 33, H = 1, B = 2;
    Buffer<float> q = ref::random_buffer({dk, 1, H, B}, 1), k = ref::random_buffer({dk, L, H, 4 * kPage}, 2);
    Buffer<float> v = ref::random_buffer({dk, L, H, 4 * kPage}, 3), o(dk, 1, H, B);
    Buffer<int32_t> table(2, B), len(B);  // 33 keys need 3 blocks
    table.fill(0);
    len.fill(L);
    const auto fn = HF_KERNEL(hf_attention_causal_decode_paged);
    EXPECT_NE(fn(q, k, v, len, L - 1, 0.125f, table, 0, o), 0);
}

// T5's attention: the scores (scale 1) plus a bias per head by relative
// position from a table of −R..R, constant beyond (R = 4 and 8 against
// sequences of up to 33: most pairs are past the table's ends); self,
// padded, a fully masked sequence, incremental decoding (q_offset), biases
// of ±1e4 that dominate the scores, and head sizes 12 (T5 test models) and
// 64.
using AttnBiasFn = int (*)(halide_buffer_t *, halide_buffer_t *, halide_buffer_t *, halide_buffer_t *, int32_t,
                           float, halide_buffer_t *, halide_buffer_t *);
class AttentionBiasTest : public OpTest<AttnBiasFn> {};

static void run_bias_case(const Kernel<AttnBiasFn> &fn, bool causal, const Case &c, int R, float bias_range,
                          uint32_t seed) {
    Inputs in(c, seed);
    BiasTable bias(c.H, R, seed + 3, bias_range);
    Buffer<float> o(c.dk, c.Tq, c.H, c.B);
    HF_CALL(fn(in.q, in.k, in.v, in.len, c.q_offset, 1.0f, bias.buf, o));
    auto r = ref::attention(ref::to_array(in.q), ref::to_array(in.k), ref::to_array(in.v), in.lens, c.q_offset, 1.0,
                            causal, &bias.fn);
    EXPECT_LE(ref::rel_error(o, r), bias_range > 100 ? 1e-4 : ref::kTolerance)
        << "B=" << c.B << " H=" << c.H << " Tq=" << c.Tq << " Tkv=" << c.Tkv << " dk=" << c.dk << " R=" << R;
}

TEST_P(AttentionBiasTest, RelativePositionBias) {
    const bool causal = is_causal(GetParam().name), decode = GetParam().name.find("decode") != std::string::npos;
    uint32_t seed = 500;
    for (int R : {4, 8}) {
        for (int dk : {12, 64}) {
            for (int T : {1, 5, 33}) {
                if (decode) {  // one query at the end of a cache of T
                    run_bias_case(GetParam().fn, causal, {3, 4, 1, T, dk, {T, T - 1 > 0 ? T - 1 : 1, 0}, T - 1, 1.f}, R,
                                  3.f, seed += 5);
                } else {
                    run_bias_case(GetParam().fn, causal, {2, 3, T, T, dk, {}, 0, 1.f}, R, 3.f, seed += 5);
                    run_bias_case(GetParam().fn, causal, {3, 2, T, T, dk, {T, (T + 1) / 2, 0}, 0, 1.f}, R, 3.f,
                                  seed += 5);
                }
            }
        }
    }
}

TEST_P(AttentionBiasTest, HugeBiasesDoNotOverflow) {
    const bool causal = is_causal(GetParam().name), decode = GetParam().name.find("decode") != std::string::npos;
    const int Tq = decode ? 1 : 17;
    run_bias_case(GetParam().fn, causal, {1, 2, Tq, 17, 64, {}, 17 - Tq, 1.f}, 8, 1e4f, 600);
}

INSTANTIATE_TEST_SUITE_P(All, AttentionBiasTest,
                         testing::ValuesIn(on_device(std::vector<Impl<AttnBiasFn>>{
                             {"hf_attention_bias", HF_KERNEL(hf_attention_bias)},
                             {"hf_attention_causal_bias", HF_KERNEL(hf_attention_causal_bias)},
                             {"hf_attention_causal_decode_bias", HF_KERNEL(hf_attention_causal_decode_bias)}})),
                         impl_name<AttnBiasFn>);

// Beam search's self-attention in T5's decoder: block tables and the bias.
TEST(AttentionPaged, ReadsKeysThroughBlockTablesWithBias) {
    check_paged(HF_KERNEL(hf_attention_causal_decode_paged_bias), true, 1, 7, 1900);
}

// Mistral's sliding window: a query at position p sees keys p − window + 1
// .. p only. Whole sequences (prefill: every query its own window), padded
// rows, decoding steps whose rows end at their own lengths (the window is
// the row's, not the furthest row's), grouped-query heads; windows of 1
// (a query sees itself only), shorter than a key block, longer than the
// keys (no effect: the causal kernel's result) and 0 (no limit).
class AttentionWindowTest : public OpTest<WindowFn> {};

static void run_window_case(const Kernel<WindowFn> &fn, const Case &c, int window, uint32_t seed) {
    Inputs in(c, seed);
    Buffer<float> o(c.dk, c.Tq, c.H, c.B);
    const float scale = 1.0f / std::sqrt((float)c.dk);
    HF_CALL(fn(in.q, in.k, in.v, in.len, c.q_offset, scale, window, o));
    auto r = ref::attention(ref::to_array(in.q), ref::to_array(in.k), ref::to_array(in.v), in.lens, c.q_offset, scale,
                            true, nullptr, window);
    EXPECT_LE(ref::rel_error(o, r), ref::kTolerance)
        << "window=" << window << " B=" << c.B << " Tq=" << c.Tq << " Tkv=" << c.Tkv << " q_offset=" << c.q_offset;
}

TEST_P(AttentionWindowTest, QueriesSeeTheirWindowOnly) {
    const bool decode = GetParam().name.find("decode") != std::string::npos;
    uint32_t seed = 700;
    for (int window : {1, 5, 16, 33, 200, 0}) {
        if (!decode) {
            run_window_case(GetParam().fn, {2, 4, 70, 70, 32, {}, 0, 1.f, 2}, window, seed += 3);
            run_window_case(GetParam().fn, {3, 2, 17, 17, 64, {17, 9, 1}, 0, 1.f}, window, seed += 3);
        }
        // Decoding steps: rows of 70, 41 and 5 keys, q_offset the furthest row's.
        run_window_case(GetParam().fn, {3, 4, 1, 70, 32, {70, 41, 5}, 69, 1.f, 1}, window, seed += 3);
    }
}

INSTANTIATE_TEST_SUITE_P(All, AttentionWindowTest,
                         testing::ValuesIn(on_device(std::vector<Impl<WindowFn>>{
                             HF_IMPL3(hf_attention_causal),
                             {"hf_attention_causal_decode", HF_KERNEL(hf_attention_causal_decode)}})),
                         impl_name<WindowFn>);

// The paged cache's decoding step with a window: keys through block tables.
TEST(AttentionPaged, ReadsTheWindowThroughBlockTables) {
    for (int window : {1, 4, 16, 30}) {
        check_paged(HF_KERNEL(hf_attention_causal_decode_paged), true, 1, 7, 2900 + window, window);
    }
}

// Gemma 2's soft-capped scores: softcap·tanh(s/softcap) for each scaled
// score s, before the mask, with and without a window (0: every key), caps
// that bite (2: the scores here reach ±4) and that hardly do (50), and a
// cap that is not positive refused.
using SoftCapFn = int (*)(halide_buffer_t *, halide_buffer_t *, halide_buffer_t *, halide_buffer_t *, int32_t, float,
                          int32_t, float, halide_buffer_t *);
class AttentionSoftCapTest : public OpTest<SoftCapFn> {};

TEST_P(AttentionSoftCapTest, ScoresAreCappedBeforeTheMask) {
    const bool decode = GetParam().name.find("decode") != std::string::npos;
    uint32_t seed = 4100;
    for (float cap : {2.0f, 50.0f}) {
        for (int window : {0, 5}) {
            std::vector<Case> cases;
            if (!decode) cases.push_back({2, 4, 37, 37, 32, {37, 20}, 0, 2.f, 2});
            cases.push_back({3, 4, 1, 70, 32, {70, 41, 5}, 69, 2.f, 1});
            for (const Case &c : cases) {
                Inputs in(c, seed += 7);
                Buffer<float> o(c.dk, c.Tq, c.H, c.B);
                const float scale = 2.0f / std::sqrt((float)c.dk);
                HF_CALL(GetParam().fn(in.q, in.k, in.v, in.len, c.q_offset, scale, window, cap, o));
                auto r = ref::attention(ref::to_array(in.q), ref::to_array(in.k), ref::to_array(in.v), in.lens,
                                        c.q_offset, scale, true, nullptr, window, cap);
                EXPECT_LE(ref::rel_error(o, r), ref::kTolerance) << "cap=" << cap << " window=" << window;
                if (cap == 2.0f) {
                    auto uncapped = ref::attention(ref::to_array(in.q), ref::to_array(in.k), ref::to_array(in.v),
                                                   in.lens, c.q_offset, scale, true, nullptr, window);
                    EXPECT_GT(ref::rel_error_arrays(uncapped, r), 1e-3) << "the cap must bite here";
                }
            }
        }
    }
    Case c{1, 2, 1, 8, 16, {8}, 7, 1.f, 1};
    Inputs in(c, 4199);
    Buffer<float> o(c.dk, c.Tq, c.H, c.B);
    EXPECT_NE(GetParam().fn(in.q, in.k, in.v, in.len, c.q_offset, 0.25f, 0, 0.0f, o), 0) << "a cap of 0";
}

INSTANTIATE_TEST_SUITE_P(All, AttentionSoftCapTest,
                         testing::ValuesIn(on_device(std::vector<Impl<SoftCapFn>>{
                             {"hf_attention_causal_window_softcap", HF_KERNEL(hf_attention_causal_window_softcap)},
                             {"hf_attention_causal_decode_window_softcap",
                              HF_KERNEL(hf_attention_causal_decode_window_softcap)}})),
                         impl_name<SoftCapFn>);
