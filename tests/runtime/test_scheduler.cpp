// The decoder's scheduler (runtime/src/decoding/scheduler.h) over a fake
// model runner, no kernel involved. The fake keeps one token per cache row
// (a source's as kSrcMark + id), writes each step's tokens to the rows the
// scheduler names, copies rows when asked, and reads every kept row's keys
// back through its block tables; its "model" is a hash of what a row read.
// So:
// - every row of every step reads exactly its own source, prefix and
//   history (a wrong block table, a copy-on-write missed or late, a row
//   mapped to the wrong slot: a read differs);
// - two small cases have their steps written out by hand (rows, positions,
//   tokens, the cache rows written, the copies);
// - random mixes of prompts, sources, beams, greedy and seeded sampling,
//   joining at random turns into a small pool, answer what each input does
//   alone, bit for bit, and greedy what a direct loop over the fake model
//   gives.
#include "../../runtime/src/decoding/generate.h"
#include "../../runtime/src/decoding/runner.h"
#include "../../runtime/src/decoding/scheduler.h"

#include "halformer/error.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <map>
#include <cstdio>
#include <random>

using namespace halformer;
using namespace halformer::decoding;

namespace {

constexpr int kV = 13;              // the fake model's vocabulary
constexpr int32_t kSrcMark = 1000;  // source token t in the cache: kSrcMark + t
constexpr int32_t kSrcPad = -9;     // a source's padding in the cache
constexpr int32_t kSep = -5;        // between a source and the decoder's tokens in a read
constexpr int32_t kUnwritten = -1;
constexpr int32_t kPad = 0, kBos = 1, kEos = 2;

// The fake model: the next token's logits after `seq` (what a row read).
std::vector<double> logits_of(const Sequence &seq) {
    uint64_t h = 1469598103934665603ull;
    for (int32_t t : seq) {
        h ^= (uint64_t)(uint32_t)t;
        h *= 1099511628211ull;
    }
    std::vector<double> z(kV);
    for (int v = 0; v < kV; v++) {
        uint64_t x = h + 0x9E3779B97F4A7C15ull * (uint64_t)(v + 1);
        x ^= x >> 31;
        x *= 0xBF58476D1CE4E5B9ull;
        x ^= x >> 29;
        z[(size_t)v] = (double)(x % 4096) / 512.0;
    }
    return z;
}

std::vector<double> log_softmax(const std::vector<double> &z) {
    const double m = *std::max_element(z.begin(), z.end());
    double sum = 0;
    for (double v : z) sum += std::exp(v - m);
    std::vector<double> out(z.size());
    for (size_t i = 0; i < z.size(); i++) out[i] = z[i] - m - std::log(sum);
    return out;
}

// Ids by value, best first (ties: the lower id).
std::vector<int> ranked(const std::vector<double> &z) {
    std::vector<int> ids(z.size());
    for (size_t i = 0; i < ids.size(); i++) ids[i] = (int)i;
    std::stable_sort(ids.begin(), ids.end(), [&](int a, int b) { return z[(size_t)a] > z[(size_t)b]; });
    return ids;
}

Sequence cat(Sequence a, const Sequence &b) {
    a.insert(a.end(), b.begin(), b.end());
    return a;
}

struct Step {
    int T = 0, R = 0, start = 0;
    std::vector<int32_t> row_pos, tokens, write, kv_len, out_at, out_to;
};
struct Choice {
    bool prefill;
    std::vector<int> slots;
};

class FakeRunner final : public Runner {
public:
    FakeRunner(bool encdec, int beams) : encdec_(encdec), K_(beams) {}

    // Every input's source and decoder prefix (bos + target prefix, or the
    // prompt), in the order inputs arrive (the test adds joiners as they join).
    std::vector<Sequence> sources, prefixes;

    std::vector<Step> steps;
    std::vector<Choice> choices;
    std::vector<std::vector<int32_t>> copied_from, copied_to;
    int encodes = 0, checked_reads = 0;

    int vocab() const override { return kV; }
    bool one_position() const override { return false; }
    int cache_blocks(int, int64_t wanted) override { return (int)wanted; }
    void begin(const GenerateOptions &o, int pool_rows) override {
        opt_ = &o;
        cache_.assign((size_t)pool_rows, kUnwritten);
    }

