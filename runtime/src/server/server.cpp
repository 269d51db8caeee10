// halformer::Server: cpp-httplib for HTTP, nlohmann-json for JSON, batch
// workers over one Model (server.h).
#include "halformer/options.h"
#include "halformer/server.h"

#include "http.h"
#include "request.h"

#include <httplib.h>
#include <nlohmann/json.hpp>

#include <algorithm>
#include <array>
#include <atomic>
#include <chrono>
#include <cmath>
#include <condition_variable>
#include <cstdio>
#include <deque>
#include <map>
#include <mutex>
#include <sstream>
#include <thread>

#include <sys/socket.h>

namespace halformer {

namespace {

using json = nlohmann::json;
using Clock = std::chrono::steady_clock;

double ms_since(Clock::time_point t0, Clock::time_point t1 = Clock::now()) {
    return std::chrono::duration<double, std::milli>(t1 - t0).count();
}

// Any text in an answer (a message, a detokenized output) goes out as valid
// UTF-8: a stray byte becomes U+FFFD instead of a throw from dump().
std::string to_body(const json &j) { return j.dump(-1, ' ', false, json::error_handler_t::replace); }

std::string error_body(const std::string &msg) { return to_body(json{{"error", msg}}); }

// What a handler waits on: one per HTTP request (a completion with several
// choices has one Job per choice, all behind one Waiter).
struct Waiter {
    std::mutex mu;
    std::condition_variable cv;
};

// One accepted generation, from the handler that queued it to the worker
// that runs it. The worker fills the fields under w->mu.
struct Job {
    serve::Request req;
    std::shared_ptr<Waiter> w;
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

// Prometheus text exposition: counters, gauges, latency histograms.
class Histogram {
public:
    void add(double seconds) {
        for (size_t i = 0; i < kBuckets.size(); i++) {
            if (seconds <= kBuckets[i]) bucket_[i]++;
        }
        count_++;
        sum_ += seconds;
    }
    void write(std::ostream &o, const char *name, const char *help) const {
        o << "# HELP " << name << " " << help << "\n# TYPE " << name << " histogram\n";
        for (size_t i = 0; i < kBuckets.size(); i++) {
            o << name << "_bucket{le=\"" << kBuckets[i] << "\"} " << bucket_[i] << "\n";
        }
        o << name << "_bucket{le=\"+Inf\"} " << count_ << "\n"
          << name << "_sum " << sum_ << "\n"
          << name << "_count " << count_ << "\n";
    }

private:
    static constexpr std::array<double, 12> kBuckets = {0.005, 0.01, 0.025, 0.05, 0.1, 0.25,
                                                         0.5,   1,    2.5,   5,    10,  30};
    std::array<int64_t, 12> bucket_{};
    int64_t count_ = 0;
    double sum_ = 0;
};

struct Gauges {
    size_t queue = 0;
    int running = 0, inflight = 0, connections = 0, idle_connections = 0;
    bool draining = false;
};

class Metrics {
public:
    void request(int status) {
        std::lock_guard<std::mutex> lock(mu_);
        by_status_[status]++;
    }
    void finished(double seconds, double first_token_seconds, int in_tokens, int out_tokens) {
        std::lock_guard<std::mutex> lock(mu_);
        duration_.add(seconds);
        if (first_token_seconds >= 0) first_token_.add(first_token_seconds);
        in_tokens_ += in_tokens;
        out_tokens_ += out_tokens;
    }
    void batch(size_t n) {
        std::lock_guard<std::mutex> lock(mu_);
        batches_++;
        batched_ += (int64_t)n;
    }
    void cancelled() {
        std::lock_guard<std::mutex> lock(mu_);
        cancelled_++;
    }
    void split() {
        std::lock_guard<std::mutex> lock(mu_);
        splits_++;
    }
    void joined(size_t n) {
        std::lock_guard<std::mutex> lock(mu_);
        joined_ += (int64_t)n;
        batched_ += (int64_t)n;
    }
    std::string text(const Gauges &g) const {
        std::lock_guard<std::mutex> lock(mu_);
        std::ostringstream o;
        o << "# HELP halformer_requests_total Requests answered, by HTTP status.\n"
             "# TYPE halformer_requests_total counter\n";
        for (auto &[s, n] : by_status_) o << "halformer_requests_total{code=\"" << s << "\"} " << n << "\n";
        auto one = [&o](const char *name, const char *type, const char *help, auto value) {
            o << "# HELP " << name << " " << help << "\n# TYPE " << name << " " << type << "\n"
              << name << " " << value << "\n";
        };
        one("halformer_input_tokens_total", "counter", "Input tokens of answered generations.", in_tokens_);
        one("halformer_generated_tokens_total", "counter", "Tokens generated for answered generations.",
            out_tokens_);
        one("halformer_cancelled_total", "counter", "Generations whose client went away before the answer.",
            cancelled_);
        one("halformer_batches_total", "counter", "Batches run.", batches_);
        one("halformer_batch_splits_total", "counter", "Batches that failed whole and ran their requests alone.",
            splits_);
        one("halformer_batched_requests_total", "counter", "Generations run in those batches.", batched_);
        one("halformer_joined_requests_total", "counter", "Generations that joined a running batch at its next step.",
            joined_);
        one("halformer_queue_depth", "gauge", "Generations waiting for a batch.", g.queue);
        one("halformer_batches_running", "gauge", "Batches running now.", g.running);
        one("halformer_requests_in_flight", "gauge", "Accepted requests not yet answered.", g.inflight);
        one("halformer_connections_open", "gauge", "Open client connections.", g.connections);
        one("halformer_connections_idle", "gauge", "Open connections waiting for a request (no thread held).",
            g.idle_connections);
        one("halformer_draining", "gauge", "1 once shutdown began.", g.draining ? 1 : 0);
        duration_.write(o, "halformer_request_duration_seconds", "Generations, arrival to answer.");
        first_token_.write(o, "halformer_time_to_first_token_seconds",
                           "Greedy and sampled generations, arrival to their first token.");
        return o.str();
    }

private:
    mutable std::mutex mu_;
    std::map<int, int64_t> by_status_;
    Histogram duration_, first_token_;
    int64_t in_tokens_ = 0, out_tokens_ = 0, batches_ = 0, batched_ = 0, cancelled_ = 0, splits_ = 0, joined_ = 0;
};

// OpenAI's error object.
json openai_error_json(int status, const std::string &msg, const std::string &param = "",
                       const std::string &code = "") {
    json e = {{"message", msg},
              {"type", status >= 500 ? "server_error" : "invalid_request_error"},
              {"param", param.empty() ? json(nullptr) : json(param)},
              {"code", code.empty() ? json(nullptr) : json(code)}};
    return json{{"error", e}};
}

std::string openai_error(int status, const std::string &msg, const std::string &param = "",
                         const std::string &code = "") {
    return to_body(openai_error_json(status, msg, param, code));
}

std::string sse(const json &j) { return "data: " + to_body(j) + "\n\n"; }

int64_t unix_now() {
    return std::chrono::duration_cast<std::chrono::seconds>(std::chrono::system_clock::now().time_since_epoch())
        .count();
}

using Jobs = std::vector<std::shared_ptr<Job>>;

// One choice of a completion, in a streamed chunk or the whole answer.
json completion_choice(size_t index, const std::string &text, const json &finish_reason,
                       const json &logprobs = nullptr) {
    return {{"text", text}, {"index", index}, {"logprobs", logprobs}, {"finish_reason", finish_reason}};
}

// The usage of a completion's jobs (n per prompt): a prompt counts once.
json completion_usage(const Jobs &jobs, int n) {
    int64_t in = 0, out = 0;
    for (size_t i = 0; i < jobs.size(); i++) {
        if (i % (size_t)n == 0) in += (int64_t)jobs[i]->req.ids.size();
        if (!jobs[i]->hyps.empty()) out += (int64_t)jobs[i]->hyps[0].tokens.size();
    }
    return json{{"prompt_tokens", in}, {"completion_tokens", out}, {"total_tokens", in + out}};
}

// A chat completion's choice: the assistant's message.
json chat_choice(size_t index, const std::string &text, const json &finish_reason, const json &logprobs = nullptr) {
    return {{"index", index},
            {"message", {{"role", "assistant"}, {"content", text}}},
            {"logprobs", logprobs},
            {"finish_reason", finish_reason}};
}

// A streamed completion (under the waiter's lock): appends a chunk per new
// text piece and one with each choice's finish reason; once every choice is
// done, the usage (when asked) and [DONE], and returns true. finished[i]:
// choice i's last chunk went out. chat: chat.completion.chunk deltas (the
// first of a choice says its role; started[i]: it went out).
bool completion_events(const Jobs &jobs, int n, const json &head, bool include_usage, std::vector<char> &finished,
                       std::string &out, bool chat = false, std::vector<char> *started = nullptr) {
    auto chunk = [&](size_t i, const std::string &text, const json &reason) {
        json e = head;
        if (chat) {
            json delta = json::object();
            if (!(*started)[i]) delta["role"] = "assistant";
            (*started)[i] = 1;
            if (!text.empty()) delta["content"] = text;
            e["choices"] = json::array(
                {json{{"index", i}, {"delta", delta}, {"logprobs", nullptr}, {"finish_reason", reason}}});
        } else {
            e["choices"] = json::array({completion_choice(i, text, reason)});
        }
        out += sse(e);
    };
    bool all = true;
    for (size_t i = 0; i < jobs.size(); i++) {
        Job &j = *jobs[i];
        if (finished[i]) continue;
        for (auto &f : j.fresh) {
            if (!f.second.empty()) chunk(i, f.second, nullptr);
        }
        j.fresh.clear();
        if (!j.done) {
            all = false;
            continue;
        }
        finished[i] = 1;
        if (!j.error.empty()) out += sse(openai_error_json(500, j.error));
        else if (!j.cancelled) chunk(i, j.last_piece, j.finish_reason);
    }
    if (!all) return false;
    if (include_usage) {
        json e = head;
        e["choices"] = json::array();
        e["usage"] = completion_usage(jobs, n);
        out += sse(e);
    }
    out += "data: [DONE]\n\n";
    return true;
}

}  // namespace

struct Server::Impl {
    Model &model;
    ServerOptions opt;
    serve::Limits limits;
    const Tokenizer *tok = nullptr;
    serve::Encoder encode;
    std::unique_ptr<serve::HttpServer> http;
    std::thread listener;
    std::vector<std::thread> workers;
    int bound_port = 0;
    int listen_fd = -1;
    bool started = false, stopped = false;
    std::mutex stop_mu;
    const int64_t created = unix_now();
    std::atomic<uint64_t> next_id{1};

