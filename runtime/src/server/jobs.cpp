// A Job as the engine's request (server_impl.h): the engine (engine.h)
// batches and runs it; its callbacks, on the engine's workers, turn tokens
// into text pieces (streaming, stop strings), count the metrics and fill
// the Job the handler waits on.
#include "server_impl.h"

#include "halformer/options.h"

#include <exception>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

namespace halformer {

EngineRequest Server::Impl::engine_request(const std::shared_ptr<Job> &job) {
    EngineRequest r;
    r.input = job->req.ids;
    r.target_prefix = job->req.target_prefix;
    r.options = job->req.options;
    r.options.seed = job->req.seed;
    // (The callbacks hold the Job: the engine may run them after the
    // handler gave up on it.)
    r.on_start = [this, job] { start(*job); };
    r.on_token = [this, job](int32_t id) { token(*job, id); };
    r.stop = [job] { return job->stop_hit.load(); };
    r.restart = [this, job] { return restart(*job); };
    r.on_done = [this, job](const EngineResult &res) { done(*job, res); };
    return r;
}

// Entering a batch (a retry alone, after a failed batch, starts its text
// again; beam search has no tokens before the end: its text comes whole).
void Server::Impl::start(Job &j) {
    j.started = Clock::now();
    if (j.text_out && j.req.options.beam == 1 && (j.req.stream || !j.req.stop.empty())) {
        j.text_stream = std::make_unique<TextStream>(model, prompt_of(j), j.req.stop);
    }
}

// Before a retry alone: the tokens it streamed cannot be taken back.
bool Server::Impl::restart(Job &j) {
    std::lock_guard<std::mutex> lock(j.w->mu);
    const bool sent = j.tokens > 0 && j.req.stream;
    j.tokens = 0;
    j.fresh.clear();
    return !sent;
}

void Server::Impl::done(Job &job, const EngineResult &r) {
    if (!r.error.empty()) return fail(job, r.error);
    if (r.aborted && !r.started) {
        // Its client went away while it waited.
        metrics.cancelled();
        {
            std::lock_guard<std::mutex> lock(job.w->mu);
            job.done = true;
        }
        job.w->cv.notify_all();
        return;
    }
    complete(job, r.hyps);
}

void Server::Impl::token(Job &job, int32_t id) {
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

void Server::Impl::complete(Job &job, const std::vector<Hypothesis> &hyps) {
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

void Server::Impl::fail(Job &job, const std::string &error) {
    {
        std::lock_guard<std::mutex> lock(job.w->mu);
        if (job.done) return;
        job.error = error;
        job.done = true;
    }
    job.w->cv.notify_all();
}


}  // namespace halformer
