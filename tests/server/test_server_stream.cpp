// Streaming (GenerateOptions::on_token, TextStream, server-sent events),
// stop strings, and the OpenAI endpoints (/v1/completions, /v1/models) of
// halformer serve; tests/check_openai.sh drives them with OpenAI's own client.
#include "serve_test_util.h"

using namespace serve_test;

namespace {

// One streamed answer read off a raw socket: its events in order, and
// whether they came in more than one piece of time.
struct Streamed {
    int status = 0;
    std::string head;
    std::vector<json> events;
    bool done_marker = false;  // "data: [DONE]"
    double first_event_s = -1, end_s = -1;
};

std::string dechunk(const std::string &body) {
    std::string out;
    size_t at = 0;
    while (at < body.size()) {
        const size_t eol = body.find("\r\n", at);
        if (eol == std::string::npos) break;
        const size_t n = std::strtoul(body.c_str() + at, nullptr, 16);
        if (n == 0) break;
        out += body.substr(eol + 2, n);
        at = eol + 2 + n + 2;
    }
    return out;
}

Streamed stream_post(int port, const std::string &path, const std::string &body) {
    Streamed s;
    int fd = connect_to(port);
    const std::string req = "POST " + path + " HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nContent-Length: " +
                            std::to_string(body.size()) + "\r\n\r\n" + body;
    ::send(fd, req.data(), req.size(), MSG_NOSIGNAL);
    timeval tv{0, 200000};
    setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
    std::string raw;
    const auto t0 = Clock::now();
    char buf[4096];
    while (std::chrono::duration<double>(Clock::now() - t0).count() < 60) {
        ssize_t n = ::recv(fd, buf, sizeof buf, 0);
        if (n == 0) break;
        if (n < 0) continue;
        raw.append(buf, (size_t)n);
        const double t = std::chrono::duration<double>(Clock::now() - t0).count();
        if (s.first_event_s < 0 && raw.find("data: ") != std::string::npos) s.first_event_s = t;
        if (raw.find("\r\n0\r\n\r\n") != std::string::npos ||
            (raw.find("Content-Length") != std::string::npos && raw.find("\r\n\r\n") != std::string::npos &&
             raw.find("text/event-stream") == std::string::npos)) {
            s.end_s = t;
            break;
        }
    }
    ::close(fd);
    const size_t h = raw.find("\r\n\r\n");
    if (h == std::string::npos) return s;
    s.head = raw.substr(0, h);
    s.status = std::atoi(raw.c_str() + 9);
    const std::string body_text = s.head.find("chunked") != std::string::npos ? dechunk(raw.substr(h + 4)) : raw.substr(h + 4);
    size_t at = 0;
    while ((at = body_text.find("data: ", at)) != std::string::npos) {
        const size_t end = body_text.find("\n\n", at);
        const std::string data = body_text.substr(at + 6, end - at - 6);
        if (data == "[DONE]") s.done_marker = true;
        else s.events.push_back(json::parse(data));
        at = end;
    }
    return s;
}

// The C++ API: on_token sees each token of greedy and sampled outputs as
// the step chooses it, and TextStream's pieces add up to text_of.
TEST_F(Serve, OnTokenAndTextStreamFollowTheHypothesis) {
    for (int i = 0; i < 48; i++) {
        const Mixed m = mixed(i);
        if (m.options.beam > 1) continue;
        Sequence src = model->tokenizer().encode(m.text);
        GenerateOptions o = m.options;
        if (o.max_new_tokens == -1) o.max_new_tokens = 2 * (int)src.size() + 10;
        Sequence seen;
        TextStream text(*model);
        std::string pieces;
        o.on_token = [&](int b, int32_t id) {
            EXPECT_EQ(b, 0);
            seen.push_back(id);
            pieces += text.push(id);
        };
        auto h = model->generate({src}, o)[0];
        pieces += text.finish();
        EXPECT_EQ(seen, h[0].tokens) << m.text;
        EXPECT_EQ(pieces, model->text_of(h[0].tokens)) << m.text;
    }
    // Beam search never calls it.
    GenerateOptions beam;
    beam.beam = 4;
    int calls = 0;
    beam.on_token = [&](int, int32_t) { calls++; };
    model->generate({model->tokenizer().encode("Open the file.")}, beam);
    EXPECT_EQ(calls, 0);
}

// Stop strings: the text ends before the first one, held back from every
// piece; no stop string: the same text as without.
TEST_F(Serve, TextStreamStopsBeforeAStopString) {
    Sequence src = model->tokenizer().encode("Save the document before you close the program.");
    GenerateOptions o;
    o.max_new_tokens = 40;
    auto h = model->generate({src}, o)[0][0];
    const std::string full = model->text_of(h.tokens);
    ASSERT_GT(full.size(), 10u);
    for (const std::string stop : {std::string(" "), full.substr(full.size() / 2, 3), std::string("."), std::string("zzz")}) {
        TextStream t(*model, nullptr, {"zzz", stop});
        std::string pieces;
        for (int32_t id : h.tokens) {
            const std::string p = t.push(id);
            EXPECT_EQ(p.find(stop), std::string::npos) << "'" << p << "' holds '" << stop << "'";
            pieces += p;
            if (t.stopped()) break;
        }
        pieces += t.finish();
        const size_t cut = full.find(stop);
        EXPECT_EQ(pieces, full.substr(0, cut)) << "stop '" << stop << "'";
        EXPECT_EQ(t.stopped(), cut != std::string::npos);
        EXPECT_EQ(t.text(), pieces);
    }
}

// /v1/generate with "stream": one event per token (its id and text piece),
// then the whole answer; the ids and the pieces equal the answer, and the
// answer equals the request alone. Beam: only the final event.
TEST_F(Serve, StreamedAnswersEqualTheRequestAlone) {
    ServerOptions so;
    so.port = 0;
    Server server(*model, so);
    const int port = server.start();
    for (int i : {0, 3, 9, 16, 33, 40, 50}) {
        const Mixed m = mixed(i);
        json body = m.body;
        body["stream"] = true;
        Streamed s = stream_post(port, "/v1/generate", body.dump());
        ASSERT_EQ(s.status, 200) << s.head;
        EXPECT_NE(s.head.find("text/event-stream"), std::string::npos);
        ASSERT_FALSE(s.events.empty());
        const json &last = s.events.back();
        ASSERT_TRUE(last.value("done", false)) << last.dump();
        const json ref = alone(*model, m);
        EXPECT_TRUE(same_answer(last, ref)) << last.dump() << " vs " << ref.dump();
        Sequence ids;
        std::string text;
        for (size_t k = 0; k + 1 < s.events.size(); k++) {
            for (auto &id : s.events[k]["ids"]) ids.push_back(id.get<int32_t>());
            text += s.events[k]["text"].get<std::string>();
        }
        if (m.options.beam > 1) {
            EXPECT_EQ(s.events.size(), 1u);
        } else {
            EXPECT_EQ(json(ids), ref["ids"]);
            EXPECT_EQ(text, ref["text"].get<std::string>());
            // One event per token, maybe the text's held-back rest, the answer.
            EXPECT_GE(s.events.size(), ids.size() + 1);
            EXPECT_LE(s.events.size(), ids.size() + 2);
        }
    }
    // A long sampled answer arrives in pieces: its first event before its end.
    json slow = {{"text", "Open the file."}, {"sample", true}, {"temperature", 50.0}, {"max_new_tokens", 100},
                 {"seed", 7}, {"stream", true}};
    Streamed s = stream_post(port, "/v1/generate", slow.dump());
    ASSERT_EQ(s.status, 200);
    EXPECT_GT(s.events.size(), 50u);
    EXPECT_LT(s.first_event_s, s.end_s) << "the events came all at once";
}

// "stop" on /v1/generate: the text ends before the first stop string, the
// reason is "stop", and generation ended there (fewer tokens than alone).
TEST_F(Serve, StopStringsEndTheOutput) {
    ServerOptions so;
    so.port = 0;
    Server server(*model, so);
    const int port = server.start();
    httplib::Client c("127.0.0.1", port);
    const std::string text = "Delete the selected messages from the server and empty the trash when the download has finished.";
    GenerateOptions o;
    o.max_new_tokens = 60;
    auto h = model->generate({model->tokenizer().encode(text)}, o)[0][0];
    const std::string full = model->text_of(h.tokens);
    const std::string stop = full.substr(full.size() / 2, 4);
    for (bool stream : {false, true}) {
        json body = {{"text", text}, {"stop", {"never-there", stop}}, {"max_new_tokens", 60}, {"stream", stream}};
        json answer;
        if (stream) {
            Streamed s = stream_post(port, "/v1/generate", body.dump());
            ASSERT_EQ(s.status, 200);
            answer = s.events.back();
            std::string pieces;
            for (size_t k = 0; k + 1 < s.events.size(); k++) pieces += s.events[k]["text"].get<std::string>();
            EXPECT_EQ(pieces, answer["text"].get<std::string>());
        } else {
            Result r = post(c, body.dump());
            ASSERT_EQ(r.status, 200) << r.body.dump();
            answer = r.body;
        }
        EXPECT_EQ(answer["text"], full.substr(0, full.find(stop))) << answer.dump();
        EXPECT_EQ(answer["finish_reason"], "stop");
        EXPECT_LT(answer["ids"].size(), h.tokens.size());
    }
    Result beam = post(c, json{{"text", text}, {"stop", "x"}, {"beam", 4}}.dump());
    EXPECT_EQ(beam.status, 400);
}

// OpenAI's /v1/models and /v1/completions: the response shapes, greedy
// choices equal to the request alone, n seeded choices, a list of prompts,
// streaming chunks that add up to the text, and OpenAI's error format.
TEST_F(Serve, OpenAICompletions) {
    ServerOptions so;
    so.port = 0;
    so.model_name = "en-de";
    Server server(*model, so);
    const int port = server.start();
    httplib::Client c("127.0.0.1", port);
    auto models = c.Get("/v1/models");
    ASSERT_TRUE(models);
    EXPECT_EQ(json::parse(models->body)["data"][0]["id"], "en-de");
    EXPECT_EQ(json::parse(c.Get("/v1/models/en-de")->body)["object"], "model");
    EXPECT_EQ(c.Get("/v1/models/gpt-4")->status, 404);

    auto complete = [&](const json &body) {
        auto res = c.Post("/v1/completions", body.dump(), "application/json");
        EXPECT_TRUE(res);
        return std::make_pair(res ? res->status : 0, res ? json::parse(res->body) : json());
    };
    auto [st, r] = complete({{"model", "en-de"}, {"prompt", {kSentences[0], kSentences[3]}}, {"temperature", 0}, {"max_tokens", 40}});
    ASSERT_EQ(st, 200) << r.dump();
    EXPECT_EQ(r["object"], "text_completion");
    ASSERT_EQ(r["choices"].size(), 2u);
    for (int i = 0; i < 2; i++) {
        Mixed m = mixed(i == 0 ? 0 : 3);
        m.options.max_new_tokens = 40;
        EXPECT_EQ(r["choices"][i]["text"], alone(*model, m)["text"]);
        EXPECT_EQ(r["choices"][i]["index"], i);
        EXPECT_EQ(r["choices"][i]["finish_reason"], "stop");
    }
    EXPECT_GT(r["usage"]["completion_tokens"].get<int>(), 0);
    EXPECT_EQ(r["usage"]["total_tokens"], r["usage"]["prompt_tokens"].get<int>() + r["usage"]["completion_tokens"].get<int>());
    // max_tokens cuts: "length".
    auto [st2, cut] = complete({{"model", "en-de"}, {"prompt", kSentences[9]}, {"temperature", 0}, {"max_tokens", 3}});
    EXPECT_EQ(cut["choices"][0]["finish_reason"], "length");
    // n sampled choices with a seed: choice k draws as seed + k alone.
    auto [st3, n3] = complete({{"model", "en-de"}, {"prompt", kSentences[2]}, {"n", 3}, {"seed", 11}, {"max_tokens", 20}});
    ASSERT_EQ(n3["choices"].size(), 3u);
    for (int k = 0; k < 3; k++) {
        Mixed m;
        m.text = kSentences[2];
        m.options.sample = true;
        m.options.seed = 11 + k;
        m.options.max_new_tokens = 20;
        EXPECT_EQ(n3["choices"][k]["text"], alone(*model, m)["text"]) << k;
    }
    // Streaming: chunks add up to the same texts; usage at the end; [DONE].
    json sb = {{"model", "en-de"}, {"prompt", {kSentences[0], kSentences[3]}}, {"temperature", 0}, {"max_tokens", 40},
               {"stream", true}, {"stream_options", {{"include_usage", true}}}};
    Streamed s = stream_post(port, "/v1/completions", sb.dump());
    ASSERT_EQ(s.status, 200);
    EXPECT_TRUE(s.done_marker);
    std::string texts[2];
    int finished = 0;
    for (auto &e : s.events) {
        EXPECT_EQ(e["object"], "text_completion");
        for (auto &ch : e["choices"]) {
            texts[ch["index"].get<int>()] += ch["text"].get<std::string>();
            if (!ch["finish_reason"].is_null()) finished++;
        }
    }
    EXPECT_EQ(finished, 2);
    EXPECT_EQ(texts[0], r["choices"][0]["text"]);
    EXPECT_EQ(texts[1], r["choices"][1]["text"]);
    EXPECT_EQ(s.events.back()["usage"], r["usage"]);
    // OpenAI's errors: {"error": {"message", "type", "param", "code"}}.
    struct Bad {
        json body;
        int status;
        const char *param;
    };
    for (const Bad &b : std::vector<Bad>{
             {{{"prompt", "a"}}, 400, "model"},
             {{{"model", "gpt-4"}, {"prompt", "a"}}, 404, "model"},
             {{{"model", "en-de"}}, 400, "prompt"},
             {{{"model", "en-de"}, {"prompt", "a"}, {"logprobs", 2}}, 400, "logprobs"},
             {{{"model", "en-de"}, {"prompt", "a"}, {"frobnicate", 1}}, 400, "frobnicate"},
             {{{"model", "en-de"}, {"prompt", "a"}, {"temperature", 3}}, 400, ""},
             {{{"model", "en-de"}, {"prompt", "a"}, {"n", 0}}, 400, ""},
             {{{"model", "en-de"}, {"prompt", "a"}, {"stop", {"a", "b", "c", "d", "e"}}}, 400, ""},
         }) {
        auto [status, e] = complete(b.body);
        EXPECT_EQ(status, b.status) << b.body.dump() << " → " << e.dump();
        ASSERT_TRUE(e["error"].is_object()) << e.dump();
        EXPECT_TRUE(e["error"]["message"].is_string());
        EXPECT_EQ(e["error"]["type"], "invalid_request_error");
        if (*b.param) EXPECT_EQ(e["error"]["param"], b.param) << e.dump();
    }
}

}  // namespace

