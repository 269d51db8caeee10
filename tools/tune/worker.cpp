#include "worker.h"

#include "halformer/files.h"
#include "measure.h"
#include "progress.h"

#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <sstream>
#include <sys/wait.h>
#include <unistd.h>

namespace tune {

namespace {

// This program's path, for running it again as a worker.
std::string self_path() {
    std::string self = "/proc/self/exe";
    char buf[4096];
    ssize_t n = readlink(self.c_str(), buf, sizeof(buf) - 1);
    if (n > 0) self.assign(buf, n);
    return self;
}

// The worker's sample: the schedule's source, and the featurization turned
// into a sample file for retrain_cost_model (dropped when that fails).
void write_sample(const Options &o, const Measured &m) {
    std::ofstream(o.sample_out + ".schedule.txt") << m.schedule_source;
    if (m.featurization.empty()) return;
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

}  // namespace

std::string shell_quote(const std::string &s) {
    std::string q = "'";
    for (char c : s) q += c == '\'' ? std::string("'\\''") : std::string(1, c);
    return q + "'";
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

std::vector<std::string> worker_command(const Options &o, const std::string &target_name, int threads,
                                        const WorkerJob &job) {
    return {self_path(), "--worker", "adams", "--ops", job.task, "--task", "0", "--pipeline-id",
            std::to_string(job.pipeline_id), "--seed", std::to_string(job.seed), "--beam",
            std::to_string(job.beam), "--dropout", std::to_string(job.dropout), "--weights",
            job.weights, "--sample-out", job.sample_out,
            "--target", target_name, "--config", o.config, "--threads",
            std::to_string(threads), "--rows", std::to_string(o.workload.prefill_rows),
            "--cache-len", std::to_string(o.workload.cache_len), "--decode-rows",
            std::to_string(o.workload.decode_rows)};
}

void read_worker_result(const std::string &out_path, int rc, Entry &e) {
    std::ifstream in(out_path);
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
}

int run_worker(const Options &o, const std::vector<Task> &tasks, const Halide::Target &target, int threads) {
    if (o.task < 0 || o.task >= (int)tasks.size()) usage("--task out of range");
    setenv("HL_SEED", std::to_string(o.seed).c_str(), 1);
    setenv("HL_RANDOM_DROPOUT", std::to_string(o.dropout).c_str(), 1);
    setenv("HL_BEAM_SIZE", std::to_string(o.beam).c_str(), 1);
    if (!o.weights.empty() && halformer::files::exists(o.weights)) setenv("HL_WEIGHTS_DIR", o.weights.c_str(), 1);
    Halide::load_plugin(std::string(HALIDE_PLUGIN_DIR) + "/libautoschedule_adams2019.so");
    const Task &task = tasks[o.task];
    Measured m = measure(task, task.shapes, {}, Sched::Adams, target, threads, true, &task.edges);
    if (!m.ok) {
        std::printf("RESULT fail %s\n", m.error.c_str());
        return 0;
    }
    if (!o.sample_out.empty()) write_sample(o, m);
    std::printf("RESULT ok %.6f %.6f%s%s\n", m.score, m.ms.front(), m.edge_error.empty() ? "" : " EDGE ",
                m.edge_error.c_str());
    return 0;
}

}  // namespace tune
