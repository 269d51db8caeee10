// halformer::Engine (halformer/engine.h) without HTTP, on the committed
// translator: answers equal each request alone, joins at a held step,
// aborts of waiting and running requests, a full queue, a stopped engine,
// a failed batch's requests run alone once, options out of range. Running
// batches are held at a step by a Gate, never raced with a sleep.
#include "halformer/engine.h"

#include "serve_test_util.h"

namespace {

using namespace serve_test;

using EngineTest = Serve;

// What one request got, filled by its callbacks.
struct Got {
    std::mutex mu;
    std::condition_variable cv;
    bool done = false;
    EngineResult r;
    Sequence tokens;  // on_token's
    int starts = 0;
    int dones = 0;

    bool wait() {
        std::unique_lock<std::mutex> lock(mu);
        return cv.wait_for(lock, std::chrono::seconds(60), [&] { return done; });
    }
    bool is_done() {
        std::lock_guard<std::mutex> lock(mu);
        return done;
    }
};

EngineRequest request(Model &model, const Mixed &m, const std::shared_ptr<Got> &g) {
    EngineRequest r;
    r.input = model.tokenizer().encode(m.text);
    r.options = m.options;
    r.on_start = [g] {
        std::lock_guard<std::mutex> lock(g->mu);
        g->starts++;
    };
    r.on_token = [g](int32_t id) {
        std::lock_guard<std::mutex> lock(g->mu);
        g->tokens.push_back(id);
    };
    r.on_done = [g](const EngineResult &res) {
        {
            std::lock_guard<std::mutex> lock(g->mu);
            g->r = res;
            g->done = true;
            g->dones++;
        }
        g->cv.notify_all();
    };
    return r;
}

// Model::generate on the one input: what the engine must answer.
std::vector<Hypothesis> generate_alone(Model &model, const Mixed &m) {
    return model.generate({model.tokenizer().encode(m.text)}, m.options)[0];
}

// Tokens and alternatives equal; scores within 1e-5 relative (a beam's sums
// run over batches of other sizes).
void expect_same(const std::vector<Hypothesis> &got, const std::vector<Hypothesis> &want, const std::string &what) {
    ASSERT_EQ(got.size(), want.size()) << what;
    for (size_t k = 0; k < got.size(); k++) {
        EXPECT_EQ(got[k].tokens, want[k].tokens) << what << ", hypothesis " << k;
        EXPECT_NEAR(got[k].score, want[k].score, 1e-5 * std::max(1.0, std::abs(want[k].score))) << what;
    }
}

// Every kind of mixed(): greedy, beams with n_best, seeded samples, short limits.
Mixed kind_mix(int i) { return mixed(16 * (i / 8) + i % 8); }

TEST_F(EngineTest, AnswersEqualEachRequestAlone) {
    const int n = 32;
    std::vector<std::vector<Hypothesis>> want;
    for (int i = 0; i < n; i++) want.push_back(generate_alone(*model, kind_mix(i)));
    EngineOptions eo;
    eo.workers = 2;
    eo.max_batch = 8;
    Engine engine(*model, eo);
    std::vector<std::shared_ptr<Got>> got;
    for (int i = 0; i < n; i++) got.push_back(std::make_shared<Got>());
    // Four clients add theirs at once.
    std::vector<std::thread> clients;
    for (int c = 0; c < 4; c++) {
        clients.emplace_back([&, c] {
            for (int i = c; i < n; i += 4) engine.add(request(*model, kind_mix(i), got[(size_t)i]));
        });
    }
    for (auto &t : clients) t.join();
    for (int i = 0; i < n; i++) {
        ASSERT_TRUE(got[(size_t)i]->wait()) << "request " << i << " never answered";
        const Got &g = *got[(size_t)i];
        EXPECT_EQ(g.r.error, "") << i;
        EXPECT_TRUE(g.r.started && !g.r.aborted) << i;
        EXPECT_EQ(g.starts, 1) << i;
        expect_same(g.r.hyps, want[(size_t)i], "request " + std::to_string(i));
        // Greedy and sampled rows stream every token of their answer.
        if (kind_mix(i).options.beam == 1) EXPECT_EQ(g.tokens, want[(size_t)i][0].tokens) << i;
    }
    engine.stop();
    const EngineStats st = engine.stats();
    EXPECT_EQ(st.batched + st.joined, n);
    EXPECT_EQ(st.waiting, 0u);
    EXPECT_EQ(st.running, 0);
    EXPECT_EQ(st.splits, 0);
    for (auto &g : got) EXPECT_EQ(g->dones, 1);
}

// A request of the running batch's kind joins it at the step after it
// arrives: the batch is held at a step while it is added.
TEST_F(EngineTest, ARequestJoinsARunningBatchAtItsNextStep) {
    Gate gate;
    EngineOptions eo;
    eo.on_step = gate.hook();
    Engine engine(*model, eo);
    auto a = std::make_shared<Got>(), b = std::make_shared<Got>();
    engine.add(request(*model, mixed(3), a));
    ASSERT_TRUE(gate.wait_held()) << "the first request's batch never started";
    engine.add(request(*model, mixed(5), b));
    EXPECT_EQ(engine.stats().waiting, 1u);
    gate.open();
    ASSERT_TRUE(a->wait() && b->wait());
    expect_same(a->r.hyps, generate_alone(*model, mixed(3)), "the first");
    expect_same(b->r.hyps, generate_alone(*model, mixed(5)), "the one that joined");
    const EngineStats st = engine.stats();
    EXPECT_EQ(st.batches, 1);
    EXPECT_EQ(st.joined, 1);
}

// abort(): a waiting request ends at once, not started; a running one at
// its batch's next step, with a prefix of its answer alone.
TEST_F(EngineTest, AbortEndsAWaitingAndARunningRequest) {
    Gate gate;
    EngineOptions eo;
    eo.on_step = gate.hook();
    Engine engine(*model, eo);
    auto a = std::make_shared<Got>(), b = std::make_shared<Got>();
    Mixed long_one = mixed(9);  // greedy, the default limit
    const Engine::Id ia = engine.add(request(*model, long_one, a));
    ASSERT_TRUE(gate.wait_held());
    const Engine::Id ib = engine.add(request(*model, mixed(16 + 2), b));  // beams: another batch
    EXPECT_EQ(engine.stats().waiting, 1u);
    engine.abort(ib);
    ASSERT_TRUE(b->is_done()) << "a waiting request ends when aborted, before any step";
    EXPECT_TRUE(b->r.aborted);
    EXPECT_FALSE(b->r.started);
    EXPECT_TRUE(b->r.hyps.empty());
    EXPECT_EQ(b->starts, 0);
    EXPECT_EQ(engine.stats().waiting, 0u);
    engine.abort(ia);
    gate.open();
    ASSERT_TRUE(a->wait());
    EXPECT_TRUE(a->r.aborted);
    EXPECT_TRUE(a->r.started);
    EXPECT_EQ(a->r.error, "");
    const Sequence full = generate_alone(*model, long_one)[0].tokens;
    ASSERT_EQ(a->r.hyps.size(), 1u);
    const Sequence &part = a->r.hyps[0].tokens;
    EXPECT_LT(part.size(), full.size());
    EXPECT_TRUE(std::equal(part.begin(), part.end(), full.begin())) << "not a prefix of its answer alone";
    engine.abort(ia);  // done: nothing
    engine.abort(12345);
    EXPECT_EQ(a->dones + b->dones, 2);
}

// Past max_queue waiting requests add() refuses, all or none; a stopped
// engine refuses everything; nothing accepted is lost.
TEST_F(EngineTest, AFullQueueAndAStoppedEngineRefuse) {
    Gate gate;
    EngineOptions eo;
    eo.max_queue = 2;
    eo.on_step = gate.hook();
    Engine engine(*model, eo);
    std::vector<std::shared_ptr<Got>> got;
    for (int i = 0; i < 5; i++) got.push_back(std::make_shared<Got>());
    engine.add(request(*model, mixed(0), got[0]));
    ASSERT_TRUE(gate.wait_held());
    std::vector<EngineRequest> two;
    two.push_back(request(*model, mixed(17), got[1]));
    two.push_back(request(*model, mixed(18), got[2]));
    std::vector<EngineRequest> three;
    for (int i = 0; i < 3; i++) three.push_back(request(*model, mixed(20 + i), got[3]));
    try {
        engine.add(std::move(three));
        ADD_FAILURE() << "three requests were taken into a queue of 2";
    } catch (const EngineBusy &e) {
        EXPECT_NE(std::string(e.what()).find("the queue is full (2 requests wait)"), std::string::npos) << e.what();
    }
    EXPECT_EQ(engine.stats().waiting, 0u) << "all or none";
    engine.add(std::move(two));
    EXPECT_THROW(engine.add(request(*model, mixed(1), got[4])), EngineBusy);
    gate.open();
    for (int i = 0; i < 3; i++) {
        ASSERT_TRUE(got[(size_t)i]->wait());
        expect_same(got[(size_t)i]->r.hyps, generate_alone(*model, mixed(i == 0 ? 0 : 16 + i)), "accepted " + std::to_string(i));
    }
    engine.stop();
    engine.stop();
    try {
        engine.add(request(*model, mixed(1), got[4]));
        ADD_FAILURE() << "a stopped engine took a request";
    } catch (const EngineBusy &e) {
        EXPECT_NE(std::string(e.what()).find("stopping"), std::string::npos) << e.what();
    }
    EXPECT_FALSE(got[3]->is_done() || got[4]->is_done()) << "refused requests get no answer";
}

// A batch past the memory budget fails whole; each of its requests then
// runs alone, once, and answers as alone, but for one that cannot start
// over (restart false: its tokens went out), which fails with the reason.
TEST_F(EngineTest, AFailedBatchRunsItsRequestsAloneOnce) {
    std::vector<std::vector<Hypothesis>> want;
    for (int i = 0; i < 8; i++) want.push_back(generate_alone(*model, mixed(i)));
    model->release_memory();
    const int64_t keep = model->memory_budget();
    model->set_memory_budget(1 << 20);  // one request fits, a batch of 8 does not
    {
        Engine engine(*model, {});
        std::vector<std::shared_ptr<Got>> got;
        std::vector<EngineRequest> reqs;
        for (int i = 0; i < 8; i++) {
            got.push_back(std::make_shared<Got>());
            reqs.push_back(request(*model, mixed(i), got.back()));
        }
        reqs[0].restart = [] { return false; };
        engine.add(std::move(reqs));  // one batch: added at once, one kind
        for (int i = 0; i < 8; i++) ASSERT_TRUE(got[(size_t)i]->wait()) << i;
        EXPECT_NE(got[0]->r.error.find("generation failed"), std::string::npos) << got[0]->r.error;
        EXPECT_EQ(got[0]->starts, 1);
        for (int i = 1; i < 8; i++) {
            EXPECT_EQ(got[(size_t)i]->r.error, "") << i;
            EXPECT_EQ(got[(size_t)i]->starts, 2) << "in the batch, then alone: " << i;
            expect_same(got[(size_t)i]->r.hyps, want[(size_t)i], "request " + std::to_string(i));
        }
        const EngineStats st = engine.stats();
        EXPECT_EQ(st.splits, 1);
        EXPECT_EQ(st.batches, 1);
    }
    model->set_memory_budget(keep);
}

// Without workers the caller runs the engine with step(): every callback
// on its thread, the batch's joins at the steps where room frees, each
// answer as alone; step() is false once nothing waits or runs.
TEST_F(EngineTest, StepsOnTheCallersThread) {
    EngineOptions eo;
    eo.workers = 0;
    eo.max_batch = 4;
    Engine engine(*model, eo);
    EXPECT_FALSE(engine.step());
    const int n = 10;
    std::vector<std::shared_ptr<Got>> got;
    std::vector<std::vector<Hypothesis>> want;
    const std::thread::id me = std::this_thread::get_id();
    bool elsewhere = false;
    for (int i = 0; i < n; i++) {
        // Greedy and sampled requests (one kind of batch), limits of 4 to 8.
        Mixed m = mixed(i % 2 ? i : 32 + i);
        m.options.max_new_tokens = 4 + i % 5;
        want.push_back(generate_alone(*model, m));
        got.push_back(std::make_shared<Got>());
        EngineRequest r = request(*model, m, got.back());
        auto token = r.on_token;
        r.on_token = [token, me, &elsewhere](int32_t id) {
            elsewhere = elsewhere || std::this_thread::get_id() != me;
            token(id);
        };
        engine.add(std::move(r));
    }
    EXPECT_EQ(engine.stats().waiting, (size_t)n);
    ASSERT_TRUE(engine.step());
    EXPECT_EQ(engine.stats().running, 1);
    EXPECT_EQ(engine.stats().waiting, (size_t)(n - 4));
    int steps = 1;
    while (engine.step()) steps++;
    EXPECT_FALSE(elsewhere) << "a callback ran on another thread";
    for (int i = 0; i < n; i++) {
        ASSERT_TRUE(got[(size_t)i]->is_done()) << i;
        EXPECT_EQ(got[(size_t)i]->r.error, "") << i;
        expect_same(got[(size_t)i]->r.hyps, want[(size_t)i], "request " + std::to_string(i));
        EXPECT_EQ(got[(size_t)i]->tokens, want[(size_t)i][0].tokens) << i;
    }
    const EngineStats st = engine.stats();
    EXPECT_EQ(st.batches, 1);
    EXPECT_EQ(st.batched, 4);
    EXPECT_EQ(st.joined, n - 4);
    EXPECT_EQ(st.running, 0);
    // One batch, fewer steps than the requests' tokens one at a time.
    int tokens = 0;
    for (auto &w : want) tokens += (int)w[0].tokens.size();
    EXPECT_LT(steps, tokens);
    // stop() answers what is left by stepping.
    auto last = std::make_shared<Got>();
    engine.add(request(*model, mixed(0), last));
    engine.stop();
    EXPECT_TRUE(last->is_done());
    EXPECT_FALSE(engine.step());
}

TEST_F(EngineTest, OptionsOutOfRangeAreAnError) {
    auto fails = [&](EngineOptions o, const std::string &what) {
        try {
            Engine e(*model, o);
            ADD_FAILURE() << "accepted: " << what;
        } catch (const Error &err) {
            EXPECT_NE(std::string(err.what()).find(what), std::string::npos) << err.what();
        }
    };
    EngineOptions o;
    o.workers = -1;
    fails(o, "workers must be >= 0, max_batch and max_queue >= 1");
    o = {};
    o.max_queue = -1;
    fails(o, "workers must be >= 0, max_batch and max_queue >= 1");
    o = {};
    Engine threads(*model, o);
    try {
        threads.step();
        ADD_FAILURE() << "step() with workers";
    } catch (const Error &err) {
        EXPECT_NE(std::string(err.what()).find("without workers"), std::string::npos) << err.what();
    }
    o = {};
    o.join_fair_ms = std::nan("");
    fails(o, "join_fair_ms");
    o = {};
    o.batch_wait_ms = -1;
    fails(o, "batch_wait_ms");
}

}  // namespace