// The decoding controls through both APIs, each equal to Model::generate
// alone with the same options: per-token log-probabilities (greedy, beam,
// sampled) and greedy scores, stop ids, a target prefix (ids), OpenAI's
// logprobs = 0; and the bad values of each get a 400 naming it.
TEST_F(Serve, DecodingControlsInBothAPIs) {
    ServerOptions so;
    so.port = 0;
    Server server(*model, so);
    const int port = server.start();
    httplib::Client c("127.0.0.1", port);
    const std::string text = "Delete the selected messages from the server.";
    const Sequence src = model->tokenizer().encode(text);
    GenerateOptions base;
    base.max_new_tokens = 30;
    const Hypothesis plain = model->generate({src}, base)[0][0];
    ASSERT_GT(plain.tokens.size(), 4u);
    struct Case {
        json body;
        GenerateOptions o;
    };
    std::vector<Case> cases;
    GenerateOptions lp = base;
    lp.return_logprobs = true;
    cases.push_back({{{"ids", src}, {"max_new_tokens", 30}, {"return_logprobs", true}}, lp});
    GenerateOptions beam = lp;
    beam.beam = 3;
    beam.n_best = 2;
    cases.push_back({{{"ids", src}, {"max_new_tokens", 30}, {"return_logprobs", true}, {"beam", 3}, {"n_best", 2}}, beam});
    GenerateOptions sampled = lp;
    sampled.sample = true;
    sampled.seed = 5;
    sampled.temperature = 0.8f;
    cases.push_back({{{"ids", src}, {"max_new_tokens", 30}, {"return_logprobs", true}, {"sample", true}, {"seed", 5},
                      {"temperature", 0.8}},
                     sampled});
    GenerateOptions stop = base;
    stop.stop_ids = {plain.tokens[3]};
    cases.push_back({{{"ids", src}, {"max_new_tokens", 30}, {"stop_ids", {plain.tokens[3]}}}, stop});
    GenerateOptions prefix = lp;
    prefix.target_prefix = {Sequence(plain.tokens.begin(), plain.tokens.begin() + 3)};
    cases.push_back({{{"ids", src},
                      {"max_new_tokens", 30},
                      {"return_logprobs", true},
                      {"target_prefix", Sequence(plain.tokens.begin(), plain.tokens.begin() + 3)}},
                     prefix});
    GenerateOptions penalized = base;
    penalized.repetition_penalty = 1.5f;
    penalized.no_repeat_ngram_size = 2;
    penalized.min_length = 12;
    cases.push_back({{{"ids", src},
                      {"max_new_tokens", 30},
                      {"repetition_penalty", 1.5},
                      {"no_repeat_ngram_size", 2},
                      {"min_length", 12}},
                     penalized});
    for (size_t i = 0; i < cases.size(); i++) {
        SCOPED_TRACE("case " + std::to_string(i) + ": " + cases[i].body.dump());
        Result r = post(c, cases[i].body.dump());
        ASSERT_EQ(r.status, 200) << r.body.dump();
        const auto ref = model->generate({src}, cases[i].o)[0];
        EXPECT_EQ(r.body["ids"], ref[0].tokens);
        EXPECT_NEAR(r.body["score"].get<double>(), ref[0].score, 1e-5 * (1 + std::abs(ref[0].score)));
        if (cases[i].o.return_logprobs) {
            ASSERT_EQ(r.body["log_probs"].size(), ref[0].log_probs.size());
            for (size_t k = 0; k < ref[0].log_probs.size(); k++) {
                EXPECT_NEAR(r.body["log_probs"][k].get<double>(), ref[0].log_probs[k], 1e-5);
            }
            if (ref.size() > 1) EXPECT_EQ(r.body["alternatives"][0]["log_probs"].size(), ref[1].log_probs.size());
        } else {
            EXPECT_FALSE(r.body.contains("log_probs"));
        }
    }
    // The stop id ends the output after its first appearance; the prefix's
    // continuation is the rest of the output without it.
    Result r = post(c, cases[3].body.dump());
    EXPECT_EQ(r.body["ids"].back(), plain.tokens[3]);
    r = post(c, cases[4].body.dump());
    EXPECT_EQ(r.body["ids"][0], plain.tokens[3]);
    // OpenAI: logprobs = 0 gives the chosen tokens' log-probabilities.
    auto res = c.Post("/v1/completions",
                      json{{"model", "halformer"}, {"prompt", text}, {"max_tokens", 30}, {"temperature", 0}, {"logprobs", 0}}
                          .dump(),
                      "application/json");
    ASSERT_TRUE(res);
    ASSERT_EQ(res->status, 200) << res->body;
    const json choice = json::parse(res->body)["choices"][0];
    const json &l = choice["logprobs"];
    ASSERT_EQ(l["token_logprobs"].size(), plain.tokens.size()) << l.dump();
    const auto ref = model->generate({src}, lp)[0][0];
    std::string joined;
    for (size_t k = 0; k < ref.log_probs.size(); k++) {
        EXPECT_NEAR(l["token_logprobs"][k].get<double>(), ref.log_probs[k], 1e-5);
        EXPECT_EQ(l["text_offset"][k].get<size_t>(), joined.size());
        joined += l["tokens"][k].get<std::string>();
    }
    EXPECT_EQ(joined, choice["text"].get<std::string>());
    // Bad values: a 400 naming the field.
    // vLLM's extensions of /v1/completions: repetition_penalty, min_tokens, stop_token_ids.
    res = c.Post("/v1/completions",
                 json{{"model", "halformer"}, {"prompt", text}, {"max_tokens", 30}, {"temperature", 0},
                      {"repetition_penalty", 1.5}, {"min_tokens", 12}}
                     .dump(),
                 "application/json");
    ASSERT_TRUE(res);
    ASSERT_EQ(res->status, 200) << res->body;
    GenerateOptions ext = base;
    ext.repetition_penalty = 1.5f;
    ext.min_length = 12;
    const auto ext_ref = model->generate({src}, ext)[0][0];
    EXPECT_EQ(json::parse(res->body)["choices"][0]["text"], model->text_of(ext_ref.tokens));
    EXPECT_GE(json::parse(res->body)["usage"]["completion_tokens"].get<int>(), 12);
    const std::vector<std::pair<json, std::string>> bad = {
        {{{"ids", src}, {"repetition_penalty", 0}}, "'repetition_penalty' must be positive"},
        {{{"ids", src}, {"no_repeat_ngram_size", -1}}, "no_repeat_ngram_size"},
        {{{"ids", src}, {"min_length", "5"}}, "min_length"},
        {{{"ids", src}, {"stop_ids", {1000000}}}, "'stop_ids'[0] = 1000000 is outside the vocabulary"},
        {{{"ids", src}, {"stop_ids", 5}}, "'stop_ids' must be an array"},
        {{{"ids", src}, {"return_logprobs", "yes"}}, "return_logprobs"},
        {{{"ids", src}, {"target_prefix", {-1}}}, "'target_prefix'[0] = -1 is outside the vocabulary"},
    };
    for (auto &[body, what] : bad) {
        Result b = post(c, body.dump());
        EXPECT_EQ(b.status, 400) << body.dump();
        EXPECT_NE(b.body.dump().find(what), std::string::npos) << b.body.dump();
    }
    for (const json &body : {json{{"model", "halformer"}, {"prompt", text}, {"logprobs", 2}},
                             json{{"model", "halformer"}, {"prompt", text}, {"logprobs", 0}, {"stream", true}}}) {
        auto e = c.Post("/v1/completions", body.dump(), "application/json");
        ASSERT_TRUE(e);
        EXPECT_EQ(e->status, 400) << body.dump();
        EXPECT_NE(e->body.find("\"param\":\"logprobs\""), std::string::npos) << e->body;
    }
}