    void copy_rows(const std::vector<int32_t> &from, const std::vector<int32_t> &to) override {
        ASSERT_EQ(from.size(), to.size());
        copied_from.push_back(from);
        copied_to.push_back(to);
        for (size_t i = 0; i < from.size(); i++) cache_.at((size_t)to[i]) = cache_.at((size_t)from[i]);
    }

    void encode(const std::vector<Sequence> &srcs, int S, const std::vector<int32_t> &to) override {
        encodes++;
        const size_t G = srcs.size();
        ASSERT_EQ(to.size(), (size_t)S * G);
        for (size_t g = 0; g < G; g++) {
            for (int t = 0; t < S; t++) {
                cache_.at((size_t)to[(size_t)t * G + g]) =
                    t < (int)srcs[g].size() ? kSrcMark + srcs[g][(size_t)t] : kSrcPad;
            }
        }
    }

    void run(const StepInput &in) override {
        const int T = in.T, R = in.R;
        Step s;
        s.T = T;
        s.R = R;
        s.start = in.start;
        if (in.row_pos) s.row_pos.assign(in.row_pos, in.row_pos + R);
        s.tokens.assign(in.tokens, in.tokens + T * R);
        s.write.assign(in.write_rows, in.write_rows + T * R);
        s.kv_len.assign(in.kv_len, in.kv_len + R);
        if (in.out_at) {
            s.out_at.assign(in.out_at, in.out_at + in.outputs);
            s.out_to.assign(in.out_to, in.out_to + in.outputs);
        }
        steps.push_back(s);
        std::vector<int32_t> sorted = s.write;
        std::sort(sorted.begin(), sorted.end());
        ASSERT_TRUE(std::adjacent_find(sorted.begin(), sorted.end()) == sorted.end()) << "a cache row written twice";
        for (int m = 0; m < T * R; m++) cache_.at((size_t)in.write_rows[m]) = in.tokens[m];
        if (T > 1 || !in.row_pos) {
            // The dense rows are the tables read out.
            for (int t = 0; t < in.L; t++) {
                for (int r = 0; r < R; r++) ASSERT_EQ(in.dense_rows[(size_t)t * R + r], row(in, r, t));
            }
        }
        if (!in.out_at) {
            held_step_.assign((size_t)R, {});
            for (int r = 0; r < R; r++) held_step_[(size_t)r] = read(in, 0, r);
            return;
        }
        for (int i = 0; i < in.outputs; i++) {
            const int m = in.out_at[i], to = in.out_to[i];
            if ((int)held_prefill_.size() <= to) held_prefill_.resize((size_t)to + 1);
            held_prefill_[(size_t)to] = read(in, m / R, m % R);
        }
    }