    mutable std::mutex qmu;
    std::condition_variable qcv;
    std::deque<std::shared_ptr<Job>> queue;
    bool stopping = false;  // workers: exit once the queue is empty
    std::atomic<bool> draining{false};
    std::atomic<int> running{0};
    // Accepted requests whose answer is not yet written (shutdown waits for 0).
    int inflight = 0;
    std::condition_variable drained;
    Metrics metrics;

    Impl(Model &m, const ServerOptions &o) : model(m), opt(o) {
        limits.max_input_tokens = o.max_input_tokens;
        limits.max_new_tokens = o.max_new_tokens;
        if (m.has_tokenizer()) {
            tok = &m.tokenizer();
            encode = [t = tok](const std::string &text) { return t->encode(text); };
        }
    }

    const Sequence *prompt_of(const Job &job) const {
        return model.config().architecture == Architecture::Decoder ? &job.req.ids : nullptr;
    }

    void answer(httplib::Response &res, int status, const std::string &body) {
        res.status = status;
        res.set_content(body, "application/json");
        metrics.request(status);
    }

    // ---- the workers ----------------------------------------------------

    void token(Job &job, int32_t id) {
        std::string piece;
        if (job.text_stream) {
            try {
                piece = job.text_stream->push(id);
            } catch (const std::exception &) {
                // Not decodable (an id past the tokenizer's pieces): the
                // answer's text says so at the end.
            }
            if (job.text_stream->stopped()) job.stop_hit = true;
        }
        {
            std::lock_guard<std::mutex> lock(job.w->mu);
            if (job.tokens++ == 0) job.first_token = Clock::now();
            if (job.req.stream) job.fresh.emplace_back(id, std::move(piece));
        }
        job.w->cv.notify_all();
    }

