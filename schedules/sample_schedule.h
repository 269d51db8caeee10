// How sample runs (algorithm: generators/sample_generator.cpp).
#pragma once

#include "schedule_common.h"

#include <vector>

namespace halformer {

struct SampleStages {
    Halide::Func ids, key, w;
    // Per-row reductions over the vocabulary (the row's max and min, each
    // bisection step's count or mass, ...): a pure init and one update over
    // the RVar beside it.
    std::vector<Halide::Func> reductions;
    std::vector<Halide::RVar> reduction_rvars;
    std::vector<Halide::Func> scalars;  // per-row values: bisection states, thresholds
    Halide::Func chunk_mass;            // (c, r): the level's mass per chunk of ids
    Halide::RVar chunk_rvar;            // over a chunk's ids
    Halide::Func chunk_scan;            // serial scan over the chunks ...
    Halide::RVar scan_rvar;             // ... along this RVar
    Halide::Func pick;                  // serial scan inside the chosen chunk
    Halide::Var v, r, c;
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

// GPU: not built (generators/CMakeLists.txt: NO_GPU); on a GPU device the
// runtime draws on the host with the CPU build. Two schedules were tried:
// a block per row with cooperative reductions (Halide 14 puts its barriers
// inside the one-thread scalar stages: tests/check_gpu_barriers.py counted
// 152, and PoCL drew different ids run to run), and this one, a row per
// thread with every stage a scalar of its thread (no barrier, no shared
// memory), whose OpenCL C nests brackets past OpenCL's limit of 256 (PoCL:
// "bracket nesting level exceeded"). It stays as the GPU branch of the
// generator so that tests/check_gpu_barriers.py reads a barrier-free one.
inline void schedule_sample_gpu(SampleStages s, int threads_knob) {
    using namespace Halide;
    const int threads = or_default(threads_knob, 32);
    Var ro("ro"), ri("ri");
    s.ids.compute_root().gpu_tile(s.r, ro, ri, threads, TailStrategy::GuardWithIf);
    for (Func f : s.reductions) f.compute_at(s.ids, ri);
    for (Func f : s.scalars) f.compute_at(s.ids, ri);
    s.chunk_scan.compute_at(s.ids, ri);
    s.chunk_mass.compute_at(s.chunk_scan, s.scan_rvar);
    s.pick.compute_at(s.ids, ri);
}

}  // namespace halformer