    StepResult choose(bool prefill, Search &search, const std::vector<int> &inputs, const std::vector<int> &slots,
                      const std::vector<int> &row_of, const std::vector<Sequence> &) override {
        EXPECT_FALSE(search.adjusts());
        choices.push_back({prefill, slots});
        const int R = (int)slots.size(), W = search.need() == Need::TopLogProbs ? K_ + 1 : 1;
        const auto &held = prefill ? held_prefill_ : held_step_;
        ids_.assign((size_t)R * W, -1);
        values_.assign((size_t)R * W, 0.0f);
        logp_.assign((size_t)R, 0.0f);
        std::vector<double> u;
        if (search.need() == Need::Sample) static_cast<SamplingSearch &>(search).uniforms(inputs, row_of, R, u);
        for (int c = 0; c < R; c++) {
            const int slot = slots[(size_t)c], b = slot / K_;
            // What this row must have read: its source, its prefix, its history.
            Sequence want = encdec_ ? cat(sources.at((size_t)b), {kSep}) : Sequence{};
            want = cat(cat(want, prefixes.at((size_t)b)), search.history(slot));
            EXPECT_EQ(held.at((size_t)c), want) << "slot " << slot << (prefill ? " after its prefill" : " at a step");
            checked_reads++;
            const std::vector<double> z = logits_of(want), lsm = log_softmax(z);
            if (search.need() == Need::TopLogProbs) {
                const std::vector<int> best = ranked(lsm);
                for (int j = 0; j < W; j++) {
                    ids_[(size_t)c * W + j] = best[(size_t)j];
                    values_[(size_t)c * W + j] = (float)lsm[(size_t)best[(size_t)j]];
                }
                continue;
            }
            int id = ranked(z)[0];
            const Sampling &sm = opt_->sampling_each.at((size_t)b);
            if (search.need() == Need::Sample && sm.sample) id = draw(z, sm, u[(size_t)c]);
            ids_[(size_t)c] = id;
            logp_[(size_t)c] = (float)lsm[(size_t)id];
        }
        StepResult res{ids_.data(), search.need() == Need::TopLogProbs ? values_.data() : nullptr, W};
        if (search.need() != Need::TopLogProbs) res.logp = logp_.data();
        return res;
    }

private:
    // The fake's draw: temperature, then top-k, then the inverse of the
    // distribution at u.
    static int draw(const std::vector<double> &z, const Sampling &sm, double u) {
        std::vector<double> scaled(z);
        for (double &v : scaled) v /= sm.temperature;
        std::vector<int> order = ranked(scaled);
        if (sm.top_k > 0 && sm.top_k < kV) order.resize((size_t)sm.top_k);
        const double m = scaled[(size_t)order[0]];
        double total = 0;
        for (int id : order) total += std::exp(scaled[(size_t)id] - m);
        double acc = 0;
        for (int id : order) {
            acc += std::exp(scaled[(size_t)id] - m);
            if (acc > u * total) return id;
        }
        return order.back();
    }

    int32_t row(const StepInput &in, int r, int q) const {
        return in.block_table[(size_t)r * in.table_stride + (size_t)(q / kBlock)] * kBlock + q % kBlock;
    }

    // What row r of the step's position t reads: its source through the
    // cross tables, then its keys through its block table (causal, up to
    // its kv_len).
    Sequence read(const StepInput &in, int t, int r) const {
        Sequence seq;
        if (encdec_) {
            const int g = r / in.cross_group;
            const int32_t *table = in.cross_table + (size_t)g * in.cross_stride;
            for (int q = 0; q < in.cross_len[g]; q++) {
                const int32_t v = cache_.at((size_t)(table[q / kBlock] * kBlock + q % kBlock));
                seq.push_back(v >= kSrcMark ? v - kSrcMark : v - 100000);  // (a non-source row reads as garbage)
            }
            seq.push_back(kSep);
        }
        const int pos = in.row_pos ? in.row_pos[r] : in.start + t;
        const int n = std::min(pos + 1, (int)in.kv_len[r]);
        EXPECT_LE(n, in.L);
        for (int q = 0; q < n; q++) seq.push_back(cache_.at((size_t)row(in, r, q)));
        return seq;
    }

