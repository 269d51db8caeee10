// Child processes: shell quoting, a command's output, a command under a time
// limit; and the Adams2019 worker, this program run again with --worker
// adams to make one schedule (the autoscheduler reads its settings from the
// environment once per process, so each sample gets its own process).
#pragma once

#include "Halide.h"
#include "journal.h"
#include "options.h"
#include "tasks.h"

#include <string>
#include <vector>

namespace tune {

// s in single quotes for /bin/sh.
std::string shell_quote(const std::string &s);

// The standard output of a shell command, trailing newlines and spaces removed.
std::string run_capture(const std::string &cmd);

// Runs a command (no shell) with its stdout in stdout_path and its stderr
// dropped, killed after timeout_s or on a stop; its exit status, -1 when
// killed.
int run_with_timeout(const std::vector<std::string> &args, const std::string &stdout_path, double timeout_s);

// One Adams2019 sample as the parent asks for it.
struct WorkerJob {
    std::string task;           // the task's id, passed as --ops
    int pipeline_id = 0;        // the task's index among all tasks (the cost model's pipeline id)
    int seed = 0, beam = 32, dropout = 100;
    std::string weights;        // cost model weights ("": the shipped model)
    std::string sample_out;     // the sample file for retraining ("": none)
};

// The worker's command line: this program, the job, and the run's target,
// config, threads and workload.
std::vector<std::string> worker_command(const Options &o, const std::string &target_name, int threads,
                                        const WorkerJob &job);

// Reads the worker's RESULT line from its output into e (ok, score, the
// first shape's ms, error); rc is run_with_timeout's status.
void read_worker_result(const std::string &out_path, int rc, Entry &e);

// The worker itself (--worker adams): schedules the task for its first
// shape, checks and times it at all the task's shapes, checks the edge
// shapes. Prints "RESULT ok SCORE FIRST_MS" (+ " EDGE msg" when an edge
// shape failed) or "RESULT fail MESSAGE"; writes the sample file for
// retraining and the schedule source.
int run_worker(const Options &o, const std::vector<Task> &tasks, const Halide::Target &target, int threads);

}  // namespace tune
