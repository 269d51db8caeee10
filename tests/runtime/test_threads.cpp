// One Model, many threads; and failures in the middle of a call.
//  * Threads: 8 threads make mixed calls (logits, encode, greedy, beam and
//    sampled generation, different shapes) on one Model; every result must
//    equal the one the same call gave alone. Also run under ThreadSanitizer
//    (scripts/sanitize.sh).
//  * Kernel errors: a message raised in a thread-pool worker reaches the
//    thread whose call failed.
//  * Faults: a failure injected at each point a call can fail (a kernel, a
//    host or device allocation, a weight upload, a device binding) throws,
//    and the Model then answers the next calls exactly as before.
#include "../../runtime/src/fault.h"
#include "halformer/model.h"
#include "test_files.h"

#include <HalideRuntime.h>
#include <gtest/gtest.h>

#include <atomic>
#include <cmath>
#include <cstdlib>
#include <random>
#include <thread>

using namespace halformer;

extern "C" int hf_embedding_adams2019(halide_buffer_t *tokens, halide_buffer_t *table, halide_buffer_t *start, float scale,
                            halide_buffer_t *out);

namespace {

using test_files::test_device;

// Large enough that the kernels split their loops over the thread pool.
Config config(Architecture a) {
    Config c;
    c.architecture = a;
    c.d_model = 128;
    c.num_heads = 4;
    c.d_ff = 256;
    c.num_encoder_layers = a == Architecture::Decoder ? 0 : 2;
    c.num_decoder_layers = a == Architecture::Encoder ? 0 : 2;
    c.src_vocab_size = a == Architecture::Decoder ? 0 : 300;
    c.tgt_vocab_size = a == Architecture::Encoder ? 0 : 280;
    c.max_positions = 64;
    c.eos_id = 2;
    return c;
}

std::vector<Sequence> random_batch(std::mt19937 &rng, int n, int vocab, int max_len) {
    std::vector<Sequence> b(n);
    for (auto &s : b) {
        s.resize(1 + rng() % max_len);
        for (auto &t : s) t = 3 + (int32_t)(rng() % (vocab - 3));
    }
    return b;
}

// One call and everything it returned, flattened to floats for comparison.
struct Job {
    Model *model;
    int kind;  // 0 logits, 1 encode, 2 greedy, 3 beam 3 (n_best 2), 4 sampled (seeded, top-k 5)
    std::vector<Sequence> src, tgt;
    uint64_t seed = 0;