    void complete(Job &job, const std::vector<Hypothesis> &hyps) {
        std::string text, last, error;
        const char *reason = "length";
        if (hyps.empty()) {
            error = "no hypothesis";
        } else {
            const Sequence &t = hyps[0].tokens;
            if (job.stop_hit || (!t.empty() && t.back() == model.config().eos_id)) reason = "stop";
            if (job.text_out) {
                try {
                    if (job.text_stream) {
                        last = job.text_stream->finish();
                        text = job.text_stream->text();
                    } else {
                        text = model.text_of(t, prompt_of(job));
                    }
                } catch (const std::exception &e) {
                    error = std::string("the output cannot be decoded: ") + e.what();
                }
            }
        }
        const auto now = Clock::now();
        const int out_tokens = hyps.empty() ? 0 : (int)hyps[0].tokens.size();
        double first = -1;
        {
            std::lock_guard<std::mutex> lock(job.w->mu);
            if (job.tokens > 0 && job.req.options.beam == 1) first = ms_since(job.arrived, job.first_token) / 1000;
        }
        // Counted before the answer can go out (a client reading /metrics
        // right after its answer sees it).
        if (job.cancelled) metrics.cancelled();
        metrics.finished(ms_since(job.arrived, now) / 1000.0, first, (int)job.req.ids.size(), out_tokens);
        {
            std::lock_guard<std::mutex> lock(job.w->mu);
            job.hyps = hyps;
            job.text = std::move(text);
            job.last_piece = std::move(last);
            job.error = std::move(error);
            job.finish_reason = job.cancelled ? "cancelled" : reason;
            job.done = true;
        }
        job.w->cv.notify_all();
    }

    void fail(Job &job, const std::string &error) {
        {
            std::lock_guard<std::mutex> lock(job.w->mu);
            if (job.done) return;
            job.error = error;
            job.done = true;
        }
        job.w->cv.notify_all();
    }

