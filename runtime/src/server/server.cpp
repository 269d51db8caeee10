// halformer::Server: cpp-httplib for HTTP, nlohmann-json for JSON, batch
// workers over one Model (server.h).
#include "halformer/server.h"

#include "request.h"

#include <httplib.h>
#include <nlohmann/json.hpp>

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdio>
#include <deque>
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

// One accepted request, from the handler that queued it to the worker that
// answers it.
struct Job {
    serve::Request req;
    Clock::time_point arrived = Clock::now(), started;
    std::mutex mu;
    std::condition_variable cv;
    bool done = false;
    std::string body;
    std::atomic<bool> cancelled{false};
};

// Prometheus text exposition: counters, gauges, one latency histogram.
class Metrics {
public:
    void request(int status) {
        std::lock_guard<std::mutex> lock(mu_);
        by_status_[status]++;
    }
    void finished(double seconds, int in_tokens, int out_tokens) {
        std::lock_guard<std::mutex> lock(mu_);
        for (size_t i = 0; i < kBuckets.size(); i++) {
            if (seconds <= kBuckets[i]) bucket_[i]++;
        }
        count_++;
        sum_ += seconds;
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
    std::string text(size_t queue, int running, bool draining) const {
        std::lock_guard<std::mutex> lock(mu_);
        std::ostringstream o;
        o << "# HELP halformer_requests_total Requests answered, by HTTP status.\n"
             "# TYPE halformer_requests_total counter\n";
        for (auto &[s, n] : by_status_) o << "halformer_requests_total{code=\"" << s << "\"} " << n << "\n";
        o << "# HELP halformer_input_tokens_total Input tokens of answered generation requests.\n"
             "# TYPE halformer_input_tokens_total counter\n"
             "halformer_input_tokens_total "
          << in_tokens_
          << "\n# HELP halformer_generated_tokens_total Tokens generated for answered requests.\n"
             "# TYPE halformer_generated_tokens_total counter\n"
             "halformer_generated_tokens_total "
          << out_tokens_
          << "\n# HELP halformer_cancelled_total Requests whose client went away before the answer.\n"
             "# TYPE halformer_cancelled_total counter\n"
             "halformer_cancelled_total "
          << cancelled_
          << "\n# HELP halformer_batches_total Batches run.\n# TYPE halformer_batches_total counter\n"
             "halformer_batches_total "
          << batches_
          << "\n# HELP halformer_batch_splits_total Batches that failed whole and ran their requests alone.\n"
             "# TYPE halformer_batch_splits_total counter\nhalformer_batch_splits_total "
          << splits_
          << "\n# HELP halformer_batched_requests_total Requests run in those batches.\n"
             "# TYPE halformer_batched_requests_total counter\nhalformer_batched_requests_total "
          << batched_
          << "\n# HELP halformer_queue_depth Requests waiting for a batch.\n# TYPE halformer_queue_depth gauge\n"
             "halformer_queue_depth "
          << queue
          << "\n# HELP halformer_batches_running Batches running now.\n# TYPE halformer_batches_running gauge\n"
             "halformer_batches_running "
          << running << "\n# HELP halformer_draining 1 once shutdown began.\n# TYPE halformer_draining gauge\n"
          << "halformer_draining " << (draining ? 1 : 0)
          << "\n# HELP halformer_request_duration_seconds Generation requests, arrival to answer.\n"
             "# TYPE halformer_request_duration_seconds histogram\n";
        for (size_t i = 0; i < kBuckets.size(); i++) {
            o << "halformer_request_duration_seconds_bucket{le=\"" << kBuckets[i] << "\"} " << bucket_[i] << "\n";
        }
        o << "halformer_request_duration_seconds_bucket{le=\"+Inf\"} " << count_ << "\n"
          << "halformer_request_duration_seconds_sum " << sum_ << "\n"
          << "halformer_request_duration_seconds_count " << count_ << "\n";
        return o.str();
    }

private:
    static constexpr std::array<double, 12> kBuckets = {0.005, 0.01, 0.025, 0.05, 0.1, 0.25,
                                                         0.5,   1,    2.5,   5,    10,  30};
    mutable std::mutex mu_;
    std::map<int, int64_t> by_status_;
    std::array<int64_t, 12> bucket_{};
    int64_t count_ = 0, in_tokens_ = 0, out_tokens_ = 0, batches_ = 0, batched_ = 0, cancelled_ = 0, splits_ = 0;
    double sum_ = 0;
};

}  // namespace