    const bool encdec_;
    const int K_;
    const GenerateOptions *opt_ = nullptr;
    std::vector<int32_t> cache_;
    std::vector<Sequence> held_prefill_, held_step_;
    std::vector<int32_t> ids_;
    std::vector<float> values_, logp_;
};

Config config(bool encdec) {
    Config c;
    c.architecture = encdec ? Architecture::EncoderDecoder : Architecture::Decoder;
    c.src_vocab_size = c.tgt_vocab_size = kV;
    c.max_positions = 256;
    c.pad_id = kPad;
    c.bos_id = kBos;
    c.eos_id = kEos;
    c.forced_eos_id = -1;
    return c;
}

// An input: its source or prompt, target prefix (encoder-decoder), limit,
// seed and (beam 1) its Sampling; given at the start (turn 0) or joining
// at the first turn ≥ `turn` with room (turns count from 1).
struct Input {
    Sequence input, target_prefix;
    int limit = 4;
    uint64_t seed = 0;
    Sampling sampling;
    int turn = 0;
};

struct Ran {
    std::vector<std::vector<Hypothesis>> hyps;
    std::unique_ptr<FakeRunner> runner;
};

// The scheduler over `inputs` (those at turn 0 given, the others joining).
Ran schedule(bool encdec, int K, const std::vector<Input> &inputs, GenerateOptions o) {
    const Config cfg = config(encdec);
    Ran out;
    out.runner = std::make_unique<FakeRunner>(encdec, K);
    FakeRunner &fake = *out.runner;
    auto arrive = [&](const Input &in) {
        fake.sources.push_back(encdec ? in.input : Sequence{});
        fake.prefixes.push_back(encdec ? cat({kBos}, in.target_prefix) : in.input);
    };
    o.beam = K;
    o.n_best = K;
    o.return_logprobs = true;
    std::vector<Sequence> given;
    size_t next = 0;
    for (; next < inputs.size() && inputs[next].turn == 0; next++) {
        const Input &in = inputs[next];
        given.push_back(in.input);
        o.target_prefix.push_back(in.target_prefix);
        o.max_new_tokens_each.push_back(in.limit);
        o.seeds.push_back(encdec ? in.seed : prompt_seed(in.seed));
        if (K == 1) o.sampling_each.push_back(in.sampling);
        arrive(in);
    }
    if (!encdec) o.target_prefix.clear();
    int turn = 0;
    if (next < inputs.size()) {
        o.on_step = [&] { turn++; };
        o.join = [&](int room) {
            std::vector<JoinInput> js;
            for (; next < inputs.size() && inputs[next].turn <= turn && (int)js.size() < room; next++) {
                const Input &in = inputs[next];
                JoinInput j;
                j.input = in.input;
                j.target_prefix = in.target_prefix;
                j.max_new_tokens = in.limit;
                j.seed = in.seed;
                if (K == 1) j.sampling = in.sampling;
                js.push_back(j);
                arrive(in);
            }
            return js;
        };
    }
    Scheduler scheduler(cfg, fake, given, o);
    out.hyps = scheduler.run();
    EXPECT_EQ(next, inputs.size()) << "every input joined";
    return out;
}

// Greedy straight over the fake model: no cache, no batch.
Sequence greedy_alone(bool encdec, const Input &in, bool stop_at_eos = true) {
    Sequence seq = encdec ? cat(cat(in.input, {kSep}), cat({kBos}, in.target_prefix)) : in.input, out;
    for (int n = 0; n < in.limit; n++) {
        const int id = ranked(logits_of(seq))[0];
        out.push_back(id);
        if (id == kEos && stop_at_eos) break;
        seq.push_back(id);
    }
    return out;
}

}  // namespace

