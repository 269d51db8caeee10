// The runtime against PyTorch: golden logits, greedy and beam outputs for
// small random models of every architecture (tests/make_fixtures.py), and
// KV-cache decoding against recomputing the whole prefix.
#include "halformer/json.h"
#include "halformer/model.h"
#include "test_files.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <fstream>
#include <sstream>

using namespace halformer;

namespace {

std::string fixture(const std::string &name) { return std::string(HALFORMER_FIXTURES) + "/" + name; }

using test_files::test_device;
Model load_model(const std::string &name) { return Model::load(fixture(name), test_device()); }

json::Value golden(const std::string &name) {
    std::ifstream in(fixture(name) + "/golden.json");
    std::stringstream ss;
    ss << in.rdbuf();
    return json::parse(ss.str(), name + "/golden.json");
}

Sequence ints(const json::Value &v) {
    Sequence s;
    for (auto &x : v.array) s.push_back((int32_t)x.number);
    return s;
}
std::vector<Sequence> batch(const json::Value &v) {
    std::vector<Sequence> out;
    for (auto &s : v.array) out.push_back(ints(s));
    return out;
}

double rel_error(const std::vector<float> &out, const json::Value &ref) {
    double num = 0, den = 0;
    for (size_t k = 0; k < out.size(); k++) {
        double d = out[k] - ref.array[k].number;
        num += d * d;
        den += ref.array[k].number * ref.array[k].number;
    }
    return std::sqrt(num / den);
}

// hf/: Hugging Face directories as transformers saves them (tests/make_hf_fixtures.py).
const char *kModels[] = {"ed_post_relu", "ed_pre_gelu",  "ed_learned_tanh", "enc_head", "enc_hidden", "dec_pre_gelu",
                         "dec_post_relu", "hf/gpt2_lm", "hf/gpt2_noprefix_f16_sharded", "hf/marian",
                         "hf/marian_positions", "hf/bert_mlm", "hf/t5_v1_0", "hf/t5_v1_1", "hf/llama_gqa",
                         "hf/llama3_mqa", "hf/mistral_window", "hf/qwen2", "hf/t5_v5_gated_tied",
                         "hf/marian_widths", "hf/qwen3", "hf/gemma3_text", "hf/gemma3_text_v5", "hf/olmo2",
                         "hf/gemma2", "hf/phi3", "hf/mixtral", "hf/qwen3_moe", "hf/qwen3_moe_v5"};
const char *kGenerators[] = {"ed_post_relu", "ed_pre_gelu", "ed_learned_tanh", "dec_pre_gelu", "dec_post_relu",
                             "hf/gpt2_lm", "hf/gpt2_noprefix_f16_sharded", "hf/marian", "hf/marian_positions",
                             "hf/t5_v1_0", "hf/t5_v1_1", "hf/llama_gqa", "hf/llama3_mqa", "hf/mistral_window",
                             "hf/qwen2", "hf/t5_v5_gated_tied", "hf/marian_widths", "hf/qwen3", "hf/gemma3_text",
                             "hf/gemma3_text_v5", "hf/olmo2", "hf/gemma2", "hf/phi3", "hf/mixtral",
                             "hf/qwen3_moe", "hf/qwen3_moe_v5"};

class Golden : public testing::TestWithParam<const char *> {};
class GoldenDecode : public testing::TestWithParam<const char *> {};

TEST_P(Golden, BatchedLogitsMatchPyTorch) {
    Model m = load_model(GetParam());
    json::Value g = golden(GetParam());
    int cases = 0;
    for (auto &c : g.find("logits")->array) {
        auto out = m.logits(batch(*c.find("src")), batch(*c.find("tgt")));
        const auto &ref = c.find("logits")->array;
        ASSERT_EQ(out.size(), ref.size());
        for (size_t b = 0; b < out.size(); b++) {
            ASSERT_EQ(out[b].shape[1], (int64_t)c.find("width")->number);
            ASSERT_EQ(out[b].data.size(), ref[b].array.size()) << "sequence " << b;
            EXPECT_LE(rel_error(out[b].data, ref[b]), 1e-4) << GetParam() << " case " << cases << " seq " << b;
        }
        cases++;
    }
    if (std::string(GetParam()).rfind("hf/", 0) == 0) {
        EXPECT_GE(cases, 4);
    } else {
        EXPECT_EQ(cases, 3);
    }
}

TEST_P(GoldenDecode, GreedyMatchesPyTorch) {
    Model m = load_model(GetParam());
    json::Value g = golden(GetParam());
    std::vector<Sequence> srcs, expected;
    GenerateOptions o;
    for (auto &c : g.find("greedy")->array) {
        o.max_new_tokens = (int)c.find("max_new_tokens")->number;
        auto hyps = m.generate({ints(*c.find("src"))}, o);
        EXPECT_EQ(hyps[0][0].tokens, ints(*c.find("tokens")));
        srcs.push_back(ints(*c.find("src")));
        expected.push_back(ints(*c.find("tokens")));
    }
    // The same inputs as one batch (padded sources, rows finishing at
    // different steps) give the same tokens.
    auto together = m.generate(srcs, o);
    for (size_t b = 0; b < srcs.size(); b++) EXPECT_EQ(together[b][0].tokens, expected[b]) << "batch row " << b;
}

TEST_P(GoldenDecode, BeamMatchesPyTorch) {
    Model m = load_model(GetParam());
    json::Value g = golden(GetParam());
    std::vector<Sequence> srcs;
    std::vector<const json::Value *> cases;
    GenerateOptions o;
    for (auto &c : g.find("beam")->array) {
        o.max_new_tokens = (int)c.find("max_new_tokens")->number;
        o.beam = (int)c.find("beam")->number;
        o.n_best = (int)c.find("n_best")->number;
        o.length_penalty = (float)c.find("length_penalty")->number;
        srcs.push_back(ints(*c.find("src")));
        cases.push_back(&c);
    }
    auto check = [&](const std::vector<Hypothesis> &hyps, const json::Value &c, const std::string &how) {
        const auto &ref = c.find("hyps")->array;
        ASSERT_EQ(hyps.size(), ref.size()) << how;
        for (size_t k = 0; k < hyps.size(); k++) {
            EXPECT_EQ(hyps[k].tokens, ints(ref[k])) << how << " hypothesis " << k;
            EXPECT_NEAR(hyps[k].score, c.find("scores")->array[k].number, 1e-4) << how << " hypothesis " << k;
        }
    };
    for (size_t i = 0; i < srcs.size(); i++) check(m.generate({srcs[i]}, o)[0], *cases[i], "alone");
    auto together = m.generate(srcs, o);
    for (size_t i = 0; i < srcs.size(); i++) check(together[i], *cases[i], "in a batch");
}

// Incremental decoding (KV cache, one position per step, beams reordered)
// against the teacher-forced forward pass over the whole prefix.
TEST_P(GoldenDecode, CacheMatchesRecomputingThePrefix) {
    Model m = load_model(GetParam());
    const Config &c = m.config();
    const bool ed = c.architecture == Architecture::EncoderDecoder;
    Sequence src = {5, 9, 11, 3, 7, 20, 4};
    GenerateOptions o;
    o.max_new_tokens = 12;
    o.beam = 4;
    o.n_best = 4;
    o.length_penalty = 0.0f;  // scores are plain log-probabilities
    o.forced_eos_id = -1;     // (Marian's forced eos would make the last token no argmax)
    auto beams = m.generate({src}, o);
    ASSERT_EQ(beams[0].size(), 4u);
    for (const auto &h : beams[0]) {
        Sequence prefix = ed ? Sequence{c.bos_id} : src;
        Sequence full = prefix;
        full.insert(full.end(), h.tokens.begin(), h.tokens.end() - 1);
        auto lg = ed ? m.logits({src}, {full}) : m.logits({full});
        const int V = (int)lg[0].shape[1];
        double total = 0;
        for (size_t k = 0; k < h.tokens.size(); k++) {
            const float *row = &lg[0].data[(prefix.size() - 1 + k) * V];
            double mx = -1e300, sum = 0;
            for (int v = 0; v < V; v++) mx = std::max(mx, (double)row[v]);
            // (Ids generation never picks — Marian's pad — are out of the softmax.)
            for (int v = 0; v < V; v++) {
                const bool banned = std::find(c.banned_ids.begin(), c.banned_ids.end(), v) != c.banned_ids.end();
                if (!banned) sum += std::exp(row[v] - mx);
            }
            total += row[h.tokens[k]] - mx - std::log(sum);
        }
        EXPECT_NEAR(h.score, total, 1e-4);
    }
    // Greedy: each generated token is the argmax of the recomputed logits.
    o = GenerateOptions{};
    o.max_new_tokens = 12;
    o.forced_eos_id = -1;
    auto g = m.generate({src}, o)[0][0].tokens;
    Sequence full = ed ? Sequence{c.bos_id} : src;
    const size_t P = full.size();
    full.insert(full.end(), g.begin(), g.end() - 1);
    auto lg = ed ? m.logits({src}, {full}) : m.logits({full});
    const int V = (int)lg[0].shape[1];
    for (size_t k = 0; k < g.size(); k++) {
        const float *row = &lg[0].data[(P - 1 + k) * V];
        EXPECT_EQ(g[k], (int32_t)(std::max_element(row, row + V) - row)) << "step " << k;
    }
}

INSTANTIATE_TEST_SUITE_P(Fixtures, Golden, testing::ValuesIn(kModels));
INSTANTIATE_TEST_SUITE_P(Fixtures, GoldenDecode, testing::ValuesIn(kGenerators));

TEST(Sampling, SeededAndFiltered) {
    Model m = load_model("ed_pre_gelu");
    Sequence src = {4, 8, 15, 16, 23};
    GenerateOptions o;
    o.max_new_tokens = 16;
    auto greedy = m.generate({src}, o)[0][0].tokens;
    o.sample = true;
    o.seed = 7;
    auto a = m.generate({src}, o)[0][0].tokens, b = m.generate({src}, o)[0][0].tokens;
    EXPECT_EQ(a, b) << "same seed, same tokens";
    bool differs = false;
    for (uint64_t s = 8; s < 16 && !differs; s++) {
        o.seed = s;
        differs = m.generate({src}, o)[0][0].tokens != a;
    }
    EXPECT_TRUE(differs) << "other seeds give other samples";
    o.top_k = 1;
    EXPECT_EQ(m.generate({src}, o)[0][0].tokens, greedy) << "top-k 1 is greedy";
    o.top_k = 0;
    o.top_p = 1e-6f;
    EXPECT_EQ(m.generate({src}, o)[0][0].tokens, greedy) << "a tiny top-p is greedy";
    o.top_p = 1.0f;
    o.temperature = 1e-4f;
    EXPECT_EQ(m.generate({src}, o)[0][0].tokens, greedy) << "temperature → 0 is greedy";
    // top-k 3 and 12 (drawn in the sampling kernel): every sampled token is
    // among the k most likely at its step.
    o.temperature = 5.0f;
    for (int kk : {3, 12})
    for (uint64_t s = 0; s < 4; s++) {
        o.top_k = kk;
        o.seed = s;
        auto t = m.generate({src}, o)[0][0].tokens;
        Sequence full = {m.config().bos_id};
        full.insert(full.end(), t.begin(), t.end() - 1);
        auto lg = m.logits({src}, {full});
        const int V = (int)lg[0].shape[1];
        for (size_t k = 0; k < t.size(); k++) {
            const float *row = &lg[0].data[k * V];
            int above = 0;
            for (int v = 0; v < V; v++) above += row[v] > row[t[k]];
            EXPECT_LT(above, kk) << "top-k " << kk << " seed " << s << " step " << k;
        }
    }
}

// Greedy decoding by hand: each next token is the argmax (lowest id on ties)
// of the teacher-forced logits over the whole prefix; max_new tokens, eos or
// not.
Sequence greedy_by_hand(Model &m, const Sequence &src, int max_new) {
    const bool ed = m.config().architecture == Architecture::EncoderDecoder;
    Sequence full = ed ? Sequence{m.config().bos_id} : src, out;
    for (int k = 0; k < max_new; k++) {
        auto lg = ed ? m.logits({src}, {full}) : m.logits({full});
        const int V = (int)lg[0].shape[1];
        const float *row = &lg[0].data[(full.size() - 1) * V];
        const int32_t next = (int32_t)(std::max_element(row, row + V) - row);
        out.push_back(next);
        full.push_back(next);
    }
    return out;
}

// Generation ends with the first eos, and nothing follows it: the tokens are
// the hand-made greedy ones up to and including their first eos. Sources
// whose greedy output reaches eos early (and, unstopped, would go on) and
// sources that never produce it (which run to the limit), alone and in one
// batch; stop_at_eos = false goes on past eos; beam hypotheses hold eos only
// as their last token.
TEST(Generate, StopsAtEosAndNothingFollows) {
    const std::vector<Sequence> srcs = {{7, 7},       {30},      {14, 13, 11, 25, 8, 3, 5, 22, 29},
                                        {4, 8},       {5, 9, 11, 3, 7, 20, 4},
                                        {3, 4, 5},    {2},       {27, 30, 12, 18, 6, 36, 26, 23, 8}};
    for (const char *name : {"ed_post_relu", "dec_post_relu"}) {
        Model m = load_model(name);
        const int32_t eos = m.config().eos_id;
        GenerateOptions o;
        o.max_new_tokens = 12;
        int stopped_early = 0, ran_to_limit = 0;
        std::vector<Sequence> expected;
        for (const Sequence &src : srcs) {
            const Sequence unstopped = greedy_by_hand(m, src, o.max_new_tokens);
            auto at = std::find(unstopped.begin(), unstopped.end(), eos);
            const Sequence want(unstopped.begin(), at == unstopped.end() ? at : at + 1);
            if (want.size() < unstopped.size()) stopped_early++;
            if (at == unstopped.end()) ran_to_limit++;
            expected.push_back(want);

            o.stop_at_eos = true;
            const Sequence got = m.generate({src}, o)[0][0].tokens;
            EXPECT_EQ(got, want) << name << " src " << testing::PrintToString(src);
            for (size_t k = 0; k + 1 < got.size(); k++)
                EXPECT_NE(got[k], eos) << name << ": something follows eos";
            if (at != unstopped.end()) EXPECT_EQ(got.back(), eos) << name << ": eos ends the tokens";

            o.stop_at_eos = false;
            EXPECT_EQ(m.generate({src}, o)[0][0].tokens, unstopped)
                << name << " src " << testing::PrintToString(src) << ": stop_at_eos = false goes on past eos";
        }
        // The test compares something on both sides of the rule.
        EXPECT_GT(stopped_early, 0) << name << ": no source reaches eos before the limit";
        EXPECT_GT(ran_to_limit, 0) << name << ": every source reaches eos";

        // One batch: rows that end at eos stay ended while the others go on.
        o.stop_at_eos = true;
        auto together = m.generate(srcs, o);
        ASSERT_EQ(together.size(), srcs.size());
        for (size_t b = 0; b < srcs.size(); b++)
            EXPECT_EQ(together[b][0].tokens, expected[b]) << name << " batch row " << b;
        // (encoder-decoder: one batch; the rows that stopped left it, so the
        // rows above ran through steps of a smaller batch)
        const bool ed = m.config().architecture == Architecture::EncoderDecoder;
        if (ed) {
            const auto &rows = m.step_rows();
            ASSERT_FALSE(rows.empty());
            EXPECT_EQ(rows.front(), (int)srcs.size()) << name;
            EXPECT_LT(rows.back(), rows.front()) << name << ": no input left the batch";
        }

        // Beam search: a hypothesis ends at its first eos; one without eos
        // ran to the limit.
        o.beam = 3;
        o.n_best = 3;
        int beam_eos = 0;
        for (const auto &hyps : m.generate(srcs, o)) {
            ASSERT_FALSE(hyps.empty());
            for (const auto &h : hyps) {
                ASSERT_FALSE(h.tokens.empty());
                for (size_t k = 0; k + 1 < h.tokens.size(); k++)
                    EXPECT_NE(h.tokens[k], eos) << name << ": beam: something follows eos";
                if (h.tokens.back() == eos) {
                    beam_eos++;
                } else {
                    EXPECT_EQ((int)h.tokens.size(), o.max_new_tokens) << name << ": a beam without eos stopped early";
                }
            }
        }
        EXPECT_GT(beam_eos, 0) << name << ": no beam hypothesis ends with eos";
        if (ed) EXPECT_LT(m.step_rows().back(), (int)srcs.size() * o.beam) << name << ": beam: no input left the batch";
        o.stop_at_eos = false;
        for (const auto &hyps : m.generate(srcs, o))
            for (const auto &h : hyps)
                EXPECT_EQ((int)h.tokens.size(), o.max_new_tokens) << name << ": beam, stop_at_eos = false";
    }
}

// max_new_tokens = max_positions is allowed (positions 0..max-1 hold bos +
// max-1 tokens) and, for a source that never produces eos, gives exactly
// that many tokens; one more is an Error.
TEST(Generate, StopsAtTheLengthLimit) {
    Model m = load_model("ed_post_relu");
    GenerateOptions o;
    o.max_new_tokens = m.config().max_positions;
    auto h = m.generate({{3, 4, 5}}, o)[0][0].tokens;
    EXPECT_EQ((int)h.size(), o.max_new_tokens);
    EXPECT_EQ(std::count(h.begin(), h.end(), m.config().eos_id), 0) << "this source never produces eos";
    o.max_new_tokens = m.config().max_positions + 1;
    EXPECT_THROW(m.generate({{3, 4, 5}}, o), Error);
}

}  // namespace

