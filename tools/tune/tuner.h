// A tuning run (Tuner) and what it finds for each task (TaskResult). Per
// task, within a share of the budget: the hand schedule's parameter space
// (search_hand.cpp), Mullapudi2016 and Adams2019 with a retrained cost model
// (search_adams.cpp), and a confirmation round (confirm.cpp); then the
// record (records.cpp), the report and the plot (report.cpp). Tuner::run,
// the journal and the outputs are in main.cpp.
#pragma once

#include "Halide.h"
#include "journal.h"
#include "options.h"
#include "progress.h"
#include "tasks.h"

#include <cmath>
#include <fstream>
#include <string>
#include <vector>

namespace tune {

// The confirmation round's paired rounds, and how many the best point must
// win (7 of 9: one-sided sign test p ≈ 0.09; with the median under 0.97).
constexpr int kPairedRounds = 9, kMustWin = 7;

struct TaskResult {
    const Task *task = nullptr;
    Point hand, best;
    double hand_score = INFINITY, best_score = INFINITY;      // search, Σ over shapes
    double hand_confirm = INFINITY, best_confirm = INFINITY;  // confirmation medians, Σ over shapes
    std::vector<double> hand_ms;                              // confirmation, per shape
    double ratio = NAN;            // paired rounds: median of best ÷ hand
    int rounds = 0, rounds_won = 0; // paired rounds run, and those the best point was faster in
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
    std::string retime_error;  // the confirmation round could not run a contender

    // The winner's confirmed time (Σ over shapes): Adams2019's or the point's.
    double tuned_ms() const { return adams_wins ? adams_confirm : best_confirm; }
};

class Tuner {
public:
    Tuner(const Options &o, std::vector<Task> tasks, Halide::Target target, std::string target_name, int threads);

    // Tunes every task, then writes the record, report and plot; 130 when stopped.
    int run();

private:
    const Options &o_;
    std::vector<Task> tasks_;
    Halide::Target target_;
    std::string target_name_;
    std::string record_name_;  // the record's directory name (record_name_for)
    int threads_, registers_;
    Progress progress_;
    Journal journal_;
    std::ofstream curve_out_;
    std::string out_dir_, work_dir_;
    int retrains_ = 0;  // cost-model generations so far (all tasks)

    // main.cpp
    std::string open_work();
    bool tune_task(size_t i, TaskResult &r);
    void curve(const Task &t, double best, double hand, const std::string &kind);
    void write_outputs(const std::vector<TaskResult> &results, bool complete);
    // search_hand.cpp
    void search_hand(const Task &t, TaskResult &r, double until);
    Entry evaluate(const Task &t, const Point &p);
    bool consider(const Task &t, TaskResult &r, const Point &p, double until);
    // search_adams.cpp
    void search_adams(const Task &t, TaskResult &r, double until);
    void run_mullapudi(const Task &t, TaskResult &r);
    Entry run_adams(const Task &t, const std::string &kind, int seed, int beam, int dropout,
                    const std::string &weights, double until);
    bool retrain(const std::string &weights);
    // confirm.cpp
    void confirm(const Task &t, TaskResult &r);
    void retime(const Task &t, TaskResult &r, bool space, bool adams);
    void decide(const Task &t, TaskResult &r, bool space, bool adams);
};

}  // namespace tune