// One worker, batches started at once: a long request holds the only worker.
static ServerOptions one_worker() {
    ServerOptions so;
    so.port = 0;
    so.engine.workers = 1;
    so.engine.batch_wait_ms = 0;
    return so;
}

// A long request: near-uniform sampling rarely draws eos, so this runs its
// 120 tokens, streamed.
static json slow_stream() {
    return {{"text", "Open the file."}, {"sample", true}, {"temperature", 50.0}, {"max_new_tokens", 120},
            {"seed", 7}, {"stream", true}};
}

// Continuous batching: with one worker busy on a long sampled batch (held
// at a step by a Gate while the next request arrives), a
// request that can share it joins at its next step and is answered while
// the long one still runs (its answer equal to the request alone); without
// joining (ServerOptions::join off) the same request waits in the queue
// for the long batch to end.
TEST_F(Serve, ARequestJoinsARunningBatchAtItsNextStep) {
    for (bool join : {true, false}) {
        SCOPED_TRACE(join ? "joining" : "not joining");
        // The long batch is held at a step while the quick request arrives
        // (no sleep races it: on a fast CPU the long one had ended first).
        Gate gate;
        ServerOptions so = one_worker();
        so.engine.join = join;
        so.engine.on_step = gate.hook();
        Server server(*model, so);
        const int port = server.start();
        Clock::time_point slow_end, quick_end;
        Streamed s;
        std::thread long_one([&] {
            s = stream_post(port, "/v1/generate", slow_stream().dump());
            slow_end = Clock::now();
        });
        ASSERT_TRUE(gate.wait_held()) << "the long request's batch never started";
        Mixed quick;
        quick.text = "The cat sat on the mat.";
        quick.body = {{"text", quick.text}, {"sample", true}, {"temperature", 50.0}, {"max_new_tokens", 5},
                      {"seed", 11}};
        quick.options.sample = true;
        quick.options.temperature = 50.0f;
        quick.options.max_new_tokens = 5;
        quick.options.seed = 11;
        Result r;
        std::thread quick_one([&] {
            httplib::Client cli("127.0.0.1", port);
            cli.set_read_timeout(60, 0);
            r = post(cli, quick.body.dump());
            quick_end = Clock::now();
        });
        wait_for_metric(server, "halformer_queue_depth", 1);
        // Without joining it waits for the long batch, which the gate holds:
        // 30 ms here are 30 ms of its queue time, whatever the CPU.
        if (!join) std::this_thread::sleep_for(std::chrono::milliseconds(30));
        gate.open();
        quick_one.join();
        long_one.join();
        ASSERT_EQ(r.status, 200) << r.error;
        ASSERT_EQ(s.status, 200);
        EXPECT_TRUE(same_answer(r.body, alone(*model, quick))) << r.body.dump();
        const double joined = metric(server.metrics(), "halformer_joined_requests_total");
        if (join) {
            EXPECT_EQ(joined, 1);
            EXPECT_LT(quick_end, slow_end) << "the request waited for the running batch to end";
        } else {
            // It waited in the queue for the long batch (the server's own
            // account: the two clients' clocks race at the end).
            EXPECT_EQ(joined, 0);
            EXPECT_GE(r.body["queue_ms"].get<double>(), 30.0) << r.body.dump();
        }
        server.shutdown();
    }
}