    std::vector<float> run() const {
        std::vector<float> out;
        auto tensors = [&](const std::vector<Tensor> &ts) {
            for (auto &t : ts) {
                out.push_back((float)t.data.size());
                out.insert(out.end(), t.data.begin(), t.data.end());
            }
        };
        if (kind == 0) {
            tensors(model->logits(src, tgt));
        } else if (kind == 1) {
            tensors(model->encode(src));
        } else {
            GenerateOptions o;
            o.max_new_tokens = 12;
            if (kind == 3) {
                o.beam = 3;
                o.n_best = 2;
            }
            if (kind == 4) {
                o.sample = true;
                o.top_k = 5;
                o.seed = seed;
            }
            for (auto &hyps : model->generate(src, o)) {
                for (auto &h : hyps) {
                    out.push_back(-1.0f);
                    out.push_back((float)h.score);
                    for (int32_t t : h.tokens) out.push_back((float)t);
                }
            }
        }
        return out;
    }
};

TEST(Threads, EightThreadsMixedCallsMatchSequential) {
    const Device dev = test_device();
    Model ed = Model::random(config(Architecture::EncoderDecoder), 11, dev);
    Model dec = Model::random(config(Architecture::Decoder), 12, dev);
    if (dev == Device::CPU) {
        ed.set_max_sessions(8);
        dec.set_max_sessions(8);
        dec.set_precision(Precision::INT8);  // packed weights are shared too
    } else {
        EXPECT_THROW(ed.set_max_sessions(2), Error) << "a GPU model runs one call at a time";
        EXPECT_EQ(ed.max_sessions(), 1);
    }
    std::mt19937 rng(2026);
    std::vector<Job> jobs;
    for (int i = 0; i < 40; i++) {
        Job j;
        j.kind = i % 5;
        const bool on_dec = (i / 5) % 2 == 1 && j.kind != 1;  // encode: encoder models only
        j.model = on_dec ? &dec : &ed;
        const int n = 1 + (int)(rng() % 4);
        j.src = random_batch(rng, n, on_dec ? 280 : 300, on_dec ? 20 : 30);
        if (!on_dec && j.kind == 0) j.tgt = random_batch(rng, n, 280, 20);
        j.seed = rng();
        jobs.push_back(std::move(j));
    }
    std::vector<std::vector<float>> alone;
    for (auto &j : jobs) alone.push_back(j.run());
    const int64_t packs_before = dec.profile().count("pack") ? dec.profile()["pack"].calls : 0;

    constexpr int kThreads = 8, kRounds = 3;
    std::atomic<int> mismatches{0}, errors{0};
    std::vector<std::string> first_error(kThreads);
    std::vector<std::thread> threads;
    for (int t = 0; t < kThreads; t++) {
        threads.emplace_back([&, t] {
            for (int round = 0; round < kRounds; round++) {
                for (size_t i = (t + round) % kThreads; i < jobs.size(); i += kThreads) {
                    try {
                        if (jobs[i].run() != alone[i]) mismatches++;
                    } catch (const std::exception &e) {
                        if (errors++ == 0) first_error[t] = e.what();
                    }
                }
            }
        });
    }
    for (auto &th : threads) th.join();
    EXPECT_EQ(errors.load(), 0) << [&] {
        std::string s;
        for (auto &e : first_error) s += e;
        return s;
    }();
    EXPECT_EQ(mismatches.load(), 0) << "of " << kThreads * kRounds * jobs.size() / kThreads << " calls";
    // Packing happened once, in set_precision: no call packed again.
    const int64_t packs_after = dec.profile().count("pack") ? dec.profile()["pack"].calls : 0;
    EXPECT_EQ(packs_after, packs_before);
    // Step times are those of one whole generate() call (the last to return).
    EXPECT_FALSE(ed.step_seconds().empty());
    EXPECT_EQ(ed.step_seconds().size(), ed.step_rows().size());
    // Buffers can be given back; the model still answers the same.
    EXPECT_GT(ed.release_memory(), 0u);
    EXPECT_EQ(jobs[3].run(), alone[3]);
}

// Each thread's embedding call fails on its own bad token id; the message
// it reads names that id, whichever thread raised it. The Adams2019 build of
// the embedding checks ids inside its parallel loop, so the errors are raised
// in the thread pool's workers (the hand schedule checks them up front, in
// the calling thread). Without the runtime's routing, 82 of 120 calls read
// another thread's message or none.
TEST(Threads, KernelErrorReachesTheCallingThread) {
    if (test_device() != Device::CPU) GTEST_SKIP() << "a CPU kernel test";
    constexpr int kThreads = 4, kCalls = 30, D = 64, V = 50, T = 256;
    std::atomic<int> wrong{0}, calls_failed{0};
    std::vector<std::string> seen(kThreads);
    std::vector<std::thread> threads;
    for (int t = 0; t < kThreads; t++) {
        threads.emplace_back([&, t] {
            std::vector<float> table((size_t)V * D, 0.5f), out((size_t)D * T);
            std::vector<int32_t> tok(T, 3);
            const int bad = V + 1000 * (t + 1);  // this thread's own bad id
            tok[T - 1 - t] = bad;                // near the end: past the first tasks
            halide_dimension_t td[2] = {{0, D, 1}, {0, V, D}}, kd[2] = {{0, T, 1}, {0, 1, T}},
                               od[3] = {{0, D, 1}, {0, T, D}, {0, 1, D * T}};
            halide_buffer_t tb{}, kb{}, ob{}, sb{};
            int32_t start = 0;
            halide_dimension_t sd[1] = {{0, 1, 1}};
            sb.host = (uint8_t *)&start;
            sb.type = halide_type_t(halide_type_int, 32);
            sb.dimensions = 1;
            sb.dim = sd;
            tb.host = (uint8_t *)table.data();
            tb.type = halide_type_t(halide_type_float, 32);
            tb.dimensions = 2;
            tb.dim = td;
            kb.host = (uint8_t *)tok.data();
            kb.type = halide_type_t(halide_type_int, 32);
            kb.dimensions = 2;
            kb.dim = kd;
            ob.host = (uint8_t *)out.data();
            ob.type = halide_type_t(halide_type_float, 32);
            ob.dimensions = 3;
            ob.dim = od;
            for (int i = 0; i < kCalls; i++) {
                take_kernel_error();
                if (hf_embedding_adams2019(&kb, &tb, &sb, 1.0f, &ob) == 0) continue;
                calls_failed++;
                const std::string msg = take_kernel_error();
                if (msg.find(std::to_string(bad)) == std::string::npos) {
                    wrong++;
                    seen[t] = msg;
                }
            }
        });
    }
    for (auto &th : threads) th.join();
    EXPECT_EQ(calls_failed.load(), kThreads * kCalls);
    std::string all;
    for (auto &s : seen) all += "[" + s + "] ";
    EXPECT_EQ(wrong.load(), 0) << "messages naming another thread's id, or none: " << all;
}

struct Point {
    Fault fault;
    int skip;
    bool gpu_only;
    const char *name;
};

// Injects each failure, checks the call throws, then that the Model gives
// the same answers as one that never failed (and can grow its buffers).
TEST(Faults, ModelStaysUsableAfterEachFailurePoint) {
    const Device dev = test_device();
    const Config c = config(Architecture::EncoderDecoder);
    Model clean = Model::random(c, 21, dev);
    std::mt19937 rng(5);
    const auto small = random_batch(rng, 2, 300, 10), large = random_batch(rng, 5, 300, 40);
    const auto tgt = random_batch(rng, 2, 280, 8);
    GenerateOptions beam;
    beam.beam = 3;
    beam.max_new_tokens = 10;
    const auto ref_small = clean.generate(small, beam), ref_large = clean.generate(large, beam);
    const auto ref_logits = clean.logits(small, tgt);
    const std::vector<Point> points = {
        {Fault::Kernel, 0, false, "the first kernel"},
        {Fault::Kernel, 9, false, "a kernel in the encoder"},
        {Fault::Kernel, 40, false, "a kernel mid-decoding"},
        {Fault::HostAlloc, 0, false, "the first scratch allocation"},
        {Fault::HostAlloc, 5, false, "a later scratch allocation"},
        {Fault::DeviceAlloc, 0, true, "the first device allocation"},
        {Fault::DeviceAlloc, 6, true, "a later device allocation"},
        {Fault::Upload, 0, true, "the first weight upload"},
        {Fault::Upload, 7, true, "a later weight upload"},
        {Fault::Bind, 0, true, "the first device binding"},
        {Fault::Bind, 50, true, "a device binding mid-decoding"},
    };
    int tried = 0;
    for (const Point &p : points) {
        if (p.gpu_only && dev == Device::CPU) continue;
        SCOPED_TRACE(p.name);
        Model m = Model::random(c, 21, dev);
        // Part of the state exists already for the later points.
        if (p.skip > 0 && p.fault != Fault::Upload) m.generate(small, beam);
        if (p.fault == Fault::HostAlloc || p.fault == Fault::DeviceAlloc) m.release_memory();
        inject_fault(p.fault, p.skip);
        bool threw = false;
        try {
            m.generate(large, beam);
        } catch (const std::exception &e) {
            threw = true;
            EXPECT_NE(std::string(e.what()).find("inject"), std::string::npos) << e.what();
        }
        clear_faults();
        EXPECT_TRUE(threw) << "the injected failure was not reached";
        tried++;
        EXPECT_EQ(m.generate(small, beam)[0][0].tokens, ref_small[0][0].tokens);
        auto after = m.generate(large, beam);
        ASSERT_EQ(after.size(), ref_large.size());
        for (size_t i = 0; i < after.size(); i++) {
            EXPECT_EQ(after[i][0].tokens, ref_large[i][0].tokens) << "input " << i;
            EXPECT_EQ(after[i][0].score, ref_large[i][0].score) << "input " << i;
        }
        auto lg = m.logits(small, tgt);
        ASSERT_EQ(lg.size(), ref_logits.size());
        for (size_t i = 0; i < lg.size(); i++) EXPECT_EQ(lg[i].data, ref_logits[i].data);
    }
    EXPECT_EQ(tried, dev == Device::CPU ? 5 : 11);
}

}  // namespace

