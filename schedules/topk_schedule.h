// How topk runs (algorithm: generators/topk_generator.cpp).
#pragma once

#include "schedule_common.h"

namespace halformer {

struct TopKStages {
    Halide::Func values, ids, best;
    Halide::Var j, m;
};

// The scan over a row is serial, so it is vectorized across rows instead: one
// lane per row, the k-entry sorted lists in registers, groups of rows over
// threads. (Serial per row it ran 4.7x slower than the autoschedulers at
// 128 x 37000.) Measured 2026-11-22: top-8 of 128 x 37000 in 1.34 ms, of
// 4 x 37000 in 4.5 ms (few rows leave the lanes empty; a two-stage
// chunked version vectorized across chunks needed stride-512 gathers and
// ran 2-8x slower, so it was dropped).
inline void schedule_topk_cpu(TopKStages s, const Halide::Target &t) {
    using namespace Halide;
    const int lanes = f32_lanes(t);
    Var mo("mo"), mi("mi");
    s.values.compute_root().parallel(s.m);
    s.ids.compute_root().parallel(s.m);
    s.best.compute_root()
        .split(s.m, mo, mi, lanes, TailStrategy::GuardWithIf)
        .vectorize(mi)
        .parallel(mo);
    s.best.update()
        .split(s.m, mo, mi, lanes, TailStrategy::GuardWithIf)
        .vectorize(mi)
        .parallel(mo);
}

// GPU: one thread per row scans the row (the sorted k-list lives in its
// registers); rows over blocks of 32 threads. Decoding calls this with a few
// rows of a vocabulary, so it is a latency path, not a throughput one.
inline void schedule_topk_gpu(TopKStages s) {
    using namespace Halide;
    Var mo("mo"), mi("mi");
    for (Func f : {s.values, s.ids}) {
        f.compute_root().split(s.m, mo, mi, 32, TailStrategy::GuardWithIf).gpu_blocks(mo).gpu_threads(mi);
    }
    s.best.compute_root().split(s.m, mo, mi, 32, TailStrategy::GuardWithIf).gpu_blocks(mo).gpu_threads(mi);
    s.best.update().split(s.m, mo, mi, 32, TailStrategy::GuardWithIf).gpu_blocks(mo).gpu_threads(mi);
}

}  // namespace halformer
