#include "report.h"

#include "halformer/files.h"
#include "worker.h"

#include <unistd.h>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <sstream>

namespace tune {

namespace files = halformer::files;

namespace {

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

// An autoscheduler's cell: its time and speed-up, † when it fails small shapes.
std::string auto_cell(const TaskResult &r, const Entry &e) {
    if (e.kind.empty()) return std::string("not run");
    if (!e.ok) return std::string(e.error == "timed out or stopped" ? "timed out" : "failed");
    return fmt_ms(e.score) + fmt_ratio(r.hand_confirm, e.score) + (e.error.empty() ? "" : "†");
}

// The task's row of the table: primary shape for the autoschedulers (they
// specialise to one shape), Σ over the task's shapes for hand and tuned.
std::string table_row(const TaskResult &r) {
    const Task &t = *r.task;
    std::string shapes;
    for (const auto &s : t.shapes) shapes += (shapes.empty() ? "" : ", ") + s.label;
    const double tuned_ms = r.tuned_ms();
    std::ostringstream md;
    md << "| " << t.op << " | " << t.shape_class << " | " << shapes << " | " << fmt_ms(r.hand_confirm) << " | "
       << fmt_ms(tuned_ms) << " | " << ratio_cell(r.hand_confirm, tuned_ms) << " | "
       << auto_cell(r, r.adams) << " | " << auto_cell(r, r.adams_best) << " (" << r.adams_samples << ") | "
       << auto_cell(r, r.mullapudi) << " | "
       << (r.adams_wins ? "Adams2019 schedule" + std::string(r.tuned ? " + `" + point_key(r.best) + "`" : "")
           : r.tuned ? "`" + point_key(r.best) + "`" : r.verdict) << " |\n";
    return md.str();
}

// The best time (relative to hand) against tuning time.
void plot(const std::string &out_dir, const std::string &work_dir, const RunInfo &run) {
    // The source tree's script, or the installed one (share/halformer/ beside bin/).
    std::string script = std::string(HALFORMER_SOURCE_DIR) + "/tools/tune/plot_tuning.py";
    if (!files::exists(script)) {
        char self[4096];
        const ssize_t n = readlink("/proc/self/exe", self, sizeof(self) - 1);
        const std::string exe = n > 0 ? std::string(self, (size_t)n) : "";
        const std::string bin = exe.substr(0, exe.rfind('/'));
        script = bin.substr(0, bin.rfind('/')) + "/share/halformer/plot_tuning.py";
    }
    std::string python = files::exists("/usr/bin/python3") ? "/usr/bin/python3" : "python3";
    std::string cmd = python + " " + shell_quote(script) + " " + shell_quote(work_dir + "/curve.csv") + " " +
                      shell_quote(out_dir + "/tuning.png") + " " + shell_quote(run.target_name + ", " + run.machine);
    if (std::system(cmd.c_str()) != 0)
        std::fprintf(stderr, "halformer tune: no plot (needs python3-matplotlib); the curve is in %s/curve.csv\n",
                     work_dir.c_str());
}

}  // namespace

std::string report_markdown(const RunInfo &run, const std::vector<TaskResult> &results) {
    std::ostringstream md;
    md << "# Tuned record: " << run.record_name << " (" << run.target_name << ")\n\n"
       << "Machine: " << run.machine << ". Date: " << run.date << ". Commit: " << run.commit << ".\n"
       << "Command: `" << run.command << "` (" << fmt_time(run.spent_s) << " of a " << fmt_time(run.budget_s)
       << " budget" << (run.complete ? "" : "; stopped early: rerun with --resume") << ").\n\n"
       << "Times are medians in ms on this machine, one run, summed over the task's shapes; ratios are\n"
       << "speed-ups over the hand schedule. *hand* and *tuned*: re-timed interleaved in a confirmation\n"
       << "round. *Adams2019* (its default search, and the best of the samples of its retraining loop)\n"
       << "and *Mullapudi2016* schedule for the first shape and run at all of them; † marks a schedule\n"
       << "that fails on small or odd shapes (it may not win: the kernels take any size).\n\n"
       << "| op | class | shapes | hand | tuned | tuned vs hand | Adams2019 default | Adams2019 best (samples) | Mullapudi2016 | record |\n"
       << "|---|---|---|---|---|---|---|---|---|---|\n";
    int nk = 0, ns = 0;
    for (const auto &r : results) {
        md << table_row(r);
        if (r.adams_wins) ns++;
        nk += (int)tuned_kernels(r).size();
    }
    int n_ratio = 0;
    char g[64];
    std::snprintf(g, sizeof(g), "%.3f", geomean_speedup(results, &n_ratio));
    md << "\nGeometric mean of hand / tuned over the " << n_ratio << " tasks: **" << g << "×**.\n\n"
       << "Kernels the build compiles with tuned values (" << nk << "): `record.json` → `kernels`; with\n"
       << "Adams2019 schedules (" << ns << "): `record.json` → `schedules`.\n"
       << "![best time against tuning time](tuning.png)\n";
    return md.str();
}

void write_report(const std::string &out_dir, const std::string &work_dir, const RunInfo &run,
                  const std::vector<TaskResult> &results) {
    const std::string md = report_markdown(run, results);
    files::write_text(out_dir + "/report.md", md);
    std::fprintf(stdout, "\n%s\n", md.c_str());
    plot(out_dir, work_dir, run);
}

}  // namespace tune