    // Takes the oldest waiting request and every other one that can share
    // its batch, up to max_batch. Empty when stopping and nothing waits.
    Jobs next_batch() {
        std::unique_lock<std::mutex> lock(qmu);
        qcv.wait(lock, [&] { return stopping || !queue.empty(); });
        if (queue.empty()) return {};
        if (opt.batch_wait_ms > 0 && (int)queue.size() < opt.max_batch && !stopping) {
            // Requests arriving together (a burst) share one batch.
            qcv.wait_for(lock, std::chrono::duration<double, std::milli>(opt.batch_wait_ms),
                         [&] { return stopping || (int)queue.size() >= opt.max_batch; });
            if (queue.empty()) return {};
        }
        const std::string key = batch_key(queue.front()->req.options);
        Jobs batch;
        for (auto it = queue.begin(); it != queue.end() && (int)batch.size() < opt.max_batch;) {
            if (batch_key((*it)->req.options) == key) {
                batch.push_back(*it);
                it = queue.erase(it);
            } else {
                ++it;
            }
        }
        return batch;
    }

    void work() {
        for (;;) {
            auto batch = next_batch();
            if (batch.empty()) {
                std::lock_guard<std::mutex> lock(qmu);
                if (stopping && queue.empty()) return;
                continue;
            }
            running++;
            metrics.batch(batch.size());
            run_batch(batch);
            running--;
        }
    }

    // A job starting in a batch (a retry alone, after a failed batch,
    // starts its text again; beam search has no tokens before the end: its
    // text comes whole).
    void start(Job &j) {
        j.started = Clock::now();
        if (j.text_out && j.req.options.beam == 1 && (j.req.stream || !j.req.stop.empty())) {
            j.text_stream = std::make_unique<TextStream>(model, prompt_of(j), j.req.stop);
        }
    }

    // Continuous batching: each step, the waiting requests that can share
    // the batch (up to `room`) join it, oldest first, but none past an
    // older request of another kind that has waited join_fair_ms while
    // every worker is busy: that one waits for a batch to end, and batches
    // that take their kind at every step may never end. The batch then
    // drains and a worker takes the oldest request next.
    std::vector<JoinInput> join(Jobs &batch, const std::string &key, int room) {
        Jobs took;
        {
            std::lock_guard<std::mutex> lock(qmu);
            const bool worker_free = running.load() < opt.workers;
            const auto now = Clock::now();
            for (auto it = queue.begin(); it != queue.end() && (int)took.size() < room;) {
                if (batch_key((*it)->req.options) == key) {
                    took.push_back(*it);
                    it = queue.erase(it);
                } else if (!worker_free && ms_since((*it)->arrived, now) >= opt.join_fair_ms) {
                    break;
                } else {
                    ++it;
                }
            }
        }
        std::vector<JoinInput> in;
        for (auto &j : took) {
            start(*j);
            batch.push_back(j);
            in.push_back({j->req.ids, j->req.seed, j->req.options.max_new_tokens, j->req.target_prefix, {}});
            if (j->req.options.beam == 1) in.back().sampling = sampling_of(j->req.options);
        }
        if (!took.empty()) metrics.joined(took.size());
        return in;
    }

    void run_batch(Jobs &batch) {
        std::vector<Sequence> src;
        GenerateOptions o = batch[0]->req.options;
        o.max_new_tokens = 1;
        bool sample = false;
        for (auto &j : batch) {
            start(*j);
            src.push_back(j->req.ids);
            o.seeds.push_back(j->req.seed);
            o.max_new_tokens_each.push_back(j->req.options.max_new_tokens);
            o.max_new_tokens = std::max(o.max_new_tokens, j->req.options.max_new_tokens);
            // Without beams each request is greedy or samples with its own settings.
            if (o.beam == 1) o.sampling_each.push_back(sampling_of(j->req.options));
            sample = sample || j->req.options.sample;
        }
        if (!sample) o.seeds.clear();
        // Target prefixes are per request: every input gets one (an empty
        // one: none) once any has one.
        for (auto &j : batch) {
            if (j->req.target_prefix.empty()) continue;
            for (auto &k : batch) o.target_prefix.push_back(k->req.target_prefix);
            break;
        }
        if (opt.join) {
            o.max_batch = opt.max_batch;
            o.join = [this, &batch, key = batch_key(batch[0]->req.options)](int room) { return join(batch, key, room); };
        }
        o.on_step = opt.on_step;
        o.on_finished = [&](int b, const std::vector<Hypothesis> &h) { complete(*batch[b], h); };
        o.on_token = [&](int b, int32_t id) { token(*batch[b], id); };
        o.cancelled = [&](int b) { return batch[b]->cancelled.load() || batch[b]->stop_hit.load(); };
        try {
            // Jobs cancelled while waiting leave at the first step.
            model.generate(src, o);
        } catch (const std::exception &e) {
            Jobs left;
            for (auto &j : batch) {
                std::lock_guard<std::mutex> lock(j->w->mu);
                if (!j->done) left.push_back(j);
            }
            // A batch can fail where its requests would not alone (the
            // memory budget): each of those left runs alone, unless it has
            // streamed tokens already (they cannot be taken back).
            if (batch.size() > 1 && !left.empty()) {
                metrics.split();
                for (auto &j : left) {
                    bool sent;
                    {
                        std::lock_guard<std::mutex> lock(j->w->mu);
                        sent = j->tokens > 0 && j->req.stream;
                        j->tokens = 0;
                        j->fresh.clear();
                    }
                    if (sent) {
                        fail(*j, std::string("generation failed: ") + e.what());
                        continue;
                    }
                    Jobs one{j};
                    run_batch(one);
                }
                return;
            }
            for (auto &j : left) fail(*j, std::string("generation failed: ") + e.what());
        }
    }

