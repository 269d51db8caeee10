// Batch invariance: an input's answer (tokens, per-token log-probabilities
// and scores, bit for bit) is the same whatever else is in its batch:
// greedy, beam and seeded sampling, each precision, encoder-decoder and
// decoder-only. A kernel whose sums for one row depend on how many rows the
// call has (a one-row kernel for decode beside a blocked one for prefill,
// a reduction split by the batch's size, the encoder's padding) fails here.
//
// (HALFORMER_FP32_PACK=0, W as stored everywhere, gives that up: its one-row
// steps take dot products along k, in another order than the prefill blocks.)
#include "halformer/model.h"
#include "test_files.h"

#include <gtest/gtest.h>

#include <cstdlib>
#include <cstring>
#include <map>
#include <optional>
#include <string>
#include <random>

using namespace halformer;

namespace {

using test_files::test_device;

Config config(Architecture a) {
    Config c;
    c.architecture = a;
    c.d_model = 128;
    c.num_heads = 4;
    c.d_ff = 256;
    c.num_encoder_layers = a == Architecture::Decoder ? 0 : 2;
    c.num_decoder_layers = 2;
    c.src_vocab_size = a == Architecture::Decoder ? 0 : 300;
    c.tgt_vocab_size = 1000;
    c.max_positions = 64;
    c.eos_id = 2;
    return c;
}

// Today's decoders (Llama, Mistral, Qwen2): rotary positions, grouped-query
// heads, RMSNorm before each sub-layer, the gated SiLU feed-forward, no
// biases, a sliding window.
Config llama() {
    Config c = config(Architecture::Decoder);
    c.positional_encoding = Positional::Rotary;
    c.num_kv_heads = 2;
    c.rms_norm = c.gated_ffn = c.norm_first = true;
    c.biases = false;
    c.activation = Act::SiLU;
    c.sliding_window = 12;
    return c;
}

// HALFORMER_FP32_PACK for the scope's duration (a model reads it when it is
// made; null: unset, the CPU's default).
struct Fp32PackEnv {
    std::string old;
    bool had;
    explicit Fp32PackEnv(const char *value) {
        const char *v = std::getenv("HALFORMER_FP32_PACK");
        had = v != nullptr;
        if (had) old = v;
        if (value) setenv("HALFORMER_FP32_PACK", value, 1);
        else unsetenv("HALFORMER_FP32_PACK");
    }
    ~Fp32PackEnv() {
        if (had) setenv("HALFORMER_FP32_PACK", old.c_str(), 1);
        else unsetenv("HALFORMER_FP32_PACK");
    }
};

std::vector<Sequence> inputs(uint32_t seed, int n, int vocab, int shortest = 1) {
    std::mt19937 rng(seed);
    std::vector<Sequence> b((size_t)n);
    for (auto &s : b) {
        s.resize((size_t)shortest + rng() % 19);
        for (auto &t : s) t = 3 + (int32_t)(rng() % (uint32_t)(vocab - 3));
    }
    return b;
}

bool same_bits(const std::vector<float> &a, const std::vector<float> &b) {
    return a.size() == b.size() && (a.empty() || std::memcmp(a.data(), b.data(), a.size() * sizeof(float)) == 0);
}

// Every input of `src` generated in one batch and alone: equal bits.
void expect_batch_invariant(Model &m, const std::vector<Sequence> &src, GenerateOptions o) {
    o.return_logprobs = !(o.beam > 1);
    o.seeds.clear();
    for (size_t b = 0; b < src.size(); b++) o.seeds.push_back(70 + b);
    const auto batched = m.generate(src, o);
    ASSERT_EQ(batched.size(), src.size());
    for (size_t b = 0; b < src.size(); b++) {
        GenerateOptions a = o;
        a.seeds = {o.seeds[b]};
        const auto alone = m.generate({src[b]}, a)[0];
        ASSERT_EQ(batched[b].size(), alone.size()) << "input " << b;
        for (size_t h = 0; h < alone.size(); h++) {
            EXPECT_EQ(batched[b][h].tokens, alone[h].tokens) << "input " << b << " hypothesis " << h;
            EXPECT_TRUE(same_bits(batched[b][h].log_probs, alone[h].log_probs))
                << "input " << b << " hypothesis " << h << ": log-probabilities differ in their bits";
            EXPECT_EQ(std::memcmp(&batched[b][h].score, &alone[h].score, sizeof(double)), 0)
                << "input " << b << " hypothesis " << h << ": score " << batched[b][h].score << " batched, "
                << alone[h].score << " alone";
        }
    }
}

// fn(model, encoder-decoder?, sources) for both architectures at each
// precision, float32 with the CPU's default packing (SSE4.1: the steps'
// shapes packed, prefill on W as stored) and with every projection packed.
// The CPU's kernels only (a GPU picks its kernels by row count: no promise
// there).
template <typename F>
void for_each_model(F &&fn) {
  for (const char *pack : {(const char *)nullptr, "1"}) {
    Fp32PackEnv env(pack);
    SCOPED_TRACE(pack ? "HALFORMER_FP32_PACK=1" : "the CPU's default float32 packing");
    for (const Config &c : {config(Architecture::EncoderDecoder), config(Architecture::Decoder), llama()}) {
        const bool ed = c.has_encoder();
        Model m = Model::random(c, ed ? 31 : 32, test_device());
        const auto src = inputs(ed ? 5 : 6, 9, ed ? 300 : 1000);
        const std::string kind = ed ? "encoder-decoder " : c.gated_ffn ? "Llama-style " : "decoder-only ";
        for (Precision p : {Precision::FP32, Precision::BF16, Precision::INT8}) {
            m.set_precision(p);
            SCOPED_TRACE(kind + precision_name(p));
            fn(m, ed, src);
        }
    }
  }
}

struct Case {
    const char *name;
    int beam;
    bool sample;
    // Its options: every hypothesis kept, sampling flat (temperature 3: the
    // draw feels every bit of the logits), never stopping at eos.
    GenerateOptions options(int new_tokens) const {
        GenerateOptions o;
        o.beam = beam;
        o.n_best = beam;
        o.sample = sample;
        o.temperature = sample ? 3.0f : 1.0f;
        o.top_k = 0;
        o.stop_at_eos = false;
        o.max_new_tokens = new_tokens;
        return o;
    }
};
const Case kCases[] = {{"greedy", 1, false}, {"beam 3", 3, false}, {"sampled", 1, true}};

TEST(BatchInvariance, EveryInputAnswersAsAloneBitForBit) {
    if (test_device() != Device::CPU) GTEST_SKIP() << "batch invariance is the CPU kernels' property";
    for_each_model([](Model &m, bool, const std::vector<Sequence> &src) {
        for (const Case &k : kCases) {
            SCOPED_TRACE(k.name);
            expect_batch_invariant(m, src, k.options(16));
        }
    });
}

// The forward passes under generation: the encoder's output and the
// teacher-forced logits of each sequence, padded in a batch or alone.
// Targets from one token: a one-token target alone is one query a row, and
// its cross-attention must take the kernel its batch takes, not the
// decoding step's (which sums a score's products in another order).
TEST(BatchInvariance, EncoderAndLogitsAreTheSameBitsAlone) {
    if (test_device() != Device::CPU) GTEST_SKIP() << "batch invariance is the CPU kernels' property";
    const auto tgt = inputs(8, 9, 1000, 1);
    for_each_model([&](Model &m, bool ed, const std::vector<Sequence> &src) {
        if (ed) {
            const auto enc = m.encode(src);
            for (size_t b = 0; b < src.size(); b++) {
                EXPECT_TRUE(same_bits(enc[b].data, m.encode({src[b]})[0].data)) << "encoder output " << b;
            }
        }
        const auto lg = ed ? m.logits(src, tgt) : m.logits(src);
        for (size_t b = 0; b < src.size(); b++) {
            const auto alone = ed ? m.logits({src[b]}, {tgt[b]}) : m.logits({src[b]});
            EXPECT_TRUE(same_bits(lg[b].data, alone[0].data)) << "logits " << b;
        }
    });
}

// A causal prefill runs its queries in chunks, each call over the keys its
// chunk sees (runtime/src/model/layers/causal_chunks.h); the answer must be the
// bits of one call over all keys. A prompt's first n positions have the
// same logits as the n-token prompt alone: n under 64 is one call, 100 and
// 200 chunks of 32, 300 chunks of 64. Plain attention, rotary GQA with
// a sliding window and SiLU (Mistral's) and T5's relative-position bias.
// n ≤ 4 takes the packed one-row projections where longer prompts take the
// panels (AVX2's default float32 packing): SiLU's values must not depend on
// the kernel (generators/common.h: activate).
TEST(BatchInvariance, CausalPrefixesAreTheSameBits) {
    if (test_device() != Device::CPU) GTEST_SKIP() << "batch invariance is the CPU kernels' property";
    Config plain = config(Architecture::Decoder);
    plain.max_positions = 512;
    Config mistral = llama();
    mistral.max_positions = 512;
    mistral.sliding_window = 40;
    Config t5 = config(Architecture::EncoderDecoder);
    t5.positional_encoding = Positional::Relative;
    t5.relative_max_distance = 64;
    t5.max_positions = 512;
    std::mt19937 rng(44);
    Sequence prompt(300);
    for (auto &t : prompt) t = 3 + (int32_t)(rng() % 900);
    const Sequence src = {5, 9, 17, 4, 80};
    for (const Config *c : {&plain, &mistral, &t5}) {
        const bool ed = c->has_encoder();
        Model m = Model::random(*c, 41, test_device());
        auto logits = [&](size_t n) {
            const Sequence p(prompt.begin(), prompt.begin() + (long)n);
            return (ed ? m.logits({src}, {p}) : m.logits({p}))[0].data;
        };
        const auto whole = logits(prompt.size());
        const size_t W = whole.size() / prompt.size();
        for (size_t n : {2, 3, 4, 5, 8, 9, 16, 17, 33, 63, 64, 100, 200, 299}) {
            const auto part = logits(n);
            ASSERT_EQ(part.size(), n * W);
            EXPECT_EQ(std::memcmp(part.data(), whole.data(), part.size() * sizeof(float)), 0)
                << (c == &plain ? "plain" : c == &mistral ? "rotary, GQA, sliding window" : "relative bias")
                << ": the first " << n << " positions' logits differ in their bits from the whole prompt's";
        }
    }
}

}  // namespace