// Without beams, greedy and sampled requests of any settings share a
// batch: while a long sampled batch runs, a greedy request and one
// sampling with other settings join it at its next step, and each answers
// what it answers alone.
TEST_F(Serve, GreedyAndSampledRequestsJoinOneBatch) {
    Gate gate;
    ServerOptions so = one_worker();
    so.engine.on_step = gate.hook();
    Server server(*model, so);
    const int port = server.start();
    std::atomic<bool> slow_done{false};
    Streamed s;
    std::thread long_one([&] {
        s = stream_post(port, "/v1/generate", slow_stream().dump());
        slow_done = true;
    });
    Mixed greedy, other;
    greedy.text = "The cat sat on the mat.";
    greedy.body = {{"text", greedy.text}, {"max_new_tokens", 6}};
    greedy.options.max_new_tokens = 6;
    other.text = "Save the file.";
    other.body = {{"text", other.text}, {"sample", true}, {"temperature", 0.8}, {"top_p", 0.9},
                  {"max_new_tokens", 6}, {"seed", 3}};
    other.options.sample = true;
    other.options.temperature = 0.8f;
    other.options.top_p = 0.9f;
    other.options.max_new_tokens = 6;
    other.options.seed = 3;
    for (const Mixed *m : {&greedy, &other}) {
        // The long batch is held while the request arrives, then runs with
        // it: 6 tokens join well inside its 120 (counted in steps, not time).
        ASSERT_TRUE(gate.wait_held());
        Result r;
        std::thread one([&] {
            httplib::Client cli("127.0.0.1", port);
            cli.set_read_timeout(60, 0);
            r = post(cli, m->body.dump());
        });
        wait_for_metric(server, "halformer_queue_depth", 1);
        gate.open();
        one.join();
        gate.close();
        EXPECT_FALSE(slow_done.load()) << m->body.dump() << " waited for the long batch to end";
        ASSERT_EQ(r.status, 200) << r.error;
        EXPECT_TRUE(same_answer(r.body, alone(*model, *m))) << r.body.dump();
    }
    gate.open();
    long_one.join();
    ASSERT_EQ(s.status, 200);
    EXPECT_EQ(metric(server.metrics(), "halformer_joined_requests_total"), 2);
    EXPECT_EQ(metric(server.metrics(), "halformer_batches_total"), 1);
    server.shutdown();
}

