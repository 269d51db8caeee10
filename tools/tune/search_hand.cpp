// The hand schedule's parameter space: coordinate descent from the hand
// values, then the untried rest of the grid in a fixed random order; each
// candidate JIT-compiled for the target, checked against the reference and
// timed at the task's shapes (measure.cpp).
#include "halformer/error.h"
#include "measure.h"
#include "tuner.h"

#include <algorithm>
#include <random>

namespace tune {

namespace {

// Every point of the task's knobs.
std::vector<Point> full_grid(const Task &t) {
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
    return grid;
}

}  // namespace

// A point of the hand space: measured, or from the journal (--resume).
Entry Tuner::evaluate(const Task &t, const Point &p) {
    std::string key = point_key(p);
    if (const Entry *e = journal_.find(t.id(), "hand", key)) return *e;
    Measured m = measure(t, t.shapes, p, Sched::Hand, target_, threads_);
    Entry e{t.id(), "hand", key, m.ok, m.error, m.ms, m.score, progress_.spent()};
    journal_.append(e);
    return e;
}

// Measures p unless it cannot fit the registers or the time is up; true
// when it is the new best.
bool Tuner::consider(const Task &t, TaskResult &r, const Point &p, double until) {
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
}

void Tuner::search_hand(const Task &t, TaskResult &r, double until) {
    r.hand = t.hand();
    Entry h = evaluate(t, r.hand);
    r.candidates++;
    if (!h.ok) throw halformer::Error(t.id() + ": the hand schedule fails: " + h.error);
    r.hand_score = r.best_score = h.score;
    r.best = r.hand;
    curve(t, r.best_score, r.hand_score, "hand");
    progress_.show(t.id(), r.candidates, r.best_score, r.hand_score, "hand");

    // Coordinate descent: each knob in turn over all its values, others held.
    for (int pass = 0; pass < 4; pass++) {
        bool improved = false;
        for (const auto &k : t.knobs) {
            Point base = r.best;
            for (int v : k.values) {
                if (v == base[k.name]) continue;
                Point p = base;
                p[k.name] = v;
                improved |= consider(t, r, p, until);
            }
        }
        if (!improved) break;
    }
    // Then the untried rest of the grid, in a fixed random order.
    std::vector<Point> grid = full_grid(t);
    std::shuffle(grid.begin(), grid.end(), std::mt19937(7));
    for (const auto &p : grid) {
        if (progress_.spent() >= until || g_stop) break;
        if (journal_.find(t.id(), "hand", point_key(p)) || !t.feasible(p, registers_)) continue;
        consider(t, r, p, until);
    }
}

}  // namespace tune