// On a GPU: the same tokens as the CPU kernels, for greedy and beam search,
// and logits within fp32 rounding of them. Skipped on the CPU (there it would
// compare the CPU with itself).
TEST(DeviceAgreement, SameTokensAndLogitsAsTheCpu) {
    if (test_device() == Device::CPU)
        GTEST_SKIP() << "no device under test (HALFORMER_DEVICE=opencl or cuda): nothing to compare the CPU with";
    for (const char *name : kGenerators) {
        Model dev = load_model(name), cpu = Model::load(fixture(name));
        ASSERT_EQ(dev.device(), test_device());
        ASSERT_EQ(cpu.device(), Device::CPU);
        Sequence src = {5, 9, 11, 3, 7, 20, 4};
        for (int beam : {1, 3}) {
            GenerateOptions o;
            o.max_new_tokens = 10;
            o.beam = beam;
            auto a = dev.generate({src, {4, 8}}, o), b = cpu.generate({src, {4, 8}}, o);
            ASSERT_EQ(a.size(), 2u);
            ASSERT_EQ(b.size(), 2u);
            for (size_t i = 0; i < a.size(); i++) {
                ASSERT_FALSE(a[i].empty());
                ASSERT_FALSE(b[i].empty());
                ASSERT_FALSE(b[i][0].tokens.empty());
                EXPECT_EQ(a[i][0].tokens, b[i][0].tokens) << name << " beam " << beam << " input " << i;
                if (beam > 1) EXPECT_NEAR(a[i][0].score, b[i][0].score, 1e-4) << name << " input " << i;
            }
        }
        const bool ed = dev.config().architecture == Architecture::EncoderDecoder;
        auto la = ed ? dev.logits({src}, {{1, 6, 2}}) : dev.logits({src});
        auto lb = ed ? cpu.logits({src}, {{1, 6, 2}}) : cpu.logits({src});
        ASSERT_EQ(la.size(), 1u);
        ASSERT_EQ(lb.size(), 1u);
        ASSERT_EQ(la[0].shape, lb[0].shape);
        ASSERT_EQ(la[0].data.size(), lb[0].data.size());
        ASSERT_FALSE(lb[0].data.empty());
        double num = 0, den = 0;
        for (size_t k = 0; k < lb[0].data.size(); k++) {
            num += std::pow(la[0].data[k] - lb[0].data[k], 2);
            den += std::pow(lb[0].data[k], 2);
        }
        ASSERT_GT(den, 0) << name;
        EXPECT_LE(std::sqrt(num / den), 1e-5) << name;
    }
}

