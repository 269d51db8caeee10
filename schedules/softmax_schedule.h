// How softmax / log_softmax runs (algorithm: generators/softmax_generator.cpp).
#pragma once

#include "schedule_common.h"

namespace halformer {

struct SoftmaxStages {
    Halide::Func out, s, e, row_max, row_sum;
    Halide::Var n, r;
    Halide::RDom k;  // over n, in row_max and row_sum
};

// One row at a time: the masked scores and the exponentials are kept for the
// row (N floats, in L1 for any vocabulary up to ~8K, L2 beyond), so x is read
// once and exp is evaluated once per element. Each row is a task of its own,
// and every row runs the same code: rows handed out several at a time (the
// knob rows_per_task, 8 by hand until 2026-11-28) split the row loop, and
// Halide's loop partitioning then compiled a whole task and a shorter one
// apart, which LLVM contracted into FMAs differently: a row's bits depended
// on the call's row count (RowInvariance.SoftmaxAndLogSoftmax; a decoding
// step of 8 rows or more answered otherwise than each row alone). strict_float
// mends that too, at 1.2–2.7× the time; one row a task was also the fastest
// (measured 2026-11-28, avx2, AMD EPYC Zen 3, 1 × 37000: 0.137 ms against
// 0.200 with 8, log_softmax).
inline void schedule_softmax_cpu(SoftmaxStages s, const Halide::Target &t) {
    using namespace Halide;
    const int lanes = f32_lanes(t);
    s.out.compute_root()
        .parallel(s.r)
        .vectorize(s.n, lanes, TailStrategy::GuardWithIf);
    s.s.compute_at(s.out, s.r).vectorize(s.n, lanes, TailStrategy::GuardWithIf);
    s.row_max.compute_at(s.out, s.r);
    s.row_max.update().atomic().vectorize(s.k.x, lanes);
    s.e.compute_at(s.out, s.r).vectorize(s.n, lanes, TailStrategy::GuardWithIf);
    s.row_sum.compute_at(s.out, s.r);
    s.row_sum.update().atomic().vectorize(s.k.x, lanes);
}

// GPU: one block per row. Each thread handles the elements u, u + threads, …
// of the row; the max and the sum are cooperative reductions (per-thread
// partials, then one combine in shared memory). The masked scores and the
// exponentials are recomputed where used rather than stored: a 37000-word row
// would not fit in shared memory, and the kernel is bound by reading x.
inline void schedule_softmax_gpu(SoftmaxStages s, int threads_knob) {
    using namespace Halide;
    const int threads = gpu_row_threads(threads_knob);
    s.out.compute_root();
    gpu_row_blocks(s.out, s.n, s.r, threads);
    gpu_block_reduce(s.row_max, s.k.x, s.out, s.r, threads);
    gpu_block_reduce(s.row_sum, s.k.x, s.out, s.r, threads);
}

}  // namespace halformer
