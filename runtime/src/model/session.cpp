// One Model, many threads: the sessions a Model hands its calls (each with
// its own activations, caches and device context) over one set of weights.
#include "session.h"

#include <algorithm>
#include <thread>
#include <unistd.h>

namespace halformer {

namespace {

int default_sessions(Device d) {
    if (d != Device::CPU) return 1;
    return std::max(2, (int)std::thread::hardware_concurrency());
}

int64_t default_budget() {
    // Three quarters of the machine's memory.
    const long pages = sysconf(_SC_PHYS_PAGES), page = sysconf(_SC_PAGE_SIZE);
    if (pages <= 0 || page <= 0) return INT64_MAX;
    return (int64_t)pages / 4 * 3 * (int64_t)page;
}

void fold(Profile &into, Profile &from) {
    for (auto &[name, k] : from) {
        into[name].seconds += k.seconds;
        into[name].calls += k.calls;
    }
    from.clear();
}

}  // namespace

Session::Session(std::shared_ptr<ModelWeights> weights, std::shared_ptr<MemoryBudget> budget_)
    : w(std::move(weights)), cfg(w->cfg), desc(w->desc), budget(std::move(budget_)) {
    wire();
}

std::unique_ptr<Session> Session::spawn() const { return std::make_unique<Session>(w, budget); }

void Session::require_fits(int64_t floats, const std::string &what) {
    int64_t held = 0;
    each_scratch([&](Scratch &s) { held += (int64_t)s.bytes(); });
    const int64_t others = budget->used.load() - held, limit = budget->limit.load();
    if (floats > (limit - std::max<int64_t>(others, 0)) / 4) {
        throw Error(what + ": needs about " + MemoryBudget::mib(floats > INT64_MAX / 4 ? INT64_MAX : floats * 4) +
                    " of activations and caches; the memory budget is " + MemoryBudget::mib(limit) + " (" +
                    MemoryBudget::mib(std::max<int64_t>(others, 0)) +
                    " held by other calls): use a smaller batch or beam, shorter inputs or fewer new tokens, "
                    "or raise the budget (--max-memory)");
    }
}

void Session::require_pass_fits(const PassShapes &p, const char *label, const std::string &what) {
    const int64_t D = std::max(cfg.d_model, desc.attn_width), F = desc.max_d_ff() * (desc.gated_ffn ? 2 : 1),
                  L = cfg.num_decoder_layers;
    const int64_t enc = checked_product({p.sources, p.source_len, 6 * D + F}, label),
                  cross = checked_product({L, p.sources, p.source_len, 2 * D}, label),
                  self = checked_product({L, p.rows, p.cache, 2 * D}, label),
                  acts = checked_product({p.rows, p.positions, 6 * D + F}, label),
                  out = checked_product({p.out_rows, p.width}, label);
    require_fits(enc + cross + self + acts + out, what);
}

void Session::wire() {
    each_scratch([&](Scratch &s) {
        s.dev = dev.get();
        s.budget = budget.get();
    });
}

size_t Session::release_buffers() {
    size_t n = 0;
    each_scratch([&](Scratch &s) { n += s.release(); });
    self_kv.clear();
    cross_kv.clear();
    return n;
}

Model::Pool::Pool(Session &first) : primary(&first), idle{&first}, max_sessions(default_sessions(first.device())) {
    first.budget->limit = default_budget();
    first.wire();
}

Session &Model::Pool::acquire() {
    std::unique_lock<std::mutex> lock(mu);
    freed.wait(lock, [&] { return !idle.empty() || sessions < max_sessions; });
    busy++;
    if (!idle.empty()) {
        Session *s = idle.back();
        idle.pop_back();
        return *s;
    }
    sessions++;
    try {
        spawned.push_back(primary->spawn());
    } catch (...) {
        sessions--;
        busy--;
        freed.notify_one();
        throw;
    }
    return *spawned.back();
}

void Model::Pool::release(Session &s, bool steps) {
    {
        std::lock_guard<std::mutex> lock(mu);
        fold(prof, s.prof);
        if (steps) {
            step_seconds = s.step_seconds;
            step_rows = s.step_rows;
        }
        idle.push_back(&s);
        busy--;
    }
    freed.notify_one();
}

void Model::Pool::require_idle(const char *what) {
    if (busy > 0) {
        throw Error(std::string(what) + ": " + std::to_string(busy) +
                    " call(s) are running on this model (it must not overlap calls)");
    }
}

Model::Model(std::unique_ptr<Impl> impl) : impl_(std::move(impl)), pool_(std::make_unique<Pool>(*impl_->first)) {}
Model::Model(Model &&) noexcept = default;
Model &Model::operator=(Model &&) noexcept = default;
Model::~Model() = default;

void Model::set_max_sessions(int n) {
    if (n < 1) throw Error("max_sessions must be >= 1, not " + std::to_string(n));
    if (n > 1 && device() != Device::CPU) {
        throw Error(std::string("a model on ") + device_name(device()) + " runs one call at a time (max_sessions 1)");
    }
    std::lock_guard<std::mutex> lock(pool_->mu);
    pool_->max_sessions = n;
    pool_->freed.notify_all();
}

int Model::max_sessions() const {
    std::lock_guard<std::mutex> lock(pool_->mu);
    return pool_->max_sessions;
}


void Model::set_memory_budget(int64_t bytes) {
    if (bytes <= 0) throw Error("memory budget must be positive, not " + std::to_string(bytes) + " bytes");
    impl_->first->budget->limit = bytes;
}

int64_t Model::memory_budget() const { return impl_->first->budget->limit.load(); }
int64_t Model::memory_used() const { return impl_->first->budget->used.load(); }

size_t Model::release_memory() {
    std::lock_guard<std::mutex> lock(pool_->mu);
    pool_->require_idle("release_memory");
    size_t n = 0;
    for (Session *s : pool_->idle) n += s->release_buffers();
    return n;
}

Profile &Model::profile() {
    std::lock_guard<std::mutex> lock(pool_->mu);
    // The Trainer runs on the first session directly, not through a lease.
    for (Session *s : pool_->idle) fold(pool_->prof, s->prof);
    return pool_->prof;
}

void Model::reset_profile() {
    std::lock_guard<std::mutex> lock(pool_->mu);
    for (Session *s : pool_->idle) s->prof.clear();
    pool_->prof.clear();
}

const std::vector<double> &Model::step_seconds() const { return pool_->step_seconds; }
const std::vector<int> &Model::step_rows() const { return pool_->step_rows; }

}  // namespace halformer
