// The tuned record, DIR/record.json: what the AOT build applies (the
// kernels' tuned values and the Adams2019 schedules, written beside it as
// KERNEL.schedule.h), with the run's machine, command and per-task results.
// And --check-records: whether the build applies the records compiled in.
#pragma once

#include "tuner.h"

#include <string>
#include <vector>

namespace tune {

// What the record and the report say about the run itself.
struct RunInfo {
    std::string target_name;    // the record's target: avx512, avx2, ...
    std::string record_name;    // its directory's name: avx2, avx2-intel-6-60, ...
    std::string halide_target;
    std::string machine;        // machine_name()
    std::string date;           // today()
    std::string commit;         // of the source tree ("" outside git)
    std::string command;        // "halformer tune ..."
    std::string config_json;    // the model config tuned for
    double budget_s = 0, spent_s = 0;
    bool complete = true;
};

// "CPU model name, N threads".
std::string machine_name(int threads);
// YYYY-MM-DD (UTC).
std::string today();

// The kernels the record gives r's point (none unless r.tuned): the task's
// group, less the kernel an Adams2019 schedule won for.
std::vector<std::string> tuned_kernels(const TaskResult &r);

// Geometric mean of hand / tuned over the tasks with both times; their
// number in *tasks.
double geomean_speedup(const std::vector<TaskResult> &results, int *tasks);

// Writes out_dir/record.json and the Adams2019 winners' KERNEL.schedule.h,
// and removes the schedule headers of a replaced record that this one lacks.
void write_record(const std::string &out_dir, const RunInfo &run, const std::vector<TaskResult> &results);

// Checks that the generators apply the records compiled into this build:
// for one kernel of each record row's op, the loop nest built under its
// name (tuned_as) must equal the one built from the record's values given
// explicitly, and differ from the hand schedule's. Prints a line a row; 1
// when one failed (its loop nests are kept in work).
int check_records(const std::string &work);

}  // namespace tune
