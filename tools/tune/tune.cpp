// halformer-tune: searches each op's schedule on this machine and writes the
// per-target record the AOT build applies (schedules/tuned/<target>/).
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
#include "Halide.h"
#include "halformer/config.h"
#include "halformer/error.h"
#include "halformer/json.h"
#include "schedules/schedule_common.h"
#include "tasks.h"

#include <algorithm>
#include <cctype>
#include <chrono>
#include <cmath>
#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <ctime>
#include <fstream>
#include <random>
#include <set>
#include <sstream>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

namespace {

using namespace tune;
using Clock = std::chrono::steady_clock;
using halformer::json::quote;

// ---------------------------------------------------------------- options

struct Options {
    std::string target = "host";      // sapphirerapids | avx512 | avx2 | sse41 | host
    std::string config = "base";      // base | model directory
    std::vector<std::string> ops;     // empty: all
    double budget_s = 20 * 60;
    bool resume = false, force = false, adams = true, check_records = false, list_kernels = false;
    std::string out_dir;              // record directory (default: the source tree's)
    std::string work_dir;             // state, samples, weights
    int threads = 0;
    Workload workload;
    // worker mode (one Adams2019 sample in a child process)
    std::string worker;
    int task = 0, seed = 0, beam = 32, dropout = 100, pipeline_id = 0;
    std::string weights, sample_out;
    std::vector<std::string> argv;
};

[[noreturn]] void usage(const std::string &msg) {
    if (!msg.empty()) std::fprintf(stderr, "halformer tune: %s\n\n", msg.c_str());
    std::fprintf(stderr,
        "usage: halformer tune [--target sapphirerapids|avx512|avx2|sse41|host]\n"
        "                      [--config base|MODEL_DIR] [--ops linear,attention,...]\n"
        "                      [--budget 20m] [--resume] [--force] [--no-adams]\n"
        "                      [--rows 128] [--cache-len 128] [--decode-rows 4]\n"
        "                      [--out DIR] [--work DIR] [--threads N]\n"
        "       halformer tune --check-records   (the build applies its records?)\n"
        "       halformer tune --list-kernels    (the kernels the tasks' records cover)\n"
        "Searches each op's schedule on this machine at the model's shapes and\n"
        "writes DIR/record.json (default: schedules/tuned/<target>/ in the source\n"
        "tree), report.md and tuning.png. Rebuild to apply the record.\n");
    std::exit(2);
}

double parse_duration(const std::string &s) {
    char *end = nullptr;
    double v = std::strtod(s.c_str(), &end);
    std::string unit = end ? end : "";
    if (end == s.c_str() || v <= 0) usage("--budget wants a positive duration such as 90s, 20m or 1h, not '" + s + "'");
    if (unit == "" || unit == "s") return v;
    if (unit == "m") return v * 60;
    if (unit == "h") return v * 3600;
    usage("--budget: unknown unit '" + unit + "' (s, m or h)");
}

int parse_int(const std::string &flag, const std::string &v, int lo) {
    char *end = nullptr;
    long x = std::strtol(v.c_str(), &end, 10);
    if (v.empty() || *end || x < lo || x > 1 << 20) usage(flag + " wants an integer >= " + std::to_string(lo) + ", not '" + v + "'");
    return (int)x;
}

Options parse_options(int argc, char **argv) {
    Options o;
    for (int i = 1; i < argc; i++) o.argv.push_back(argv[i]);
    for (int i = 1; i < argc; i++) {
        std::string a = argv[i];
        auto next = [&]() -> std::string {
            if (i + 1 >= argc) usage(a + " needs a value");
            return argv[++i];
        };
        if (a == "--target") o.target = next();
        else if (a == "--config") o.config = next();
        else if (a == "--ops") {
            std::stringstream ss(next());
            for (std::string op; std::getline(ss, op, ',');)
                if (!op.empty()) o.ops.push_back(op);
        } else if (a == "--budget") o.budget_s = parse_duration(next());
        else if (a == "--resume") o.resume = true;
        else if (a == "--force") o.force = true;
        else if (a == "--no-adams") o.adams = false;
        else if (a == "--check-records") o.check_records = true;
        else if (a == "--list-kernels") o.list_kernels = true;
        else if (a == "--out") o.out_dir = next();
        else if (a == "--work") o.work_dir = next();
        else if (a == "--threads") o.threads = parse_int(a, next(), 1);
        else if (a == "--rows") o.workload.prefill_rows = parse_int(a, next(), 1);
        else if (a == "--cache-len") o.workload.cache_len = parse_int(a, next(), 1);
        else if (a == "--decode-rows") o.workload.decode_rows = parse_int(a, next(), 1);
        else if (a == "--worker") o.worker = next();
        else if (a == "--task") o.task = parse_int(a, next(), 0);
        else if (a == "--seed") o.seed = parse_int(a, next(), 0);
        else if (a == "--pipeline-id") o.pipeline_id = parse_int(a, next(), 0);
        else if (a == "--beam") o.beam = parse_int(a, next(), 1);
        else if (a == "--dropout") o.dropout = parse_int(a, next(), 0);
        else if (a == "--weights") o.weights = next();
        else if (a == "--sample-out") o.sample_out = next();
        else if (a == "-h" || a == "--help") usage("");
        else if (a == "--device") {
            usage("--device: halformer tune tunes the CPU kernels (--target); GPU schedules are not "
                  "searched yet (see --target cuda)");
        } else usage("unknown argument '" + a + "'");
    }
    return o;
}

// ---------------------------------------------------------------- targets

// The x86 variants the build compiles (HALFORMER_X86_TARGETS), by record name.
std::map<std::string, std::string> build_targets() {
    std::map<std::string, std::string> out;
    std::stringstream ss(HALFORMER_X86_TARGETS);  // comma-separated
    for (std::string t; std::getline(ss, t, ',');)
        if (!t.empty()) out[halformer::tuned_target_name(Halide::Target(t))] = t;
    return out;
}

Halide::Target resolve_target(const std::string &name, std::string *record_name) {
    auto targets = build_targets();
    Halide::Target host = Halide::get_host_target();
    if (name == "host") {
        // The most specific build variant this CPU runs.
        for (const char *n : {"sapphirerapids", "avx512", "avx2", "sse41"}) {
            if (!targets.count(n)) continue;
            Halide::Target t(targets.at(n));
            bool ok = true;
            for (auto f : {Halide::Target::AVX512_SapphireRapids, Halide::Target::AVX512_Skylake,
                           Halide::Target::AVX2, Halide::Target::FMA, Halide::Target::F16C})
                if (t.has_feature(f) && !host.has_feature(f)) ok = false;
            if (ok) {
                *record_name = n;
                return t;
            }
        }
        throw halformer::Error("no build target runs on this CPU");
    }
    if (name == "cuda" || name == "opencl" || name == "gpu") {
        throw halformer::Error(
            "--target " + name + ": GPU schedules are not searched by halformer tune yet (it times on this "
            "machine's CPU). Their numbers are GeneratorParams (gpu_tile_n, gpu_tile_m, gpu_reg_n, gpu_reg_m, "
            "gpu_threads, gpu_query_tile): set them in generators/CMakeLists.txt and time with "
            "bench/gpu/run_gpu.sh on the GPU");
    }
    if (!targets.count(name)) {
        std::string known;
        for (const auto &[k, v] : targets) known += " " + k;
        throw halformer::Error("--target " + name + ": not a build target (known:" + known + ", host)");
    }
    Halide::Target t(targets.at(name));
    for (auto f : {Halide::Target::AVX512_SapphireRapids, Halide::Target::AVX512_Skylake, Halide::Target::AVX2,
                   Halide::Target::FMA})
        if (t.has_feature(f) && !host.has_feature(f))
            throw halformer::Error("--target " + name + ": this CPU cannot run it, so it cannot be timed here");
    *record_name = name;
    return t;
}

// ---------------------------------------------------------------- evaluation

// Generators are built here as libHalide's JIT sees them, with the inputs
// left unbound (as in the AOT build): one compiled candidate then runs at
// every shape by setting the inputs' Parameters, found by name in the
// pipeline. (Halide 14 keeps build_pipeline() protected; Access reaches it.)
struct Access : Halide::Internal::GeneratorBase {
    static Halide::Pipeline build(Halide::Internal::GeneratorBase *g) {
        // configure() adds the optional inputs (residual, mask); GenGen runs
        // it before building, and so must we.
        (g->*(&Access::ensure_configure_has_been_called))();
        return (g->*(&Access::build_pipeline))();
    }
};

// A generator instance with these GeneratorParams, built for the target.
Halide::Pipeline build_pipeline(const std::string &generator, const std::map<std::string, std::string> &params,
                                const Halide::Target &target) {
    auto gen = Halide::Internal::GeneratorRegistry::create(generator, Halide::GeneratorContext(target));
    Halide::Internal::GeneratorParamsMap gp;
    for (const auto &[k, v] : params) gp[k] = v;
    gen->set_generator_param_values(gp);
    return Access::build(gen.get());
}

class ParamFinder : public Halide::Internal::IRGraphVisitor {
public:
    std::map<std::string, Halide::Internal::Parameter> params;

private:
    using IRGraphVisitor::visit;
    void visit(const Halide::Internal::Call *op) override {
        if (op->param.defined()) params.emplace(op->param.name(), op->param);
        IRGraphVisitor::visit(op);
    }
    void visit(const Halide::Internal::Variable *op) override {
        if (op->param.defined()) params.emplace(op->param.name(), op->param);
    }
};

std::map<std::string, Halide::Internal::Parameter> pipeline_params(const Halide::Pipeline &p) {
    ParamFinder finder;
    for (const Halide::Func &out : p.outputs())
        for (const auto &[name, fn] : Halide::Internal::find_transitive_calls(out.function())) fn.accept(&finder);
    return finder.params;
}

// Sets the pipeline's inputs to the op data's values (and, for the
// autoschedulers, their estimates to those sizes).
void bind_inputs(const Halide::Pipeline &pipe, OpData &d, bool estimates) {
    auto params = pipeline_params(pipe);
    for (const InputValue &v : d.inputs()) {
        auto it = params.find(v.name);
        if (it == params.end()) {
            // A scalar the algorithm does not use at these settings (q_offset
            // without the causal mask) is not in the pipeline.
            if (!v.buf.defined()) continue;
            throw halformer::Error("the pipeline has no input named " + v.name);
        }
        Halide::Internal::Parameter prm = it->second;
        if (prm.is_buffer()) {
            prm.set_buffer(v.buf);
            if (estimates)
                for (int i = 0; i < v.buf.dimensions(); i++) {
                    prm.set_min_constraint_estimate(i, 0);
                    prm.set_extent_constraint_estimate(i, v.buf.dim(i).extent());
                }
        } else if (prm.type() == Halide::Float(32)) {
            prm.set_scalar<float>((float)v.scalar);
        } else if (prm.type() == Halide::Int(32)) {
            prm.set_scalar<int32_t>((int32_t)v.scalar);
        } else {
            throw halformer::Error("input " + v.name + " has a scalar type the tuner does not set");
        }
    }
}

double seconds_since(Clock::time_point t0) {
    return std::chrono::duration<double>(Clock::now() - t0).count();
}

// Median time of f in ms: batches of at least ~10 ms, 3–9 of them.
double time_ms(const std::function<void()> &f) {
    f();  // warm: first-call allocations, page faults
    auto t0 = Clock::now();
    f();
    double one = std::max(seconds_since(t0), 1e-7);
    int inner = std::max(1, (int)(0.01 / one));
    int batches = std::clamp((int)(0.15 / (one * inner)), 3, 9);
    std::vector<double> v;
    for (int b = 0; b < batches; b++) {
        t0 = Clock::now();
        for (int i = 0; i < inner; i++) f();
        v.push_back(seconds_since(t0) / inner);
    }
    std::nth_element(v.begin(), v.begin() + v.size() / 2, v.end());
    return v[v.size() / 2] * 1e3;
}

constexpr double kTolerance = 1e-4;

enum class Sched { Hand, Mullapudi, Adams };

struct Measured {
    bool ok = false;
    std::string error;
    std::vector<double> ms;  // per shape
    double score = INFINITY; // Σ ms
    std::vector<uint8_t> featurization;  // autoschedulers: of the first shape's schedule
    std::string schedule_source;         // autoschedulers: the schedule as C++
    std::string edge_error;              // the first small/odd shape that failed ("": all passed)
};

std::map<std::string, std::string> gen_params(const Task &task, const Shape &shape, const Point &p, Sched s) {
    auto params = task.fixed();
    for (const auto &[k, v] : shape.gen) params[k] = v;
    if (s == Sched::Hand) {
        for (const auto &[k, v] : p) params[k] = std::to_string(v);
    } else {
        params["auto_schedule"] = "true";
    }
    return params;
}

std::string gen_key(const Shape &s) {
    std::string k;
    for (const auto &[a, b] : s.gen) k += a + "=" + b + ";";
    return k;
}

std::string one_line(std::string e) {
    while (!e.empty() && (e.back() == '\n' || e.back() == ' ')) e.pop_back();
    for (char &c : e)
        if (c == '\n') c = ' ';
    if (e.size() > 300) e = e.substr(0, 300) + "...";
    return e;
}

// Runs a compiled candidate at one shape and checks it; "" or the problem.
std::string run_and_check(Halide::Pipeline &pipe, const Task &task,
                          const std::map<std::string, std::string> &params, const Shape &shape,
                          const Halide::Target &target, double *ms) {
    auto data = make_op_data(task.generator(), params, shape);
    bind_inputs(pipe, *data, false);
    Halide::Realization out = data->outputs();
    try {
        pipe.realize(out, target);
    } catch (const std::exception &e) {
        return "fails at " + shape.label + ": " + one_line(e.what());
    }
    double err = data->error();
    if (!(err <= kTolerance)) {
        char buf[160];
        std::snprintf(buf, sizeof(buf), "wrong result at %s: relative error %.3g > %.0e", shape.label.c_str(), err,
                      kTolerance);
        return buf;
    }
    if (ms) *ms = time_ms([&] { pipe.realize(out, target); });
    return "";
}

// Compiles one candidate (once per distinct set of algorithm parameters
// among the shapes), checks it against the reference at every shape, times
// it; then checks the edge shapes, if given. The autoschedulers schedule for
// the first shape.
Measured measure(const Task &task, const std::vector<Shape> &shapes, const Point &p, Sched s,
                 const Halide::Target &target, int threads, bool timed = true,
                 const std::vector<Shape> *edges = nullptr) {
    Measured m;
    m.ms.assign(shapes.size(), 0.0);
    std::vector<std::string> groups;
    for (const auto &sh : shapes)
        if (std::find(groups.begin(), groups.end(), gen_key(sh)) == groups.end()) groups.push_back(gen_key(sh));
    try {
        for (const auto &group : groups) {
            size_t first = 0;
            while (gen_key(shapes[first]) != group) first++;
            auto params = gen_params(task, shapes[first], p, s);
            Halide::Pipeline pipe = build_pipeline(task.generator(), params, target);
            if (s != Sched::Hand) {
                auto data = make_op_data(task.generator(), params, shapes[first]);
                bind_inputs(pipe, *data, true);
                auto extents = data->output_extents();
                auto outs = pipe.outputs();
                for (size_t i = 0; i < outs.size() && i < extents.size(); i++) {
                    Halide::Region r;
                    for (int e : extents[i]) r.push_back(Halide::Range(0, e));
                    outs[i].set_estimates(r);
                }
                // Guarded: the autoscheduler's schedule with every tail guarded, as the
                // build's autoscheduled kernels (schedules/guarded_autoschedulers.cpp).
                auto res = pipe.auto_schedule(s == Sched::Adams ? "GuardedAdams2019" : "GuardedMullapudi2016", target,
                                              Halide::MachineParams(threads, 32 << 20, 40));
                m.featurization = res.featurization;
                m.schedule_source = res.schedule_source;
            }
            pipe.compile_jit(target);
            for (size_t i = 0; i < shapes.size(); i++) {
                if (gen_key(shapes[i]) != group) continue;
                std::string err = run_and_check(pipe, task, params, shapes[i], target,
                                                timed ? &m.ms[i] : nullptr);
                if (!err.empty()) {
                    m.error = err;
                    return m;
                }
            }
            if (edges)
                for (const auto &e : *edges) {
                    if (gen_key(e) != group || !m.edge_error.empty()) continue;
                    m.edge_error = run_and_check(pipe, task, gen_params(task, e, p, s), e, target, nullptr);
                }
        }
    } catch (const std::exception &e) {
        m.error = one_line(e.what());
        return m;
    }
    m.ok = true;
    m.score = 0;
    for (double x : m.ms) m.score += x;
    return m;
}

// ---------------------------------------------------------------- state

struct Entry {
    std::string task, kind, key;  // kind: hand | mullapudi2016 | adams2019 | adams-sample | confirm
    bool ok = false;
    std::string error;
    std::vector<double> ms;
    double score = INFINITY;
    double t = 0;  // tuning seconds spent when it finished
};

std::string entry_json(const Entry &e) {
    std::ostringstream o;
    o << "{\"task\":" << quote(e.task) << ",\"kind\":" << quote(e.kind) << ",\"key\":" << quote(e.key)
      << ",\"ok\":" << (e.ok ? "true" : "false") << ",\"error\":" << quote(e.error) << ",\"ms\":[";
    for (size_t i = 0; i < e.ms.size(); i++) o << (i ? "," : "") << e.ms[i];
    o << "],\"score\":" << (std::isfinite(e.score) ? e.score : -1) << ",\"t\":" << e.t << "}";
    return o.str();
}

std::vector<Entry> load_state(const std::string &path) {
    std::vector<Entry> out;
    std::ifstream in(path);
    std::string line;
    int n = 0;
    while (std::getline(in, line)) {
        n++;
        if (line.empty()) continue;
        halformer::json::Value v;
        try {
            v = halformer::json::parse(line, path + " line " + std::to_string(n));
        } catch (const std::exception &) {
            // A line cut short by a kill: everything before it stands.
            std::fprintf(stderr, "halformer tune: %s line %d is incomplete; ignoring it\n", path.c_str(), n);
            continue;
        }
        Entry e;
        auto str = [&](const char *k) { auto *x = v.find(k); return x && x->is_string() ? x->string : std::string(); };
        e.task = str("task");
        e.kind = str("kind");
        e.key = str("key");
        e.error = str("error");
        if (auto *x = v.find("ok")) e.ok = x->boolean;
        if (auto *x = v.find("ms"))
            for (const auto &y : x->array) e.ms.push_back(y.number);
        if (auto *x = v.find("score")) e.score = x->number < 0 ? INFINITY : x->number;
        if (auto *x = v.find("t")) e.t = x->number;
        out.push_back(e);
    }
    return out;
}

// ---------------------------------------------------------------- progress

volatile std::sig_atomic_t g_stop = 0;
void on_signal(int) { g_stop = 1; }

std::string fmt_time(double s) {
    char buf[32];
    int t = (int)std::lround(std::max(0.0, s));
    if (t >= 3600) std::snprintf(buf, sizeof(buf), "%dh%02dm", t / 3600, t / 60 % 60);
    else std::snprintf(buf, sizeof(buf), "%dm%02ds", t / 60, t % 60);
    return buf;
}

struct Progress {
    double budget = 0, spent0 = 0;  // spent0: seconds from earlier runs (--resume)
    Clock::time_point start = Clock::now();
    bool tty = isatty(2);
    double spent() const { return spent0 + seconds_since(start); }
    void show(const std::string &task, int candidates, double best, double hand, const std::string &what) {
        double s = spent(), frac = std::min(1.0, s / budget);
        int filled = (int)(frac * 24);
        std::string bar(filled, '#');
        bar += std::string(24 - filled, '.');
        char line[320];
        std::snprintf(line, sizeof(line), "[%s] %3.0f%% %s/%s ETA %s | %-22s | %3d cand | best %.4g ms (hand %.4g, %.2fx) %s",
                      bar.c_str(), frac * 100, fmt_time(s).c_str(), fmt_time(budget).c_str(),
                      fmt_time(budget - s).c_str(), task.c_str(), candidates, best, hand,
                      best > 0 ? hand / best : 0.0, what.c_str());
        if (tty) std::fprintf(stderr, "\r\033[K%s", line);
        else std::fprintf(stderr, "%s\n", line);
        std::fflush(stderr);
    }
    void done_line() {
        if (tty) std::fprintf(stderr, "\n");
    }
};

// ---------------------------------------------------------------- files

void make_dirs(const std::string &path) {
    std::string cur;
    std::stringstream ss(path);
    if (!path.empty() && path[0] == '/') cur = "/";
    for (std::string part; std::getline(ss, part, '/');) {
        if (part.empty()) continue;
        cur += part + "/";
        if (mkdir(cur.c_str(), 0755) != 0 && errno != EEXIST)
            throw halformer::Error("cannot create directory " + cur + ": " + std::strerror(errno));
    }
}

bool exists(const std::string &path) {
    struct stat st;
    return stat(path.c_str(), &st) == 0;
}

// Writes path atomically (temporary file, then rename).
void write_file(const std::string &path, const std::string &text) {
    std::string tmp = path + ".tmp";
    {
        std::ofstream out(tmp, std::ios::binary);
        out << text;
        if (!out) throw halformer::Error("cannot write " + tmp);
    }
    if (std::rename(tmp.c_str(), path.c_str()) != 0) throw halformer::Error("cannot write " + path);
}

std::string run_capture(const std::string &cmd) {
    std::string out;
    FILE *p = popen(cmd.c_str(), "r");
    if (!p) return out;
    char buf[512];
    while (fgets(buf, sizeof(buf), p)) out += buf;
    pclose(p);
    while (!out.empty() && (out.back() == '\n' || out.back() == ' ')) out.pop_back();
    return out;
}

std::string shell_quote(const std::string &s) {
    std::string q = "'";
    for (char c : s) q += c == '\'' ? std::string("'\\''") : std::string(1, c);
    return q + "'";
}

std::string machine_name(int threads) {
    std::ifstream in("/proc/cpuinfo");
    std::string line, model = "unknown CPU";
    while (std::getline(in, line))
        if (line.rfind("model name", 0) == 0) {
            model = line.substr(line.find(':') + 2);
            break;
        }
    return model + ", " + std::to_string(threads) + " threads";
}

std::string today() {
    std::time_t t = std::time(nullptr);
    char buf[16];
    std::strftime(buf, sizeof(buf), "%Y-%m-%d", std::gmtime(&t));
    return buf;
}

// Runs a command with a time limit; returns its exit status (-1: killed).
int run_with_timeout(const std::vector<std::string> &args, const std::string &stdout_path, double timeout_s) {
    pid_t pid = fork();
    if (pid < 0) return -1;
    if (pid == 0) {
        FILE *f = std::freopen(stdout_path.c_str(), "w", stdout);
        (void)f;
        std::freopen("/dev/null", "w", stderr);
        std::vector<char *> argv;
        for (const auto &a : args) argv.push_back(const_cast<char *>(a.c_str()));
        argv.push_back(nullptr);
        execv(argv[0], argv.data());
        _exit(127);
    }
    auto t0 = Clock::now();
    int status = 0;
    while (true) {
        pid_t r = waitpid(pid, &status, WNOHANG);
        if (r == pid) return WIFEXITED(status) ? WEXITSTATUS(status) : -1;
        if (seconds_since(t0) > timeout_s || g_stop) {
            kill(pid, SIGKILL);
            waitpid(pid, &status, 0);
            return -1;
        }
        usleep(20000);
    }
}

// ---------------------------------------------------------------- worker

// One Adams2019 schedule in this (child) process: the autoscheduler reads
// HL_RANDOM_DROPOUT once per process, so each sample gets its own. Schedules
// for the task's first shape, checks and times it at all the task's shapes,
// checks the edge shapes. Prints "RESULT ok SCORE FIRST_MS" (+ " EDGE msg"
// when an edge shape failed) or "RESULT fail MESSAGE"; writes the sample
// file for retraining and the schedule source.
int run_worker(const Options &o, const std::vector<Task> &tasks, const Halide::Target &target, int threads) {
    if (o.task < 0 || o.task >= (int)tasks.size()) usage("--task out of range");
    setenv("HL_SEED", std::to_string(o.seed).c_str(), 1);
    setenv("HL_RANDOM_DROPOUT", std::to_string(o.dropout).c_str(), 1);
    setenv("HL_BEAM_SIZE", std::to_string(o.beam).c_str(), 1);
    if (!o.weights.empty() && exists(o.weights)) setenv("HL_WEIGHTS_DIR", o.weights.c_str(), 1);
    Halide::load_plugin(std::string(HALIDE_PLUGIN_DIR) + "/libautoschedule_adams2019.so");
    const Task &task = tasks[o.task];
    Measured m = measure(task, task.shapes, {}, Sched::Adams, target, threads, true, &task.edges);
    if (!m.ok) {
        std::printf("RESULT fail %s\n", m.error.c_str());
        return 0;
    }
    if (!o.sample_out.empty()) {
        std::ofstream(o.sample_out + ".schedule.txt") << m.schedule_source;
        if (!m.featurization.empty()) {
            std::string feat = o.sample_out + ".featurization";
            std::ofstream(feat, std::ios::binary).write((const char *)m.featurization.data(), m.featurization.size());
            // runtime in seconds (first shape: the one scheduled for), pipeline id,
            // schedule id, as autotune_loop.sh passes them
            std::string cmd = std::string(HALIDE_PLUGIN_DIR) + "/featurization_to_sample " + shell_quote(feat) + " " +
                              std::to_string(m.ms.front() / 1e3) + " " + std::to_string(o.pipeline_id) + " " +
                              std::to_string(o.seed) + " " + shell_quote(o.sample_out) + " >/dev/null 2>&1";
            if (std::system(cmd.c_str()) != 0) std::remove(o.sample_out.c_str());
            std::remove(feat.c_str());
        }
    }
    std::printf("RESULT ok %.6f %.6f%s%s\n", m.score, m.ms.front(), m.edge_error.empty() ? "" : " EDGE ",
                m.edge_error.c_str());
    return 0;
}

// ---------------------------------------------------------------- records

// The lowered loop nest of a generator instance, with Halide's per-process
// unique-name counters removed so that two builds compare as text.
std::string lowered(const std::string &generator, const std::map<std::string, std::string> &params,
                    const Halide::Target &target, const std::string &path) {
    Halide::Pipeline pipe = build_pipeline(generator, params, target);
    pipe.compile_to_lowered_stmt(path, pipe.infer_arguments(), Halide::StmtOutputFormat::Text, target);
    std::ifstream in(path);
    std::stringstream ss;
    ss << in.rdbuf();
    // Identifiers lose their digits, '$' and '_' (unique-name counters come
    // as y_18, t18319, logits$3); numbers standing alone (extents, split
    // factors) stay.
    std::string text = ss.str(), out;
    for (size_t i = 0; i < text.size(); i++) {
        char c = text[i];
        if (std::isalpha((unsigned char)c) || c == '_') {
            while (i < text.size() && (std::isalnum((unsigned char)text[i]) || text[i] == '_' || text[i] == '.' ||
                                       text[i] == '$')) {
                if (!std::isdigit((unsigned char)text[i]) && text[i] != '$' && text[i] != '_') out += text[i];
                i++;
            }
            i--;
            continue;
        }
        out += c;
    }
    // Closure packing follows name order, which the counters change: drop
    // those lines, and compare the rest as a sorted multiset of lines.
    std::vector<std::string> lines;
    std::stringstream ls(out);
    for (std::string line; std::getline(ls, line);)
        if (line.find("closure") == std::string::npos) lines.push_back(line);
    std::sort(lines.begin(), lines.end());
    out.clear();
    for (const auto &line : lines) out += line + "\n";
    std::ofstream(path + ".normalized") << out;
    return out;
}

// Checks that the generators apply the records compiled into this build:
// for one kernel of each record row's op, the loop nest built under its
// name (tuned_as) must equal the one built from the record's values given
// explicitly, and differ from the hand schedule's.
int check_records(const std::string &work) {
    int n = 0, bad = 0;
    const halformer::TunedRow *rows = halformer::tuned_rows(&n);
    auto targets = build_targets();
    std::set<std::string> seen;
    make_dirs(work);
    for (int i = 0; i < n; i++) {
        const KernelInfo &k = kernel_info(rows[i].kernel);
        std::string op = std::string(rows[i].target) + "/" + k.generator;
        if (seen.count(op) || !targets.count(rows[i].target)) continue;
        seen.insert(op);
        Halide::Target t(targets.at(rows[i].target));
        auto hand = parse_params(k.params);
        auto explicit_params = hand;
        for (const auto &[name, v] : halformer::parse_tuned_params(rows[i].params)) explicit_params[name] = std::to_string(v);
        auto named = hand;
        named["tuned_as"] = rows[i].kernel;
        std::string a = lowered(k.generator, named, t, work + "/a.stmt");
        std::string b = lowered(k.generator, explicit_params, t, work + "/b.stmt");
        std::string c = lowered(k.generator, hand, t, work + "/c.stmt");
        bool ok = a == b && a != c;
        if (!ok) {  // keep the loop nests for a look
            for (const char *f : {"a", "b", "c"})
                std::rename((work + "/" + f + ".stmt.normalized").c_str(),
                            (work + "/" + rows[i].target + "_" + rows[i].kernel + "_" + f + ".stmt").c_str());
        }
        bad += !ok;
        std::printf("%s %-14s %-24s %s%s\n", ok ? "ok  " : "FAIL", rows[i].target, rows[i].kernel, rows[i].params,
                    a != b ? "  (the build does not apply the record)" : a == c ? "  (same as the hand schedule)" : "");
    }
    std::printf("%zu record rows checked, %d failed\n", seen.size(), bad);
    return bad ? 1 : 0;
}

// ---------------------------------------------------------------- the search

struct TaskResult {
    const Task *task = nullptr;
    Point hand, best;
    double hand_score = INFINITY, best_score = INFINITY;      // search, Σ over shapes
    double hand_confirm = INFINITY, best_confirm = INFINITY;  // confirmation medians, Σ over shapes
    std::vector<double> hand_ms;                              // confirmation, per shape
    Entry mullapudi, adams;                                   // first shape
    Entry adams_best;    // best Adams2019 schedule (Σ over shapes)
    Entry adams_valid;   // best one that also passed the small shapes: may win
    double adams_confirm = NAN;
    bool adams_wins = false;
    std::string schedule_source;
    int candidates = 0, failed = 0, adams_samples = 0, retrains = 0;
    bool tuned = false;        // record keeps `best`
    std::string verdict;
    std::string edge_error;    // the winner failed an edge shape
};

class Tuner {
public:
    Tuner(const Options &o, std::vector<Task> tasks, Halide::Target target, std::string target_name, int threads)
        : o_(o), tasks_(std::move(tasks)), target_(target), target_name_(std::move(target_name)), threads_(threads) {
        registers_ = halformer::vector_registers(target_);
    }

