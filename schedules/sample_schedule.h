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
    Halide::Func chunk_scan, pick;      // serial scans: over chunks, inside one
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

// GPU: one block per row, the whole draw in one kernel. The weights and keys
// live in global scratch per block (MemoryType::Heap: 2·V floats outgrow
// shared memory); every reduction is cooperative (per-thread partials in
// shared memory, one thread folds them), and the per-row values and the two
// short serial scans run on one thread between barriers.
inline void schedule_sample_gpu(SampleStages s, int threads_knob) {
    using namespace Halide;
    const int threads = gpu_row_threads(threads_knob);
    Var vo("vo"), vi("vi"), co("co"), ci("ci");
    s.ids.compute_root().gpu_blocks(s.r);
    for (Func f : {s.key, s.w}) {
        f.compute_at(s.ids, s.r)
            .store_in(MemoryType::Heap)
            .split(s.v, vo, vi, threads, TailStrategy::GuardWithIf)
            .reorder(vi, vo)
            .gpu_threads(vi);
    }
    for (size_t i = 0; i < s.reductions.size(); i++) {
        gpu_block_reduce(s.reductions[i], s.reduction_rvars[i], s.ids, s.r, threads);
    }
    for (Func f : s.scalars) f.compute_at(s.ids, s.r);
    s.chunk_mass.compute_at(s.ids, s.r)
        .store_in(MemoryType::Heap)
        .split(s.c, co, ci, threads, TailStrategy::GuardWithIf)
        .reorder(ci, co)
        .gpu_threads(ci);
    s.chunk_mass.update()
        .split(s.c, co, ci, threads, TailStrategy::GuardWithIf)
        .reorder(s.chunk_rvar, ci, co)
        .gpu_threads(ci);
    s.chunk_scan.compute_at(s.ids, s.r);
    s.pick.compute_at(s.ids, s.r);
}

}  // namespace halformer
