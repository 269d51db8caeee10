// Measuring one candidate schedule: the generator built with libHalide's JIT
// for the target, its inputs bound to the op's data at each shape, checked
// against the double-precision reference, and timed (median).
#pragma once

#include "Halide.h"
#include "tasks.h"

#include <cmath>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <string>
#include <vector>

namespace tune {

// Relative error a candidate may have against the reference.
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

// A generator instance with these GeneratorParams, built for the target,
// its inputs left unbound (as in the AOT build).
Halide::Pipeline build_pipeline(const std::string &generator, const std::map<std::string, std::string> &params,
                                const Halide::Target &target);

// Median time of f in ms: batches of at least ~10 ms, 3–9 of them, within
// about budget_s seconds.
double time_ms(const std::function<void()> &f, double budget_s = 0.15);

// A hand-space point compiled once (as measure() compiles it) and bound to
// its data at every shape, so that the confirmation round can time it again
// and again, interleaved with another, without compiling it again. Its
// values were checked when the search measured it.
class Contender {
public:
    Contender(const Task &task, const std::vector<Shape> &shapes, const Point &p, const Halide::Target &target);
    ~Contender();
    // Every shape timed once, briefly (about 50 ms each): ms per shape.
    std::vector<double> time_pass();

private:
    struct Impl;
    std::unique_ptr<Impl> impl_;
};

// Compiles one candidate (once per distinct set of algorithm parameters
// among the shapes), checks it against the reference at every shape, times
// it; then checks the edge shapes, if given. The autoschedulers schedule for
// the first shape. checked = false runs it once a shape without looking at
// its outputs (--launch-only: a device that runs no kernel).
Measured measure(const Task &task, const std::vector<Shape> &shapes, const Point &p, Sched s,
                 const Halide::Target &target, int threads, bool timed = true,
                 const std::vector<Shape> *edges = nullptr, bool checked = true);

// --launch-only: every feasible point of every task's space compiled for the
// GPU target and run once at each shape, outputs unread; prints each that
// fails (a launch the device refuses) and a summary. 0 when none failed.
int launch_only(const std::vector<Task> &tasks, const Halide::Target &target);

}  // namespace tune