namespace {

// A request past the memory budget fails before it allocates, naming the
// sizes; the model then runs what fits, and gives its buffers back.
TEST(Memory, BudgetRejectsWhatDoesNotFitBeforeAllocating) {
    const Device dev = test_device();
    Model m = Model::random(config(Architecture::EncoderDecoder), 31, dev);
    EXPECT_GT(m.memory_budget(), int64_t(1) << 30) << "default: most of the machine";
    std::mt19937 rng(9);
    const auto small = random_batch(rng, 2, 300, 8), big = random_batch(rng, 48, 280, 60);
    GenerateOptions o;
    o.beam = 4;
    o.max_new_tokens = 60;
    const auto ref = m.generate(small, o);
    m.release_memory();
    EXPECT_EQ(m.memory_used(), 0);
    m.set_memory_budget(8 << 20);  // 8 MiB: the small batch fits, 48 × beam 4 × 60 tokens does not
    const int64_t before = m.memory_used();
    try {
        m.generate(big, o);
        ADD_FAILURE() << "no error past the budget";
    } catch (const Error &e) {
        const std::string w = e.what();
        EXPECT_NE(w.find("48 inputs x beam 4"), std::string::npos) << w;
        EXPECT_NE(w.find("memory budget is 8.0 MiB"), std::string::npos) << w;
    }
    EXPECT_EQ(m.memory_used(), before) << "nothing was allocated for the rejected call";
    try {
        m.logits(big, big);
        ADD_FAILURE() << "no error past the budget";
    } catch (const Error &e) {
        EXPECT_NE(std::string(e.what()).find("logits (48 sequences"), std::string::npos) << e.what();
    }
    auto again = m.generate(small, o);
    ASSERT_EQ(again.size(), ref.size());
    for (size_t i = 0; i < ref.size(); i++) EXPECT_EQ(again[i][0].tokens, ref[i][0].tokens);
    EXPECT_GT(m.memory_used(), 0);
    EXPECT_LE(m.memory_used(), 8 << 20);
    m.set_memory_budget(int64_t(4) << 30);
    EXPECT_EQ(m.generate(big, o).size(), big.size());
    EXPECT_GT(m.memory_used(), 8 << 20);
    EXPECT_GT(m.release_memory(), 0u);
    EXPECT_EQ(m.memory_used(), 0);
    EXPECT_THROW(m.set_memory_budget(0), Error);
}

}  // namespace

