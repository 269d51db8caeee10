// halformer::Engine (engine.h): the queue, the workers that take batches off
// it, the requests that join a running batch, and the retry alone of a
// failed batch's requests. Each batch is one Model::generate call with a
// join callback (without workers: a Generation the caller's step() runs a
// turn at a time); the model's decoder runs it (decoding/scheduler.h).
#include "halformer/engine.h"

#include "halformer/options.h"

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cmath>
#include <condition_variable>
#include <deque>
#include <exception>
#include <map>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

namespace halformer {

namespace {

using Clock = std::chrono::steady_clock;

double ms_since(Clock::time_point t0, Clock::time_point t1) {
    return std::chrono::duration<double, std::milli>(t1 - t0).count();
}

}  // namespace

struct Engine::Impl {
    // One accepted request, from add() to on_done.
    struct Entry {
        Id id = 0;
        EngineRequest req;
        std::string key;  // batch_key(req.options)
        Clock::time_point arrived = Clock::now();
        std::atomic<bool> aborted{false};
        bool started = false;   // worker side
        bool tokens = false;    // worker side: on_token was called since it (re)started
        bool done = false;      // under mu
    };
    using Batch = std::vector<std::shared_ptr<Entry>>;

    Model &model;
    const EngineOptions opt;
    std::vector<std::thread> workers;

    mutable std::mutex mu;
    std::condition_variable cv;
    std::deque<std::shared_ptr<Entry>> queue;
    std::map<Id, std::shared_ptr<Entry>> live;  // accepted and not yet done
    Id next_id = 1;
    bool stopping = false;  // workers exit once the queue is empty
    std::mutex stop_mu;
    bool stopped = false;
    std::atomic<int> running{0};
    std::atomic<int64_t> batches{0}, batched{0}, joined{0}, splits{0};

    // Without workers: the batch step() runs, and its generation.
    struct Current {
        Batch batch;
        std::vector<Sequence> src;
        GenerateOptions o;  // (its callbacks point at batch)
        std::unique_ptr<Generation> gen;
    };
    std::unique_ptr<Current> current;
    std::mutex step_mu;  // one step() at a time

    Impl(Model &m, const EngineOptions &o) : model(m), opt(o) {}