struct Server::Impl {
    Model &model;
    ServerOptions opt;
    serve::Limits limits;
    const Tokenizer *tok = nullptr;
    serve::Encoder encode;
    httplib::Server http;
    std::thread listener;
    std::vector<std::thread> workers;
    int bound_port = 0;
    int listen_fd = -1;
    bool started = false, stopped = false;
    std::mutex stop_mu;

    mutable std::mutex qmu;
    std::condition_variable qcv;
    std::deque<std::shared_ptr<Job>> queue;
    bool stopping = false;           // workers: exit once the queue is empty
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

    void answer(httplib::Response &res, int status, const std::string &body) {
        res.status = status;
        res.set_content(body, "application/json");
        metrics.request(status);
    }

    void complete(Job &job, const std::vector<Hypothesis> &hyps, bool cancelled) {
        json out;
        const Sequence *prompt =
            model.config().architecture == Architecture::Decoder ? &job.req.ids : nullptr;
        int out_tokens = 0;
        if (hyps.empty()) {
            out = {{"error", "no hypothesis"}};
        } else {
            const Hypothesis &h = hyps[0];
            out_tokens = (int)h.tokens.size();
            out["ids"] = h.tokens;
            out["score"] = h.score;
            json alt = json::array();
            for (size_t k = 1; k < hyps.size(); k++) {
                json a = {{"ids", hyps[k].tokens}, {"score", hyps[k].score}};
                if (job.req.is_text) a["text"] = model.text_of(hyps[k].tokens, prompt);
                alt.push_back(a);
            }
            out["alternatives"] = alt;
            if (job.req.is_text) {
                try {
                    out["text"] = model.text_of(h.tokens, prompt);
                } catch (const std::exception &e) {
                    out["error"] = std::string("the output cannot be decoded: ") + e.what();
                }
            }
        }
        const auto now = Clock::now();
        out["input_tokens"] = job.req.ids.size();
        out["output_tokens"] = out_tokens;
        out["queue_ms"] = ms_since(job.arrived, job.started);
        out["total_ms"] = ms_since(job.arrived, now);
        if (cancelled) metrics.cancelled();
        metrics.finished(ms_since(job.arrived, now) / 1000.0, (int)job.req.ids.size(), out_tokens);
        finish(job, to_body(out));
    }

    void finish(Job &job, std::string body) {
        {
            std::lock_guard<std::mutex> lock(job.mu);
            if (job.done) return;
            job.body = std::move(body);
            job.done = true;
        }
        job.cv.notify_all();
    }