    // ---- the handlers ---------------------------------------------------

    // Counts a request in flight until its answer is written (shutdown
    // waits for that).
    struct Inflight {
        Impl *s;
        explicit Inflight(Impl *s_) : s(s_) {}
        ~Inflight() {
            {
                std::lock_guard<std::mutex> lock(s->qmu);
                s->inflight--;
            }
            s->drained.notify_all();
        }
    };

    // Queues the jobs (all or none); "" when queued, else the reason (503).
    std::string enqueue(const Jobs &jobs, std::shared_ptr<Inflight> &guard) {
        if (draining) return "the server is shutting down";
        {
            std::lock_guard<std::mutex> lock(qmu);
            if (queue.size() + jobs.size() > (size_t)opt.max_queue) {
                return "the queue is full (" + std::to_string(opt.max_queue) + " requests wait); retry later";
            }
            for (auto &j : jobs) queue.push_back(j);
            inflight++;
        }
        guard = std::make_shared<Inflight>(this);
        qcv.notify_all();
        return "";
    }

    Jobs make_jobs(std::vector<serve::Request> reqs, bool text_out) {
        auto w = std::make_shared<Waiter>();
        Jobs jobs;
        for (auto &r : reqs) {
            auto j = std::make_shared<Job>();
            j->req = std::move(r);
            j->w = w;
            j->text_out = text_out && tok != nullptr;
            jobs.push_back(j);
        }
        return jobs;
    }

    void cancel(const Jobs &jobs) {
        for (auto &j : jobs) j->cancelled = true;
        // Still waiting: they leave the queue now.
        std::lock_guard<std::mutex> lock(qmu);
        for (auto &j : jobs) {
            auto it = std::find(queue.begin(), queue.end(), j);
            if (it != queue.end()) {
                queue.erase(it);
                metrics.cancelled();
                std::lock_guard<std::mutex> jl(j->w->mu);
                j->done = true;
            }
        }
    }

    // Waits until every job is done (true), or the client went away (false:
    // the jobs are cancelled).
    bool wait_all(const Jobs &jobs) {
        Waiter &w = *jobs[0]->w;
        for (;;) {
            {
                std::unique_lock<std::mutex> lock(w.mu);
                auto all = [&] {
                    return std::all_of(jobs.begin(), jobs.end(), [](auto &j) { return j->done; });
                };
                if (w.cv.wait_for(lock, std::chrono::milliseconds(20), all)) return true;
            }
            if (serve::HttpServer::client_gone()) {
                cancel(jobs);
                return false;
            }
        }
    }

    // Streams events: each call of `next` (under the waiter's lock) appends
    // what is new to its string and says whether the answer is complete.
    using Next = std::function<bool(std::string &)>;
    void stream(const httplib::Request &req, httplib::Response &res, Jobs jobs,
                std::shared_ptr<Inflight> guard, Next next) {
        res.status = 200;
        metrics.request(200);
        res.set_header("Cache-Control", "no-cache");
        auto provider = [this, jobs, guard, next](size_t, httplib::DataSink &sink) {
            std::string out;
            bool complete;
            {
                Waiter &w = *jobs[0]->w;
                std::unique_lock<std::mutex> lock(w.mu);
                w.cv.wait_for(lock, std::chrono::milliseconds(20));
                complete = next(out);
            }
            if (!out.empty() && !sink.write(out.data(), out.size())) {
                cancel(jobs);
                return false;
            }
            if (complete) {
                sink.done();
                return true;
            }
            if (out.empty() && !sink.is_writable()) {
                cancel(jobs);
                return false;
            }
            return true;
        };
        // HTTP/1.0 has no chunks: the answer runs until the server closes.
        if (req.version == "HTTP/1.0") {
            res.set_content_provider("text/event-stream", provider);
        } else {
            res.set_chunked_content_provider("text/event-stream", provider);
        }
    }

