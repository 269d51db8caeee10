// Server::Impl's HTTP handlers (server_impl.h): POST /v1/generate, the
// OpenAI API's POST /v1/completions and /v1/chat/completions, and what
// GET /v1/models, /health and /metrics answer; a handler adds its jobs to
// the engine (jobs.cpp), then answers whole or streams.
#include "openai.h"
#include "server_impl.h"

#include <algorithm>
#include <chrono>
#include <cstddef>
#include <memory>
#include <mutex>
#include <string>
#include <utility>
#include <vector>

namespace halformer {

Server::Impl::Inflight::~Inflight() {
    {
        std::lock_guard<std::mutex> lock(s->imu);
        s->inflight--;
    }
    s->drained.notify_all();
}

// Adds the jobs to the engine (all or none); "" when queued, else the
// reason (503).
std::string Server::Impl::enqueue(const Jobs &jobs, std::shared_ptr<Inflight> &guard) {
    if (draining) return "the server is shutting down";
    std::vector<EngineRequest> reqs;
    for (auto &j : jobs) reqs.push_back(engine_request(j));
    // (Counted first: an answer can be done before add() returns.)
    {
        std::lock_guard<std::mutex> lock(imu);
        inflight++;
    }
    guard = std::make_shared<Inflight>(this);
    try {
        const std::vector<Engine::Id> ids = engine->add(std::move(reqs));
        for (size_t i = 0; i < jobs.size(); i++) jobs[i]->id = ids[i];
    } catch (const EngineBusy &e) {
        guard.reset();
        return e.what();
    }
    return "";
}

Jobs Server::Impl::make_jobs(std::vector<serve::Request> reqs, bool text_out) {
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

// The client went away: waiting jobs leave the queue now, running ones
// their batch at its next step.
void Server::Impl::cancel(const Jobs &jobs) {
    for (auto &j : jobs) j->cancelled = true;
    for (auto &j : jobs) engine->abort(j->id);
}

// Waits until every job is done (true), or the client went away (false:
// the jobs are cancelled).
bool Server::Impl::wait_all(const Jobs &jobs) {
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
void Server::Impl::stream(const httplib::Request &req, httplib::Response &res, Jobs jobs,
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
json Server::Impl::token_logprobs(const Job &job) const {
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

json Server::Impl::generate_answer(const Job &job) const {
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
void Server::Impl::generate(const httplib::Request &req, httplib::Response &res) {
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
void Server::Impl::openai_completion(const httplib::Request &req, httplib::Response &res, bool chat,
                                     Parse &&parse) {
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
        auto split = std::make_shared<std::vector<serve::ReplySplitter>>(jobs.size(), serve::ReplySplitter(c.reply));
        stream(req, res, jobs, guard,
               [jobs, n = c.n, head, finished, started, split, chat, include = c.include_usage](std::string &out) {
                   return completion_events(jobs, n, head, include, *finished, out, chat, started.get(),
                                            split.get());
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
        out["choices"].push_back(chat ? chat_choice(i, jobs[i]->text, jobs[i]->finish_reason, logprobs, c.reply)
                                      : completion_choice(i, jobs[i]->text, jobs[i]->finish_reason, logprobs));
    }
    out["usage"] = completion_usage(jobs, c.n);
    answer(res, 200, to_body(out));
}

void Server::Impl::completions(const httplib::Request &req, httplib::Response &res) {
    openai_completion(req, res, false,
                      [&] { return serve::parse_completion(req.body, model.config(), encode, limits, opt.model_name); });
}

// The conversation through the model's chat template, then as a completion.
void Server::Impl::chat_completions(const httplib::Request &req, httplib::Response &res) {
    serve::ChatRenderer render;
    if (model.has_chat_template()) {
        render = [this](const std::string &conversation) { return model.chat_prompt_json(conversation, true); };
    }
    openai_completion(req, res, true, [&] {
        return serve::parse_chat_completion(req.body, model.config(), encode, limits, opt.model_name, render,
                                            model.chat_template_source());
    });
}

json Server::Impl::model_object() const {
    return {{"id", opt.model_name}, {"object", "model"}, {"created", created}, {"owned_by", "halformer"}};
}

Gauges Server::Impl::gauges() const {
    Gauges g;
    {
        std::lock_guard<std::mutex> lock(imu);
        g.inflight = inflight;
    }
    g.engine = engine->stats();
    g.draining = draining;
    g.connections = http->open_connections();
    g.idle_connections = http->idle_connections();
    return g;
}

std::string Server::Impl::metrics_text() const { return metrics.text(gauges()); }

std::string Server::Impl::health() const {
    const Gauges g = gauges();
    const Config &c = model.config();
    return json{{"status", draining ? "draining" : "ok"},
                {"architecture", architecture_name(c.architecture)},
                {"model", opt.model_name},
                {"text", tok != nullptr},
                {"max_positions", c.max_positions},
                {"queue", g.engine.waiting},
                {"batches_running", g.engine.running},
                {"connections", g.connections},
                {"workers", opt.engine.workers}}
        .dump();
}

}  // namespace halformer