    void work();
    Batch next_batch();
    Batch take_batch();  // under mu
    void prepare(Batch &batch, std::vector<Sequence> &src, GenerateOptions &o);
    void run(Batch &batch);
    void failed(Batch &batch, const std::exception &ex);
    std::vector<JoinInput> join(Batch &batch, const std::string &key, int room);
    void start(Entry &e);
    void finish(Entry &e, EngineResult r);
};

Engine::Engine(Model &model, const EngineOptions &o) {
    if (o.workers < 0 || o.max_batch < 1 || o.max_queue < 1) {
        throw Error("engine: workers must be >= 0, max_batch and max_queue >= 1 (got " + std::to_string(o.workers) +
                    ", " + std::to_string(o.max_batch) + ", " + std::to_string(o.max_queue) + ")");
    }
    if (!(o.join_fair_ms >= 0 && std::isfinite(o.join_fair_ms))) {
        throw Error("engine: join_fair_ms must be a finite number >= 0");
    }
    if (!(o.batch_wait_ms >= 0 && std::isfinite(o.batch_wait_ms))) {
        throw Error("engine: batch_wait_ms must be a finite number >= 0");
    }
    if (model.device() == Device::CPU && model.max_sessions() < o.workers) model.set_max_sessions(o.workers);
    impl_ = std::make_unique<Impl>(model, o);
    for (int i = 0; i < o.workers; i++) impl_->workers.emplace_back([s = impl_.get()] { s->work(); });
}

Engine::~Engine() { stop(); }

const EngineOptions &Engine::options() const { return impl_->opt; }

std::vector<Engine::Id> Engine::add(std::vector<EngineRequest> requests) {
    Impl &s = *impl_;
    const Config &c = s.model.config();
    std::vector<std::shared_ptr<Impl::Entry>> entries;
    for (auto &r : requests) {
        auto e = std::make_shared<Impl::Entry>();
        if (r.options.max_new_tokens < 1) {
            r.options.max_new_tokens =
                c.architecture == Architecture::EncoderDecoder
                    ? default_new_tokens(c, (int)r.input.size(), 1 + (int)r.target_prefix.size())
                    : default_new_tokens(c, 0, (int)r.input.size());
        }
        e->key = batch_key(r.options);
        e->req = std::move(r);
        entries.push_back(std::move(e));
    }
    std::vector<Id> ids;
    {
        std::lock_guard<std::mutex> lock(s.mu);
        if (s.stopping) throw EngineBusy("the engine is stopping");
        if (s.queue.size() + entries.size() > (size_t)s.opt.max_queue) {
            throw EngineBusy("the queue is full (" + std::to_string(s.opt.max_queue) + " requests wait); retry later");
        }
        for (auto &e : entries) {
            e->id = s.next_id++;
            ids.push_back(e->id);
            s.live[e->id] = e;
            s.queue.push_back(e);
        }
    }
    s.cv.notify_all();
    return ids;
}

Engine::Id Engine::add(EngineRequest request) {
    std::vector<EngineRequest> one;
    one.push_back(std::move(request));
    return add(std::move(one))[0];
}

void Engine::abort(Id id) {
    Impl &s = *impl_;
    std::shared_ptr<Impl::Entry> waiting;
    {
        std::lock_guard<std::mutex> lock(s.mu);
        auto it = s.live.find(id);
        if (it == s.live.end()) return;
        it->second->aborted = true;
        // Still waiting: it leaves the queue now.
        auto q = std::find(s.queue.begin(), s.queue.end(), it->second);
        if (q != s.queue.end()) {
            waiting = *q;
            s.queue.erase(q);
        }
    }
    if (waiting) {
        EngineResult r;
        r.aborted = true;
        s.finish(*waiting, std::move(r));
    }
}

EngineStats Engine::stats() const {
    const Impl &s = *impl_;
    EngineStats st;
    {
        std::lock_guard<std::mutex> lock(s.mu);
        st.waiting = s.queue.size();
    }
    st.running = s.running.load();
    st.batches = s.batches.load();
    st.batched = s.batched.load();
    st.joined = s.joined.load();
    st.splits = s.splits.load();
    return st;
}

void Engine::stop() {
    Impl &s = *impl_;
    std::lock_guard<std::mutex> lock(s.stop_mu);
    if (s.stopped) return;
    {
        std::lock_guard<std::mutex> q(s.mu);
        s.stopping = true;
    }
    s.cv.notify_all();
    for (auto &w : s.workers) w.join();
    if (s.opt.workers == 0) {
        while (step()) {
        }
    }
    s.stopped = true;
}

bool Engine::step() {
    Impl &s = *impl_;
    if (s.opt.workers > 0) throw Error("engine: step() runs an engine without workers (EngineOptions::workers = 0)");
    std::lock_guard<std::mutex> one(s.step_mu);
    if (!s.current) {
        Impl::Batch batch;
        {
            std::lock_guard<std::mutex> lock(s.mu);
            batch = s.take_batch();
        }
        if (batch.empty()) return false;
        s.running++;
        s.batches++;
        s.batched += (int64_t)batch.size();
        s.current = std::make_unique<Impl::Current>();
        s.current->batch = std::move(batch);
    }
    Impl::Current &c = *s.current;
    bool more = false;
    try {
        if (!c.gen) {
            s.prepare(c.batch, c.src, c.o);
            c.gen = std::make_unique<Generation>(s.model.start(c.src, c.o));
        }
        more = c.gen->step();
        if (!more) c.gen->results();  // (reports any input not yet reported)
    } catch (const std::exception &ex) {
        c.gen.reset();
        s.failed(c.batch, ex);
    }
    if (!more) {
        s.current.reset();
        s.running--;
    }
    return true;
}

// on_done, once: the entry leaves `live`.
void Engine::Impl::finish(Entry &e, EngineResult r) {
    {
        std::lock_guard<std::mutex> lock(mu);
        if (e.done) return;
        e.done = true;
        live.erase(e.id);
    }
    r.started = e.started;
    r.aborted = r.aborted || e.aborted.load();
    if (e.req.on_done) e.req.on_done(r);
}

// The oldest waiting request and every other one that can share its
// batch, up to max_batch. Empty when stopping and nothing waits.
Engine::Impl::Batch Engine::Impl::next_batch() {
    std::unique_lock<std::mutex> lock(mu);
    cv.wait(lock, [&] { return stopping || !queue.empty(); });
    if (queue.empty()) return {};
    if (opt.batch_wait_ms > 0 && (int)queue.size() < opt.max_batch && !stopping) {
        // Requests arriving together (a burst) share one batch.
        cv.wait_for(lock, std::chrono::duration<double, std::milli>(opt.batch_wait_ms),
                    [&] { return stopping || (int)queue.size() >= opt.max_batch; });
        if (queue.empty()) return {};
    }
    return take_batch();
}

Engine::Impl::Batch Engine::Impl::take_batch() {
    if (queue.empty()) return {};
    const std::string key = queue.front()->key;
    Batch batch;
    for (auto it = queue.begin(); it != queue.end() && (int)batch.size() < opt.max_batch;) {
        if ((*it)->key == key) {
            batch.push_back(*it);
            it = queue.erase(it);
        } else {
            ++it;
        }
    }
    return batch;
}

void Engine::Impl::work() {
    for (;;) {
        auto batch = next_batch();
        if (batch.empty()) {
            std::lock_guard<std::mutex> lock(mu);
            if (stopping && queue.empty()) return;
            continue;
        }
        running++;
        batches++;
        batched += (int64_t)batch.size();
        run(batch);
        running--;
    }
}

void Engine::Impl::start(Entry &e) {
    e.started = true;
    e.tokens = false;
    if (e.req.on_start) e.req.on_start();
}

// Continuous batching: each step, the waiting requests that can share the
// batch (up to `room`) join it, oldest first, but none past an older
// request of another kind that has waited join_fair_ms while every worker
// is busy: that one waits for a batch to end, and batches that take their
// kind at every step may never end. The batch then drains and a worker
// takes the oldest request next.
std::vector<JoinInput> Engine::Impl::join(Batch &batch, const std::string &key, int room) {
    Batch took;
    {
        std::lock_guard<std::mutex> lock(mu);
        const bool worker_free = running.load() < opt.workers;
        const auto now = Clock::now();
        for (auto it = queue.begin(); it != queue.end() && (int)took.size() < room;) {
            if ((*it)->key == key) {
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
    for (auto &e : took) {
        start(*e);
        batch.push_back(e);
        const GenerateOptions &o = e->req.options;
        in.push_back({e->req.input, o.seed, o.max_new_tokens, e->req.target_prefix, {}});
        if (o.beam == 1) in.back().sampling = sampling_of(o);
    }
    joined += (int64_t)took.size();
    return in;
}

// The generate() call of a batch (and those that join it): its inputs and
// options, with callbacks into the batch.
void Engine::Impl::prepare(Batch &batch, std::vector<Sequence> &src, GenerateOptions &o) {
    src.clear();
    o = batch[0]->req.options;
    o.seeds.clear();
    o.max_new_tokens_each.clear();
    o.sampling_each.clear();
    o.target_prefix.clear();
    o.max_new_tokens = 1;
    bool sample = false;
    for (auto &e : batch) {
        start(*e);
        const GenerateOptions &eo = e->req.options;
        src.push_back(e->req.input);
        o.seeds.push_back(eo.seed);
        o.max_new_tokens_each.push_back(eo.max_new_tokens);
        o.max_new_tokens = std::max(o.max_new_tokens, eo.max_new_tokens);
        // Without beams each request is greedy or samples with its own settings.
        if (o.beam == 1) o.sampling_each.push_back(sampling_of(eo));
        sample = sample || eo.sample;
    }
    if (!sample) o.seeds.clear();
    // Target prefixes are per request: every input gets one (an empty one:
    // none) once any has one.
    for (auto &e : batch) {
        if (e->req.target_prefix.empty()) continue;
        for (auto &k : batch) o.target_prefix.push_back(k->req.target_prefix);
        break;
    }
    if (opt.join) {
        o.max_batch = opt.max_batch;
        o.join = [this, &batch, key = batch[0]->key](int room) { return join(batch, key, room); };
    }
    o.on_step = opt.on_step;
    o.on_finished = [this, &batch](int b, const std::vector<Hypothesis> &h) {
        EngineResult r;
        r.hyps = h;
        finish(*batch[(size_t)b], std::move(r));
    };
    o.on_token = [&batch](int b, int32_t id) {
        Entry &e = *batch[(size_t)b];
        e.tokens = true;
        if (e.req.on_token) e.req.on_token(id);
    };
    o.cancelled = [&batch](int b) {
        Entry &e = *batch[(size_t)b];
        return e.aborted.load() || (e.req.stop && e.req.stop());
    };
}

// One generate() call for the batch.
void Engine::Impl::run(Batch &batch) {
    std::vector<Sequence> src;
    GenerateOptions o;
    prepare(batch, src, o);
    try {
        // Requests aborted while waiting leave at the first step.
        model.generate(src, o);
    } catch (const std::exception &ex) {
        failed(batch, ex);
    }
}

// A batch that threw: its requests not yet answered.
void Engine::Impl::failed(Batch &batch, const std::exception &ex) {
    Batch left;
    {
        std::lock_guard<std::mutex> lock(mu);
        for (auto &e : batch) {
            if (!e->done) left.push_back(e);
        }
    }
    const std::string error = std::string("generation failed: ") + ex.what();
    // A batch can fail where its requests would not alone (the memory
    // budget): each of those left runs alone, unless it cannot start over
    // (its tokens went out already).
    if (batch.size() > 1 && !left.empty()) {
        splits++;
        for (auto &e : left) {
            if (e->req.restart ? !e->req.restart() : e->tokens) {
                finish(*e, {{}, error});
                continue;
            }
            Batch one{e};
            run(one);
        }
        return;
    }
    for (auto &e : left) finish(*e, {{}, error});
}

}  // namespace halformer