// Model::start: the caller runs the same call a turn at a time. The
// results are generate()'s bit for bit, tokens stream during the steps,
// and inputs joining at a later step answer as alone.
TEST(Generation, StepByStepIsGenerate) {
    for (const Config &c : {config(Architecture::EncoderDecoder), config(Architecture::Decoder)}) {
        const bool ed = c.has_encoder();
        SCOPED_TRACE(ed ? "encoder-decoder" : "decoder-only");
        Model m = Model::random(c, ed ? 31 : 32, test_device());
        const auto src = inputs(ed ? 5 : 6, 6, ed ? 300 : 1000);
        for (const Case &k : kCases) {
            SCOPED_TRACE(k.name);
            GenerateOptions o = k.options(8);
            o.seed = 7;
            o.return_logprobs = true;
            const auto want = m.generate(src, o);
            int streamed = 0;
            GenerateOptions s = o;
            s.on_token = [&](int, int32_t) { streamed++; };
            std::optional<Generation> gen(m.start(src, s));
            Generation &g = *gen;
            EXPECT_THROW(g.results(), Error);
            int steps = 0, streamed_first = -1;
            while (g.step()) {
                if (++steps == 1) streamed_first = streamed;
            }
            EXPECT_TRUE(g.done());
            EXPECT_FALSE(g.step());
            if (k.beam == 1) {
                // (The sources prefill as one group: every first token at
                // the first step; prompts whose lengths differ much prefill
                // in groups of their own.)
                if (ed) EXPECT_EQ(streamed_first, (int)src.size()) << "each input's first token at the first step";
                EXPECT_GE(streamed_first, 1);
                EXPECT_EQ(streamed, (int)src.size() * 8);
            }
            const auto got = g.results();
            ASSERT_EQ(got.size(), want.size());
            for (size_t b = 0; b < got.size(); b++) {
                ASSERT_EQ(got[b].size(), want[b].size());
                for (size_t h = 0; h < got[b].size(); h++) {
                    EXPECT_EQ(got[b][h].tokens, want[b][h].tokens) << "input " << b;
                    if (test_device() == Device::CPU) {
                        EXPECT_TRUE(same_bits(got[b][h].log_probs, want[b][h].log_probs)) << "input " << b;
                        continue;
                    }
                    // (A GPU's reductions need not repeat their bits.)
                    ASSERT_EQ(got[b][h].log_probs.size(), want[b][h].log_probs.size());
                    for (size_t t = 0; t < got[b][h].log_probs.size(); t++) {
                        EXPECT_NEAR(got[b][h].log_probs[t], want[b][h].log_probs[t], 1e-4) << "input " << b;
                    }
                }
            }
            gen.reset();
            // (Its steps reach Model::step_rows once it lets its session go:
            // one a turn, and one more where a group's prefill ends beside
            // a step.)
            if (ed) EXPECT_EQ(steps + 1, (int)m.step_rows().size());
            EXPECT_GE((int)m.step_rows().size(), steps + 1);
            // Half given, half joining at the third step: each as alone.
            const std::vector<Sequence> first(src.begin(), src.begin() + 3);
            GenerateOptions j = o;
            j.seeds = {11, 12, 13};
            int turn = 0;
            size_t next = 3;
            j.on_step = [&] { turn++; };
            j.join = [&](int room) {
                std::vector<JoinInput> in;
                for (; turn >= 3 && next < src.size() && (int)in.size() < room; next++) {
                    in.push_back({src[next], 11 + next, 8, {}, {}});
                }
                return in;
            };
            j.max_batch = 6;
            std::vector<std::vector<Hypothesis>> all;
            {
                // (A Generation holds the model's one session: the calls
                // alone below wait for it to go.)
                Generation joined = m.start(first, j);
                while (joined.step()) {
                }
                all = joined.results();
            }
            ASSERT_EQ(all.size(), src.size());
            for (size_t b = 0; b < src.size(); b++) {
                GenerateOptions one = o;
                one.seeds = {11 + b};
                const auto alone = m.generate({src[b]}, one);
                // (A GPU picks its kernels by row count: the same answer
                // alone is the CPU kernels' promise.)
                if (test_device() != Device::CPU) {
                    EXPECT_EQ(all[b][0].tokens.size(), alone[0][0].tokens.size()) << "input " << b;
                    continue;
                }
                EXPECT_EQ(all[b][0].tokens, alone[0][0].tokens) << "input " << b;
                EXPECT_TRUE(same_bits(all[b][0].log_probs, alone[0][0].log_probs)) << "input " << b;
            }
        }
    }
}

