// How softmax / log_softmax runs (algorithm: generators/softmax_generator.cpp).
#pragma once

#include "schedule_common.h"

namespace halformer {

struct SoftmaxStages {
    Halide::Func out, s, e, row_max, row_sum;
    Halide::Var n, r;
    Halide::RDom k;  // over n, in row_max and row_sum
};

struct SoftmaxKnobs {
    int rows_per_task;  // rows handed to one thread at a time
};

// One row at a time: the masked scores and the exponentials are kept for the
// row (N floats, in L1 for any vocabulary up to ~8K, L2 beyond), so x is read
// once and exp is evaluated once per element. Rows are spread over threads.
inline void schedule_softmax_cpu(SoftmaxStages s, const SoftmaxKnobs &knobs,
                                 const Halide::Target &t) {
    using namespace Halide;
    const int lanes = f32_lanes(t);
    Var ro("ro"), ri("ri");
    s.out.compute_root()
        .split(s.r, ro, ri, std::max(1, knobs.rows_per_task), TailStrategy::GuardWithIf)
        .parallel(ro)
        .vectorize(s.n, lanes, TailStrategy::GuardWithIf);
    s.s.compute_at(s.out, ri).vectorize(s.n, lanes, TailStrategy::GuardWithIf);
    s.row_max.compute_at(s.out, ri);
    s.row_max.update().atomic().vectorize(s.k.x, lanes);
    s.e.compute_at(s.out, ri).vectorize(s.n, lanes, TailStrategy::GuardWithIf);
    s.row_sum.compute_at(s.out, ri);
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
