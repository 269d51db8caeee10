// The run's report: DIR/report.md (also printed), a table of the tasks'
// times against the hand schedule's; and DIR/tuning.png, the best time
// against tuning time, drawn from WORK/curve.csv by plot_tuning.py.
#pragma once

#include "records.h"
#include "tuner.h"

#include <string>
#include <vector>

namespace tune {

std::string report_markdown(const RunInfo &run, const std::vector<TaskResult> &results);

// Writes out_dir/report.md, prints it, and draws out_dir/tuning.png (a
// note on stderr when python3-matplotlib is missing).
void write_report(const std::string &out_dir, const std::string &work_dir, const RunInfo &run,
                  const std::vector<TaskResult> &results);

}  // namespace tune
