// How linear_backward runs (algorithm:
// generators/linear_backward_generator.cpp). dX and dW are matmuls and use
// the forward's panel schedules (schedules/linear_schedule.h); this adds the
// bias gradient's column sum.
#pragma once

#include "linear_schedule.h"

namespace halformer {

// out(n) = in(n) + sum(n), sum(n) = Σ_m dy(n, m): columns vectorized, rows
// streamed; the columns split over threads.
inline void schedule_column_sum_cpu(Halide::Func out, Halide::Func sum, Halide::Var n, Halide::RDom rm,
                                    const Halide::Target &t) {
    using namespace Halide;
    const int lanes = f32_lanes(t);
    Var no("no"), ni("ni");
    out.compute_root().split(n, no, ni, 4 * lanes, TailStrategy::GuardWithIf).parallel(no).vectorize(ni, lanes);
    sum.compute_at(out, no).vectorize(n, lanes, TailStrategy::GuardWithIf);
    sum.update().reorder(n, rm.x).vectorize(n, lanes, TailStrategy::GuardWithIf);
}

// out(k, n) = in(k, n) + t(n, k): a transposing add, in lanes × lanes tiles
// (dense loads of t's rows, shuffled in registers), tiles over threads.
inline void schedule_transposed_add_cpu(Halide::Func out, Halide::Var k, Halide::Var n, const Halide::Target &t) {
    using namespace Halide;
    const int lanes = f32_lanes(t);
    Var ko("ko"), no("no"), ki("ki"), ni("ni");
    out.compute_root()
        .tile(k, n, ko, no, ki, ni, lanes, lanes, TailStrategy::GuardWithIf)
        .vectorize(ki)
        .unroll(ni)
        .parallel(no);
}

// GPU: 32 × 8 tiles of threads.
inline void schedule_transposed_add_gpu(Halide::Func out, Halide::Var k, Halide::Var n) {
    using namespace Halide;
    out.compute_root().gpu_tile(k, n, Var("ko"), Var("no"), Var("ki"), Var("ni"), 32, 8, TailStrategy::GuardWithIf);
}

// GPU: one thread per column, looping over rows (coalesced across threads).
inline void schedule_column_sum_gpu(Halide::Func out, Halide::Func sum, Halide::Var n) {
    using namespace Halide;
    Var no("no"), ni("ni");
    out.compute_root().gpu_tile(n, no, ni, 64, TailStrategy::GuardWithIf);
    sum.compute_at(out, ni);
}

}  // namespace halformer
