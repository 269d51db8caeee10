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
// For k = 1 (argmax) a block of threads shares each row instead: thread u
// scans the contiguous stretch u of the row (so that, combined in stretch
// order, ties still go to the lowest id), then one thread combines the
// threads' (value, id) pairs. (Measured on an H100: one thread per row
// took 0.8 ms for 8 × 37,000, 8.8% of a decoding step's GPU time.)
inline void schedule_topk_gpu(TopKStages s, int k, Halide::RVar r, Halide::Expr row_length) {
    using namespace Halide;
    Var mo("mo"), mi("mi");
    if (k == 1) {
        Var u("u");
        RVar ro("ro"), ri("ri");
        // Thread u takes the u-th stretch of `chunk` ids: 256 long, longer
        // past 262,144 ids so that a block never has more than 1024 threads.
        Expr chunk = max(256, (row_length + 1023) / 1024);
        Func part = s.best.update().split(r, ro, ri, chunk, TailStrategy::GuardWithIf).rfactor(ro, u);
        s.best.compute_root().gpu_blocks(s.m);
        s.best.update().gpu_blocks(s.m);
        part.compute_at(s.best, s.m).gpu_threads(u);
        part.update().gpu_threads(u);
        for (Func f : {s.values, s.ids}) {
            f.compute_root().split(s.m, mo, mi, 32, TailStrategy::GuardWithIf).gpu_blocks(mo).gpu_threads(mi);
        }
        return;
    }
    for (Func f : {s.values, s.ids}) {
        f.compute_root().split(s.m, mo, mi, 32, TailStrategy::GuardWithIf).gpu_blocks(mo).gpu_threads(mi);
    }
    s.best.compute_root().split(s.m, mo, mi, 32, TailStrategy::GuardWithIf).gpu_blocks(mo).gpu_threads(mi);
    s.best.update().split(s.m, mo, mi, 32, TailStrategy::GuardWithIf).gpu_blocks(mo).gpu_threads(mi);
}

}  // namespace halformer
