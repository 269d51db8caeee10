// The decoding policies (runtime/src/decoding/) driven by a fake step
// function: exact beams, parents, finished hypotheses and scores, greedy
// limits, cancellation, and the sampling streams; no model involved.
#include "../../runtime/src/decoding/search.h"

#include <gtest/gtest.h>

#include <cmath>
#include <map>

using namespace halformer;
using namespace halformer::decoding;

namespace {

constexpr int kEos = 2, kPad = 0;

using Cands = std::vector<std::pair<int32_t, float>>;  // best first

// A fake step: each row's best continuations from its history alone.
struct FakeStep {
    std::map<Sequence, Cands> table;
    Cands fallback{{kEos, -0.01f}, {3, -1.0f}, {4, -2.0f}};
    std::vector<int32_t> ids;
    std::vector<float> values;
    // One step of `s`: every slot's candidates at row r (no compaction).
    StepResult run(const Search &s, const std::vector<Sequence> &hist, int width) {
        const int rows = (int)hist.size();
        ids.assign((size_t)rows * width, -1);
        values.assign((size_t)rows * width, 0.0f);
        for (int r = 0; r < rows; r++) {
            auto it = table.find(hist[r]);
            const Cands &c = it == table.end() ? fallback : it->second;
            for (int j = 0; j < width && j < (int)c.size(); j++) {
                ids[(size_t)r * width + j] = c[j].first;
                values[(size_t)r * width + j] = c[j].second;
            }
        }
        (void)s;
        return {ids.data(), values.data(), width};
    }
};

// Every input of `s`: a step over the whole batch.
std::vector<int> all(const Search &s) {
    std::vector<int> v(s.inputs());
    for (int b = 0; b < s.inputs(); b++) v[b] = b;
    return v;
}

double pen(size_t len, double a) { return std::pow((5.0 + (double)len) / 6.0, a); }
double f(float x) { return (double)x; }

// Runs a search to the end with histories tracked by the test itself (from
// next() and parent()), as Session::decode does with its caches.
std::vector<std::vector<Hypothesis>> drive(Search &s, FakeStep &fake, int max_new, int cand_width,
                                           std::vector<std::vector<int>> *parents = nullptr) {
    const int R = s.inputs() * s.width();
    std::vector<Sequence> hist(R);
    std::vector<int> row_of(R);
    for (int r = 0; r < R; r++) row_of[r] = r;
    for (int step = 0; step < max_new; step++) {
        s.step(all(s), fake.run(s, hist, cand_width), row_of);
        s.report_done();
        if (s.all_done()) break;
        std::vector<Sequence> next(R);
        std::vector<int> par(R);
        for (int r = 0; r < R; r++) {
            par[r] = s.parent(r);
            next[r] = hist[par[r]];
            next[r].push_back(s.next(r));
        }
        if (parents) parents->push_back(par);
        hist = next;
    }
    return s.results();
}

}  // namespace

TEST(BeamSearch, ExactBeamsParentsAndFinishedHypotheses) {
    FakeStep fake;
    fake.table[{}] = {{5, -0.1f}, {6, -0.5f}, {kEos, -1.0f}};
    fake.table[{5}] = {{kEos, -0.2f}, {7, -0.3f}, {8, -2.0f}};
    fake.table[{6}] = {{7, -0.1f}, {kEos, -0.9f}, {9, -1.5f}};
    fake.table[{5, 7}] = {{kEos, -0.1f}, {3, -1.0f}, {4, -2.0f}};
    fake.table[{6, 7}] = {{kEos, -0.05f}, {3, -1.0f}, {4, -2.0f}};
    GenerateOptions o;
    o.beam = 2;
    o.n_best = 2;
    o.length_penalty = 0.6f;
    const double a = o.length_penalty;
    BeamSearch s(1, 2, o, 10, kEos, kPad);
    std::vector<std::vector<int>> parents;
    auto res = drive(s, fake, 10, 3, &parents);
    // Step 0: both beams continue the one live beam.
    ASSERT_GE(parents.size(), 2u);
    EXPECT_EQ(parents[0], (std::vector<int>{0, 0}));
    // Step 1: [5, eos] finishes; [5, 7] and [6, 7] continue their own beams.
    EXPECT_EQ(parents[1], (std::vector<int>{0, 1}));
    // Step 2: [5, 7, eos] and [6, 7, eos] finish: three finished ≥ beam, done.
    ASSERT_EQ(res.size(), 1u);
    ASSERT_EQ(res[0].size(), 2u);
    const double s52 = (f(-0.1f) + f(-0.2f)) / pen(2, a), s572 = (f(-0.1f) + f(-0.3f) + f(-0.1f)) / pen(3, a),
                 s672 = (f(-0.5f) + f(-0.1f) + f(-0.05f)) / pen(3, a);
    ASSERT_GT(s52, s572);
    ASSERT_GT(s572, s672);
    EXPECT_EQ(res[0][0].tokens, (Sequence{5, kEos}));
    EXPECT_DOUBLE_EQ(res[0][0].score, s52);
    EXPECT_EQ(res[0][1].tokens, (Sequence{5, 7, kEos}));
    EXPECT_DOUBLE_EQ(res[0][1].score, s572);
}