// First come, first served: with the only worker busy on a long sampled
// batch (held at a step by a Gate while the others arrive), a request of
// another kind (beam 2) waits for it. With
// join_fair_ms 0 a later request that could join the long batch does not
// pass it: the long batch drains, the beam request runs next, then the
// later one (nothing joined). With join_fair_ms far above its wait, the
// later request joins and is answered first.
TEST_F(Serve, JoinersDoNotPassAnOlderRequestOfAnotherKind) {
    for (double fair : {0.0, 1e5}) {
        SCOPED_TRACE("join_fair_ms " + std::to_string(fair));
        Gate gate;
        ServerOptions so = one_worker();
        so.engine.join_fair_ms = fair;
        so.engine.on_step = gate.hook();
        Server server(*model, so);
        const int port = server.start();
        Streamed s;
        std::thread long_one([&] { s = stream_post(port, "/v1/generate", slow_stream().dump()); });
        ASSERT_TRUE(gate.wait_held());
        Clock::time_point beam_end, later_end;
        Result beam, later;
        std::thread other_kind([&] {
            httplib::Client c("127.0.0.1", port);
            c.set_read_timeout(60, 0);
            beam = post(c, json{{"text", "Save the file."}, {"beam", 2}, {"max_new_tokens", 5}}.dump());
            beam_end = Clock::now();
        });
        wait_for_metric(server, "halformer_queue_depth", 1);
        std::thread later_one([&] {
            httplib::Client cli("127.0.0.1", port);
            cli.set_read_timeout(60, 0);
            later = post(cli, json{{"text", "The cat sat on the mat."}, {"sample", true}, {"temperature", 50.0},
                                   {"max_new_tokens", 5}, {"seed", 11}}
                                  .dump());
            later_end = Clock::now();
        });
        wait_for_metric(server, "halformer_queue_depth", 2);
        gate.open();
        later_one.join();
        other_kind.join();
        long_one.join();
        ASSERT_EQ(s.status, 200);
        ASSERT_EQ(beam.status, 200) << beam.error;
        ASSERT_EQ(later.status, 200) << later.error;
        if (fair == 0) {
            EXPECT_EQ(metric(server.metrics(), "halformer_joined_requests_total"), 0);
            EXPECT_LT(beam_end, later_end) << "the later request passed the older one of another kind";
        } else {
            EXPECT_EQ(metric(server.metrics(), "halformer_joined_requests_total"), 1);
            EXPECT_LT(later_end, beam_end) << "the later request did not join";
        }
        server.shutdown();
    }
}

// Options out of range are refused, naming the option.
TEST_F(Serve, BadOptionsAreRefused) {
    for (double fair : {-1.0, std::nan(""), HUGE_VAL}) {
        ServerOptions so;
        so.port = 0;
        so.engine.join_fair_ms = fair;
        try {
            Server server(*model, so);
            ADD_FAILURE() << "join_fair_ms " << fair << " was accepted";
        } catch (const Error &e) {
            EXPECT_NE(std::string(e.what()).find("join_fair_ms"), std::string::npos) << e.what();
        }
    }
    ServerOptions so;
    so.engine.workers = 0;
    EXPECT_THROW(Server(*model, so), Error);
}
