// halformer-tune: searches each op's schedule on this machine and writes the
// record the AOT build compiles as this CPU's kernel set of the target
// (schedules/tuned/<record>/).
// `halformer tune ...` runs this program; see usage() and the README.
//
// For each task (op × shape class, tasks.h), within a share of the budget:
//   1. the hand schedule's parameter space: coordinate descent from the hand
//      values, then untried points; each candidate JIT-compiled with
//      libHalide for the target, checked against the double-precision
//      reference, and timed (median) at the model's shapes;
//   2. Mullapudi2016 once, and Adams2019: its default search, then batches
//      of random-dropout samples benchmarked here whose featurizations
//      retrain the cost model (Halide's autotune_loop.sh, in process
//      workers, with Debian's retrain_cost_model);
//   3. a confirmation round, hand and best interleaved, and the winner's
//      check on small and odd shapes. The record keeps a tuned point only
//      where it beat the hand values in that round.
// State is appended to WORK/state.jsonl as it goes: --resume skips what was
// measured and counts the time already spent against the budget.
//
// The files, by job: options (command line), target (build targets),
// measure (building, checking and timing a candidate), journal (the state),
// progress (clock, stop flag, progress line), worker (child processes),
// search_hand, search_adams, confirm, records (record.json,
// --check-records), report (report.md, tuning.png); tuner.h holds the run.
#include "Halide.h"
#include "halformer/build_info.h"
#include "halformer/config.h"
#include "halformer/device.h"
#include "halformer/error.h"
#include "halformer/files.h"
#include "halformer/json.h"
#include "measure.h"
#include "options.h"
#include "records.h"
#include "report.h"
#include "schedules/schedule_common.h"
#include "target.h"
#include "tasks.h"
#include "tuner.h"
#include "worker.h"

#include <algorithm>
#include <cctype>
#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <iostream>
#include <set>
#include <unistd.h>