    // OpenAI's logprobs of a completion: each token's text (what it adds to
    // the text before it; eos adds none), log-probability and byte offset,
    // for the tokens of the answer's text (a stop string's cut drops the
    // later ones).
    json token_logprobs(const Job &job) const {
        json tokens = json::array(), lps = json::array(), offsets = json::array();
        const Hypothesis &h = job.hyps[0];
        const Sequence *prompt = prompt_of(job);
        std::string before;
        for (size_t i = 0; i < h.tokens.size() && i < h.log_probs.size(); i++) {
            if (!job.req.stop.empty() && i > 0 && before.size() >= job.text.size()) break;  // past a stop string
            const std::string now = model.text_of(Sequence(h.tokens.begin(), h.tokens.begin() + (ptrdiff_t)i + 1), prompt);
            const bool grows = now.compare(0, before.size(), before) == 0;
            tokens.push_back(grows ? now.substr(before.size()) : model.text_of({h.tokens[i]}, prompt));
            lps.push_back(h.log_probs[i]);
            offsets.push_back(std::min(before.size(), job.text.size()));
            before = now;
        }
        return {{"tokens", tokens}, {"token_logprobs", lps}, {"top_logprobs", nullptr}, {"text_offset", offsets}};
    }

    json generate_answer(const Job &job) const {
        json out;
        const Hypothesis &h = job.hyps[0];
        const bool logprobs = job.req.options.return_logprobs;
        out["ids"] = h.tokens;
        out["score"] = h.score;
        if (logprobs) out["log_probs"] = h.log_probs;
        json alt = json::array();
        for (size_t k = 1; k < job.hyps.size(); k++) {
            json a = {{"ids", job.hyps[k].tokens}, {"score", job.hyps[k].score}};
            if (logprobs) a["log_probs"] = job.hyps[k].log_probs;
            if (job.req.is_text) a["text"] = model.text_of(job.hyps[k].tokens, prompt_of(job));
            alt.push_back(a);
        }
        out["alternatives"] = alt;
        if (job.req.is_text) out["text"] = job.text;
        out["finish_reason"] = job.finish_reason;
        out["input_tokens"] = job.req.ids.size();
        out["output_tokens"] = h.tokens.size();
        out["queue_ms"] = ms_since(job.arrived, job.started);
        if (job.tokens > 0 && job.req.options.beam == 1) out["first_token_ms"] = ms_since(job.arrived, job.first_token);
        out["total_ms"] = ms_since(job.arrived, Clock::now());
        return out;
    }

    // POST /v1/generate
    void generate(const httplib::Request &req, httplib::Response &res) {
        if (draining) return answer(res, 503, error_body("the server is shutting down"));
        serve::Request r;
        try {
            r = serve::parse_request(req.body, model.config(), encode, limits);
        } catch (const serve::RequestError &e) {
            return answer(res, e.status, error_body(e.what()));
        }
        const bool is_text = r.is_text;
        auto jobs = make_jobs({std::move(r)}, is_text);
        std::shared_ptr<Inflight> guard;
        const std::string busy = enqueue(jobs, guard);
        if (!busy.empty()) return answer(res, 503, error_body(busy));
        Job &job = *jobs[0];
        if (job.req.stream) {
            stream(req, res, jobs, guard, [this, &job](std::string &out) {
                for (auto &[id, piece] : job.fresh) {
                    json e = {{"ids", {id}}};
                    if (job.req.is_text) e["text"] = piece;
                    out += sse(e);
                }
                job.fresh.clear();
                if (!job.done) return false;
                if (!job.error.empty()) {
                    out += sse(json{{"error", job.error}, {"done", true}});
                } else if (!job.cancelled) {
                    if (!job.last_piece.empty()) out += sse(json{{"ids", json::array()}, {"text", job.last_piece}});
                    json a = generate_answer(job);
                    a["done"] = true;
                    out += sse(a);
                }
                return true;
            });
            return;
        }
        if (!wait_all(jobs)) return;  // the client is gone: no one to answer
        if (!job.error.empty()) return answer(res, 500, error_body(job.error));
        answer(res, 200, to_body(generate_answer(job)));
    }

