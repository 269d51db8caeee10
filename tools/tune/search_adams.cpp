// The autoschedulers: Mullapudi2016 once, in process; Adams2019's default
// search, then batches of random-dropout samples, each made and benchmarked
// in a worker process (worker.cpp), whose featurizations retrain the cost
// model between batches (Halide's autotune_loop.sh, with Debian's
// retrain_cost_model).
#include "halformer/files.h"
#include "measure.h"
#include "tuner.h"
#include "worker.h"

#include <algorithm>
#include <cstdlib>

namespace tune {

namespace files = halformer::files;

void Tuner::run_mullapudi(const Task &t, TaskResult &r) {
    if (const Entry *e = journal_.find(t.id(), "mullapudi2016", "")) {
        r.mullapudi = *e;
        return;
    }
    Measured m = measure(t, t.shapes, {}, Sched::Mullapudi, target_, threads_);
    r.mullapudi = {t.id(), "mullapudi2016", "", m.ok, m.error, m.ms, m.score, progress_.spent()};
    journal_.append(r.mullapudi);
}

// One Adams2019 schedule made and measured by a worker; kind "confirm"
// re-times a known one (neither looked up in the journal nor added to it).
Entry Tuner::run_adams(const Task &t, const std::string &kind, int seed, int beam, int dropout,
                       const std::string &weights, double until) {
    std::string key = "seed=" + std::to_string(seed) + ",beam=" + std::to_string(beam) +
                      ",dropout=" + std::to_string(dropout) + ",weights=" + weights;
    if (kind != "confirm")
        if (const Entry *e = journal_.find(t.id(), kind, key)) return *e;
    std::string samples = work_dir_ + "/samples/" + t.op + "_" + t.shape_class;
    files::make_dirs(samples);
    WorkerJob job;
    job.task = t.id();
    for (size_t i = 0; i < tasks_.size(); i++)
        if (tasks_[i].id() == t.id()) job.pipeline_id = (int)i;
    job.seed = seed;
    job.beam = beam;
    job.dropout = dropout;
    job.weights = weights.empty() ? "" : work_dir_ + "/" + weights;
    job.sample_out = kind == "confirm" ? "" : samples + "/" + std::to_string(seed) + ".sample";
    std::string out = work_dir_ + "/worker.out";
    // The default search (beam 32) is the baseline of the table: it gets at
    // least 90 s; a sample at least 20 s.
    double limit = std::max(kind == "adams2019" ? 90.0 : 20.0, std::min(240.0, until - progress_.spent() + 30));
    int rc = run_with_timeout(worker_command(o_, target_name_, threads_, job), out, limit);
    Entry e{t.id(), kind, key, false, "", {}, INFINITY, 0};
    read_worker_result(out, rc, e);
    e.t = progress_.spent();
    if (!(g_stop && !e.ok) && kind != "confirm") journal_.append(e);
    return e;
}

// Retrains the cost model on every sample benchmarked so far (all tasks),
// from the weights of the last retraining; true when it wrote the next ones.
bool Tuner::retrain(const std::string &weights) {
    const int kEpochs = 60;
    std::string next = work_dir_ + "/cost_model_" + std::to_string(retrains_ + 1) + ".weights";
    std::string cmd = "find " + shell_quote(work_dir_ + "/samples") + " -name '*.sample' | " +
                      std::string(HALIDE_PLUGIN_DIR) + "/retrain_cost_model --epochs=" + std::to_string(kEpochs) +
                      " --rates=0.0001 --num_cores=" + std::to_string(threads_) +
                      // Debian ships the baseline model only inside the plugin (no
                      // baseline.weights file): the first retraining starts from
                      // random weights, later ones from the last retrained model.
                      (weights.empty() ? std::string(" --randomize_weights=1")
                                       : " --initial_weights=" + shell_quote(work_dir_ + "/" + weights)) +
                      " --weights_out=" + shell_quote(next) +
                      " --best_benchmark=" + shell_quote(work_dir_ + "/best.benchmark.txt") +
                      " --best_schedule=" + shell_quote(work_dir_ + "/best.schedule.h") + " > " +
                      shell_quote(work_dir_ + "/retrain.log") + " 2>&1";
    return std::system(cmd.c_str()) == 0 && files::exists(next);
}

void Tuner::search_adams(const Task &t, TaskResult &r, double until) {
    run_mullapudi(t, r);
    if (!o_.adams) return;
    const Entry *hand_entry = journal_.find(t.id(), "hand", point_key(r.hand));
    const bool has_hand = hand_entry != nullptr;
    const double hand_score = has_hand ? hand_entry->score : INFINITY;  // (the journal grows below)
    auto consider = [&](const Entry &e) {
        if (!e.ok) return;
        if (e.score < r.adams_best.score || !r.adams_best.ok) r.adams_best = e;
        if (e.error.empty() && (!r.adams_valid.ok || e.score < r.adams_valid.score)) r.adams_valid = e;
        if (has_hand) curve(t, r.adams_best.score, hand_score, "adams2019");
    };
    // The default search (beam 32, no dropout) with the shipped cost model.
    r.adams = run_adams(t, "adams2019", 0, 32, 100, "", until);
    consider(r.adams);
    progress_.show(t.id(), r.candidates, r.best_score, r.hand_score, "adams2019 default");
    // Batches as autotune_loop.sh: one best-effort schedule under the current
    // model, then random probes biased by it; after each batch (--adams-batch
    // samples) the cost model is retrained on every sample benchmarked so far
    // (all tasks).
    // --adams-rounds N: the first N batches (each retrained after) run
    // whatever the budget says, so that a short run on a slow or busy
    // machine still reaches a retraining.
    const int batch = o_.adams_batch;
    int seed = 1;
    auto in_budget = [&](int round) { return round < o_.adams_rounds || progress_.spent() < until; };
    for (int round = 0; in_budget(round) && !g_stop; round++) {
        std::string weights = retrains_ > 0 ? "cost_model_" + std::to_string(retrains_) + ".weights" : "";
        for (int i = 0; i < batch && in_budget(round) && !g_stop; i++, seed++) {
            bool best_effort = i == 0;
            Entry e = run_adams(t, "adams-sample", seed, best_effort ? 32 : 1, best_effort ? 100 : 1, weights, until);
            r.adams_samples++;
            consider(e);
            progress_.show(t.id(), r.candidates + r.adams_samples, r.best_score, r.hand_score,
                           "adams sample " + std::to_string(seed) + (e.ok ? "" : " failed"));
        }
        if (g_stop || !in_budget(round)) break;
        if (retrain(weights)) {
            retrains_++;
            r.retrains++;
        }
    }
}

}  // namespace tune