    int run();

private:
    const Options &o_;
    std::vector<Task> tasks_;
    Halide::Target target_;
    std::string target_name_;
    int threads_, registers_;
    Progress progress_;
    std::vector<Entry> state_;
    std::ofstream state_out_, curve_out_;
    std::string out_dir_, work_dir_;

    const Entry *find(const std::string &task, const std::string &kind, const std::string &key) const {
        for (const auto &e : state_)
            if (e.task == task && e.kind == kind && e.key == key) return &e;
        return nullptr;
    }
    void record(const Entry &e) {
        state_.push_back(e);
        state_out_ << entry_json(e) << "\n";
        state_out_.flush();
    }
    // A point of the hand space: measured, or from the state (--resume).
    Entry evaluate(const Task &t, const Point &p) {
        std::string key = point_key(p);
        if (const Entry *e = find(t.id(), "hand", key)) return *e;
        Measured m = measure(t, t.shapes, p, Sched::Hand, target_, threads_);
        Entry e{t.id(), "hand", key, m.ok, m.error, m.ms, m.score, progress_.spent()};
        record(e);
        return e;
    }
    void curve(const Task &t, double best, double hand, const std::string &kind) {
        curve_out_ << t.id() << "," << progress_.spent() << "," << best << "," << hand << "," << kind << "\n";
        curve_out_.flush();
    }
    void search_hand(const Task &t, TaskResult &r, double until);
    void search_adams(const Task &t, TaskResult &r, double until);
    Entry run_adams(const Task &t, const std::string &kind, int seed, int beam, int dropout,
                    const std::string &weights, double until);
    int retrains_ = 0;  // cost-model generations so far (all tasks)
    void confirm(const Task &t, TaskResult &r);
    void write_outputs(const std::vector<TaskResult> &results, bool complete);
};

void Tuner::search_hand(const Task &t, TaskResult &r, double until) {
    r.hand = t.hand();
    Entry h = evaluate(t, r.hand);
    r.candidates++;
    if (!h.ok) throw halformer::Error(t.id() + ": the hand schedule fails: " + h.error);
    r.hand_score = r.best_score = h.score;
    r.best = r.hand;
    curve(t, r.best_score, r.hand_score, "hand");
    progress_.show(t.id(), r.candidates, r.best_score, r.hand_score, "hand");

    auto consider = [&](const Point &p) {
        if (!t.feasible(p, registers_) || progress_.spent() >= until || g_stop) return false;
        Entry e = evaluate(t, p);
        r.candidates++;
        if (!e.ok) r.failed++;
        // A new best must win by 1%: below that it is timing noise.
        bool better = e.ok && e.score < r.best_score * 0.99;
        if (better) {
            r.best = p;
            r.best_score = e.score;
        }
        curve(t, r.best_score, r.hand_score, "hand");
        progress_.show(t.id(), r.candidates, r.best_score, r.hand_score, e.ok ? point_key(p) : "failed: " + e.error.substr(0, 40));
        return better;
    };
    // Coordinate descent: each knob in turn over all its values, others held.
    for (int pass = 0; pass < 4; pass++) {
        bool improved = false;
        for (const auto &k : t.knobs) {
            Point base = r.best;
            for (int v : k.values) {
                if (v == base[k.name]) continue;
                Point p = base;
                p[k.name] = v;
                improved |= consider(p);
            }
        }
        if (!improved) break;
    }
    // Then the untried rest of the grid, in a fixed random order.
    std::vector<Point> grid{{}};
    for (const auto &k : t.knobs) {
        std::vector<Point> next;
        for (const auto &g : grid)
            for (int v : k.values) {
                Point p = g;
                p[k.name] = v;
                next.push_back(p);
            }
        grid = next;
    }
    std::shuffle(grid.begin(), grid.end(), std::mt19937(7));
    for (const auto &p : grid) {
        if (progress_.spent() >= until || g_stop) break;
        if (find(t.id(), "hand", point_key(p)) || !t.feasible(p, registers_)) continue;
        consider(p);
    }
}

Entry Tuner::run_adams(const Task &t, const std::string &kind, int seed, int beam, int dropout,
                       const std::string &weights, double until) {
    std::string key = "seed=" + std::to_string(seed) + ",beam=" + std::to_string(beam) +
                      ",dropout=" + std::to_string(dropout) + ",weights=" + weights;
    if (kind != "confirm")
        if (const Entry *e = find(t.id(), kind, key)) return *e;
    std::string samples = work_dir_ + "/samples/" + t.op + "_" + t.shape_class;
    make_dirs(samples);
    std::string self = "/proc/self/exe";
    char buf[4096];
    ssize_t n = readlink(self.c_str(), buf, sizeof(buf) - 1);
    if (n > 0) self.assign(buf, n);
    std::string sample = kind == "confirm" ? "" : samples + "/" + std::to_string(seed) + ".sample";
    std::string out = work_dir_ + "/worker.out";
    int pipeline_id = 0;
    for (size_t i = 0; i < tasks_.size(); i++)
        if (tasks_[i].id() == t.id()) pipeline_id = (int)i;
    std::vector<std::string> args{self, "--worker", "adams", "--ops", t.id(), "--task", "0", "--pipeline-id",
                                  std::to_string(pipeline_id), "--seed", std::to_string(seed), "--beam",
                                  std::to_string(beam), "--dropout", std::to_string(dropout), "--weights",
                                  weights.empty() ? "" : work_dir_ + "/" + weights, "--sample-out", sample,
                                  "--target", target_name_, "--config", o_.config, "--threads",
                                  std::to_string(threads_), "--rows", std::to_string(o_.workload.prefill_rows),
                                  "--cache-len", std::to_string(o_.workload.cache_len), "--decode-rows",
                                  std::to_string(o_.workload.decode_rows)};
    // The default search (beam 32) is the baseline of the table: it gets at
    // least 90 s; a sample at least 20 s.
    double limit = std::max(kind == "adams2019" ? 90.0 : 20.0, std::min(240.0, until - progress_.spent() + 30));
    int rc = run_with_timeout(args, out, limit);
    Entry e{t.id(), kind, key, false, "", {}, INFINITY, 0};
    std::ifstream in(out);
    std::string line, last;
    while (std::getline(in, line))
        if (line.rfind("RESULT ", 0) == 0) last = line;
    if (last.rfind("RESULT ok ", 0) == 0) {
        std::istringstream ls(last.substr(10));
        double first = 0;
        ls >> e.score >> first;
        e.ok = true;
        e.ms = {first};
        std::string rest;
        std::getline(ls, rest);
        if (rest.rfind(" EDGE ", 0) == 0) e.error = "small shapes: " + rest.substr(6);
    } else if (last.rfind("RESULT fail ", 0) == 0) {
        e.error = last.substr(12);
    } else {
        e.error = rc == -1 ? "timed out or stopped" : "worker exited with status " + std::to_string(rc);
    }
    e.t = progress_.spent();
    if (!(g_stop && !e.ok) && kind != "confirm") record(e);
    return e;
}

void Tuner::search_adams(const Task &t, TaskResult &r, double until) {
    // Mullapudi2016, once, in process.
    if (const Entry *e = find(t.id(), "mullapudi2016", "")) {
        r.mullapudi = *e;
    } else {
        Measured m = measure(t, t.shapes, {}, Sched::Mullapudi, target_, threads_);
        r.mullapudi = {t.id(), "mullapudi2016", "", m.ok, m.error, m.ms, m.score, progress_.spent()};
        record(r.mullapudi);
    }
    if (!o_.adams) return;
    const Entry *hand = find(t.id(), "hand", point_key(r.hand));
    auto consider = [&](const Entry &e) {
        if (!e.ok) return;
        if (e.score < r.adams_best.score || !r.adams_best.ok) r.adams_best = e;
        if (e.error.empty() && (!r.adams_valid.ok || e.score < r.adams_valid.score)) r.adams_valid = e;
        if (hand) curve(t, r.adams_best.score, hand->score, "adams2019");
    };
    // The default search (beam 32, no dropout) with the shipped cost model.
    r.adams = run_adams(t, "adams2019", 0, 32, 100, "", until);
    consider(r.adams);
    progress_.show(t.id(), r.candidates, r.best_score, r.hand_score, "adams2019 default");
    // Batches as autotune_loop.sh: one best-effort schedule under the current
    // model, then random probes biased by it; after each batch the cost model
    // is retrained on every sample benchmarked so far (all tasks).
    const int batch = 6, kEpochs = 60;
    int seed = 1;
    while (progress_.spent() < until && !g_stop) {
        std::string weights = retrains_ > 0 ? "cost_model_" + std::to_string(retrains_) + ".weights" : "";
        for (int i = 0; i < batch && progress_.spent() < until && !g_stop; i++, seed++) {
            bool best_effort = i == 0;
            Entry e = run_adams(t, "adams-sample", seed, best_effort ? 32 : 1, best_effort ? 100 : 1, weights, until);
            r.adams_samples++;
            consider(e);
            progress_.show(t.id(), r.candidates + r.adams_samples, r.best_score, r.hand_score,
                           "adams sample " + std::to_string(seed) + (e.ok ? "" : " failed"));
        }
        if (g_stop || progress_.spent() >= until) break;
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
        if (std::system(cmd.c_str()) == 0 && exists(next)) {
            retrains_++;
            r.retrains++;
        }
    }
}

std::map<std::string, std::string> parse_key(const std::string &key) {
    std::map<std::string, std::string> out;
    std::stringstream ss(key);
    for (std::string item; std::getline(ss, item, ',');) {
        size_t eq = item.find('=');
        if (eq != std::string::npos) out[item.substr(0, eq)] = item.substr(eq + 1);
    }
    return out;
}

double median(std::vector<double> v) {
    if (v.empty()) return NAN;
    std::sort(v.begin(), v.end());
    return v[v.size() / 2];
}

// The contenders re-timed interleaved over 3 rounds (medians of Σ over the
// shapes): the hand values, the best point of their space, and the best
// Adams2019 schedule that passed the small shapes (re-created in a worker
// from the same seed and cost model). A winner must beat the hand values by
// 3% here; a point of the hand space must also pass the small shapes.
void Tuner::confirm(const Task &t, TaskResult &r) {
    const bool space = point_key(r.best) != point_key(r.hand);
    const bool adams = r.adams_valid.ok && r.adams_valid.score < std::min(r.best_score, r.hand_score);
    std::vector<std::vector<double>> hand(t.shapes.size()), best(t.shapes.size());
    std::vector<double> adams_scores;
    for (int round = 0; round < 3 && (space || adams) && !g_stop; round++) {
        Measured a = measure(t, t.shapes, r.hand, Sched::Hand, target_, threads_);
        if (!a.ok) break;
        for (size_t i = 0; i < t.shapes.size(); i++) hand[i].push_back(a.ms[i]);
        if (space) {
            Measured b = measure(t, t.shapes, r.best, Sched::Hand, target_, threads_);
            for (size_t i = 0; i < t.shapes.size() && b.ok; i++) best[i].push_back(b.ms[i]);
        }
        if (adams) {
            auto k = parse_key(r.adams_valid.key);
            Entry e = run_adams(t, "confirm", std::stoi(k["seed"]), std::stoi(k["beam"]), std::stoi(k["dropout"]),
                                k["weights"], progress_.spent() + 120);
            if (e.ok) adams_scores.push_back(e.score);
        }
        progress_.show(t.id(), r.candidates + r.adams_samples, r.best_score, r.hand_score,
                       "confirming, round " + std::to_string(round + 1));
    }
    r.hand_confirm = r.best_confirm = 0;
    const Entry *h = find(t.id(), "hand", point_key(r.hand));
    for (size_t i = 0; i < t.shapes.size(); i++) {
        double hm = hand[i].empty() ? h->ms[i] : median(hand[i]);
        double bm = best[i].empty() ? hm : median(best[i]);
        r.hand_ms.push_back(hm);
        r.hand_confirm += hm;
        r.best_confirm += bm;
    }
    r.adams_confirm = median(adams_scores);
    // 3%: below that, a win is within this machine's run-to-run noise.
    if (space && r.best_confirm < r.hand_confirm * 0.97) {
        Measured e = measure(t, t.edges, r.best, Sched::Hand, target_, threads_, /*timed=*/false);
        if (e.ok) {
            r.tuned = true;
        } else {
            r.edge_error = e.error;
        }
    }
    if (!r.tuned) r.best_confirm = r.hand_confirm;
    if (std::isfinite(r.adams_confirm) && r.adams_confirm < r.best_confirm * 0.97) {
        r.adams_wins = true;
        auto k = parse_key(r.adams_valid.key);
        std::ifstream in(work_dir_ + "/samples/" + t.op + "_" + t.shape_class + "/" + k["seed"] + ".sample.schedule.txt");
        std::stringstream ss;
        ss << in.rdbuf();
        r.schedule_source = ss.str();
        if (r.schedule_source.empty()) r.adams_wins = false;  // (the default search keeps no file)
    }
    if (r.adams_wins) {
        r.verdict = "Adams2019 schedule (" + r.adams_valid.key + ") for " + t.kernel +
                    (r.tuned ? "; the hand-space point for the rest of the group" : "");
    } else if (r.tuned) {
        r.verdict = "tuned";
    } else if (!r.edge_error.empty()) {
        r.verdict = "hand values kept: the best point failed a small shape: " + r.edge_error;
    } else if (space || adams) {
        r.verdict = "hand values kept: no contender beat them when re-timed";
    } else {
        r.verdict = "hand values kept: no candidate beat them";
    }
}

std::string fmt_ms(double ms) {
    if (!std::isfinite(ms)) return "—";
    char buf[32];
    std::snprintf(buf, sizeof(buf), ms < 0.1 ? "%.4f" : ms < 10 ? "%.3f" : "%.2f", ms);
    return buf;
}

std::string fmt_ratio(double base, double x) {
    if (!std::isfinite(base) || !std::isfinite(x) || x <= 0) return "";
    char buf[32];
    std::snprintf(buf, sizeof(buf), " (%.2f×)", base / x);
    return buf;
}

std::string ratio_cell(double base, double x) {
    std::string s = fmt_ratio(base, x);  // " (1.23×)"
    return s.size() > 3 ? s.substr(2, s.size() - 3) : s;
}

void Tuner::write_outputs(const std::vector<TaskResult> &results, bool complete) {
    const std::string command = "halformer tune " + [&] {
        std::string s;
        for (const auto &a : o_.argv) s += (s.empty() ? "" : " ") + a;
        return s;
    }();
    std::string commit = run_capture("git -C " + shell_quote(HALFORMER_SOURCE_DIR) + " rev-parse --short HEAD 2>/dev/null");
    halformer::Config cfg = o_.config == "base" ? halformer::Config::base()
                                                : halformer::Config::from_file(o_.config + "/config.json");
    std::ostringstream js;
    js << "{\n  \"format\": 1,\n  \"target\": " << quote(target_name_) << ",\n  \"halide_target\": "
       << quote(target_.to_string()) << ",\n  \"machine\": " << quote(machine_name(threads_)) << ",\n  \"date\": "
       << quote(today()) << ",\n  \"commit\": " << quote(commit) << ",\n  \"command\": " << quote(command)
       << ",\n  \"complete\": " << (complete ? "true" : "false") << ",\n  \"config\": " << cfg.to_json()
       << ",\n  \"budget_s\": " << o_.budget_s << ",\n  \"spent_s\": " << progress_.spent() << ",\n  \"tasks\": [";
    // The table: primary shape for the autoschedulers (they specialise to one
    // shape), Σ over the task's shapes for hand and tuned.
    std::ostringstream md;
    md << "# Tuned record: " << target_name_ << "\n\n"
       << "Machine: " << machine_name(threads_) << ". Date: " << today() << ". Commit: " << commit << ".\n"
       << "Command: `" << command << "` (" << fmt_time(progress_.spent()) << " of a " << fmt_time(o_.budget_s)
       << " budget" << (complete ? "" : "; stopped early: rerun with --resume") << ").\n\n"
       << "Times are medians in ms on this machine, one run, summed over the task's shapes; ratios are\n"
       << "speed-ups over the hand schedule. *hand* and *tuned*: re-timed interleaved in a confirmation\n"
       << "round. *Adams2019* (its default search, and the best of the samples of its retraining loop)\n"
       << "and *Mullapudi2016* schedule for the first shape and run at all of them; † marks a schedule\n"
       << "that fails on small or odd shapes (it may not win: the kernels take any size).\n\n"
       << "| op | class | shapes | hand | tuned | tuned vs hand | Adams2019 default | Adams2019 best (samples) | Mullapudi2016 | record |\n"
       << "|---|---|---|---|---|---|---|---|---|---|\n";
    std::ostringstream kernels, schedules;
    int nk = 0, ns = 0;
    double log_sum = 0;
    int n_ratio = 0;
    for (size_t i = 0; i < results.size(); i++) {
        const auto &r = results[i];
        const Task &t = *r.task;
        std::string shapes;
        for (const auto &s : t.shapes) shapes += (shapes.empty() ? "" : ", ") + s.label;
        js << (i ? "," : "") << "\n    {\"op\": " << quote(t.op) << ", \"class\": " << quote(t.shape_class)
           << ", \"kernel\": " << quote(t.kernel) << ", \"shapes\": " << quote(shapes)
           << ", \"hand\": " << quote(point_key(r.hand)) << ", \"hand_ms\": " << r.hand_confirm
           << ", \"best\": " << quote(point_key(r.best)) << ", \"best_ms\": " << r.best_confirm
           << ", \"tuned\": " << (r.tuned ? "true" : "false") << ", \"verdict\": " << quote(r.verdict)
           << ", \"candidates\": " << r.candidates << ", \"failed\": " << r.failed
           << ", \"adams2019_ms\": " << (r.adams.ok ? r.adams.score : -1)
           << ", \"adams2019_best_ms\": " << (r.adams_best.ok ? r.adams_best.score : -1)
           << ", \"adams2019_samples\": " << r.adams_samples << ", \"retrains\": " << r.retrains
           << ", \"adams2019_confirmed_ms\": " << (std::isfinite(r.adams_confirm) ? r.adams_confirm : -1)
           << ", \"adams2019_wins\": " << (r.adams_wins ? "true" : "false")
           << ", \"mullapudi2016_ms\": " << (r.mullapudi.ok ? r.mullapudi.score : -1) << "}";
        double tuned_ms = r.adams_wins ? r.adams_confirm : r.best_confirm;
        if (std::isfinite(tuned_ms) && tuned_ms > 0 && std::isfinite(r.hand_confirm)) {
            log_sum += std::log(r.hand_confirm / tuned_ms);
            n_ratio++;
        }
        auto auto_cell = [&](const Entry &e) {
            if (e.kind.empty()) return std::string("not run");
            if (!e.ok) return std::string(e.error == "timed out or stopped" ? "timed out" : "failed");
            return fmt_ms(e.score) + fmt_ratio(r.hand_confirm, e.score) + (e.error.empty() ? "" : "†");
        };
        md << "| " << t.op << " | " << t.shape_class << " | " << shapes << " | " << fmt_ms(r.hand_confirm) << " | "
           << fmt_ms(tuned_ms) << " | " << ratio_cell(r.hand_confirm, tuned_ms) << " | "
           << auto_cell(r.adams) << " | " << auto_cell(r.adams_best) << " (" << r.adams_samples << ") | "
           << auto_cell(r.mullapudi) << " | "
           << (r.adams_wins ? "Adams2019 schedule" + std::string(r.tuned ? " + `" + point_key(r.best) + "`" : "")
               : r.tuned ? "`" + point_key(r.best) + "`" : r.verdict) << " |\n";
        if (r.adams_wins) {
            const std::string file = t.kernel + ".schedule.h";
            const std::string fn = "apply_schedule_" + t.kernel + "_" + target_name_;
            std::ostringstream h;
            h << "// Machine-written by `" << command << "` (" << today() << ", " << machine_name(threads_)
              << "):\n// Adams2019 (" << r.adams_valid.key << ") for " << t.kernel << " at " << t.shapes.front().label
              << ", checked against the reference at\n// the task's shapes and small ones. Do not edit; re-run the tuner.\n"
              << "#pragma once\n\n#include \"Halide.h\"\n\ninline void " << fn
              << "(::Halide::Pipeline pipeline, ::Halide::Target target) {\n"
              << "    using ::Halide::Func;\n    using ::Halide::MemoryType;\n    using ::Halide::RVar;\n"
              << "    using ::Halide::TailStrategy;\n    using ::Halide::Var;\n"
              << r.schedule_source << "}\n";
            make_dirs(out_dir_);
            write_file(out_dir_ + "/" + file, h.str());
            schedules << (ns++ ? ",\n" : "\n") << "    " << quote(t.kernel) << ": " << quote(file);
        }
        if (r.tuned) {
            for (const auto &k : t.group) {
                // The autoscheduled schedule was made for the hand values'
                // algorithm (attention's key_block shapes it): keep them.
                if (r.adams_wins && k == t.kernel) continue;
                kernels << (nk++ ? ",\n" : "\n") << "    " << quote(k) << ": {";
                int j = 0;
                for (const auto &[name, v] : r.best) kernels << (j++ ? ", " : "") << quote(name) << ": " << v;
                kernels << "}";
            }
        }
    }
    double geo = n_ratio ? std::exp(log_sum / n_ratio) : 1.0;
    js << "\n  ],\n  \"geomean_speedup\": " << geo << ",\n  \"kernels\": {" << kernels.str() << (nk ? "\n  " : "")
       << "},\n  \"schedules\": {" << schedules.str() << (ns ? "\n  " : "") << "}\n}\n";
    char g[64];
    std::snprintf(g, sizeof(g), "%.3f", geo);
    md << "\nGeometric mean of hand / tuned over the " << n_ratio << " tasks: **" << g << "×**.\n\n"
       << "Kernels the build compiles with tuned values (" << nk << "): `record.json` → `kernels`; with\n"
       << "Adams2019 schedules (" << ns << "): `record.json` → `schedules`.\n"
       << "![best time against tuning time](tuning.png)\n";
    make_dirs(out_dir_);
    // A schedule a replaced record had, and this one has not, goes with it.
    std::string stale = run_capture("ls " + shell_quote(out_dir_) + " 2>/dev/null | grep '\\.schedule\\.h$' || true");
    std::stringstream ss(stale);
    for (std::string f; std::getline(ss, f);)
        if (schedules.str().find(quote(f)) == std::string::npos) std::remove((out_dir_ + "/" + f).c_str());
    write_file(out_dir_ + "/record.json", js.str());
    write_file(out_dir_ + "/report.md", md.str());
    std::fprintf(stdout, "\n%s\n", md.str().c_str());
    // The plot: best time (relative to hand) against tuning time.
    std::string plot = std::string(HALFORMER_SOURCE_DIR) + "/tools/tune/plot_tuning.py";
    std::string python = exists("/usr/bin/python3") ? "/usr/bin/python3" : "python3";
    std::string cmd = python + " " + shell_quote(plot) + " " + shell_quote(work_dir_ + "/curve.csv") + " " +
                      shell_quote(out_dir_ + "/tuning.png") + " " + shell_quote(target_name_ + ", " + machine_name(threads_));
    if (std::system(cmd.c_str()) != 0)
        std::fprintf(stderr, "halformer tune: no plot (needs python3-matplotlib); the curve is in %s/curve.csv\n",
                     work_dir_.c_str());
    std::fprintf(stdout, "Wrote %s/record.json, report.md and tuning.png. Rebuild (./scripts/build.sh) to apply it.\n",
                 out_dir_.c_str());
}

int Tuner::run() {
    out_dir_ = o_.out_dir.empty() ? std::string(HALFORMER_SOURCE_DIR) + "/schedules/tuned/" + target_name_ : o_.out_dir;
    work_dir_ = o_.work_dir.empty() ? std::string(HALFORMER_BINARY_DIR) + "/tune/" + target_name_ : o_.work_dir;
    if (exists(out_dir_ + "/record.json") && !o_.force && !o_.resume)
        throw halformer::Error(out_dir_ + "/record.json exists: pass --force to replace it, or --out DIR");
    make_dirs(work_dir_);
    const std::string state_path = work_dir_ + "/state.jsonl";
    if (o_.resume) {
        state_ = load_state(state_path);
        for (const auto &e : state_) progress_.spent0 = std::max(progress_.spent0, e.t);
        while (exists(work_dir_ + "/cost_model_" + std::to_string(retrains_ + 1) + ".weights")) retrains_++;
        std::fprintf(stderr, "halformer tune: resuming: %zu measurements, %s already spent\n", state_.size(),
                     fmt_time(progress_.spent0).c_str());
    } else if (exists(state_path)) {
        std::rename(state_path.c_str(), (state_path + ".previous").c_str());
        std::system(("rm -rf " + shell_quote(work_dir_ + "/samples") + " " + shell_quote(work_dir_) + "/cost_model_*.weights").c_str());
    }
    state_out_.open(state_path, std::ios::app);
    curve_out_.open(work_dir_ + "/curve.csv", o_.resume ? std::ios::app : std::ios::trunc);
    if (!o_.resume) curve_out_ << "task,spent_s,best_ms,hand_ms,kind\n";
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
        const Task &t = tasks_[i];
        // An equal share of what is left; the search gets 60% of it and the
        // autoschedulers the rest, a confirmation round after both.
        double left = o_.budget_s - progress_.spent();
        double share = left / (double)(tasks_.size() - i);
        double start = progress_.spent();
        TaskResult r;
        r.task = &t;
        search_hand(t, r, start + share * (o_.adams ? 0.6 : 0.9));
        if (g_stop) break;
        search_adams(t, r, start + share * 0.9);
        if (g_stop) break;
        confirm(t, r);
        curve(t, r.tuned ? r.best_confirm : r.hand_confirm, r.hand_confirm, "confirmed");
        progress_.show(t.id(), r.candidates + r.adams_samples, r.tuned ? r.best_confirm : r.hand_confirm,
                       r.hand_confirm, r.verdict.substr(0, 40));
        progress_.done_line();
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

}  // namespace

int main(int argc, char **argv) {
    Options o = parse_options(argc, argv);
    try {
        halformer::Config cfg = o.config == "base" ? halformer::Config::base()
                                                   : halformer::Config::from_file(o.config + "/config.json");
        std::vector<Task> all = make_tasks(cfg, o.workload);
        std::vector<Task> tasks;
        for (const auto &t : all) {
            bool want = o.ops.empty();
            for (const auto &op : o.ops) want |= op == t.op || op == t.id();
            if (want) tasks.push_back(t);
        }
        for (const auto &op : o.ops) {
            bool known = false;
            for (const auto &t : all) known |= op == t.op || op == t.id();
            if (!known) {
                std::string names;
                for (const auto &t : all) names += " " + t.id();
                throw halformer::Error("--ops: no op '" + op + "' (ops:" + names + ")");
            }
        }
        // Every kernel a task's winner is recorded for, one a line
        // (tests/check_tune_coverage.py compares them with the runtime's calls).
        if (o.list_kernels) {
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
        int threads = o.threads > 0 ? o.threads : (int)sysconf(_SC_NPROCESSORS_ONLN);
        setenv("HL_NUM_THREADS", std::to_string(threads).c_str(), 1);
        std::string name;
        Halide::Target target = resolve_target(o.target, &name);
        if (o.worker == "adams") return run_worker(o, tasks, target, threads);
        if (o.check_records)
            return check_records(o.work_dir.empty() ? std::string(HALFORMER_BINARY_DIR) + "/tune/check" : o.work_dir);
        if (!o.worker.empty()) usage("unknown --worker " + o.worker);
        Tuner tuner(o, tasks, target, name, threads);
        return tuner.run();
    } catch (const std::exception &e) {
        std::fprintf(stderr, "\nhalformer tune: %s\n", e.what());
        return 1;
    }
}
