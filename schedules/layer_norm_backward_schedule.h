// How layer_norm_backward runs (algorithm:
// generators/layer_norm_backward_generator.cpp).
#pragma once

#include "schedule_common.h"

namespace halformer {

struct LayerNormBackwardStages {
    Halide::Func dx, dgamma, dbeta;
    Halide::Func h, sum, dev, sq, stats, xhat, g, sum_g, sum_gx, gsum, bsum;
    Halide::Var d, r;
    Halide::RDom k, rr;  // over d; over rows
};

// dx row by row; the per-row mean and rstd are kept (2 floats a row) for dγ and dβ,
// which reduce over rows with d vectorized, the columns split over threads.
inline void schedule_layer_norm_backward_cpu(LayerNormBackwardStages s, int rows_per_task,
                                             const Halide::Target &t) {
    using namespace Halide;
    const int lanes = f32_lanes(t);
    Var ro("ro"), ri("ri"), dout("dout"), din("din");
    s.stats.compute_root().parallel(s.r, 16, TailStrategy::GuardWithIf);
    for (Func f : {s.sum, s.dev, s.sq}) {
        f.compute_at(s.stats, s.r);
        f.update().atomic().vectorize(s.k.x, lanes);
    }
    s.dx.compute_root()
        .split(s.r, ro, ri, std::max(1, rows_per_task), TailStrategy::GuardWithIf)
        .parallel(ro)
        .vectorize(s.d, lanes, TailStrategy::GuardWithIf);
    // h, x̂ and g stay inline: each is a few flops per element, and dγ reads
    // x̂ too (a second consumer).
    for (Func f : {s.sum_g, s.sum_gx}) {
        f.compute_at(s.dx, ri);
        f.update().atomic().vectorize(s.k.x, lanes);
    }
    for (Func out : {s.dgamma, s.dbeta}) {
        out.compute_root().split(s.d, dout, din, 4 * lanes, TailStrategy::GuardWithIf).parallel(dout)
            .vectorize(din, lanes);
    }
    for (auto [f, out] : {std::pair{s.gsum, s.dgamma}, std::pair{s.bsum, s.dbeta}}) {
        f.compute_at(out, dout).vectorize(s.d, lanes, TailStrategy::GuardWithIf);
        f.update().reorder(s.d, s.rr).vectorize(s.d, lanes, TailStrategy::GuardWithIf);
    }
}

// GPU: dx one block per row with cooperative reductions (the forward's
// schedule); the statistics one thread per row; dγ, dβ one thread per
// column looping over rows (coalesced across the threads of a block).
inline void schedule_layer_norm_backward_gpu(LayerNormBackwardStages s, int threads_knob) {
    using namespace Halide;
    const int threads = gpu_row_threads(threads_knob);
    Var ro("ro"), ri("ri");
    s.stats.compute_root().split(s.r, ro, ri, 64, TailStrategy::GuardWithIf).gpu_blocks(ro).gpu_threads(ri);
    for (Func f : {s.sum, s.dev, s.sq}) f.compute_at(s.stats, ri);
    s.dx.compute_root();
    gpu_row_blocks(s.dx, s.d, s.r, threads);
    gpu_block_reduce(s.sum_g, s.k.x, s.dx, s.r, threads);
    gpu_block_reduce(s.sum_gx, s.k.x, s.dx, s.r, threads);
    for (Func out : {s.dgamma, s.dbeta}) {
        out.compute_root().split(s.d, ro, ri, 64, TailStrategy::GuardWithIf).gpu_blocks(ro).gpu_threads(ri);
    }
    s.gsum.compute_at(s.dgamma, ri);
    s.bsum.compute_at(s.dbeta, ri);
}

}  // namespace halformer
