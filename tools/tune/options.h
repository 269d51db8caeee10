// halformer-tune's command line: the options of a tuning run, and those the
// tuner passes to its own worker processes (--worker, worker.cpp).
#pragma once

#include "tasks.h"

#include <string>
#include <vector>

namespace tune {

struct Options {
    std::string target = "host";      // sapphirerapids | avx512 | avx2 | sse41 | host | cuda | opencl
    std::string config = "base";      // base | model directory
    std::vector<std::string> ops;     // empty: all
    double budget_s = 20 * 60;
    bool resume = false, force = false, adams = true, check_records = false, list_kernels = false;
    bool launch_only = false;         // GPU: every candidate compiled and launched once (launch.cpp)
    std::string try_point;            // --try: one point of one task's space, measured and checked
    std::string out_dir;              // record directory (default: the source tree's)
    std::string work_dir;             // state, samples, weights
    int threads = 0;
    int adams_batch = 6;              // Adams2019 samples between retrainings of the cost model
    int adams_rounds = 0;             // > 0: at least this many batches (and retrainings) a task, whatever the budget
    Workload workload;
    // worker mode (one Adams2019 sample in a child process)
    std::string worker;
    int task = 0, seed = 0, beam = 32, dropout = 100, pipeline_id = 0;
    std::string weights, sample_out;
    std::vector<std::string> argv;
};

// Prints msg (when not empty) and the usage to stderr, and exits with status 2.
[[noreturn]] void usage(const std::string &msg);

// The options of argv; a bad one ends the program through usage().
Options parse_options(int argc, char **argv);

}  // namespace tune