namespace tune {

namespace files = halformer::files;

namespace {

halformer::Config model_config(const std::string &config) {
    return config == "base" ? halformer::Config::base() : halformer::Config::from_file(config + "/config.json");
}

}  // namespace

Tuner::Tuner(const Options &o, std::vector<Task> tasks, Halide::Target target, std::string target_name, int threads)
    : o_(o), tasks_(std::move(tasks)), target_(target), target_name_(std::move(target_name)), threads_(threads) {
    registers_ = halformer::vector_registers(target_);
}

void Tuner::curve(const Task &t, double best, double hand, const std::string &kind) {
    curve_out_ << t.id() << "," << progress_.spent() << "," << best << "," << hand << "," << kind << "\n";
    curve_out_.flush();
}

// The record this run writes, in `records` (a directory of record
// directories): the one of this target made on this CPU if there is one
// (replaced with --force), else one named after the target, or, where that
// name holds another CPU's record, "<target>-<vendor>-<family>-<model>". The
// build compiles each as its own kernel set and runs it on its CPU only.
std::string record_name_for(const std::string &target, const std::string &records) {
    const halformer::CpuInfo &cpu = halformer::this_cpu();
    auto cpu_of = [&](const std::string &name) -> std::string {
        const std::string path = records + "/" + name + "/record.json";
        if (!files::exists(path)) return "";
        try {
            const auto v = halformer::json::parse(files::read_text(path), path);
            const auto *t = v.find("target");
            const auto *c = v.find("cpu");
            const auto *key = c && c->is_object() ? c->find("key") : nullptr;
            if (!t || !t->is_string() || t->string != target) return "?";
            return key && key->is_string() ? key->string : "?";
        } catch (const halformer::Error &) {
            return "?";
        }
    };
    std::string vendor = cpu.vendor == "AuthenticAMD" ? "amd" : cpu.vendor == "GenuineIntel" ? "intel" : "";
    if (vendor.empty()) {
        for (char c : cpu.vendor)
            if (std::isalnum((unsigned char)c)) vendor += (char)std::tolower((unsigned char)c);
    }
    const std::string own = target + "-" + vendor + "-" + std::to_string(cpu.family) + "-" + std::to_string(cpu.model);
    for (const std::string &name : {target, own}) {
        const std::string c = cpu_of(name);
        if (c == cpu.key()) return name;
    }
    const std::string c = cpu_of(target);
    return c.empty() ? target : own;
}

// The output and work directories; the journal loaded (--resume) or the last
// run's set aside; the journal and the curve opened. Returns the journal's path.
std::string Tuner::open_work() {
    // A developer's build writes into its source tree, where the next build
    // applies the record; an installed tuner (cmake --install), away from
    // any source tree, into ./tuned/<target> and a scratch work directory.
    const bool in_tree = files::exists(std::string(HALFORMER_SOURCE_DIR) + "/schedules/tuned");
    const std::string tmp = std::getenv("TMPDIR") && *std::getenv("TMPDIR") ? std::getenv("TMPDIR") : "/tmp";
    const std::string records = in_tree ? std::string(HALFORMER_SOURCE_DIR) + "/schedules/tuned" : "tuned";
    // (A GPU's record is its API's: the build applies it to that API's one
    // kernel set, whatever the CPU.)
    record_name_ = target_.has_gpu_feature() ? target_name_ : record_name_for(target_name_, records);
    out_dir_ = !o_.out_dir.empty() ? o_.out_dir : records + "/" + record_name_;
    work_dir_ = !o_.work_dir.empty() ? o_.work_dir
                : files::exists(HALFORMER_BINARY_DIR)
                    ? std::string(HALFORMER_BINARY_DIR) + "/tune/" + target_name_
                    : tmp + "/halformer-tune-" + std::to_string(getuid()) + "/" + target_name_;
    if (files::exists(out_dir_ + "/record.json") && !o_.force && !o_.resume)
        throw halformer::Error(out_dir_ + "/record.json exists: pass --force to replace it, or --out DIR");
    files::make_dirs(work_dir_);
    const std::string state_path = work_dir_ + "/state.jsonl";
    if (o_.resume) {
        journal_.load(state_path);
        for (const auto &e : journal_.entries()) progress_.spent0 = std::max(progress_.spent0, e.t);
        while (files::exists(work_dir_ + "/cost_model_" + std::to_string(retrains_ + 1) + ".weights")) retrains_++;
        std::fprintf(stderr, "halformer tune: resuming: %zu measurements, %s already spent\n",
                     journal_.entries().size(), fmt_time(progress_.spent0).c_str());
    } else if (files::exists(state_path)) {
        std::rename(state_path.c_str(), (state_path + ".previous").c_str());
        std::system(("rm -rf " + shell_quote(work_dir_ + "/samples") + " " + shell_quote(work_dir_) + "/cost_model_*.weights").c_str());
    }
    journal_.open(state_path);
    curve_out_.open(work_dir_ + "/curve.csv", o_.resume ? std::ios::app : std::ios::trunc);
    if (!o_.resume) curve_out_ << "task,spent_s,best_ms,hand_ms,kind\n";
    return state_path;
}

// Task i within an equal share of what is left of the budget: the search
// gets 60% of it and the autoschedulers the rest, a confirmation round
// after both. False when stopped.
bool Tuner::tune_task(size_t i, TaskResult &r) {
    const Task &t = tasks_[i];
    double left = o_.budget_s - progress_.spent();
    double share = left / (double)(tasks_.size() - i);
    double start = progress_.spent();
    r.task = &t;
    search_hand(t, r, start + share * (o_.adams ? 0.6 : 0.9));
    if (g_stop) return false;
    search_adams(t, r, start + share * 0.9);
    if (g_stop) return false;
    confirm(t, r);
    curve(t, r.tuned ? r.best_confirm : r.hand_confirm, r.hand_confirm, "confirmed");
    progress_.show(t.id(), r.candidates + r.adams_samples, r.tuned ? r.best_confirm : r.hand_confirm,
                   r.hand_confirm, r.verdict.substr(0, 40));
    progress_.done_line();
    return true;
}

void Tuner::write_outputs(const std::vector<TaskResult> &results, bool complete) {
    RunInfo run;
    std::string args;
    for (const auto &a : o_.argv) args += (args.empty() ? "" : " ") + a;
    run.command = "halformer tune " + args;
    run.commit = run_capture("git -C " + shell_quote(HALFORMER_SOURCE_DIR) + " rev-parse --short HEAD 2>/dev/null");
    run.config_json = model_config(o_.config).to_json();
    run.target_name = target_name_;
    {
        // --out DIR: the record is named after DIR.
        std::string dir = out_dir_;
        while (dir.size() > 1 && dir.back() == '/') dir.pop_back();
        run.record_name = o_.out_dir.empty() ? record_name_ : dir.substr(dir.find_last_of('/') + 1);
    }
    run.halide_target = target_.to_string();
    run.machine = machine_name(threads_);
    if (target_.has_gpu_feature()) {
        // The GPU the candidates ran on (the runtime's probe of the driver).
        const auto dev = target_.has_feature(Halide::Target::CUDA) ? halformer::Device::CUDA : halformer::Device::OpenCL;
        run.machine = halformer::device_description(dev) + ", host " + run.machine;
    }
    run.date = today();
    run.budget_s = o_.budget_s;
    run.spent_s = progress_.spent();
    run.complete = complete;
    write_record(out_dir_, run, results);
    write_report(out_dir_, work_dir_, run, results);
    std::fprintf(stdout, "Wrote %s/record.json, report.md and tuning.png. Rebuild (./scripts/build.sh) to apply it.\n",
                 out_dir_.c_str());
}

int Tuner::run() {
    const std::string state_path = open_work();
    progress_.budget = o_.budget_s;
    std::fprintf(stderr, "halformer tune: target %s (%s), %d threads, %zu tasks, budget %s\n", target_name_.c_str(),
                 target_.to_string().c_str(), threads_, tasks_.size(), fmt_time(o_.budget_s).c_str());
    Halide::load_plugin(std::string(HALIDE_PLUGIN_DIR) + "/libautoschedule_mullapudi2016.so");
    // Halide's warnings (std::cerr) go to a log, not into the progress line.
    static std::ofstream halide_log(work_dir_ + "/halide.log");
    std::cerr.rdbuf(halide_log.rdbuf());
    std::signal(SIGINT, on_signal);
    std::signal(SIGTERM, on_signal);

    std::vector<TaskResult> results;
    for (size_t i = 0; i < tasks_.size() && !g_stop; i++) {
        TaskResult r;
        if (!tune_task(i, r)) break;
        results.push_back(r);
    }
    progress_.done_line();
    if (g_stop) {
        std::fprintf(stderr, "halformer tune: stopped after %zu of %zu tasks; %s. Rerun with --resume to go on.\n",
                     results.size(), tasks_.size(), state_path.c_str());
        return 130;
    }
    write_outputs(results, true);
    return 0;
}

namespace {

// The tasks --ops names (all when none); an Error for a name no task has.
std::vector<Task> select_tasks(const std::vector<Task> &all, const std::vector<std::string> &ops) {
    std::vector<Task> tasks;
    for (const auto &t : all) {
        bool want = ops.empty();
        for (const auto &op : ops) want |= op == t.op || op == t.id();
        if (want) tasks.push_back(t);
    }
    for (const auto &op : ops) {
        bool known = false;
        for (const auto &t : all) known |= op == t.op || op == t.id();
        if (!known) {
            std::string names;
            for (const auto &t : all) names += " " + t.id();
            throw halformer::Error("--ops: no op '" + op + "' (ops:" + names + ")");
        }
    }
    return tasks;
}

// Every kernel a task's winner is recorded for, one a line
// (tests/check_tune_coverage.py compares them with the runtime's calls).
int list_kernels(const std::vector<Task> &tasks) {
    std::set<std::string> names;
    for (const auto &t : tasks)
        for (const auto &k : t.group) {
            if (std::string(kernel_info(k).generator) != t.generator())
                throw halformer::Error(t.id() + ": " + k + " is no " + t.generator() + " kernel");
            names.insert(k);
        }
    for (const auto &k : names) std::printf("%s\n", k.c_str());
    return 0;
}

// --try: one point of one task's space (knobs not named keep their hand
// values), measured as a search measures a candidate: checked against the
// reference, the task's bit-identities, timed, then the small shapes.
// 0 when it passes all of them.
int try_point(const std::vector<Task> &tasks, const std::string &text, const Halide::Target &target, int threads) {
    if (tasks.size() != 1) {
        std::string names;
        for (const auto &t : tasks) names += " " + t.id();
        throw halformer::Error("--try: --ops must name one task (" + std::to_string(tasks.size()) + " chosen:" + names + ")");
    }
    const Task &t = tasks.front();
    Point p = t.hand();
    std::string spaced = text;
    std::replace(spaced.begin(), spaced.end(), ',', ' ');
    for (const auto &[k, v] : parse_params(spaced)) {
        if (!p.count(k)) {
            std::string knobs;
            for (const auto &kn : t.knobs) knobs += " " + kn.name;
            throw halformer::Error("--try: " + t.id() + " has no knob '" + k + "' (knobs:" + knobs + ")");
        }
        char *end = nullptr;
        long n = std::strtol(v.c_str(), &end, 10);
        if (v.empty() || *end || n < 0 || n > 1 << 16)
            throw halformer::Error("--try: " + k + "=" + v + " is not a whole number from 0 to 65536");
        p[k] = (int)n;
    }
    Measured m = measure(t, t.shapes, p, Sched::Hand, target, threads, true, &t.edges);
    std::printf("%s %s on %s: ", t.id().c_str(), point_key(p).c_str(), target.to_string().c_str());
    if (!m.ok) {
        std::printf("FAILS: %s\n", m.error.c_str());
        return 1;
    }
    std::printf("%.4f ms (", m.score);
    for (size_t i = 0; i < t.shapes.size(); i++)
        std::printf("%s%s %.4f", i ? ", " : "", t.shapes[i].label.c_str(), m.ms[i]);
    std::printf("); checked against the reference and %zu bit-identities", t.same_bits.size());
    if (!m.edge_error.empty()) {
        std::printf("; a small shape FAILS: %s\n", m.edge_error.c_str());
        return 1;
    }
    std::printf("; small shapes pass\n");
    return 0;
}

int run_tune(const Options &options) {
    std::string name;
    const Halide::Target target = resolve_target(options.target, &name);
    // A GPU's schedules are searched by hand knobs only: Adams2019 and
    // Mullapudi2016 schedule CPUs.
    Options o = options;
    if (target.has_gpu_feature()) o.adams = false;
    std::vector<Task> tasks =
        select_tasks(make_tasks(model_config(o.config), o.workload, target.has_gpu_feature()), o.ops);
    if (o.list_kernels) return list_kernels(tasks);
    if (o.launch_only) return launch_only(tasks, target);
    int threads = o.threads > 0 ? o.threads : (int)sysconf(_SC_NPROCESSORS_ONLN);
    setenv("HL_NUM_THREADS", std::to_string(threads).c_str(), 1);
    if (!o.try_point.empty()) return try_point(tasks, o.try_point, target, threads);
    if (o.worker == "adams") return run_worker(o, tasks, target, threads);
    if (o.check_records)
        return check_records(o.work_dir.empty() ? std::string(HALFORMER_BINARY_DIR) + "/tune/check" : o.work_dir);
    if (!o.worker.empty()) usage("unknown --worker " + o.worker);
    Tuner tuner(o, tasks, target, name, threads);
    return tuner.run();
}

}  // namespace

}  // namespace tune

int main(int argc, char **argv) {
    tune::Options o = tune::parse_options(argc, argv);
    try {
        return tune::run_tune(o);
    } catch (const std::exception &e) {
        std::fprintf(stderr, "\nhalformer tune: %s\n", e.what());
        return 1;
    }
}