// Sampling on a device draws there (hf_sample's GPU build: only the ids come
// back) the tokens the CPU draws from the same seeds: with top-k, top-p and a
// temperature, alone and beside a greedy input, and with the drawn tokens'
// log-probabilities (read from the step's scores brought to the host).
// (Logits within 1e-5 could in principle put a uniform on the other side of
// a decision; at these few draws none lies that close.)
TEST(DeviceAgreement, SampledTokensAsTheCpu) {
    if (test_device() == Device::CPU)
        GTEST_SKIP() << "no device under test (HALFORMER_DEVICE=opencl or cuda): nothing to compare the CPU with";
    for (const char *name : kGenerators) {
        Model dev = load_model(name), cpu = Model::load(fixture(name));
        Sequence src = {5, 9, 11, 3, 7, 20, 4};
        GenerateOptions o;
        o.max_new_tokens = 10;
        o.sample = true;
        o.temperature = 0.8f;
        o.top_k = 20;
        o.top_p = 0.9f;
        for (uint64_t seed : {1, 2, 3}) {
            o.seed = seed;
            o.return_logprobs = seed == 3;
            auto a = dev.generate({src, {4, 8}}, o), b = cpu.generate({src, {4, 8}}, o);
            ASSERT_EQ(a.size(), 2u);
            ASSERT_EQ(b.size(), 2u);
            for (size_t i = 0; i < a.size(); i++) {
                ASSERT_FALSE(b[i][0].tokens.empty());
                EXPECT_EQ(a[i][0].tokens, b[i][0].tokens) << name << " seed " << seed << " input " << i;
                ASSERT_EQ(a[i][0].log_probs.size(), b[i][0].log_probs.size());
                for (size_t k = 0; k < a[i][0].log_probs.size(); k++) {
                    EXPECT_NEAR(a[i][0].log_probs[k], b[i][0].log_probs[k], 1e-4) << name << " token " << k;
                }
            }
        }
        // One input greedy, one sampled, in one batch.
        GenerateOptions g = o;
        g.sampling_each = {Sampling{}, Sampling{true, 1.2f, 0, 0.95f}};
        auto a = dev.generate({src, {4, 8}}, g), b = cpu.generate({src, {4, 8}}, g);
        for (size_t i = 0; i < a.size(); i++) EXPECT_EQ(a[i][0].tokens, b[i][0].tokens) << name << " mixed, input " << i;
    }
}