// Kernel calls by name in one decoding step: two greedy runs of the same
// batch that differ only in their number of steps.
std::map<std::string, double> calls_per_step(Model &m, const std::vector<Sequence> &src) {
    auto run = [&](int n) {
        m.reset_profile();
        GenerateOptions o;
        o.max_new_tokens = n;
        o.stop_at_eos = false;
        m.generate(src, o);
        std::map<std::string, int64_t> calls;
        for (const auto &[name, t] : m.profile()) calls[name] = t.calls;
        return calls;
    };
    auto a = run(2), b = run(10);
    std::map<std::string, double> per;
    for (const auto &[name, n] : b) per[name] = double(n - a[name]) / 8;
    return per;
}

// A decoding step's self-attention projections: Q|K|V in one call side by
// side (rotary: Q|K in one, V in another), Q and K turned by position in one
// call, and one scatter of K|V a layer to the paged cache (a GPU launch
// each). Before, Q and K|V were two calls and a rotary model turned Q and K
// in two. Their answers are the golden suites' (test_models.cpp,
// test_hf_llama.cpp) and the batch tests' above.
TEST(DecodingStep, OneProjectionOneRotaryCallAndOneScatterALayer) {
    for (const Config &c : {config(Architecture::EncoderDecoder), config(Architecture::Decoder), llama()}) {
        const bool ed = c.has_encoder(), rotary = c.positional_encoding == Positional::Rotary;
        Model m = Model::random(c, 41, test_device());
        const auto src = inputs(7, 3, ed ? 300 : 1000);
        const auto per = calls_per_step(m, src);
        const double layers = c.num_decoder_layers;
        std::string all;
        double total = 0;
        for (const auto &[name, n] : per) {
            all += " " + name + " " + std::to_string(n);
            total += n;
        }
        SCOPED_TRACE((ed ? "encoder-decoder:" : rotary ? "rotary:" : "decoder-only:") + all);
        EXPECT_EQ(per.count("rope") ? per.at("rope") : 0.0, rotary ? layers : 0.0);
        EXPECT_EQ(per.count("scatter") ? per.at("scatter") : 0.0, layers);
        // A layer's projections: Q|K|V (rotary: Q|K, V) and the output's;
        // behind an encoder, the cross-attention's queries and output too.
        EXPECT_EQ(per.count("linear") ? per.at("linear") : 0.0, layers * ((rotary ? 3 : 2) + (ed ? 2 : 0)));
        EXPECT_GT(total, 0.0);
    }
}