namespace {

// What a server batching requests relies on: per-input seeds and limits give
// each input what it gets alone; on_finished reports each input once, with
// what generate() returns, shortest limit first; a cancelled input leaves
// and the others are unchanged.
TEST(Generate, PerInputSeedsLimitsAndCallbacks) {
    const Device dev = test_device();
    for (Architecture arch : {Architecture::EncoderDecoder, Architecture::Decoder}) {
        Model m = Model::random(config(arch), 41, dev);
        const int vocab = arch == Architecture::Decoder ? 280 : 300;
        std::mt19937 rng(13);
        const auto mixed = random_batch(rng, 4, vocab, 9);
        // Decoder-only: prompts of one length or of several run as one
        // batch (decode.cpp: each row at its own positions); both as alone.
        auto equal = mixed;
        for (auto &s : equal) s.resize(std::min_element(mixed.begin(), mixed.end(), [](auto &a, auto &b) {
                                            return a.size() < b.size();
                                        })->size());
        for (const std::vector<Sequence> *batch_src : {&mixed, (const std::vector<Sequence> *)&equal}) {
            if (arch != Architecture::Decoder && batch_src == &equal) continue;
            const auto &src = *batch_src;
            for (int beam : {1, 3}) {
                for (bool sample : {false, true}) {
                    if (sample && beam > 1) continue;
                    SCOPED_TRACE(std::string(arch == Architecture::Decoder ? "decoder" : "encoder-decoder") +
                                 " beam " + std::to_string(beam) + (sample ? " sampled" : ""));
                    GenerateOptions o;
                    o.beam = beam;
                    o.sample = sample;
                    o.stop_at_eos = false;  // random weights: run to each limit
                    o.max_new_tokens = 12;
                    o.seeds = {7, 8, 9, 10};
                    o.max_new_tokens_each = {12, 3, 7, 12};
                    std::vector<int> order;
                    std::vector<std::vector<Hypothesis>> reported(4);
                    o.on_finished = [&](int b, const std::vector<Hypothesis> &h) {
                        order.push_back(b);
                        reported[b] = h;
                    };
                    const auto batch = m.generate(src, o);
                    ASSERT_EQ(order.size(), 4u);
                    if (arch == Architecture::EncoderDecoder) EXPECT_EQ(order[0], 1) << "the 3-token input first";
                    for (int b = 0; b < 4; b++) {
                        GenerateOptions a;
                        a.beam = beam;
                        a.sample = sample;
                        a.stop_at_eos = false;
                        a.seed = o.seeds[b];
                        a.max_new_tokens = o.max_new_tokens_each[b];
                        const auto alone = m.generate({src[b]}, a)[0];
                        ASSERT_EQ(batch[b].size(), alone.size()) << "input " << b;
                        EXPECT_EQ(batch[b][0].tokens, alone[0].tokens) << "input " << b;
                        EXPECT_EQ((int)batch[b][0].tokens.size(), o.max_new_tokens_each[b]) << "input " << b;
                        EXPECT_EQ(reported[b][0].tokens, batch[b][0].tokens) << "input " << b;
                    }
                    // Input 2 cancelled after its third step; the others as before.
                    int steps = 0;
                    o.on_finished = nullptr;
                    o.cancelled = [&](int b) { return b == 2 && ++steps > 3; };
                    const auto cut = m.generate(src, o);
                    EXPECT_LE(cut[2][0].tokens.size(), 4u);
                    for (int b : {0, 1, 3}) EXPECT_EQ(cut[b][0].tokens, batch[b][0].tokens) << "input " << b;
                }
            }
        }
    }
}

}  // namespace

