// Server::Impl's workers (server_impl.h): each takes the oldest waiting
// request and those that can share its batch, runs the batch on the model
// (tokens streamed out, answers filled in), lets requests join it at each
// step, and runs a failed batch's requests alone.
#include "server_impl.h"

#include "halformer/options.h"

#include <algorithm>
#include <chrono>
#include <exception>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

namespace halformer {

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

// Takes the oldest waiting request and every other one that can share
// its batch, up to max_batch. Empty when stopping and nothing waits.
Jobs Server::Impl::next_batch() {
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

void Server::Impl::work() {
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
void Server::Impl::start(Job &j) {
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
std::vector<JoinInput> Server::Impl::join(Jobs &batch, const std::string &key, int room) {
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

void Server::Impl::run_batch(Jobs &batch) {
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

}  // namespace halformer