    // POST /v1/completions and /v1/chat/completions (OpenAI): the body
    // parsed by `parse`, then the choices as jobs, answered whole or
    // streamed; chat: the answer's chat shape (messages, deltas).
    template <typename Parse>
    void openai_completion(const httplib::Request &req, httplib::Response &res, bool chat, Parse &&parse) {
        auto fail_with = [&](int status, const std::string &msg, const std::string &param = "",
                             const std::string &code = "") {
            res.status = status;
            res.set_content(openai_error(status, msg, param, code), "application/json");
            metrics.request(status);
        };
        if (draining) return fail_with(503, "the server is shutting down");
        serve::Completion c;
        try {
            c = parse();
        } catch (const serve::RequestError &e) {
            return fail_with(e.status, e.what(), e.param, e.code);
        }
        auto jobs = make_jobs(std::move(c.choices), true);
        std::shared_ptr<Inflight> guard;
        const std::string busy = enqueue(jobs, guard);
        if (!busy.empty()) return fail_with(503, busy);
        const std::string id = (chat ? "chatcmpl-" : "cmpl-") + std::to_string(created) + "-" + std::to_string(next_id++);
        json head = {{"id", id},
                     {"object", chat ? "chat.completion.chunk" : "text_completion"},
                     {"created", unix_now()},
                     {"model", opt.model_name}};
        if (c.stream) {
            auto finished = std::make_shared<std::vector<char>>(jobs.size(), 0);
            auto started = std::make_shared<std::vector<char>>(jobs.size(), 0);
            stream(req, res, jobs, guard,
                   [jobs, n = c.n, head, finished, started, chat, include = c.include_usage](std::string &out) {
                       return completion_events(jobs, n, head, include, *finished, out, chat, started.get());
                   });
            return;
        }
        if (!wait_all(jobs)) return;
        for (auto &j : jobs) {
            if (!j->error.empty()) return fail_with(500, j->error);
        }
        json out = head;
        if (chat) out["object"] = "chat.completion";
        out["choices"] = json::array();
        for (size_t i = 0; i < jobs.size(); i++) {
            const json logprobs = c.logprobs ? token_logprobs(*jobs[i]) : json(nullptr);
            out["choices"].push_back(chat ? chat_choice(i, jobs[i]->text, jobs[i]->finish_reason, logprobs)
                                          : completion_choice(i, jobs[i]->text, jobs[i]->finish_reason, logprobs));
        }
        out["usage"] = completion_usage(jobs, c.n);
        answer(res, 200, to_body(out));
    }

    void completions(const httplib::Request &req, httplib::Response &res) {
        openai_completion(req, res, false,
                          [&] { return serve::parse_completion(req.body, model.config(), encode, limits, opt.model_name); });
    }

    // The conversation through the model's chat template, then as a completion.
    void chat_completions(const httplib::Request &req, httplib::Response &res) {
        serve::ChatRenderer render;
        if (model.has_chat_template()) {
            render = [this](const std::vector<ChatMessage> &m) { return model.chat_prompt(m, true); };
        }
        openai_completion(req, res, true, [&] {
            return serve::parse_chat_completion(req.body, model.config(), encode, limits, opt.model_name, render);
        });
    }

    json model_object() const {
        return {{"id", opt.model_name}, {"object", "model"}, {"created", created}, {"owned_by", "halformer"}};
    }

    Gauges gauges() const {
        Gauges g;
        {
            std::lock_guard<std::mutex> lock(qmu);
            g.queue = queue.size();
            g.inflight = inflight;
        }
        g.running = running.load();
        g.draining = draining;
        g.connections = http->open_connections();
        g.idle_connections = http->idle_connections();
        return g;
    }

    std::string metrics_text() const { return metrics.text(gauges()); }

