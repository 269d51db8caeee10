// The training loop (see halformer/training_loop.h): accumulation, shards,
// the all-reduce, validation, checkpoints and the final model.
#include "halformer/training_loop.h"

#include "halformer/distributed.h"
#include "halformer/error.h"
#include "halformer/files.h"
#include "halformer/json.h"

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <sstream>
#include <system_error>

namespace halformer {

namespace {

// Every batch of a held-out source, at the training micro-batch size.
std::vector<std::vector<Example>> read_batches(std::unique_ptr<ExampleSource> source, BatchOptions bo) {
    std::vector<std::vector<Example>> out;
    if (!source) return out;
    bo.seed = 7;
    Batcher batcher(std::move(source), bo);
    for (Batch b; batcher.next(b);) out.push_back(b.examples);
    return out;
}

BatchOptions batch_options(const TrainingLoopOptions &o) {
    BatchOptions bo;
    bo.max_tokens = o.micro_tokens;
    bo.pool_examples = o.pool;
    bo.seed = o.data_seed;
    return bo;
}

// A number of a JSON object; `fallback` when absent.
double number(const json::Value &object, const char *key, double fallback, const std::string &what) {
    const json::Value *v = object.find(key);
    if (!v) return fallback;
    if (!v->is_number()) throw Error(what + ": \"" + key + "\" is " + json::kind_name(v->kind) + ", not a number");
    return v->number;
}

}  // namespace

TrainingLoop::TrainingLoop(Trainer &trainer, std::unique_ptr<ExampleSource> train, TrainingLoopOptions opt,
                           std::unique_ptr<ExampleSource> valid, TrainingPosition from)
    : trainer_(trainer), opt_(std::move(opt)), dist_(Distributed::get()),
      batches_(std::move(train), batch_options(opt_)), elapsed_before_(from.elapsed),
      t0_(std::chrono::steady_clock::now()) {
    if (opt_.micro_tokens < 1 || opt_.batch_tokens < 1) throw Error("batch_tokens and micro_tokens must be positive");
    if (from.epoch || from.batch_index) batches_.seek(from.epoch, from.batch_index);
    valid_ = read_batches(std::move(valid), batch_options(opt_));
    // Micro-batches per optimizer step (fairseq's update_freq): every rank
    // runs the same count, so every rank ends each step at the same batch.
    accumulate_ = (int)std::max<int64_t>(1, (opt_.batch_tokens + opt_.micro_tokens - 1) / opt_.micro_tokens);
    nshards_ = std::max(opt_.shards, dist_.world());
}

double TrainingLoop::elapsed() const {
    return elapsed_before_ + std::chrono::duration<double>(std::chrono::steady_clock::now() - t0_).count();
}

TrainingLoop::Outcome TrainingLoop::run() {
    if (nshards_ % dist_.world() != 0) {
        throw Error("shards (" + std::to_string(opt_.shards) + ") must be a multiple of the " +
                    std::to_string(dist_.world()) + " ranks");
    }
    auto stopped = [&] { return callbacks.stop && callbacks.stop(); };
    t0_ = std::chrono::steady_clock::now();
    first_step_ = trainer_.steps();
    while (trainer_.steps() < opt_.steps && !stopped()) {
        take_step();
        const int64_t step = trainer_.steps();
        if (opt_.save_every > 0 && step % opt_.save_every == 0 && step != opt_.steps) save_checkpoint();
    }
    save_checkpoint();
    return stopped() ? Stopped : Finished;
}

// The next batch of the data, into the next epoch at the end of one.
bool TrainingLoop::next_batch(Batch &b) {
    if (batches_.next(b)) return true;
    batches_.next_epoch();
    return batches_.next(b);
}

// Gradients of this rank's shards of a step's micro-batches, summed; the
// loss and tokens of those shards.
StepStats TrainingLoop::accumulate_gradients() {
    StepStats sum;
    Batch b;
    for (int micro = 0; micro < accumulate_; micro++) {
        if (!next_batch(b)) throw Error("the training data has no examples");
        for (int sh = dist_.rank(); sh < nshards_; sh += dist_.world()) {
            Batch mine = shard(b, sh, nshards_);
            if (mine.examples.empty()) continue;
            StepStats s = trainer_.forward_backward(mine.examples);
            sum.loss += s.loss;
            sum.tokens += s.tokens;
        }
    }
    return sum;
}

void TrainingLoop::take_step() {
    const double ts = elapsed();
    trainer_.zero_grad();
    const StepStats mine = accumulate_gradients();
    double sums[2] = {mine.loss, (double)mine.tokens};  // loss, tokens: this rank's, then all ranks'
    if (dist_.world() > 1) trainer_.reduce_gradients([&](float *g, size_t n) { dist_.sum(g, n); });
    dist_.sum(sums, 2);
    StepProgress p;
    p.lr = trainer_.step((int64_t)sums[1]);
    p.seconds = elapsed() - ts;
    p.step = trainer_.steps();
    p.steps = opt_.steps;
    p.loss = sums[0] / sums[1];
    p.tokens = (int64_t)sums[1];
    p.grad_norm = trainer_.grad_norm();
    const bool due = opt_.valid_every > 0 && (p.step % opt_.valid_every == 0 || p.step == opt_.steps);
    if (due && !valid_.empty()) {
        p.valid_loss = validate();
        if (dist_.leader() && callbacks.on_validation) callbacks.on_validation(p.step, p.valid_loss);
    }
    p.elapsed = elapsed();
    const double per = (p.elapsed - elapsed_before_) / (double)std::max<int64_t>(p.step - first_step_, 1);
    p.seconds_left = per * (double)(opt_.steps - p.step);
    if (dist_.leader() && callbacks.on_step) callbacks.on_step(p);
}

// The mean negative log-likelihood of the held-out batches, rank r taking
// batches r, r + ranks, ...
double TrainingLoop::validate() {
    double v[2] = {0, 0};
    for (size_t i = 0; i < valid_.size(); i++) {
        if ((int64_t)i % dist_.world() != dist_.rank()) continue;
        StepStats s = trainer_.evaluate(valid_[i], 0.0f);
        v[0] += s.loss;
        v[1] += (double)s.tokens;
    }
    dist_.sum(v, 2);
    return v[1] > 0 ? v[0] / v[1] : 0.0;
}

// Rank 0 writes OUT/checkpoints/step_N (with a copy of the model's
// tokenizer: every checkpoint is a model directory) and removes the oldest
// beyond max(keep, average); every rank waits for it.
void TrainingLoop::save_checkpoint() {
    if (dist_.leader()) {
        std::ostringstream u;
        u.precision(17);
        u << "{\"epoch\": " << batches_.epoch() << ", \"batch_index\": " << batches_.batch_index()
          << ", \"elapsed\": " << elapsed() << "}";
        char name[64];
        std::snprintf(name, sizeof name, "/checkpoints/step_%08lld", (long long)trainer_.steps());
        const std::string dir = opt_.out + name;
        trainer_.save(dir, false, false, u.str());
        const std::string &tok = trainer_.config().tokenizer;
        if (!tok.empty()) files::write_text(dir + "/" + tok, files::read_text(opt_.out + "/" + tok));
        remove_old_checkpoints();
        if (callbacks.on_checkpoint) callbacks.on_checkpoint(trainer_.steps(), dir);
    }
    dist_.barrier();
}

void TrainingLoop::remove_old_checkpoints() {
    auto cks = checkpoints(opt_.out);
    const size_t keep = (size_t)std::max(1, std::max(opt_.keep, opt_.average));
    for (size_t i = 0; i + keep < cks.size(); i++) {
        std::error_code ec;  // one that cannot be removed now is tried again at the next checkpoint
        std::filesystem::remove_all(cks[i].dir, ec);
    }
}

size_t TrainingLoop::write_final_model() {
    if (!dist_.leader()) return 0;
    auto cks = checkpoints(opt_.out);
    if (opt_.average > 1 && cks.size() >= 2) {
        std::vector<std::string> dirs;
        for (size_t i = cks.size() - std::min<size_t>(cks.size(), opt_.average); i < cks.size(); i++) {
            dirs.push_back(cks[i].dir);
        }
        average_checkpoints(dirs, opt_.out, opt_.half);
        return dirs.size();
    }
    trainer_.save(opt_.out, /*weights_only=*/true, opt_.half);
    return 0;
}

std::vector<Checkpoint> TrainingLoop::checkpoints(const std::string &out) {
    std::vector<Checkpoint> v;
    const std::string dir = out + "/checkpoints";
    std::error_code ec;
    for (std::filesystem::directory_iterator it(dir, ec), end; !ec && it != end; it.increment(ec)) {
        const std::string n = it->path().filename().string();
        if (n.rfind("step_", 0) == 0 && files::exists(dir + "/" + n + "/trainer.json")) {
            v.push_back({std::atoll(n.c_str() + 5), dir + "/" + n});
        }
    }
    std::sort(v.begin(), v.end(), [](const Checkpoint &a, const Checkpoint &b) {
        return a.step != b.step ? a.step < b.step : a.dir < b.dir;
    });
    return v;
}

Checkpoint TrainingLoop::latest_checkpoint(const std::string &out) {
    auto cks = checkpoints(out);
    if (cks.empty()) throw Error(out + "/checkpoints: no checkpoint to resume from");
    return cks.back();
}

TrainingPosition TrainingLoop::position(const std::string &checkpoint_dir) {
    const std::string what = checkpoint_dir + "/trainer.json \"user\"";
    const json::Value user = json::parse(Trainer::checkpoint_user_json(checkpoint_dir), what);
    TrainingPosition p;
    p.epoch = (int64_t)number(user, "epoch", 0, what);
    p.batch_index = (int64_t)number(user, "batch_index", 0, what);
    p.elapsed = number(user, "elapsed", 0, what);
    return p;
}

}  // namespace halformer