namespace {

// Decoder-only prompts of different lengths run as one batch: one kernel
// call per step for all of them (each row at its own positions, its own
// keys), and each prompt gets what it gets alone — greedy, beam and seeded
// sampling, with learned and sinusoidal positions; on_token reports each
// prompt's own tokens.
TEST(Generate, DecoderPromptsOfDifferentLengthsRunAsOneBatch) {
    const Device dev = test_device();
    for (Positional pe : {Positional::Learned, Positional::Sinusoidal}) {
        Config c = config(Architecture::Decoder);
        c.positional_encoding = pe;
        Model m = Model::random(c, 43, dev);
        std::mt19937 rng(17);
        std::vector<Sequence> src;
        for (int len : {1, 23, 5, 40, 2, 11}) {
            Sequence p(len);
            for (auto &t : p) t = 3 + (int32_t)(rng() % 277);
            src.push_back(p);
        }
        const int n = (int)src.size();
        for (int beam : {1, 2}) {
            for (bool sample : {false, true}) {
                if (sample && beam > 1) continue;
                SCOPED_TRACE(std::string(positional_name(pe)) + " beam " + std::to_string(beam) +
                             (sample ? " sampled" : ""));
                GenerateOptions o;
                o.beam = beam;
                o.sample = sample;
                o.stop_at_eos = false;  // random weights: run to each limit
                o.max_new_tokens = 10;
                o.seeds = {1, 2, 3, 4, 5, 6};
                o.max_new_tokens_each = {10, 4, 10, 7, 2, 10};
                std::vector<std::vector<int32_t>> streamed(n);
                if (beam == 1) o.on_token = [&](int b, int32_t id) { streamed[(size_t)b].push_back(id); };
                m.reset_profile();
                const auto batch = m.generate(src, o);
                // One batch: prompts of similar lengths prefill together
                // (here 3 groups: 1-11, 23 and 40 tokens, each one call), the
                // later ones while the first decode, and every decode step is
                // one embedding call for every row decoding, not one per
                // length.
                ASSERT_FALSE(m.step_rows().empty());
                EXPECT_EQ(m.profile()["embedding"].calls, (int64_t)m.step_rows().size());
                EXPECT_LE(m.step_rows().size(), 12u);
                int most = 0;
                for (int r : m.step_rows()) most = std::max(most, r);
                EXPECT_GE(most, (n - 1) * beam);
                for (int b = 0; b < n; b++) {
                    GenerateOptions a;
                    a.beam = beam;
                    a.sample = sample;
                    a.stop_at_eos = false;
                    a.seed = o.seeds[(size_t)b];
                    a.max_new_tokens = o.max_new_tokens_each[(size_t)b];
                    const auto alone = m.generate({src[(size_t)b]}, a)[0];
                    ASSERT_EQ(batch[(size_t)b].size(), alone.size()) << "prompt " << b;
                    for (size_t h = 0; h < alone.size(); h++) {
                        EXPECT_EQ(batch[(size_t)b][h].tokens, alone[h].tokens) << "prompt " << b << " hypothesis " << h;
                        EXPECT_NEAR(batch[(size_t)b][h].score, alone[h].score, 1e-5 * (1 + std::abs(alone[h].score)))
                            << "prompt " << b;
                    }
                    EXPECT_EQ((int)batch[(size_t)b][0].tokens.size(), o.max_new_tokens_each[(size_t)b]);
                    if (beam == 1) EXPECT_EQ(streamed[(size_t)b], batch[(size_t)b][0].tokens) << "prompt " << b;
                }
            }
        }
    }
}

// Each prompt's limit is checked against its own length: a long prompt
// with few new tokens beside a short one with many is one valid call.
TEST(Generate, EachPromptsLimitIsCheckedAgainstItsOwnLength) {
    Model m = Model::random(config(Architecture::Decoder), 44, test_device());
    std::vector<Sequence> src = {Sequence(60, 5), Sequence(3, 6)};
    GenerateOptions o;
    o.stop_at_eos = false;
    o.max_new_tokens = 50;
    o.max_new_tokens_each = {5, 50};  // 60 + 5 - 1 and 3 + 50 - 1 positions: both within 64
    const auto out = m.generate(src, o);
    EXPECT_EQ(out[0][0].tokens.size(), 5u);
    EXPECT_EQ(out[1][0].tokens.size(), 50u);
    o.max_new_tokens_each = {6, 50};  // 65 positions
    try {
        m.generate(src, o);
        ADD_FAILURE() << "no error past max_positions";
    } catch (const Error &e) {
        EXPECT_NE(std::string(e.what()).find("prompt 0: 60 tokens + 6 new tokens need 65 positions"), std::string::npos)
            << e.what();
    }
}

}  // namespace