TEST(BeamSearch, LengthLimitFinishesLiveBeamsAndTiesGoToTheLowerBeam) {
    FakeStep fake;  // never eos: both beams run to the limit
    fake.fallback = {{3, -1.0f}, {4, -1.0f}, {5, -3.0f}};
    GenerateOptions o;
    o.beam = 2;
    o.n_best = 2;
    o.length_penalty = 0.0f;
    BeamSearch s(1, 2, o, 3, kEos, kPad);
    auto res = drive(s, fake, 3, 3);
    ASSERT_EQ(res[0].size(), 2u);
    EXPECT_EQ(res[0][0].tokens, (Sequence{3, 3, 3}));  // ties: lower beam, then lower rank
    EXPECT_DOUBLE_EQ(res[0][0].score, -3.0);
    EXPECT_EQ(res[0][1].tokens, (Sequence{3, 3, 4}));
    EXPECT_DOUBLE_EQ(res[0][1].score, -3.0);
}

TEST(BeamSearch, CancelledInputKeepsItsLiveBeams) {
    FakeStep fake;
    fake.fallback = {{3, -0.5f}, {4, -1.0f}, {kEos, -4.0f}};
    GenerateOptions o;
    o.beam = 2;
    o.n_best = 2;
    o.length_penalty = 1.0f;
    int asked = 0;
    o.cancelled = [&](int b) { return b == 1 && ++asked > 1; };  // input 1 leaves at step 1
    std::vector<int> finished_order;
    o.on_finished = [&](int b, const std::vector<Hypothesis> &) { finished_order.push_back(b); };
    BeamSearch s(2, 2, o, 4, kEos, kPad);
    auto res = drive(s, fake, 4, 3);
    ASSERT_EQ(res[1].size(), 2u);
    EXPECT_EQ(res[1][0].tokens, (Sequence{3}));
    EXPECT_DOUBLE_EQ(res[1][0].score, f(-0.5f) / pen(1, 1.0));
    EXPECT_EQ(res[1][1].tokens, (Sequence{4}));
    EXPECT_EQ(res[0][0].tokens, (Sequence{3, 3, 3, 3}));
    EXPECT_EQ(finished_order, (std::vector<int>{1, 0}));  // reported once each, as each is done
}

TEST(GreedySearch, EosAndPerInputLimits) {
    FakeStep fake;
    fake.table[{}] = {{4, 0.0f}};
    fake.table[{4}] = {{5, 0.0f}};
    fake.table[{4, 5}] = {{kEos, 0.0f}};
    fake.fallback = {{7, 0.0f}};
    GenerateOptions o;
    o.max_new_tokens_each = {6, 3};
    GreedySearch s(2, o, 6, kEos, kPad);
    // Input 1 starts from another history: seed its first step by table.
    fake.table[{7}] = {{7, 0.0f}};
    std::vector<Sequence> hist{{}, {7}};
    std::vector<int> row_of{0, 1};
    for (int step = 0; step < 6 && !s.all_done(); step++) {
        s.step(all(s), fake.run(s, hist, 1), row_of);
        for (int r = 0; r < 2; r++) hist[r].push_back(s.next(r));
    }
    auto res = s.results();
    EXPECT_EQ(res[0][0].tokens, (Sequence{4, 5, kEos}));
    EXPECT_EQ(res[1][0].tokens, (Sequence{7, 7, 7}));  // its own limit, 3
    GenerateOptions no_eos;
    GreedySearch t(1, no_eos, 4, -2, kPad);  // stop_at_eos off: eos is a token like others
    std::vector<Sequence> h{{4, 5}};
    for (int step = 0; step < 4 && !t.all_done(); step++) {
        t.step({0}, fake.run(t, h, 1), {0});
        h[0].push_back(t.next(0));
    }
    EXPECT_EQ(t.results()[0][0].tokens.size(), 4u);
}