    std::string health() const {
        const Gauges g = gauges();
        const Config &c = model.config();
        return json{{"status", draining ? "draining" : "ok"},
                    {"architecture", architecture_name(c.architecture)},
                    {"model", opt.model_name},
                    {"text", tok != nullptr},
                    {"max_positions", c.max_positions},
                    {"queue", g.queue},
                    {"batches_running", g.running},
                    {"connections", g.connections},
                    {"workers", opt.workers}}
            .dump();
    }
};

Server::Server(Model &model, const ServerOptions &options) : impl_(std::make_unique<Impl>(model, options)) {
    const ServerOptions &o = options;
    if (o.workers < 1 || o.max_batch < 1 || o.max_queue < 1 || o.http_threads < 1 || o.max_new_tokens < 1 ||
        o.max_connections < 1 || o.read_timeout_s < 1) {
        throw Error("serve: workers, max_batch, max_queue, http_threads, max_connections, read_timeout_s and "
                    "max_new_tokens must be >= 1");
    }
    if (o.model_name.empty()) throw Error("serve: the model name must not be empty");
    if (!(o.join_fair_ms >= 0 && std::isfinite(o.join_fair_ms))) {
        throw Error("serve: join_fair_ms must be a finite number >= 0");
    }
    if (model.device() == Device::CPU && model.max_sessions() < o.workers) model.set_max_sessions(o.workers);
    Impl &s = *impl_;
    serve::HttpLimits hl;
    hl.threads = o.http_threads;
    hl.max_connections = o.max_connections;
    hl.idle_timeout_s = o.read_timeout_s;
    hl.read_timeout_s = o.read_timeout_s;
    hl.write_timeout_s = o.read_timeout_s;
    s.http = std::make_unique<serve::HttpServer>(hl);
    auto &http = *s.http;
    // Remember the listening socket: httplib listens with a backlog of 5,
    // and a burst of clients past it would see resets (start() raises it).
    http.set_socket_options([&s](socket_t sock) {
        int yes = 1;
        setsockopt(sock, SOL_SOCKET, SO_REUSEADDR, &yes, sizeof yes);  // restart on the same port at once
        s.listen_fd = sock;
    });
    http.set_payload_max_length(o.max_body);
    http.Post("/v1/generate", [&s](const httplib::Request &req, httplib::Response &res) { s.generate(req, res); });
    http.Post("/v1/completions",
              [&s](const httplib::Request &req, httplib::Response &res) { s.completions(req, res); });
    http.Post("/v1/chat/completions",
              [&s](const httplib::Request &req, httplib::Response &res) { s.chat_completions(req, res); });
    for (const char *path : {"/v1/generate", "/v1/completions", "/v1/chat/completions"}) {
        http.Get(path, [&s](const httplib::Request &, httplib::Response &res) {
            s.answer(res, 405, error_body("use POST with a JSON body"));
        });
    }
    http.Get("/v1/models", [&s](const httplib::Request &, httplib::Response &res) {
        s.answer(res, 200, to_body(json{{"object", "list"}, {"data", json::array({s.model_object()})}}));
    });
    http.Get("/v1/models/(.+)", [&s](const httplib::Request &req, httplib::Response &res) {
        if (req.matches[1] == s.opt.model_name) return s.answer(res, 200, to_body(s.model_object()));
        res.status = 404;
        res.set_content(openai_error(404, "the model '" + std::string(req.matches[1]) + "' does not exist", "model",
                                     "model_not_found"),
                        "application/json");
        s.metrics.request(404);
    });
    http.Get("/health", [&s](const httplib::Request &, httplib::Response &res) {
        res.set_content(s.health(), "application/json");
    });
    http.Get("/metrics", [&s](const httplib::Request &, httplib::Response &res) {
        res.set_content(s.metrics_text(), "text/plain; version=0.0.4");
    });
    http.set_error_handler([&s](const httplib::Request &, httplib::Response &res) {
        if (!res.body.empty()) return;
        const char *what = res.status == 413 ? "the request body is too large"
                           : res.status == 404 ? "no such endpoint (POST /v1/generate, POST /v1/completions, POST /v1/chat/completions, "
                                                 "GET /v1/models, GET /health, GET /metrics)"
                                               : "bad request";
        res.set_content(error_body(what), "application/json");
        s.metrics.request(res.status);
    });
    http.set_exception_handler([&s](const httplib::Request &, httplib::Response &res, std::exception_ptr ep) {
        std::string what = "internal error";
        try {
            std::rethrow_exception(ep);
        } catch (const std::exception &e) {
            what = e.what();
        } catch (...) {
        }
        s.answer(res, 500, error_body(what));
    });
    if (o.log) {
        http.set_logger([](const httplib::Request &req, const httplib::Response &res) {
            std::fprintf(stderr, "serve: %s %s %d (%zu bytes in)\n", req.method.c_str(), req.path.c_str(), res.status,
                         req.body.size());
        });
    }
}

Server::~Server() { shutdown(); }

int Server::start() {
    Impl &s = *impl_;
    if (s.started) return s.bound_port;
    const ServerOptions &o = s.opt;
    if (o.port == 0) {
        s.bound_port = s.http->bind_to_any_port(o.host);
        if (s.bound_port < 0) throw Error("serve: cannot bind " + o.host + " to any port");
    } else {
        if (!s.http->bind_to_port(o.host, o.port)) {
            throw Error("serve: cannot bind " + o.host + ":" + std::to_string(o.port) +
                        " (in use, or not an address of this machine)");
        }
        s.bound_port = o.port;
    }
    if (s.listen_fd >= 0) ::listen(s.listen_fd, SOMAXCONN);
    for (int i = 0; i < o.workers; i++) s.workers.emplace_back([&s] { s.work(); });
    s.listener = std::thread([&s] { s.http->listen_after_bind(); });
    s.started = true;
    // Until listen runs, stop() would not stop it.
    for (int i = 0; i < 5000 && !s.http->is_running(); i++) std::this_thread::sleep_for(std::chrono::milliseconds(1));
    return s.bound_port;
}

int Server::port() const { return impl_->bound_port; }

void Server::shutdown() {
    Impl &s = *impl_;
    std::lock_guard<std::mutex> lock(s.stop_mu);
    if (!s.started || s.stopped) return;
    // New requests get 503 from now on and idle connections close at once;
    // the accepted ones are answered in full (httplib cuts a streamed answer
    // short once stopped, so stop() waits for them); then the port is closed.
    s.draining = true;
    s.http->drain();
    {
        std::unique_lock<std::mutex> q(s.qmu);
        s.drained.wait(q, [&] { return s.inflight == 0; });
    }
    s.http->close_all();
    s.http->stop();
    if (s.listener.joinable()) s.listener.join();
    {
        std::lock_guard<std::mutex> q(s.qmu);
        s.stopping = true;
    }
    s.qcv.notify_all();
    for (auto &w : s.workers) w.join();
    s.stopped = true;
}

std::string Server::metrics() const { return impl_->metrics_text(); }

}  // namespace halformer