// Continuous batching: inputs join a running generate() (GenerateOptions::
// join) at later steps, some prefilled in chunks beside the rows decoding
// (prefill_chunk 4), at most max_batch at once (the rest wait for room),
// with their own seeds, limits and target prefixes; each answers exactly
// what it answers alone (tokens; beam scores within 1e-5), streams its own
// tokens, and the joined rows decode in the same steps as the others.
TEST(Generate, InputsJoinARunningBatchAndAnswerAsAlone) {
    const Device dev = test_device();
    for (Architecture arch : {Architecture::EncoderDecoder, Architecture::Decoder}) {
        const bool ed = arch == Architecture::EncoderDecoder;
        Config c = config(arch);
        Model m = Model::random(c, ed ? 45 : 46, dev);
        std::mt19937 rng(23);
        auto seq = [&](int len) {
            Sequence p(len);
            for (auto &t : p) t = 3 + (int32_t)(rng() % 270);
            return p;
        };
        const std::vector<Sequence> first = {seq(7), seq(3)};
        // (at poll, input, seed, limit, target prefix)
        struct Joiner {
            int at;
            Sequence input;
            uint64_t seed;
            int limit;
            Sequence prefix;
        };
        const std::vector<Joiner> joiners = {{1, seq(13), 7, 9, ed ? seq(2) : Sequence{}},
                                             {3, seq(1), 8, 12, {}},
                                             {3, seq(22), 9, 5, ed ? seq(6) : Sequence{}},
                                             {3, seq(9), 10, 8, {}},
                                             {6, seq(4), 11, 1, {}}};
        for (int beam : {1, 2}) {
            for (bool sample : {false, true}) {
                if (sample && beam > 1) continue;
                SCOPED_TRACE(std::string(ed ? "encoder-decoder" : "decoder-only") + " beam " + std::to_string(beam) +
                             (sample ? " sampled" : ""));
                GenerateOptions o;
                o.beam = beam;
                o.n_best = beam;
                o.sample = sample;
                o.top_k = 20;
                o.stop_at_eos = false;  // random weights: run to each limit
                o.max_new_tokens = 10;
                o.seeds = {1, 2};
                o.max_new_tokens_each = {10, 6};
                o.max_batch = 4;
                o.prefill_chunk = 4;
                int polls = 0;
                size_t next = 0;
                std::vector<int> rooms;
                o.join = [&](int room) {
                    rooms.push_back(room);
                    polls++;
                    std::vector<JoinInput> in;
                    while (next < joiners.size() && joiners[next].at <= polls && (int)in.size() < room) {
                        const Joiner &j = joiners[next++];
                        in.push_back({j.input, j.seed, j.limit, j.prefix});
                    }
                    return in;
                };
                const int n = (int)(first.size() + joiners.size());
                std::vector<std::vector<int32_t>> streamed((size_t)n);
                if (beam == 1) o.on_token = [&](int b, int32_t id) { streamed[(size_t)b].push_back(id); };
                const auto out = m.generate(first, o);
                ASSERT_EQ(next, joiners.size()) << "not every joiner was taken";
                ASSERT_EQ((int)out.size(), n);
                for (int room : rooms) EXPECT_LE(room, 4);
                // Joined rows decoded beside the first ones: some step ran
                // more rows than the first inputs have.
                int most = 0;
                for (int r : m.step_rows()) most = std::max(most, r);
                EXPECT_GT(most, (int)first.size() * beam);
                for (int b = 0; b < n; b++) {
                    const bool joined = b >= (int)first.size();
                    const Joiner *j = joined ? &joiners[(size_t)b - first.size()] : nullptr;
                    GenerateOptions a;
                    a.beam = beam;
                    a.n_best = beam;
                    a.sample = sample;
                    a.top_k = 20;
                    a.stop_at_eos = false;
                    a.seeds = {joined ? j->seed : o.seeds[(size_t)b]};
                    a.max_new_tokens = joined ? j->limit : o.max_new_tokens_each[(size_t)b];
                    if (joined && !j->prefix.empty()) a.target_prefix = {j->prefix};
                    const auto alone = m.generate({joined ? j->input : first[(size_t)b]}, a)[0];
                    ASSERT_EQ(out[(size_t)b].size(), alone.size()) << "input " << b;
                    for (size_t h = 0; h < alone.size(); h++) {
                        EXPECT_EQ(out[(size_t)b][h].tokens, alone[h].tokens) << "input " << b << " hypothesis " << h;
                        EXPECT_NEAR(out[(size_t)b][h].score, alone[h].score, 1e-5 * (1 + std::abs(alone[h].score)))
                            << "input " << b;
                    }
                    EXPECT_EQ((int)out[(size_t)b][0].tokens.size(), a.max_new_tokens) << "input " << b;
                    if (beam == 1) EXPECT_EQ(streamed[(size_t)b], out[(size_t)b][0].tokens) << "input " << b;
                }
            }
        }
    }
}

