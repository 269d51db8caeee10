// halformer serve (halformer/server.h), in process, on the loopback address:
//  * load: 64 clients × 20 mixed requests against the committed translator,
//    with requests joining running batches and without; 0 errors, every
//    answer equal to the same request run alone through Model::generate;
//    throughput against one-at-a-time serving and against no joining, p50/
//    p99 latency and time to first token printed (bench/serve_load.sh
//    records them; speed is not asserted);
//  * faults: malformed and wrong requests, an oversized body, a full queue,
//    a slow client, a stalled client, clients killed mid-request, shutdown
//    with requests in flight.
// SIGTERM and a restart under load: tests/check_serve.py (the binary).
#include "serve_test_util.h"

using namespace halformer;
using namespace serve_test;
using json = nlohmann::json;
using Clock = std::chrono::steady_clock;

namespace {

TEST_F(Serve, LoadOf64ClientsEqualsEachRequestAlone) {
    const int clients = env_int("HALFORMER_LOAD_CLIENTS", 64), per_client = env_int("HALFORMER_LOAD_REQUESTS", 20);
    constexpr int kMix = 64;
    std::vector<Mixed> mix;
    std::vector<json> ref;
    for (int i = 0; i < kMix; i++) {
        mix.push_back(mixed(i));
        ref.push_back(alone(*model, mix.back()));
    }
    std::vector<double> *first_token = nullptr;  // the run's times to first token (s), where it records them
    std::vector<std::pair<int, double>> *by_request = nullptr;  // (mix entry, latency), where it records them
    auto run = [&](ServerOptions so, int n_clients, int n_each, std::vector<double> &latency, int &errors,
                   int &mismatches, int64_t &tokens) {
        Server server(*model, so);
        const int port = server.start();
        std::mutex mu;
        std::vector<std::thread> th;
        const auto t0 = Clock::now();
        for (int c = 0; c < n_clients; c++) {
            th.emplace_back([&, c] {
                httplib::Client cli("127.0.0.1", port);
                cli.set_read_timeout(120, 0);
                for (int k = 0; k < n_each; k++) {
                    const int i = (c * 7 + k * 13) % kMix;
                    Result r = post(cli, mix[i].body.dump());
                    std::lock_guard<std::mutex> lock(mu);
                    latency.push_back(r.seconds);
                    if (by_request) by_request->push_back({i, r.seconds});
                    if (r.status != 200 || r.body.is_discarded() || r.body.contains("error")) {
                        if (errors++ < 3) ADD_FAILURE() << "status " << r.status << " " << r.error << ": " << r.body.dump();
                    } else {
                        tokens += r.body["output_tokens"].get<int64_t>();
                        if (first_token && r.body.contains("first_token_ms")) {
                            first_token->push_back(r.body["first_token_ms"].get<double>() / 1000);
                        }
                        if (!same_answer(r.body, ref[i])) {
                            if (mismatches++ < 3) {
                                ADD_FAILURE() << "request " << i << " " << mix[i].body.dump() << "\n got "
                                              << r.body.dump() << "\n alone " << ref[i].dump();
                            }
                        }
                    }
                }
            });
        }
        for (auto &t : th) t.join();
        const double s = std::chrono::duration<double>(Clock::now() - t0).count();
        const std::string m = server.metrics();
        server.shutdown();
        return std::make_pair(s, m);
    };
    // Joining at the next step (the default), then today's batching (a
    // request waits for a batch to start), interleaved: the same load each.
    ServerOptions batched;
    batched.port = 0;
    // (bench/serve_load.py --join-fair-ms)
    if (const char *e = std::getenv("HALFORMER_LOAD_JOIN_FAIR_MS")) batched.engine.join_fair_ms = std::atof(e);
    // (bench/serve_load.py --workers)
    batched.engine.workers = env_int("HALFORMER_LOAD_WORKERS", batched.engine.workers);
    std::vector<double> lat, ttft;
    std::vector<std::pair<int, double>> each, each0, each1;
    int errors = 0, mismatches = 0;
    int64_t tokens = 0;
    first_token = &ttft;
    by_request = &each;
    auto [seconds, metrics] = run(batched, clients, per_client, lat, errors, mismatches, tokens);
    EXPECT_EQ(errors, 0);
    EXPECT_EQ(mismatches, 0);
    EXPECT_EQ((int)lat.size(), clients * per_client);
    const double batches = metric(metrics, "halformer_batches_total"),
                 batched_requests = metric(metrics, "halformer_batched_requests_total"),
                 joined = metric(metrics, "halformer_joined_requests_total");
    EXPECT_EQ(batched_requests, clients * per_client);

    ServerOptions no_join = batched;
    no_join.engine.join = false;
    std::vector<double> lat0, ttft0;
    int errors0 = 0, mismatches0 = 0;
    int64_t tokens0 = 0;
    first_token = &ttft0;
    by_request = &each0;
    auto [seconds0, metrics0] = run(no_join, clients, per_client, lat0, errors0, mismatches0, tokens0);
    EXPECT_EQ(errors0 + mismatches0, 0);
    EXPECT_EQ(metric(metrics0, "halformer_joined_requests_total"), 0);
    first_token = nullptr;
    by_request = &each1;

    // One at a time: one client, one request per batch, one worker.
    ServerOptions single;
    single.port = 0;
    single.engine.workers = 1;
    single.engine.max_batch = 1;
    single.engine.batch_wait_ms = 0;
    std::vector<double> lat1;
    int errors1 = 0, mismatches1 = 0;
    int64_t tokens1 = 0;
    const int n_single = std::min(kMix, clients * per_client);
    auto [seconds1, metrics1] = run(single, 1, n_single, lat1, errors1, mismatches1, tokens1);
    EXPECT_EQ(errors1 + mismatches1, 0);
    by_request = nullptr;
    // Slowdown: a request's latency under load over the same request's
    // alone (the one-at-a-time run takes each entry of the mix once), and
    // latency per kind of request (greedy, beam, sampled, 4-token): the
    // mix's kinds differ in work several times over, so percentiles over
    // all requests measure the mix as much as the server.
    std::vector<double> alone_s(kMix, 0);
    for (auto &[i, sec] : each1) alone_s[(size_t)i] = sec;
    auto slowdowns = [&](const std::vector<std::pair<int, double>> &e) {
        std::vector<double> v;
        for (auto &[i, sec] : e) {
            if (alone_s[(size_t)i] > 0) v.push_back(sec / alone_s[(size_t)i]);
        }
        return v;
    };
    const char *kinds[] = {"greedy", "beam4", "sampled", "cut4"};
    auto by_kind = [&](const std::vector<std::pair<int, double>> &e) {
        json out;
        for (int c = 0; c < 4; c++) {
            std::vector<double> v;
            for (auto &[i, sec] : e) {
                if ((i / 16) % 4 == c) v.push_back(sec);
            }
            out[kinds[c]] = {{"p50_s", percentile(v, 0.5)}, {"p99_s", percentile(v, 0.99)}};
        }
        return out;
    };
    const std::vector<double> slow = slowdowns(each), slow0 = slowdowns(each0);
    std::printf("[load] slowdown (latency / the request alone): joining p50 %.2f, p99 %.2f; no joining p50 %.2f, "
                "p99 %.2f\n",
                percentile(slow, 0.5), percentile(slow, 0.99), percentile(slow0, 0.5), percentile(slow0, 0.99));
    const json kinds_join = by_kind(each), kinds_no_join = by_kind(each0), kinds_single = by_kind(each1);
    std::printf("[load] by kind (joining): %s\n", kinds_join.dump().c_str());
    const double tps = tokens / seconds, tps1 = tokens1 / seconds1;
    std::printf("[load] %d clients x %d requests: %.2f s, %lld tokens, %.0f tokens/s, %.1f requests/s; "
                "p50 %.3f s, p99 %.3f s; %.0f batches (%.1f requests each)\n",
                clients, per_client, seconds, (long long)tokens, tps, clients * per_client / seconds,
                percentile(lat, 0.5), percentile(lat, 0.99), batches, batched_requests / std::max(1.0, batches));
    std::printf("[load] cancelled %.0f, requests %s\n", metric(metrics, "halformer_cancelled_total"),
                metrics.substr(metrics.find("halformer_requests_total{"), 120).c_str());
    std::printf("[load] one at a time: %d requests: %.2f s, %.0f tokens/s, p50 %.3f s, p99 %.3f s\n", n_single,
                seconds1, tps1, percentile(lat1, 0.5), percentile(lat1, 0.99));
    std::printf("[load] throughput ratio (batched / one at a time): %.2f\n", tps / tps1);
    const double tps0 = tokens0 / seconds0;
    std::printf("[load] joining: %.0f of %d requests joined a running batch; first token p50 %.3f s, p99 %.3f s\n",
                joined, clients * per_client, percentile(ttft, 0.5), percentile(ttft, 0.99));
    std::printf("[load] no joining: %.2f s, %.0f tokens/s, p50 %.3f s, p99 %.3f s; first token p50 %.3f s, "
                "p99 %.3f s\n",
                seconds0, tps0, percentile(lat0, 0.5), percentile(lat0, 0.99), percentile(ttft0, 0.5),
                percentile(ttft0, 0.99));
    std::printf("[load] throughput ratio (joining / no joining): %.2f\n", tps / tps0);
    if (const char *out = std::getenv("HALFORMER_LOAD_REPORT")) {
        std::ofstream(out) << json{{"clients", clients},
                                   {"requests_per_client", per_client},
                                   {"errors", errors},
                                   {"mismatches", mismatches},
                                   {"seconds", seconds},
                                   {"tokens", tokens},
                                   {"tokens_per_s", tps},
                                   {"p50_s", percentile(lat, 0.5)},
                                   {"p99_s", percentile(lat, 0.99)},
                                   {"batches", batches},
                                   {"single_requests", n_single},
                                   {"single_tokens_per_s", tps1},
                                   {"single_p50_s", percentile(lat1, 0.5)},
                                   {"single_p99_s", percentile(lat1, 0.99)},
                                   {"ratio", tps / tps1},
                                   {"joined", joined},
                                   {"first_token_p50_s", percentile(ttft, 0.5)},
                                   {"first_token_p99_s", percentile(ttft, 0.99)},
                                   {"no_join_seconds", seconds0},
                                   {"no_join_tokens_per_s", tps0},
                                   {"no_join_p50_s", percentile(lat0, 0.5)},
                                   {"no_join_p99_s", percentile(lat0, 0.99)},
                                   {"no_join_first_token_p50_s", percentile(ttft0, 0.5)},
                                   {"no_join_first_token_p99_s", percentile(ttft0, 0.99)},
                                   {"join_ratio", tps / tps0},
                                   {"slowdown_p50", percentile(slow, 0.5)},
                                   {"slowdown_p99", percentile(slow, 0.99)},
                                   {"no_join_slowdown_p50", percentile(slow0, 0.5)},
                                   {"no_join_slowdown_p99", percentile(slow0, 0.99)},
                                   {"kinds", kinds_join},
                                   {"no_join_kinds", kinds_no_join},
                                   {"single_kinds", kinds_single}}
                                  .dump(2);
    }
}

// Each bad request gets its status and a JSON error naming the problem;
// then a good one is still answered.
TEST_F(Serve, BadRequestsGetAClearError) {
    ServerOptions so;
    so.port = 0;
    so.max_body = 4096;
    so.max_input_tokens = 20;
    Server server(*model, so);
    httplib::Client c("127.0.0.1", server.start());
    struct Case {
        std::string body;
        int status;
        const char *piece;
    };
    const std::vector<Case> cases = {
        {"{\"text\": \"Open", 400, "malformed JSON"},
        {"", 400, "malformed JSON"},
        {"{\"ids\": [5], \"beam\": 1e30308}", 400, "malformed JSON"},  // found by fuzz_request: was a 500
        {"[1, 2]", 400, "must be a JSON object"},
        {"{\"text\": \"a\", \"beam\": 2, \"beam\": 3}", 400, "duplicate key 'beam'"},
        {"{\"text\": 5}", 400, "'text' must be a string"},
        {"{\"ids\": \"5,6\"}", 400, "'ids' must be an array"},
        {"{\"ids\": [5, 6.5]}", 400, "'ids'[1] must be an integer"},
        {"{\"ids\": [5, 8000]}", 400, "outside the vocabulary"},
        {"{\"ids\": [5, -1]}", 400, "outside the vocabulary"},
        {"{\"ids\": []}", 400, "'ids' is empty"},
        {"{\"text\": \"   \"}", 400, "'text' is empty"},
        {"{\"text\": \"a\", \"ids\": [5]}", 400, "not both"},
        {"{\"text\": \"a\", \"bem\": 4}", 400, "unknown field 'bem'"},
        {"{\"text\": \"a\", \"beam\": 9}", 400, "'beam' is 9"},
        {"{\"text\": \"a\", \"beam\": 99999999999999999999}", 400, "'beam'"},
        {"{\"text\": \"a\", \"beam\": \"4\"}", 400, "'beam' must be an integer"},
        {"{\"text\": \"a\", \"n_best\": 3}", 400, "'n_best' (3) must be at most 'beam' (1)"},
        {"{\"text\": \"a\", \"sample\": 1}", 400, "'sample' must be true or false"},
        {"{\"text\": \"a\", \"temperature\": 0}", 400, "'temperature' must be positive"},
        {"{\"text\": \"a\", \"top_p\": 1.5}", 400, "'top_p'"},
        {"{\"text\": \"a\", \"seed\": -3}", 400, "'seed'"},
        {"{\"text\": \"a\", \"max_new_tokens\": 0}", 400, "'max_new_tokens'"},
        {"{\"text\": \"a\", \"max_new_tokens\": 100000}", 400, "'max_new_tokens'"},
        {"{\"text\": \"a\", \"sample\": true, \"beam\": 2}", 400, "exclusive"},
        {"{\"ids\": [" + repeat("5,", 24) + "5]}", 413, "the input is 25 tokens; this server takes at most 20"},
        {"{\"text\": \"" + repeat("word ", 40) + "\"}", 413, "this server takes at most 20"},
        {std::string(20, '[') + std::string(20, ']'), 400, "nests deeper"},
        {"{\"text\": \"" + std::string(5000, 'a') + "\"}", 413, "too large"},
        // Bytes that are not UTF-8, anywhere: a 400 naming the offset (these
        // were 500s: the parser's message quoted them, and could not be sent).
        {"{\"text\": \"Open\xff\xfe the file.\"}", 400, "not valid UTF-8 (at byte 14)"},
        {"{\"text\": \"a\xc0\xaf\"}", 400, "not valid UTF-8"},      // overlong '/'
        {"{\"text\": \"a\xed\xa0\x80\"}", 400, "not valid UTF-8"},  // encoded surrogate
        {"{\"text\": \"a\xe2\x82\"}", 400, "not valid UTF-8"},      // truncated sequence
        {"{\"te\xffxt\": \"a\"}", 400, "not valid UTF-8 (at byte 4)"},  // in a key
        {"{\"text\": \"a\"}\xff", 400, "not valid UTF-8"},           // outside strings
        {"{\"text\": tru\xe2\x82\xac}", 400, "malformed JSON"},       // valid UTF-8, cut by the parser
        // Finite as a double, not as the float32 the kernels take.
        {"{\"text\": \"a\", \"sample\": true, \"temperature\": 1e308}", 400, "'temperature' is 1e+308"},
        {"{\"text\": \"a\", \"beam\": 2, \"length_penalty\": 1e308}", 400, "float32's range"},
        {"{\"text\": \"a\", \"beam\": 2, \"length_penalty\": -1e308}", 400, "'length_penalty'"},
        {"{\"text\": \"a\", \"sample\": true, \"top_p\": 1e-300}", 400, "'top_p'"},
    };
    for (const Case &k : cases) {
        auto res = c.Post("/v1/generate", k.body, "application/json");
        ASSERT_TRUE(res) << k.body;
        EXPECT_EQ(res->status, k.status) << k.body.substr(0, 80) << " → " << res->body;
        json j = json::parse(res->body, nullptr, false);
        ASSERT_FALSE(j.is_discarded()) << res->body;
        ASSERT_TRUE(j.contains("error")) << res->body;
        EXPECT_NE(j["error"].get<std::string>().find(k.piece), std::string::npos)
            << k.body.substr(0, 80) << " → " << res->body;
    }
    auto get = c.Get("/v1/generate");
    ASSERT_TRUE(get);
    EXPECT_EQ(get->status, 405);
    auto missing = c.Get("/nope");
    ASSERT_TRUE(missing);
    EXPECT_EQ(missing->status, 404);
    EXPECT_NE(missing->body.find("no such endpoint"), std::string::npos);
    auto health = c.Get("/health");
    ASSERT_TRUE(health);
    EXPECT_EQ(json::parse(health->body)["status"], "ok");
    Result ok = post(c, "{\"text\": \"Open the file.\"}");
    EXPECT_EQ(ok.status, 200);
    EXPECT_EQ(ok.body["text"], "Datei öffnen.");
    const std::string m = server.metrics();
    EXPECT_NE(m.find("halformer_requests_total{code=\"400\"}"), std::string::npos) << m;
    EXPECT_NE(m.find("halformer_request_duration_seconds_bucket{le=\"+Inf\"} 1"), std::string::npos) << m;
}

// The request that once answered another text among 32 concurrent ones
// than alone: seeded sampling from a flat distribution (temperature 3,
// top-k 0), where one rounding difference in a logit moves the draw. 32
// such requests (8 sentences, "Show hidden files" among them, 4 seeds
// each) run in one batch: the first is held at a step by a Gate until the
// other 31 wait in the queue, then they join it. Each answers what it
// answers alone, token for token (tests/runtime/test_batch_invariance.cpp
// checks the bits).
TEST_F(Serve, SeededSamplesAnswerAsAloneInABatch) {
    Gate gate;
    ServerOptions so;
    so.port = 0;
    so.engine.workers = 1;
    so.engine.batch_wait_ms = 0;
    so.engine.on_step = gate.hook();
    Server server(*model, so);
    const int port = server.start();
    const char *texts[] = {"Show hidden files", "Open the file.", "Save the document before closing.",
                           "The cat sat on the mat.", "Select a language for the user interface.",
                           "An error occurred while reading the file from the disk.", "Delete the selected items?",
                           "Print the current page."};
    std::vector<Mixed> reqs;
    for (int i = 0; i < 32; i++) {
        Mixed m;
        m.text = texts[i % 8];
        m.body = {{"text", m.text}, {"sample", true}, {"temperature", 3.0}, {"top_k", 0}, {"max_new_tokens", 48},
                  {"seed", 76 + i / 8}};
        m.options.sample = true;
        m.options.temperature = 3.0f;
        m.options.top_k = 0;
        m.options.max_new_tokens = 48;
        m.options.seed = 76 + i / 8;
        reqs.push_back(m);
    }
    std::vector<Result> got(reqs.size());
    std::vector<std::thread> th;
    auto send = [&](size_t i) {
        th.emplace_back([&, i] {
            httplib::Client c("127.0.0.1", port);
            c.set_read_timeout(120, 0);
            got[i] = post(c, reqs[i].body.dump());
        });
    };
    send(0);
    ASSERT_TRUE(gate.wait_held()) << "the first request's batch never started";
    for (size_t i = 1; i < reqs.size(); i++) send(i);
    wait_for_metric(server, "halformer_queue_depth", (double)reqs.size() - 1);
    gate.open();
    for (auto &t : th) t.join();
    EXPECT_EQ(metric(server.metrics(), "halformer_joined_requests_total"), (double)reqs.size() - 1);
    for (size_t i = 0; i < reqs.size(); i++) {
        ASSERT_EQ(got[i].status, 200) << got[i].error;
        EXPECT_TRUE(same_answer(got[i].body, alone(*model, reqs[i])))
            << reqs[i].body.dump() << "\n got " << got[i].body.dump() << "\n alone " << alone(*model, reqs[i]).dump();
    }
    server.shutdown();
}

// A long request occupies the only worker; a queue of 2 takes two more and
// answers the other six 503 at once. Every accepted request is answered.
TEST_F(Serve, FullQueueAnswers503AndLosesNothing) {
    ServerOptions so;
    so.port = 0;
    so.engine.workers = 1;
    so.engine.max_batch = 1;
    so.engine.max_queue = 2;
    so.engine.batch_wait_ms = 0;
    // The long request's batch is held at a step until the queue has
    // answered (no sleep races it on a fast CPU).
    Gate gate;
    so.engine.on_step = gate.hook();
    Server server(*model, so);
    const int port = server.start();
    const json slow = {{"text", "Open the file."}, {"sample", true}, {"temperature", 50.0}, {"max_new_tokens", 120},
                       {"seed", 1}};
    std::thread first([&] {
        httplib::Client c("127.0.0.1", port);
        c.set_read_timeout(60, 0);
        EXPECT_EQ(post(c, slow.dump()).status, 200);
    });
    ASSERT_TRUE(gate.wait_held()) << "the long request's batch never started";
    std::atomic<int> ok{0}, busy{0}, other{0};
    std::vector<std::thread> th;
    for (int i = 0; i < 8; i++) {
        th.emplace_back([&] {
            httplib::Client c("127.0.0.1", port);
            c.set_read_timeout(60, 0);
            Result r = post(c, slow.dump());
            if (r.status == 200 && r.body.contains("ids")) ok++;
            else if (r.status == 503 && r.body["error"].get<std::string>().find("queue is full") != std::string::npos) busy++;
            else other++;
        });
    }
    // Two wait in the queue; the other six are refused while the worker is held.
    EXPECT_TRUE(wait_until([&] { return busy.load() + other.load() >= 6; }));
    gate.open();
    for (auto &t : th) t.join();
    first.join();
    EXPECT_EQ(busy.load(), 6);
    EXPECT_EQ(ok.load(), 2);
    EXPECT_EQ(other.load(), 0);
}

// A client sending a request a byte every 100 ms, and one that stops half
// way, do not hold anyone else up; the slow one is answered, the stalled
// one cut off after the read timeout.
TEST_F(Serve, SlowAndStalledClientsDoNotBlockOthers) {
    ServerOptions so;
    so.port = 0;
    so.read_timeout_s = 2;
    Server server(*model, so);
    const int port = server.start();
    std::string slow_answer;
    std::thread slow([&] {
        int fd = connect_to(port);
        ASSERT_GE(fd, 0);
        const std::string req = raw_request("{\"ids\":[5,6]}");
        for (char ch : req) {
            ASSERT_EQ(::send(fd, &ch, 1, MSG_NOSIGNAL), 1);
            std::this_thread::sleep_for(std::chrono::milliseconds(100));
        }
        slow_answer = read_all(fd, 30);
        ::close(fd);
    });
    int stalled = connect_to(port);
    ASSERT_GE(stalled, 0);
    const std::string half = raw_request("{\"ids\":[5,6]}").substr(0, 30);
    ASSERT_EQ(::send(stalled, half.data(), half.size(), MSG_NOSIGNAL), (ssize_t)half.size());
    // Meanwhile: 20 ordinary requests, each answered in well under the slow
    // client's 8 s.
    httplib::Client c("127.0.0.1", port);
    double worst = 0;
    for (int i = 0; i < 20; i++) {
        Result r = post(c, mixed(i).body.dump());
        EXPECT_EQ(r.status, 200);
        worst = std::max(worst, r.seconds);
    }
    EXPECT_LT(worst, 4.0);
    const auto t0 = Clock::now();
    const std::string cut = read_all(stalled, 20);
    const double waited = std::chrono::duration<double>(Clock::now() - t0).count();
    ::close(stalled);
    EXPECT_LT(waited, 8.0) << "the stalled connection was not closed (after " << waited << " s)";
    slow.join();
    EXPECT_NE(slow_answer.find("HTTP/1.1 200"), std::string::npos) << slow_answer;
    EXPECT_NE(slow_answer.find("\"ids\""), std::string::npos) << slow_answer;
}

// Clients that send a long request and vanish cancel it; the server goes on.
TEST_F(Serve, ClientsKilledMidRequestCancelTheirWork) {
    ServerOptions so;
    so.port = 0;
    Server server(*model, so);
    const int port = server.start();
    const json slow = {{"text", "Open the file."}, {"sample", true}, {"temperature", 50.0}, {"max_new_tokens", 120}};
    for (int i = 0; i < 6; i++) {
        int fd = connect_to(port);
        ASSERT_GE(fd, 0);
        const std::string req = raw_request(slow.dump());
        ASSERT_EQ(::send(fd, req.data(), req.size(), MSG_NOSIGNAL), (ssize_t)req.size());
        // Accepted: in flight (its answer comes when it is done).
        double inflight = 0;
        for (int k = 0; k < 200 && inflight < 1; k++) {
            std::this_thread::sleep_for(std::chrono::milliseconds(5));
            inflight = metric(server.metrics(), "halformer_requests_in_flight");
        }
        ASSERT_GE(inflight, 1);
        struct linger l = {1, 0};  // reset, as a killed process's socket is
        setsockopt(fd, SOL_SOCKET, SO_LINGER, &l, sizeof l);
        ::close(fd);
    }
    double cancelled = 0;
    for (int i = 0; i < 100 && cancelled < 6; i++) {
        std::this_thread::sleep_for(std::chrono::milliseconds(50));
        cancelled = metric(server.metrics(), "halformer_cancelled_total");
    }
    EXPECT_EQ(cancelled, 6);
    httplib::Client c("127.0.0.1", port);
    Result r = post(c, "{\"text\": \"Open the file.\"}");
    EXPECT_EQ(r.status, 200);
    EXPECT_EQ(r.body["text"], "Datei öffnen.");
}

// A batch past the model's memory budget fails whole; its requests then
// run alone and are answered as if the budget had been ample.
TEST_F(Serve, ABatchPastTheMemoryBudgetRunsItsRequestsAlone) {
    std::vector<json> ref;
    for (int i = 0; i < 8; i++) ref.push_back(alone(*model, mixed(i)));
    model->release_memory();
    const int64_t keep = model->memory_budget();
    model->set_memory_budget(1 << 20);  // one request fits, a batch of 8 does not
    {
        ServerOptions so;
        so.port = 0;
        so.engine.workers = 1;
        so.engine.batch_wait_ms = 100;
        Server server(*model, so);
        const int port = server.start();
        std::vector<Result> got(8);
        std::vector<std::thread> th;
        for (int i = 0; i < 8; i++) {
            th.emplace_back([&, i] {
                httplib::Client c("127.0.0.1", port);
                c.set_read_timeout(60, 0);
                got[i] = post(c, mixed(i).body.dump());
            });
        }
        for (auto &t : th) t.join();
        for (int i = 0; i < 8; i++) {
            EXPECT_EQ(got[i].status, 200);
            EXPECT_TRUE(same_answer(got[i].body, ref[i])) << got[i].body.dump() << " vs " << ref[i].dump();
        }
        EXPECT_GE(metric(server.metrics(), "halformer_batch_splits_total"), 1);
    }
    model->set_memory_budget(keep);
}

// shutdown() with requests in flight: each of them is answered in full,
// then the port is closed.
TEST_F(Serve, ShutdownAnswersEveryAcceptedRequest) {
    ServerOptions so;
    so.port = 0;
    auto server = std::make_unique<Server>(*model, so);
    const int port = server->start();
    std::atomic<int> answered{0}, refused{0}, broken{0};
    std::vector<std::thread> th;
    for (int i = 0; i < 16; i++) {
        th.emplace_back([&, i] {
            httplib::Client c("127.0.0.1", port);
            c.set_read_timeout(60, 0);
            Result r = post(c, mixed(i + 16).body.dump());  // beam 4
            if (r.status == 200 && r.body.contains("ids")) answered++;
            else if (r.status == 0 || r.status == 503) refused++;
            else broken++;
        });
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(150));
    server->shutdown();
    for (auto &t : th) t.join();
    EXPECT_EQ(broken.load(), 0);
    EXPECT_EQ(answered.load() + refused.load(), 16);
    EXPECT_GE(answered.load(), 1);
    EXPECT_LT(connect_to(port), 0) << "still accepting after shutdown";
}

}  // namespace