// Weights go to the device once, on first use: every parameter's bytes (a
// tied head shares the embedding's upload), and a second call uploads
// nothing more. Skipped on the CPU (nothing is held on a device there).
TEST(DeviceAgreement, WeightsAreUploadedOnce) {
    if (test_device() == Device::CPU)
        GTEST_SKIP() << "no device under test (HALFORMER_DEVICE=opencl or cuda): nothing is uploaded";
    Model m = load_model("ed_pre_gelu");
    ASSERT_EQ(m.device(), test_device());
    const size_t params = (size_t)m.parameter_count() * sizeof(float);
    ASSERT_GT(params, 0u);
    EXPECT_EQ(m.device_memory().weights, 0u) << "weights are uploaded on first use, not at load";
    GenerateOptions o;
    o.max_new_tokens = 6;
    o.beam = 2;
    m.generate({{5, 9, 11}}, o);
    const DeviceMemory first = m.device_memory();
    EXPECT_GE(first.weights, params);
    EXPECT_LE(first.weights, params * 11 / 10);
    EXPECT_GT(first.activations, 0u);
    m.generate({{5, 9, 11, 3, 7}}, o);
    m.logits({{5, 9}}, {{1, 6}});
    const DeviceMemory second = m.device_memory();
    EXPECT_EQ(second.weights, first.weights) << "a second call uploads nothing more";
    EXPECT_GE(second.activations, first.activations) << "activation buffers only grow";
}