// Without beams, greedy and sampled inputs with different settings share
// one batch (GenerateOptions::sampling_each, and JoinInput::sampling for
// inputs that join): each answers exactly what it answers alone with its
// own settings (tokens; with return_logprobs, the per-token log-
// probabilities and the score), a greedy row's streams untouched.
TEST(Generate, GreedyAndSampledInputsShareABatch) {
    const Device dev = test_device();
    const std::vector<Sampling> kinds = {{false, 1.0f, 0, 1.0f},   // greedy
                                         {true, 0.7f, 20, 1.0f},   // sampled, top-k
                                         {true, 1.3f, 0, 0.9f},    // sampled, top-p
                                         {true, 0.7f, 20, 1.0f},   // as the second: one hf_sample run
                                         {false, 1.0f, 0, 1.0f}};  // greedy
    for (Architecture arch : {Architecture::EncoderDecoder, Architecture::Decoder}) {
        const bool ed = arch == Architecture::EncoderDecoder;
        Model m = Model::random(config(arch), ed ? 48 : 49, dev);
        std::mt19937 rng(31);
        const std::vector<Sequence> in = random_batch(rng, (int)kinds.size(), ed ? 300 : 280, 12);
        for (bool join : {false, true}) {
            for (bool logprobs : {false, true}) {
                SCOPED_TRACE(std::string(ed ? "encoder-decoder" : "decoder-only") + (join ? ", joining" : ", given") +
                             (logprobs ? ", log-probabilities" : ""));
                GenerateOptions o;
                o.stop_at_eos = false;  // random weights: run to each limit
                o.max_new_tokens = 8;
                o.return_logprobs = logprobs;
                std::vector<Sequence> given = in;
                for (size_t b = 0; b < in.size(); b++) o.seeds.push_back(100 + b);
                size_t next = 2;  // (the join callback's: it lives as long as the call)
                if (join) {
                    // Two given (greedy, sampled); the rest join one a step.
                    given.resize(2);
                    o.seeds.resize(2);
                    o.sampling_each = {kinds[0], kinds[1]};
                    o.join = [&](int room) {
                        std::vector<JoinInput> j;
                        if (next < in.size() && room > 0) {
                            j.push_back({in[next], 100 + next, 8, {}, kinds[next]});
                            next++;
                        }
                        return j;
                    };
                } else {
                    o.sampling_each = kinds;
                }
                const auto out = m.generate(given, o);
                ASSERT_EQ(out.size(), in.size());
                // The kinds decoded in the same steps.
                int most = 0;
                for (int r : m.step_rows()) most = std::max(most, r);
                EXPECT_GE(most, join ? 3 : (int)in.size());
                for (size_t b = 0; b < in.size(); b++) {
                    GenerateOptions a;
                    a.stop_at_eos = false;
                    a.max_new_tokens = 8;
                    a.return_logprobs = logprobs;
                    a.sample = kinds[b].sample;
                    a.temperature = kinds[b].temperature;
                    a.top_k = kinds[b].top_k;
                    a.top_p = kinds[b].top_p;
                    a.seeds = {100 + b};
                    const Hypothesis alone = m.generate({in[b]}, a)[0][0];
                    EXPECT_EQ(out[b][0].tokens, alone.tokens) << "input " << b;
                    EXPECT_EQ(out[b][0].log_probs.size(), alone.log_probs.size()) << "input " << b;
                    for (size_t t = 0; t < alone.log_probs.size() && t < out[b][0].log_probs.size(); t++) {
                        EXPECT_NEAR(out[b][0].log_probs[t], alone.log_probs[t], 1e-4) << "input " << b << " token " << t;
                    }
                    EXPECT_NEAR(out[b][0].score, alone.score, 1e-4 * (1 + std::abs(alone.score))) << "input " << b;
                }
            }
        }
    }
}

