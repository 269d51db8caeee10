// Internal: what the files of `halformer serve` share. A Job is one accepted
// generation, from the handler that queued it to the engine's worker that
// answers it; Server::Impl is the server: HTTP over one Engine (engine.h:
// the queue, the batches, joins and retries), each Job an EngineRequest
// whose callbacks fill it (jobs.cpp), the HTTP handlers (routes.cpp), its
// construction and the public functions (server.cpp). The OpenAI API's
// answers are in openai.h, the /metrics counters in metrics.h.
#pragma once

#include "halformer/engine.h"
#include "halformer/options.h"
#include "halformer/server.h"

#include "http.h"
#include "metrics.h"
#include "request.h"

#include <httplib.h>
#include <nlohmann/json.hpp>

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <deque>
#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <utility>
#include <vector>

namespace halformer {

namespace serving {

using json = nlohmann::json;
using Clock = std::chrono::steady_clock;

double ms_since(Clock::time_point t0, Clock::time_point t1 = Clock::now());
int64_t unix_now();
std::string to_body(const json &j);
std::string error_body(const std::string &msg);

// What a handler waits on: one per HTTP request (a completion with several
// choices has one Job per choice, all behind one Waiter).
struct Waiter {
    std::mutex mu;
    std::condition_variable cv;
};

// One accepted generation, from the handler that queued it to the engine's
// worker that runs it. The worker fills the fields under w->mu.
struct Job {
    serve::Request req;
    std::shared_ptr<Waiter> w;
    Engine::Id id = 0;
    bool text_out = false;  // the answer has text (the model has a tokenizer and the API wants it)
    Clock::time_point arrived = Clock::now(), started, first_token;
    std::unique_ptr<TextStream> text_stream;  // worker side: text pieces (streaming, stop strings)
    std::atomic<bool> cancelled{false};  // the client went away
    std::atomic<bool> stop_hit{false};   // a stop string appeared: leave at the next step
    // Under w->mu:
    std::vector<std::pair<int32_t, std::string>> fresh;  // new tokens and their text, not yet sent
    std::string last_piece;                              // the text's rest, at the end
    int tokens = 0;
    bool done = false;
    std::vector<Hypothesis> hyps;
    std::string text, error;
    const char *finish_reason = "length";
};

using Jobs = std::vector<std::shared_ptr<Job>>;

}  // namespace serving

// The server's files see these as server.cpp saw them in its anonymous
// namespace.
using namespace serving;

struct Server::Impl {
    Model &model;
    ServerOptions opt;
    serve::Limits limits;
    const Tokenizer *tok = nullptr;
    serve::Encoder encode;
    std::unique_ptr<serve::HttpServer> http;
    std::unique_ptr<Engine> engine;
    std::thread listener;
    int bound_port = 0;
    int listen_fd = -1;
    bool started = false, stopped = false;
    std::mutex stop_mu;
    const int64_t created = unix_now();
    std::atomic<uint64_t> next_id{1};

    std::atomic<bool> draining{false};
    // Accepted requests whose answer is not yet written (shutdown waits for 0).
    mutable std::mutex imu;
    int inflight = 0;
    std::condition_variable drained;
    Metrics metrics;

    // server.cpp
    Impl(Model &m, const ServerOptions &o);

    const Sequence *prompt_of(const Job &job) const;
    void answer(httplib::Response &res, int status, const std::string &body);
    httplib::Server::HandlerResponse authorize(const httplib::Request &req, httplib::Response &res);

    // ---- a Job as the engine's request -----------------------------------
    // jobs.cpp (the callbacks run on the engine's workers)
    EngineRequest engine_request(const std::shared_ptr<Job> &job);
    void start(Job &j);
    void token(Job &job, int32_t id);
    bool restart(Job &job);
    void done(Job &job, const EngineResult &r);
    void complete(Job &job, const std::vector<Hypothesis> &hyps);
    void fail(Job &job, const std::string &error);

    // ---- the handlers ---------------------------------------------------
    // routes.cpp

    // Counts a request in flight until its answer is written (shutdown
    // waits for that).
    struct Inflight {
        Impl *s;
        explicit Inflight(Impl *s_) : s(s_) {}
        ~Inflight();
    };

    std::string enqueue(const Jobs &jobs, std::shared_ptr<Inflight> &guard);
    Jobs make_jobs(std::vector<serve::Request> reqs, bool text_out);
    void cancel(const Jobs &jobs);
    bool wait_all(const Jobs &jobs);
    using Next = std::function<bool(std::string &)>;
    void stream(const httplib::Request &req, httplib::Response &res, Jobs jobs,
                std::shared_ptr<Inflight> guard, Next next);
    json token_logprobs(const Job &job) const;
    json generate_answer(const Job &job) const;
    void generate(const httplib::Request &req, httplib::Response &res);
    template <typename Parse>
    void openai_completion(const httplib::Request &req, httplib::Response &res, bool chat, Parse &&parse);
    void completions(const httplib::Request &req, httplib::Response &res);
    void chat_completions(const httplib::Request &req, httplib::Response &res);
    json model_object() const;
    Gauges gauges() const;
    std::string metrics_text() const;
    std::string health() const;
};

}  // namespace halformer