// Two prompts given, a third joining at the second turn (prefilled a
// position a step beside the two decoding), written out by hand.
TEST(Scheduler, TwoPromptsAndAJoinerStepByStep) {
    GenerateOptions o;
    o.stop_at_eos = false;  // each runs to its limit
    o.prefill_chunk = 1;
    o.max_batch = 4;
    o.kv_blocks = 8;
    const std::vector<Input> inputs = {{{3, 4, 5}, {}, 3},            // A: block 0
                                       {{6, 7, 8, 9, 10}, {}, 2},      // B: block 1
                                       {{11, 12}, {}, 2, 0, {}, 2}};  // C: joins at turn 2, block 2
    const Ran r = schedule(false, 1, inputs, o);
    const auto &steps = r.runner->steps;
    const Sequence a = greedy_alone(false, inputs[0], false), b = greedy_alone(false, inputs[1], false),
                   c = greedy_alone(false, inputs[2], false);
    ASSERT_EQ(steps.size(), 5u);
    // Turn 1: A and B prefill as one group (nothing decodes yet: one chunk
    // of all 5 positions, A padded), A's rows in block 0, B's in block 1.
    EXPECT_EQ(steps[0].T, 5);
    EXPECT_EQ(steps[0].R, 2);
    EXPECT_EQ(steps[0].start, 0);
    EXPECT_EQ(steps[0].tokens, (std::vector<int32_t>{3, 6, 4, 7, 5, 8, kPad, 9, kPad, 10}));
    EXPECT_EQ(steps[0].write, (std::vector<int32_t>{0, 16, 1, 17, 2, 18, 3, 19, 4, 20}));
    EXPECT_EQ(steps[0].kv_len, (std::vector<int32_t>{3, 5}));
    EXPECT_EQ(steps[0].out_at, (std::vector<int32_t>{2 * 2 + 0, 4 * 2 + 1}));
    EXPECT_EQ(steps[0].out_to, (std::vector<int32_t>{0, 1}));
    // Turn 2: C joins; its first position (block 2), then A and B decode
    // at their own positions (A's next row is its padding's).
    EXPECT_EQ(steps[1].T, 1);
    EXPECT_EQ(steps[1].R, 1);
    EXPECT_EQ(steps[1].tokens, (std::vector<int32_t>{11}));
    EXPECT_EQ(steps[1].write, (std::vector<int32_t>{32}));
    EXPECT_EQ(steps[1].kv_len, (std::vector<int32_t>{1}));
    EXPECT_TRUE(steps[1].out_at.empty());
    EXPECT_EQ(steps[2].R, 2);
    EXPECT_EQ(steps[2].row_pos, (std::vector<int32_t>{3, 5}));
    EXPECT_EQ(steps[2].start, 5);
    EXPECT_EQ(steps[2].tokens, (std::vector<int32_t>{a[0], b[0]}));
    EXPECT_EQ(steps[2].write, (std::vector<int32_t>{3, 21}));
    EXPECT_EQ(steps[2].kv_len, (std::vector<int32_t>{4, 6}));
    // Turn 3: B is done; C's last prefix position (its output kept), C's
    // first token, then A and C decode together.
    EXPECT_EQ(steps[3].tokens, (std::vector<int32_t>{12}));
    EXPECT_EQ(steps[3].start, 1);
    EXPECT_EQ(steps[3].write, (std::vector<int32_t>{33}));
    EXPECT_EQ(steps[3].out_at, (std::vector<int32_t>{0}));
    EXPECT_EQ(steps[4].R, 2);
    EXPECT_EQ(steps[4].row_pos, (std::vector<int32_t>{4, 2}));
    EXPECT_EQ(steps[4].tokens, (std::vector<int32_t>{a[1], c[0]}));
    EXPECT_EQ(steps[4].write, (std::vector<int32_t>{4, 34}));
    EXPECT_EQ(steps[4].kv_len, (std::vector<int32_t>{5, 3}));
    // The choices: after each prefill's last chunk and each step.
    const auto &ch = r.runner->choices;
    ASSERT_EQ(ch.size(), 4u);
    EXPECT_TRUE(ch[0].prefill);
    EXPECT_EQ(ch[0].slots, (std::vector<int>{0, 1}));
    EXPECT_EQ(ch[1].slots, (std::vector<int>{0, 1}));
    EXPECT_TRUE(ch[2].prefill);
    EXPECT_EQ(ch[2].slots, (std::vector<int>{2}));
    EXPECT_FALSE(ch[3].prefill);
    EXPECT_EQ(ch[3].slots, (std::vector<int>{0, 2}));
    ASSERT_EQ(r.hyps.size(), 3u);
    EXPECT_EQ(r.hyps[0][0].tokens, a);
    EXPECT_EQ(r.hyps[1][0].tokens, b);
    EXPECT_EQ(r.hyps[2][0].tokens, c);
    EXPECT_EQ(r.runner->checked_reads, 7);
}