TEST(SamplingSearch, EachInputDrawsItsOwnStream) {
    GenerateOptions batch;
    batch.sample = true;
    batch.seeds = {11, 22, 33};
    SamplingSearch s(3, batch, 5, kEos, kPad);
    GenerateOptions alone = batch;
    alone.seeds = {22};
    SamplingSearch t(1, alone, 5, kEos, kPad);
    std::vector<double> u, v;
    // Rows in another order than slots: the uniform lands on the input's row.
    s.uniforms({0, 1, 2}, {2, 0, 1}, 3, u);
    t.uniforms({0}, {0}, 1, v);
    ASSERT_EQ(u.size(), 3u);
    EXPECT_EQ(u[0], v[0]);  // input 1 sits at row 0
    EXPECT_NE(u[1], u[2]);
    for (double x : u) {
        EXPECT_GE(x, 0.0);
        EXPECT_LT(x, 1.0);
    }
    s.uniforms({0, 1, 2}, {2, 0, 1}, 3, u);
    t.uniforms({0}, {0}, 1, v);
    EXPECT_EQ(u[0], v[0]);  // and so on, step after step
    GenerateOptions seeded;
    seeded.sample = true;
    seeded.seed = 5;
    SamplingSearch a(2, seeded, 5, kEos, kPad), b(2, seeded, 5, kEos, kPad);
    a.uniforms({0, 1}, {0, 1}, 2, u);
    b.uniforms({0, 1}, {0, 1}, 2, v);
    EXPECT_EQ(u, v);  // one seed, the same draws
    EXPECT_NE(u[0], u[1]);
}

// Continuous batching: an input that joins a running search (add) draws,
// stops and is scored as it would alone, whatever step the others are at.
TEST(SamplingSearch, AJoiningInputDrawsAsAlone) {
    GenerateOptions batch;
    batch.sample = true;
    batch.seeds = {11};
    batch.max_new_tokens_each = {5};
    SamplingSearch s(1, batch, 1 << 20, kEos, kPad);
    std::vector<double> u;
    s.uniforms({0}, {0}, 1, u);
    s.uniforms({0}, {0}, 1, u);  // input 0 is two steps in
    batch.seeds.push_back(22);
    batch.max_new_tokens_each.push_back(2);
    s.add(1);
    ASSERT_EQ(s.inputs(), 2);
    GenerateOptions alone;
    alone.sample = true;
    alone.seeds = {22};
    SamplingSearch t(1, alone, 5, kEos, kPad);
    std::vector<double> v;
    for (int step = 0; step < 3; step++) {
        s.uniforms({1}, {5, 0}, 1, u);  // only the joiner's row (row 0) this step
        t.uniforms({0}, {0}, 1, v);
        EXPECT_EQ(u[0], v[0]) << step;
    }
}

TEST(GreedySearch, AJoiningInputKeepsItsOwnLimitAndSteps) {
    FakeStep fake;
    fake.fallback = {{7, 0.0f}};
    GenerateOptions o;
    o.max_new_tokens_each = {4};
    GreedySearch s(1, o, 1 << 20, kEos, kPad);
    std::vector<Sequence> hist{{}};
    s.step({0}, fake.run(s, hist, 1), {0});
    s.step({0}, fake.run(s, hist, 1), {0});
    o.max_new_tokens_each.push_back(2);
    s.add(1);
    std::vector<int> finished;
    hist.resize(2);
    // Both step together now; input 1 is done after its own 2 tokens.
    for (int step = 0; step < 3 && !s.all_done(); step++) {
        std::vector<int> live;
        for (int b = 0; b < 2; b++) if (!s.done(b)) live.push_back(b);
        s.step(live, fake.run(s, hist, 1), {0, 1});
        if (s.done(1) && finished.empty()) finished.push_back(step);
    }
    auto res = s.results();
    EXPECT_EQ(res[0][0].tokens, (Sequence{7, 7, 7, 7}));
    EXPECT_EQ(res[1][0].tokens, (Sequence{7, 7}));
    EXPECT_EQ(finished, (std::vector<int>{1}));
}
