// The confirmation round: the contenders re-timed interleaved over 3 rounds
// (medians of Σ over the shapes): the hand values, the best point of their
// space, and the best Adams2019 schedule that passed the small shapes
// (re-created in a worker from the same seed and cost model). A winner must
// beat the hand values by 3% here; a point of the hand space must also pass
// the small shapes.
#include "halformer/files.h"
#include "measure.h"
#include "tuner.h"

#include <algorithm>
#include <sstream>

namespace tune {

namespace {

// "seed=1,beam=32,dropout=100,weights=" as a map.
std::map<std::string, std::string> parse_key(const std::string &key) {
    std::map<std::string, std::string> out;
    std::stringstream ss(key);
    for (std::string item; std::getline(ss, item, ',');) {
        size_t eq = item.find('=');
        if (eq != std::string::npos) out[item.substr(0, eq)] = item.substr(eq + 1);
    }
    return out;
}

double median(std::vector<double> v) {
    if (v.empty()) return NAN;
    std::sort(v.begin(), v.end());
    return v[v.size() / 2];
}

}  // namespace

// The rounds; their medians go to r.hand_confirm, r.best_confirm, r.hand_ms
// and r.adams_confirm (the search's times where a contender was not re-timed).
void Tuner::retime(const Task &t, TaskResult &r, bool space, bool adams) {
    std::vector<std::vector<double>> hand(t.shapes.size()), best(t.shapes.size());
    std::vector<double> adams_scores;
    for (int round = 0; round < 3 && (space || adams) && !g_stop; round++) {
        Measured a = measure(t, t.shapes, r.hand, Sched::Hand, target_, threads_);
        if (!a.ok) break;
        for (size_t i = 0; i < t.shapes.size(); i++) hand[i].push_back(a.ms[i]);
        if (space) {
            Measured b = measure(t, t.shapes, r.best, Sched::Hand, target_, threads_);
            for (size_t i = 0; i < t.shapes.size() && b.ok; i++) best[i].push_back(b.ms[i]);
        }
        if (adams) {
            auto k = parse_key(r.adams_valid.key);
            Entry e = run_adams(t, "confirm", std::stoi(k["seed"]), std::stoi(k["beam"]), std::stoi(k["dropout"]),
                                k["weights"], progress_.spent() + 120);
            if (e.ok) adams_scores.push_back(e.score);
        }
        progress_.show(t.id(), r.candidates + r.adams_samples, r.best_score, r.hand_score,
                       "confirming, round " + std::to_string(round + 1));
    }
    r.hand_confirm = r.best_confirm = 0;
    const Entry *h = journal_.find(t.id(), "hand", point_key(r.hand));
    for (size_t i = 0; i < t.shapes.size(); i++) {
        double hm = hand[i].empty() ? h->ms[i] : median(hand[i]);
        double bm = best[i].empty() ? hm : median(best[i]);
        r.hand_ms.push_back(hm);
        r.hand_confirm += hm;
        r.best_confirm += bm;
    }
    r.adams_confirm = median(adams_scores);
}

// What the record keeps: r.tuned, r.adams_wins (with the schedule's source)
// and the verdict.
void Tuner::decide(const Task &t, TaskResult &r, bool space, bool adams) {
    // 3%: below that, a win is within this machine's run-to-run noise.
    if (space && r.best_confirm < r.hand_confirm * 0.97) {
        Measured e = measure(t, t.edges, r.best, Sched::Hand, target_, threads_, /*timed=*/false);
        if (e.ok) {
            r.tuned = true;
        } else {
            r.edge_error = e.error;
        }
    }
    if (!r.tuned) r.best_confirm = r.hand_confirm;
    if (std::isfinite(r.adams_confirm) && r.adams_confirm < r.best_confirm * 0.97) {
        r.adams_wins = true;
        auto k = parse_key(r.adams_valid.key);
        const std::string source =
            work_dir_ + "/samples/" + t.op + "_" + t.shape_class + "/" + k["seed"] + ".sample.schedule.txt";
        r.schedule_source = halformer::files::exists(source) ? halformer::files::read_text(source) : "";
        if (r.schedule_source.empty()) r.adams_wins = false;  // (the default search keeps no file)
    }
    if (r.adams_wins) {
        r.verdict = "Adams2019 schedule (" + r.adams_valid.key + ") for " + t.kernel +
                    (r.tuned ? "; the hand-space point for the rest of the group" : "");
    } else if (r.tuned) {
        r.verdict = "tuned";
    } else if (!r.edge_error.empty()) {
        r.verdict = "hand values kept: the best point failed a small shape: " + r.edge_error;
    } else if (space || adams) {
        r.verdict = "hand values kept: no contender beat them when re-timed";
    } else {
        r.verdict = "hand values kept: no candidate beat them";
    }
}

void Tuner::confirm(const Task &t, TaskResult &r) {
    const bool space = point_key(r.best) != point_key(r.hand);
    const bool adams = r.adams_valid.ok && r.adams_valid.score < std::min(r.best_score, r.hand_score);
    retime(t, r, space, adams);
    decide(t, r, space, adams);
}

}  // namespace tune