// Translation without a target prefix: a joining group's whole prefill is
// bos at position 0, so it runs as rows of the batch's next step (one
// layers call), after its sources are encoded into their blocks.
TEST(Scheduler, AJoinerWhosePrefixIsBosDecodesInTheRunningStep) {
    GenerateOptions o;
    o.stop_at_eos = false;
    o.max_batch = 4;
    o.kv_blocks = 8;
    const std::vector<Input> inputs = {{{3, 4, 5}, {}, 3},              // A: source block 0, rows block 2
                                       {{6, 7}, {}, 3},                 // B: source block 1, rows block 3
                                       {{8, 9, 10, 11}, {}, 2, 0, {}, 2}};  // C: joins at turn 2: blocks 4, 5
    const Ran r = schedule(true, 1, inputs, o);
    const auto &steps = r.runner->steps;
    const Sequence a = greedy_alone(true, inputs[0], false), b = greedy_alone(true, inputs[1], false),
                   c = greedy_alone(true, inputs[2], false);
    EXPECT_EQ(r.runner->encodes, 2);
    ASSERT_GE(steps.size(), 2u);
    // Turn 1: A and B's bos (nothing decodes yet: their prefill).
    EXPECT_EQ(steps[0].T, 1);
    EXPECT_EQ(steps[0].tokens, (std::vector<int32_t>{kBos, kBos}));
    EXPECT_EQ(steps[0].write, (std::vector<int32_t>{32, 48}));
    EXPECT_EQ(steps[0].out_at, (std::vector<int32_t>{0, 1}));
    // Turn 2: C's bos beside A's and B's first tokens, in one step.
    EXPECT_EQ(steps[1].R, 3);
    EXPECT_TRUE(steps[1].out_at.empty());
    EXPECT_EQ(steps[1].row_pos, (std::vector<int32_t>{1, 1, 0}));
    EXPECT_EQ(steps[1].tokens, (std::vector<int32_t>{a[0], b[0], kBos}));
    EXPECT_EQ(steps[1].write, (std::vector<int32_t>{33, 49, 80}));
    EXPECT_EQ(steps[1].kv_len, (std::vector<int32_t>{2, 2, 1}));
    ASSERT_GE(r.runner->choices.size(), 2u);
    EXPECT_FALSE(r.runner->choices[1].prefill);
    EXPECT_EQ(r.runner->choices[1].slots, (std::vector<int>{0, 1, 2}));
    // Then the three decode together: each has its tokens after it.
    ASSERT_EQ(steps.size(), 3u);
    EXPECT_EQ(steps[2].tokens, (std::vector<int32_t>{a[1], b[1], c[0]}));
    EXPECT_EQ(steps[2].row_pos, (std::vector<int32_t>{2, 2, 1}));
    EXPECT_EQ(r.hyps[0][0].tokens, a);
    EXPECT_EQ(r.hyps[1][0].tokens, b);
    EXPECT_EQ(r.hyps[2][0].tokens, c);
}

// Two beams share the prompt's block after the first choice; the first
// step's write into it copies it for one beam first (copy-on-write).
TEST(Scheduler, BeamsCopyASharedBlockBeforeTheirFirstWrite) {
    GenerateOptions o;
    o.stop_at_eos = false;
    const Ran r = schedule(false, 2, {{{3, 4, 5, 6, 7}, {}, 2}}, o);
    const auto &steps = r.runner->steps;
    ASSERT_EQ(steps.size(), 2u);
    EXPECT_EQ(steps[0].write, (std::vector<int32_t>{0, 1, 2, 3, 4}));
    EXPECT_EQ(steps[1].R, 2);
    EXPECT_EQ(steps[1].row_pos, (std::vector<int32_t>{5, 5}));
    // Beam 0 writes first into the shared block 0: its 5 rows go to block
    // 1 first, then beam 0 writes its position 5 there; beam 1 is block
    // 0's only owner by then and writes in place.
    ASSERT_EQ(r.runner->copied_from.size(), 1u);
    EXPECT_EQ(r.runner->copied_from[0], (std::vector<int32_t>{0, 1, 2, 3, 4}));
    EXPECT_EQ(r.runner->copied_to[0], (std::vector<int32_t>{16, 17, 18, 19, 20}));
    EXPECT_EQ(steps[1].write, (std::vector<int32_t>{21, 5}));
    EXPECT_EQ(r.runner->checked_reads, 3);
    ASSERT_EQ(r.hyps[0].size(), 2u);
}

