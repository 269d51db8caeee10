// How topk runs (algorithm: generators/topk_generator.cpp).
#pragma once

#include "schedule_common.h"

namespace halformer {

struct TopKStages {
    Halide::Func values, ids, best, part;
    Halide::Var j, m, c;
};

// Each scan is serial, so both stages vectorize across independent lists:
// the first stage across chunks of a row (one lane per chunk, the k-entry
// lists in registers), rows and groups of chunks over threads; the merge
// across rows. Measured 2026-11-22 (sapphirerapids, 2 threads, top-8 of
// 4 × 37000): 5.1 ms as one serial scan per row vectorized across rows.
inline void schedule_topk_cpu(TopKStages s, const Halide::Target &t) {
    using namespace Halide;
    const int lanes = f32_lanes(t);
    Var mo("mo"), mi("mi"), co("co"), ci("ci");
    s.values.compute_root().parallel(s.m);
    s.ids.compute_root().parallel(s.m);
    s.part.compute_root()
        .split(s.c, co, ci, lanes, TailStrategy::GuardWithIf)
        .vectorize(ci)
        .fuse(co, s.m, mo)
        .parallel(mo);
    s.part.update()
        .split(s.c, co, ci, lanes, TailStrategy::GuardWithIf)
        .vectorize(ci)
        .fuse(co, s.m, mo)
        .parallel(mo);
    s.best.compute_root()
        .split(s.m, mo, mi, lanes, TailStrategy::GuardWithIf)
        .vectorize(mi)
        .parallel(mo);
    s.best.update()
        .split(s.m, mo, mi, lanes, TailStrategy::GuardWithIf)
        .vectorize(mi)
        .parallel(mo);
}

}  // namespace halformer