// Per-input settings that cannot be: named in the error.
TEST(Generate, BadPerInputSamplingIsRefused) {
    Model m = Model::random(config(Architecture::Decoder), 50, test_device());
    auto refused = [&](GenerateOptions o, int inputs, const std::string &piece) {
        try {
            m.generate(std::vector<Sequence>((size_t)inputs, Sequence{5, 6}), o);
            ADD_FAILURE() << "accepted; expected an error with: " << piece;
        } catch (const Error &e) {
            EXPECT_NE(std::string(e.what()).find(piece), std::string::npos) << e.what();
        }
    };
    GenerateOptions o;
    o.max_new_tokens = 2;
    o.sampling_each = {{}, {true, 0.5f, 0, 1.0f}};
    GenerateOptions beams = o;
    beams.beam = 2;
    refused(beams, 2, "sampling_each is for beam 1");
    refused(o, 3, "2 sampling_each for 3 inputs");
    GenerateOptions cold = o;
    cold.sampling_each[1].temperature = 0;
    refused(cold, 2, "temperature of input 1 must be positive");
    GenerateOptions nan_p = o;
    nan_p.sampling_each[0].top_p = std::nanf("");
    refused(nan_p, 2, "top_p of input 0 must be in (0, 1]");
    GenerateOptions bad_join = o;
    bad_join.sampling_each.clear();
    bool asked = false;
    bad_join.join = [&](int) {
        std::vector<JoinInput> j;
        if (!asked) j.push_back({Sequence{7}, 1, 2, {}, Sampling{true, 1.0f, -1, 1.0f}});
        asked = true;
        return j;
    };
    refused(bad_join, 1, "top_k of a joining input must be in [0, 1048576], not -1");
}

// The paged cache's blocks decide who prefills when: with room for one
// input's blocks only, joined inputs wait until an input is done and frees
// its blocks, one batch row at a time, and still answer as alone; an input
// that could never fit is an Error naming the blocks.
TEST(Generate, AJoiningInputWaitsForFreeCacheBlocks) {
    Model m = Model::random(config(Architecture::Decoder), 47, test_device());
    const std::vector<Sequence> prompts = {Sequence(10, 5), Sequence(12, 6), Sequence(3, 7)};
    GenerateOptions o;
    o.stop_at_eos = false;
    o.max_new_tokens = 9;
    o.kv_blocks = 2;  // one input: 10 + 9 - 1 positions of 16 each
    size_t next = 1;
    o.join = [&](int room) {
        std::vector<JoinInput> in;
        if (next < prompts.size() && room > 0) in.push_back({prompts[next++], 0, 9, {}});
        return in;
    };
    const auto out = m.generate({prompts[0]}, o);
    ASSERT_EQ(out.size(), prompts.size());
    for (int r : m.step_rows()) EXPECT_EQ(r, 1);
    GenerateOptions a;
    a.stop_at_eos = false;
    a.max_new_tokens = 9;
    for (size_t b = 0; b < prompts.size(); b++) EXPECT_EQ(out[b][0].tokens, m.generate({prompts[b]}, a)[0][0].tokens);
    // 40 + 9 - 1 positions: 3 blocks, never free.
    o.join = [&, joined = false](int) mutable {
        std::vector<JoinInput> in;
        if (!joined) in.push_back({Sequence(40, 5), 0, 9, {}});
        joined = true;
        return in;
    };
    try {
        m.generate({prompts[0]}, o);
        FAIL() << "an input larger than the cache was accepted";
    } catch (const Error &e) {
        EXPECT_NE(std::string(e.what()).find("KV cache blocks"), std::string::npos) << e.what();
    }
}
