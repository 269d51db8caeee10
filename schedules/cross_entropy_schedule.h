// How cross_entropy runs (algorithm: generators/cross_entropy_generator.cpp).
#pragma once

#include "schedule_common.h"

namespace halformer {

struct CrossEntropyStages {
    Halide::Func dlogits, loss, tokens, target, row_max, row_sum, row_total, stats;
    Halide::Var v, m;
    Halide::RDom k, rm;  // over the vocabulary; over rows
};

// Two passes over the logits: per row, the max, Σexp and Σ (a V-float row
// stays in L2 across the three reductions), then dlogits written row by row.
// The loss and token sums are serial over rows (M adds).
inline void schedule_cross_entropy_cpu(CrossEntropyStages s, int rows_per_task, const Halide::Target &t) {
    using namespace Halide;
    const int lanes = f32_lanes(t);
    Var ro("ro"), ri("ri");
    s.target.compute_root();
    s.stats.compute_root().split(s.m, ro, ri, std::max(1, rows_per_task), TailStrategy::GuardWithIf).parallel(ro);
    for (Func f : {s.row_max, s.row_sum, s.row_total}) {
        f.compute_at(s.stats, ri);
        f.update().atomic().vectorize(s.k.x, lanes);
    }
    s.dlogits.compute_root()
        .split(s.m, ro, ri, std::max(1, rows_per_task), TailStrategy::GuardWithIf)
        .parallel(ro)
        .vectorize(s.v, lanes, TailStrategy::GuardWithIf);
    s.loss.compute_root();
    s.tokens.compute_root();
}

// GPU: the statistics one block per row (cooperative reductions), dlogits
// one block per row striding the vocabulary, the sums one thread.
inline void schedule_cross_entropy_gpu(CrossEntropyStages s, int threads_knob) {
    using namespace Halide;
    const int threads = gpu_row_threads(threads_knob);
    // The target check runs on the host (v14 cannot emit require() in GPU
    // code); M ints go to the device.
    s.target.compute_root();
    s.stats.compute_root().gpu_blocks(s.m);
    for (Func f : {s.row_max, s.row_sum, s.row_total}) gpu_block_reduce(f, s.k.x, s.stats, s.m, threads);
    s.dlogits.compute_root();
    gpu_row_blocks(s.dlogits, s.v, s.m, threads);
    s.loss.compute_root().gpu_single_thread();
    s.loss.update().gpu_single_thread();
    s.tokens.compute_root().gpu_single_thread();
    s.tokens.update().gpu_single_thread();
}

}  // namespace halformer
