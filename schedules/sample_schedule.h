// How sample runs (algorithm: generators/sample_generator.cpp).
#pragma once

#include "schedule_common.h"

#include <set>
#include <string>
#include <utility>
#include <vector>

namespace halformer {

struct SampleStages {
    Halide::Func ids, key, w;
    // Per-row reductions over the vocabulary (the row's max and min, each
    // search step's count or mass, ...), each lane's part: a pure init and
    // one update over the RVar beside it.
    std::vector<Halide::Func> reductions;
    std::vector<Halide::RVar> reduction_rvars;
    std::vector<Halide::Func> scalars;  // per (lane, row) values: search states, thresholds, the draw
    Halide::Func chunk_mass;            // (lane, c, r): the level's mass per chunk of ids
    Halide::RVar chunk_rvar;            // over a chunk's ids
    Halide::Func chunk_scan;            // serial scan over the chunks ...
    Halide::RVar scan_rvar;             // ... along this RVar
    Halide::Func pick;                  // serial scan inside the chosen chunk
    // Every stage but key and w, by phase of the algorithm, and the value
    // each phase but the last ends in (the later phases read it).
    std::vector<std::vector<Halide::Func>> phases;
    std::vector<Halide::Func> phase_roots;
    Halide::Var v, t, r, c;  // id, lane, row, chunk
};

struct SampleKnobs {
    int vectors;  // partial-sum vectors per reduction (0: 4)
};

// One row per thread task. Per row, the keys and weights are computed once
// (2·V floats: L2 at V = 37000) and each of the ~100 bisection steps is one
// pass over them: a reduction split into `vectors` vectors of partial sums
// (rfactor), so that consecutive adds do not wait on each other, then folded.
inline void schedule_sample_cpu(SampleStages s, const SampleKnobs &knobs, const Halide::Target &t) {
    using namespace Halide;
    const int lanes = f32_lanes(t);
    const int vecs = or_default(knobs.vectors, 4);
    s.ids.compute_root().parallel(s.r);
    s.key.compute_at(s.ids, s.r).vectorize(s.v, lanes, TailStrategy::GuardWithIf);
    s.w.compute_at(s.ids, s.r).vectorize(s.v, lanes, TailStrategy::GuardWithIf);
    for (size_t i = 0; i < s.reductions.size(); i++) {
        Func f = s.reductions[i];
        RVar rv = s.reduction_rvars[i], ro("ro"), ri("ri");
        Var lane("lane"), lo("lo"), li("li");
        f.compute_at(s.ids, s.r);
        Func part = f.update().split(rv, ro, ri, lanes * vecs, TailStrategy::GuardWithIf).rfactor(ri, lane);
        part.compute_at(s.ids, s.r).vectorize(lane, lanes);
        part.update().split(lane, lo, li, lanes).reorder(li, lo, ro).vectorize(li).unroll(lo);
    }
    for (Func f : s.scalars) f.compute_at(s.ids, s.r);
    s.chunk_mass.compute_at(s.ids, s.r);
    s.chunk_mass.update().atomic().vectorize(s.chunk_rvar, lanes);
    s.chunk_scan.compute_at(s.ids, s.r);
    s.pick.compute_at(s.ids, s.r);
}

// GPU: a kernel per phase of the algorithm (the row's max, the top-k
// threshold, the top-p threshold, the draw's target, its level, the draw),
// each one block per row and one thread per lane (the generator splits every
// reduction over the row into lanes), each ending in its value for every
// lane stored in global memory for the later phases. In a block, in order,
// with a barrier between stages: each reduction's parts (thread t: ids t,
// t + lanes, ...; shared memory), then its fold, which every thread computes
// for itself from all the parts, then the scalars of the next step, again
// one copy a thread (registers). No stage runs on one thread of the block,
// so every barrier is at the block's level (tests/check_gpu_barriers.py);
// key and w are recomputed where read (a few integer ops and an exp per id
// and pass, no V-sized scratch). The scans over chunks and inside the
// chosen one are serial (lane 0's copy).
// Tried before, 2026-11: a block per row whose scalars ran on one thread
// (Halide 14 put barriers inside those stages), and a row per thread; and,
// 2026-11-29, this schedule in one kernel: each stage's registers are an
// allocation of their own, which OpenCL C nests one bracket deeper each, past
// the 256 levels PoCL's compiler takes. A phase has under a hundred.
inline void schedule_sample_gpu(SampleStages s) {
    using namespace Halide;
    Var ro("ro"), ri("ri");
    s.ids.compute_root().split(s.r, ro, ri, 1).gpu_blocks(ro).gpu_threads(ri);
    std::vector<std::pair<Func, Var>> kernels;
    for (Func root : s.phase_roots) {
        Func k = root.in();
        k.compute_root().gpu_blocks(s.r).gpu_threads(s.t);
        kernels.emplace_back(k, s.r);
    }
    kernels.emplace_back(s.ids, ro);
    std::set<std::string> parts;
    for (Func f : s.reductions) parts.insert(f.name());
    for (size_t p = 0; p < s.phases.size() && p < kernels.size(); p++) {
        auto per_lane = [&](Func f) -> Func {
            f.compute_at(kernels[p].first, kernels[p].second).gpu_threads(s.t);
            for (int u = 0; u < f.num_update_definitions(); u++) f.update(u).gpu_threads(s.t);
            return f;
        };
        for (Func f : s.phases[p]) {
            if (parts.count(f.name())) {
                // A part is read by every thread: summed in the thread's
                // registers, then stored once to shared memory.
                Func w = f.in();
                per_lane(w);
                f.compute_at(w, s.t).store_in(MemoryType::Register);
            } else if (f.name() == s.chunk_mass.name()) {
                per_lane(f);  // (shared memory: every thread's scan reads it)
            } else {
                // Read only by the thread that computed it.
                per_lane(f).store_in(MemoryType::Register);
            }
        }
    }
}

}  // namespace halformer