    // Takes the oldest waiting request and every other one that can share
    // its batch, up to max_batch. Empty when stopping and nothing waits.
    std::vector<std::shared_ptr<Job>> next_batch() {
        std::unique_lock<std::mutex> lock(qmu);
        qcv.wait(lock, [&] { return stopping || !queue.empty(); });
        if (queue.empty()) return {};
        if (opt.batch_wait_ms > 0 && (int)queue.size() < opt.max_batch && !stopping) {
            // Requests arriving together (a burst) share one batch.
            qcv.wait_for(lock, std::chrono::duration<double, std::milli>(opt.batch_wait_ms),
                         [&] { return stopping || (int)queue.size() >= opt.max_batch; });
            if (queue.empty()) return {};
        }
        const std::string key = serve::batch_key(queue.front()->req.options);
        std::vector<std::shared_ptr<Job>> batch;
        for (auto it = queue.begin(); it != queue.end() && (int)batch.size() < opt.max_batch;) {
            if (serve::batch_key((*it)->req.options) == key) {
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

    void run_batch(std::vector<std::shared_ptr<Job>> &batch) {
        const auto now = Clock::now();
        std::vector<Sequence> src;
        GenerateOptions o = batch[0]->req.options;
        o.max_new_tokens = 1;
        for (auto &j : batch) {
            j->started = now;
            src.push_back(j->req.ids);
            o.seeds.push_back(j->req.seed);
            o.max_new_tokens_each.push_back(j->req.options.max_new_tokens);
            o.max_new_tokens = std::max(o.max_new_tokens, j->req.options.max_new_tokens);
        }
        if (!o.sample) o.seeds.clear();
        o.on_finished = [&](int b, const std::vector<Hypothesis> &h) {
            complete(*batch[b], h, batch[b]->cancelled.load());
        };
        o.cancelled = [&](int b) { return batch[b]->cancelled.load(); };
        try {
            // Jobs cancelled while waiting leave at the first step.
            model.generate(src, o);
        } catch (const std::exception &e) {
            std::vector<std::shared_ptr<Job>> left;
            for (auto &j : batch) {
                std::lock_guard<std::mutex> lock(j->mu);
                if (!j->done) left.push_back(j);
            }
            if (batch.size() > 1 && !left.empty()) {
                // A batch can fail where its requests would not alone (the
                // memory budget): each of those left runs alone.
                metrics.split();
                for (auto &j : left) {
                    std::vector<std::shared_ptr<Job>> one{j};
                    run_batch(one);
                }
                return;
            }
            for (auto &j : left) finish(*j, error_body(std::string("generation failed: ") + e.what()));
        }
    }

    void generate(const httplib::Request &req, httplib::Response &res) {
        if (draining) return answer(res, 503, error_body("the server is shutting down"));
        std::shared_ptr<Job> job = std::make_shared<Job>();
        try {
            job->req = serve::parse_request(req.body, model.config(), encode, limits);
        } catch (const serve::RequestError &e) {
            return answer(res, e.status, error_body(e.what()));
        }
        {
            std::lock_guard<std::mutex> lock(qmu);
            if ((int)queue.size() >= opt.max_queue) {
                return answer(res, 503, error_body("the queue is full (" + std::to_string(opt.max_queue) +
                                                   " requests wait); retry later"));
            }
            queue.push_back(job);
            inflight++;
        }
        qcv.notify_all();
        metrics.request(200);
        res.status = 200;
        // The answer is written when the job is done; meanwhile the
        // connection is watched, and a client that went away cancels it.
        // Counts the request in flight until httplib drops the response
        // (written, or given up): shutdown waits for that.
        struct Inflight {
            Impl *s;
            ~Inflight() { s->answered(); }
        };
        std::shared_ptr<Inflight> guard(new Inflight{this});
        res.set_chunked_content_provider("application/json", [this, job, guard](size_t, httplib::DataSink &sink) {
            std::unique_lock<std::mutex> lock(job->mu);
            if (!job->cv.wait_for(lock, std::chrono::milliseconds(20), [&] { return job->done; })) {
                if (!sink.is_writable()) {
                    lock.unlock();
                    cancel(*job);
                    return false;
                }
                return true;
            }
            const std::string body = job->body;
            lock.unlock();
            sink.write(body.data(), body.size());
            sink.done();  // writes the last chunk: the answer is out
            return true;
        });
    }

    void answered() {
        {
            std::lock_guard<std::mutex> lock(qmu);
            inflight--;
        }
        drained.notify_all();
    }

    void cancel(Job &job) {
        job.cancelled = true;
        // Still waiting: it leaves the queue now.
        std::lock_guard<std::mutex> lock(qmu);
        for (auto it = queue.begin(); it != queue.end(); ++it) {
            if (it->get() == &job) {
                queue.erase(it);
                metrics.cancelled();
                return;
            }
        }
    }

    std::string metrics_text() const {
        size_t depth;
        {
            std::lock_guard<std::mutex> lock(qmu);
            depth = queue.size();
        }
        return metrics.text(depth, running.load(), draining);
    }

    std::string health() const {
        std::lock_guard<std::mutex> lock(qmu);
        const Config &c = model.config();
        return json{{"status", draining ? "draining" : "ok"},
                    {"architecture", architecture_name(c.architecture)},
                    {"text", tok != nullptr},
                    {"max_positions", c.max_positions},
                    {"queue", queue.size()},
                    {"batches_running", running.load()},
                    {"workers", opt.workers}}
            .dump();
    }
};

Server::Server(Model &model, const ServerOptions &options) : impl_(std::make_unique<Impl>(model, options)) {
    const ServerOptions &o = options;
    if (o.workers < 1 || o.max_batch < 1 || o.max_queue < 1 || o.http_threads < 1 || o.max_new_tokens < 1) {
        throw Error("serve: workers, max_batch, max_queue, http_threads and max_new_tokens must be >= 1");
    }
    if (model.device() == Device::CPU && model.max_sessions() < o.workers) model.set_max_sessions(o.workers);
    Impl &s = *impl_;
    auto &http = s.http;
    const int threads = o.http_threads;
    http.new_task_queue = [threads] { return new httplib::ThreadPool(threads); };
    // Remember the listening socket: httplib listens with a backlog of 5,
    // and a burst of clients past it would see resets (start() raises it).
    http.set_socket_options([&s](socket_t sock) {
        int yes = 1;
        setsockopt(sock, SOL_SOCKET, SO_REUSEADDR, &yes, sizeof yes);  // restart on the same port at once
        s.listen_fd = sock;
    });
    http.set_payload_max_length(o.max_body);
    // A client's connection serves many requests: closing it after a few
    // (httplib's default is 5) races with the client's next request.
    // An idle or stalled connection is closed after read_timeout_s (httplib
    // waits for a request's first bytes with the keep-alive timeout).
    http.set_keep_alive_max_count(100000);
    http.set_keep_alive_timeout(o.read_timeout_s);
    http.set_read_timeout(o.read_timeout_s, 0);
    http.set_write_timeout(o.read_timeout_s, 0);
    http.Post("/v1/generate", [&s](const httplib::Request &req, httplib::Response &res) { s.generate(req, res); });
    http.Get("/v1/generate", [&s](const httplib::Request &, httplib::Response &res) {
        s.answer(res, 405, error_body("use POST with a JSON body"));
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
                           : res.status == 404 ? "no such endpoint (POST /v1/generate, GET /health, GET /metrics)"
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
        s.bound_port = s.http.bind_to_any_port(o.host);
        if (s.bound_port < 0) throw Error("serve: cannot bind " + o.host + " to any port");
    } else {
        if (!s.http.bind_to_port(o.host, o.port)) {
            throw Error("serve: cannot bind " + o.host + ":" + std::to_string(o.port) +
                        " (in use, or not an address of this machine)");
        }
        s.bound_port = o.port;
    }
    if (s.listen_fd >= 0) ::listen(s.listen_fd, SOMAXCONN);
    for (int i = 0; i < o.workers; i++) s.workers.emplace_back([&s] { s.work(); });
    s.listener = std::thread([&s] { s.http.listen_after_bind(); });
    s.started = true;
    // Until listen runs, stop() would not stop it.
    for (int i = 0; i < 5000 && !s.http.is_running(); i++) std::this_thread::sleep_for(std::chrono::milliseconds(1));
    return s.bound_port;
}

int Server::port() const { return impl_->bound_port; }

void Server::shutdown() {
    Impl &s = *impl_;
    std::lock_guard<std::mutex> lock(s.stop_mu);
    if (!s.started || s.stopped) return;
    // New requests get 503 from now on; the accepted ones are answered in
    // full (httplib cuts a chunked answer short once stopped, so stop()
    // waits for them); then the port is closed.
    s.draining = true;
    {
        std::unique_lock<std::mutex> q(s.qmu);
        s.drained.wait(q, [&] { return s.inflight == 0; });
    }
    s.http.stop();
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
