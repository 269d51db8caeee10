#include "records.h"

#include "halformer/build_info.h"

#include "halformer/files.h"
#include "halformer/json.h"
#include "measure.h"
#include "schedules/schedule_common.h"
#include "target.h"
#include "worker.h"

#include <algorithm>
#include <cctype>
#include <cstdio>
#include <ctime>
#include <fstream>
#include <set>
#include <regex>
#include <sstream>

namespace tune {

namespace files = halformer::files;
using halformer::json::quote;

namespace {

// The task's line of the record's "tasks".
std::string task_json(const TaskResult &r) {
    const Task &t = *r.task;
    std::string shapes;
    for (const auto &s : t.shapes) shapes += (shapes.empty() ? "" : ", ") + s.label;
    std::ostringstream js;
    js << "\n    {\"op\": " << quote(t.op) << ", \"class\": " << quote(t.shape_class)
       << ", \"kernel\": " << quote(t.kernel) << ", \"shapes\": " << quote(shapes)
       << ", \"hand\": " << quote(point_key(r.hand)) << ", \"hand_ms\": " << r.hand_confirm
       << ", \"best\": " << quote(point_key(r.best)) << ", \"best_ms\": " << r.best_confirm
       << ", \"paired_rounds\": " << r.rounds << ", \"rounds_won\": " << r.rounds_won
       << ", \"paired_ratio\": " << (std::isfinite(r.ratio) ? r.ratio : -1)
       << ", \"tuned\": " << (r.tuned ? "true" : "false") << ", \"verdict\": " << quote(r.verdict)
       << ", \"candidates\": " << r.candidates << ", \"failed\": " << r.failed
       << ", \"adams2019_ms\": " << (r.adams.ok ? r.adams.score : -1)
       << ", \"adams2019_best_ms\": " << (r.adams_best.ok ? r.adams_best.score : -1)
       << ", \"adams2019_samples\": " << r.adams_samples << ", \"retrains\": " << r.retrains
       << ", \"adams2019_confirmed_ms\": " << (std::isfinite(r.adams_confirm) ? r.adams_confirm : -1)
       << ", \"adams2019_wins\": " << (r.adams_wins ? "true" : "false")
       << ", \"mullapudi2016_ms\": " << (r.mullapudi.ok ? r.mullapudi.score : -1) << "}";
    return js.str();
}

// An Adams2019 winner's schedule as the header the build includes.
std::string schedule_header(const RunInfo &run, const TaskResult &r) {
    const Task &t = *r.task;
    // (cmake/HalformerTuned.cmake names it after the record, as a C identifier.)
    std::string record = run.record_name;
    for (char &c : record)
        if (!std::isalnum((unsigned char)c)) c = '_';
    const std::string fn = "apply_schedule_" + t.kernel + "_" + record;
    std::ostringstream h;
    h << "// Machine-written by `" << run.command << "` (" << run.date << ", " << run.machine
      << "):\n// Adams2019 (" << r.adams_valid.key << ") for " << t.kernel << " at " << t.shapes.front().label
      << ", checked against the reference at\n// the task's shapes and small ones. Do not edit; re-run the tuner.\n"
      << "#pragma once\n\n#include \"Halide.h\"\n\ninline void " << fn
      << "(::Halide::Pipeline pipeline, ::Halide::Target target) {\n"
      << "    using ::Halide::Func;\n    using ::Halide::MemoryType;\n    using ::Halide::RVar;\n"
      << "    using ::Halide::TailStrategy;\n    using ::Halide::Var;\n"
      << r.schedule_source << "}\n";
    return h.str();
}

// The record's "kernels" entries for a tuned task: its point for each of
// its kernels.
void add_kernels(const TaskResult &r, std::ostringstream &kernels, int &nk) {
    for (const auto &k : tuned_kernels(r)) {
        kernels << (nk++ ? ",\n" : "\n") << "    " << quote(k) << ": {";
        int j = 0;
        for (const auto &[name, v] : r.best) kernels << (j++ ? ", " : "") << quote(name) << ": " << v;
        kernels << "}";
    }
}

// A schedule a replaced record had, and this one has not, goes with it.
void remove_stale_schedules(const std::string &out_dir, const std::set<std::string> &written) {
    std::string stale = run_capture("ls " + shell_quote(out_dir) + " 2>/dev/null | grep '\\.schedule\\.h$' || true");
    std::stringstream ss(stale);
    for (std::string f; std::getline(ss, f);)
        if (!written.count(f)) std::remove((out_dir + "/" + f).c_str());
}

// The microarchitecture the record was made on (halformer::this_cpu()):
// the runtime compares its key with the CPU it runs on.
std::string cpu_json() {
    const halformer::CpuInfo &c = halformer::this_cpu();
    std::ostringstream js;
    js << "{\"key\": " << quote(c.key()) << ", \"vendor\": " << quote(c.vendor) << ", \"family\": " << c.family
       << ", \"model\": " << c.model << ", \"name\": " << quote(c.name) << ", \"threads\": " << c.threads
       << ", \"l1d_kb\": " << c.l1d_kb << ", \"l2_kb\": " << c.l2_kb << ", \"l3_kb\": " << c.l3_kb << "}";
    return js.str();
}

std::string run_json(const RunInfo &run) {
    std::ostringstream js;
    js << "{\n  \"format\": 1,\n  \"target\": " << quote(run.target_name) << ",\n  \"halide_target\": "
       << quote(run.halide_target) << ",\n  \"machine\": " << quote(run.machine) << ",\n  \"cpu\": " << cpu_json()
       << ",\n  \"date\": "
       << quote(run.date) << ",\n  \"commit\": " << quote(run.commit) << ",\n  \"command\": " << quote(run.command)
       << ",\n  \"complete\": " << (run.complete ? "true" : "false") << ",\n  \"config\": " << run.config_json
       << ",\n  \"budget_s\": " << run.budget_s << ",\n  \"spent_s\": " << run.spent_s << ",\n  \"tasks\": [";
    return js.str();
}

}  // namespace

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

std::vector<std::string> tuned_kernels(const TaskResult &r) {
    std::vector<std::string> out;
    if (!r.tuned) return out;
    for (const auto &k : r.task->group) {
        // The autoscheduled schedule was made for the hand values'
        // algorithm (attention's key_block shapes it): keep them.
        if (r.adams_wins && k == r.task->kernel) continue;
        out.push_back(k);
    }
    return out;
}

double geomean_speedup(const std::vector<TaskResult> &results, int *tasks) {
    double log_sum = 0;
    int n = 0;
    for (const auto &r : results) {
        double tuned_ms = r.tuned_ms();
        if (std::isfinite(tuned_ms) && tuned_ms > 0 && std::isfinite(r.hand_confirm)) {
            log_sum += std::log(r.hand_confirm / tuned_ms);
            n++;
        }
    }
    *tasks = n;
    return n ? std::exp(log_sum / n) : 1.0;
}

void write_record(const std::string &out_dir, const RunInfo &run, const std::vector<TaskResult> &results) {
    std::ostringstream js, kernels, schedules;
    js << run_json(run);
    std::set<std::string> written;
    int nk = 0, ns = 0;
    for (size_t i = 0; i < results.size(); i++) {
        const auto &r = results[i];
        js << (i ? "," : "") << task_json(r);
        if (r.adams_wins) {
            const std::string file = r.task->kernel + ".schedule.h";
            files::make_dirs(out_dir);
            files::write_text(out_dir + "/" + file, schedule_header(run, r));
            written.insert(file);
            schedules << (ns++ ? ",\n" : "\n") << "    " << quote(r.task->kernel) << ": " << quote(file);
        }
        add_kernels(r, kernels, nk);
    }
    int n_ratio = 0;
    double geo = geomean_speedup(results, &n_ratio);
    js << "\n  ],\n  \"geomean_speedup\": " << geo << ",\n  \"kernels\": {" << kernels.str() << (nk ? "\n  " : "")
       << "},\n  \"schedules\": {" << schedules.str() << (ns ? "\n  " : "") << "}\n}\n";
    files::make_dirs(out_dir);
    remove_stale_schedules(out_dir, written);
    files::write_text(out_dir + "/record.json", js.str());
}

// ---------------------------------------------------------------- --check-records

namespace {

// Identifiers lose their digits, '$' and '_' (unique-name counters come as
// y_18, t18319, logits$3); numbers standing alone (extents, split factors)
// stay.
std::string strip_counters(const std::string &text) {
    std::string out;
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
    return out;
}

// The lowered loop nest of a generator instance, with Halide's per-process
// unique-name counters removed so that two builds compare as text.
std::string lowered(const std::string &generator, const std::map<std::string, std::string> &params,
                    const Halide::Target &target, const std::string &path) {
    Halide::Pipeline pipe = build_pipeline(generator, params, target);
    pipe.compile_to_lowered_stmt(path, pipe.infer_arguments(), Halide::StmtOutputFormat::Text, target);
    std::string out = strip_counters(files::read_text(path));
    // The simplifier orders a sum of two variables by their names, which
    // carry the counters: (a.epilogue + a.rebased) in one build is
    // (a.rebased + a.epilogue) in the other. Such a pair is sorted.
    static const std::regex pair(R"(\(([A-Za-z][A-Za-z.$]*) \+ ([A-Za-z][A-Za-z.$]*)\))");
    std::string sorted;
    auto at = out.cbegin();
    for (std::sregex_iterator m(out.begin(), out.end(), pair), end; m != end; ++m) {
        sorted.append(at, (*m)[0].first);
        std::string x = (*m)[1], y = (*m)[2];
        if (y < x) std::swap(x, y);
        sorted += "(" + x + " + " + y + ")";
        at = (*m)[0].second;
    }
    sorted.append(at, out.cend());
    out = sorted;
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

// Checks one record row (see check_records); prints its line.
bool check_row(const halformer::TunedRow &row, const KernelInfo &k, const Halide::Target &t, const std::string &work) {
    auto hand = parse_params(k.params);
    auto explicit_params = hand;
    for (const auto &[name, v] : halformer::parse_tuned_params(row.params)) explicit_params[name] = std::to_string(v);
    auto named = hand;
    named["tuned_as"] = row.kernel;
    std::string a = lowered(k.generator, named, t, work + "/a.stmt");
    std::string b = lowered(k.generator, explicit_params, t, work + "/b.stmt");
    // A record whose values are the hand ones (the hand default moved to
    // them) gives the hand loop nest: still applied, and said so.
    bool ok = a == b;
    if (!ok) {  // keep the loop nests for a look, and the hand one beside them
        lowered(k.generator, hand, t, work + "/c.stmt");
        for (const char *f : {"a", "b", "c"})
            std::rename((work + "/" + f + ".stmt.normalized").c_str(),
                        (work + "/" + row.record + "_" + row.kernel + "_" + f + ".stmt").c_str());
    }
    std::printf("%s %-14s %-24s %s%s\n", ok ? "ok  " : "FAIL", row.record, row.kernel, row.params,
                !ok ? "  (the build does not apply the record)" : explicit_params == hand ? "  (the hand values now)" : "");
    return ok;
}

}  // namespace

int check_records(const std::string &work) {
    int n = 0, nr = 0, bad = 0;
    const halformer::TunedRow *rows = halformer::tuned_rows(&n);
    const halformer::TunedRecordRow *records = halformer::tuned_record_rows(&nr);
    auto targets = build_targets();
    std::set<std::string> seen;
    files::make_dirs(work);
    for (int i = 0; i < n; i++) {
        const KernelInfo &k = kernel_info(rows[i].kernel);
        std::string op = std::string(rows[i].record) + "/" + k.generator;
        const halformer::TunedRecordRow *rec = nullptr;
        for (int j = 0; j < nr; j++)
            if (std::string(records[j].record) == rows[i].record) rec = &records[j];
        if (seen.count(op) || !rec || !targets.count(rec->target)) continue;
        seen.insert(op);
        // The record's kernel set: its variant's target with its marker.
        const Halide::Target t = halformer::tuned_target_of(*rec, Halide::Target(targets.at(rec->target)));
        bad += !check_row(rows[i], k, t, work);
    }
    std::printf("%zu record rows checked, %d failed\n", seen.size(), bad);
    return bad ? 1 : 0;
}

}  // namespace tune