// Random mixes, both architectures, greedy and sampled rows together and
// beams: each input answers what it does alone (tokens, log-probabilities
// and scores, bit for bit), greedy what the fake model gives directly.
TEST(Scheduler, RandomMixesAnswerAsEachInputAlone) {
    for (bool encdec : {false, true}) {
        for (int K : {1, 3}) {
            std::mt19937 rng(encdec * 10 + K);
            auto uni = [&](int lo, int hi) { return std::uniform_int_distribution<int>(lo, hi)(rng); };
            std::vector<Input> inputs(12);
            for (size_t i = 0; i < inputs.size(); i++) {
                Input &in = inputs[i];
                in.input.resize((size_t)uni(1, 40));
                for (auto &t : in.input) t = uni(3, kV - 1);
                if (encdec && uni(0, 2) == 0) in.target_prefix = {uni(3, kV - 1), uni(3, kV - 1)};
                in.limit = uni(1, 20);
                in.seed = (uint64_t)uni(0, 1 << 30);
                in.sampling = uni(0, 1) ? Sampling{} : Sampling{true, uni(0, 1) ? 3.0f : 0.7f, uni(0, 1) * 4, 1.0f};
                // (Joiners come as soon as there is room: one waiting for
                // a turn could find the batch ended.)
                in.turn = i < 3 ? 0 : 1;
            }
            GenerateOptions o;
            o.prefill_chunk = uni(1, 8);
            o.max_batch = 4;
            o.kv_blocks = K == 1 ? 12 : 40;
            const std::string what = std::string(encdec ? "encoder-decoder" : "decoder-only") + ", beam " +
                                     std::to_string(K) + ", chunk " + std::to_string(o.prefill_chunk);
            const Ran all = schedule(encdec, K, inputs, o);
            ASSERT_EQ(all.hyps.size(), inputs.size()) << what;
            // The mix did what it is meant to: batched steps, joins, and for
            // beams copies of shared blocks.
            int most_rows = 0;
            for (const Step &s : all.runner->steps) most_rows = std::max(most_rows, s.R);
            std::printf("%s: %zu steps, %d rows at most, %zu copies, %d reads checked\n", what.c_str(),
                        all.runner->steps.size(), most_rows, all.runner->copied_from.size(), all.runner->checked_reads);
            EXPECT_GE(most_rows, 2 * K) << what;
            if (K > 1) EXPECT_FALSE(all.runner->copied_from.empty()) << what;
            for (size_t i = 0; i < inputs.size(); i++) {
                Input alone_in = inputs[i];
                alone_in.turn = 0;
                GenerateOptions one;
                one.prefill_chunk = o.prefill_chunk;
                const Ran alone = schedule(encdec, K, {alone_in}, one);
                const auto &x = all.hyps[i], &y = alone.hyps[0];
                ASSERT_EQ(x.size(), y.size()) << what << ", input " << i;
                for (size_t h = 0; h < x.size(); h++) {
                    EXPECT_EQ(x[h].tokens, y[h].tokens) << what << ", input " << i << ", hypothesis " << h;
                    EXPECT_EQ(x[h].log_probs, y[h].log_probs) << what << ", input " << i;
                    EXPECT_EQ(x[h].score, y[h].score) << what << ", input " << i;
                }
                if (K == 1 && !inputs[i].sampling.sample) {
                    EXPECT_EQ(x[0].tokens, greedy_alone(encdec, inputs[i])) << what << ", input " << i;
                }
            }
        }
    }
}

// A join that returns more than the room it was given, or a joining
// prompt the model cannot read, is an Error naming it.
TEST(Scheduler, ABadJoinIsAnErrorNamingIt) {
    const Config cfg = config(false);
    FakeRunner fake(false, 1);
    fake.prefixes = {{3, 4}};
    GenerateOptions o;
    o.max_new_tokens_each = {3};
    o.max_batch = 2;
    o.kv_blocks = 4;
    o.join = [](int room) { return std::vector<JoinInput>((size_t)room + 1, JoinInput{{3}}); };
    Scheduler too_many(cfg, fake, {{3, 4}}, o);
    try {
        too_many.run();
        FAIL() << "no error";
    } catch (const Error &e) {
        EXPECT_NE(std::string(e.what()).find("join returned 2 inputs for room for 1"), std::string::npos) << e.what();
    }
    o.join = [](int) { return std::vector<JoinInput>{JoinInput{{3, kV + 4}}}; };
    Scheduler bad_token(cfg, fake, {{3, 4}}, o);
    try {
        bad_token.run();
        FAIL() << "no error";
    } catch (const Error &e) {
        EXPECT_NE(std::string(e.what()).find("joining prompt token id 17 at position 1"), std::string::npos)
            << e.what();
    }
}
