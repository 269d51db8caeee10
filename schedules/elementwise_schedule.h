// Schedules of the elementwise and flat-vector kernels (dropout, activation,
// adam, axpy, sum_squares). Memory-bound: the only goals are full vectors,
// both threads, and on a GPU coalesced threads.
#pragma once

#include "schedule_common.h"

namespace halformer {

// out(x, y): rows spread over threads, x vectorized.
inline void schedule_elementwise_2d(Halide::Func out, Halide::Var x, Halide::Var y, const Halide::Target &t) {
    using namespace Halide;
    Var xo("xo"), xi("xi"), yo("yo"), yi("yi");
    out.compute_root();
    if (t.has_gpu_feature()) {
        out.gpu_tile(x, y, xo, yo, xi, yi, 64, 4, TailStrategy::GuardWithIf);
        return;
    }
    out.split(y, yo, yi, 8, TailStrategy::GuardWithIf).parallel(yo).vectorize(x, f32_lanes(t), TailStrategy::GuardWithIf);
}

// out(i) over a flat vector: chunks of 16 K elements per task.
inline void schedule_elementwise_1d(Halide::Func out, Halide::Var i, const Halide::Target &t) {
    using namespace Halide;
    Var io("io"), ii("ii");
    out.compute_root();
    if (t.has_gpu_feature()) {
        out.gpu_tile(i, io, ii, 256, TailStrategy::GuardWithIf);
        return;
    }
    out.split(i, io, ii, 16384, TailStrategy::GuardWithIf).parallel(io).vectorize(ii, f32_lanes(t), TailStrategy::GuardWithIf);
}

// out() = Σ_c partial(c): the chunk partials in parallel (vectorized inside
// a chunk on the CPU), then one serial sum of the few partials.
inline void schedule_chunked_sum(Halide::Func out, Halide::Func partial, Halide::Var c, const Halide::Target &t) {
    using namespace Halide;
    Var co("co"), ci("ci");
    partial.compute_root();
    out.compute_root();
    if (t.has_gpu_feature()) {
        partial.gpu_tile(c, co, ci, 64, TailStrategy::GuardWithIf);
        partial.update().gpu_tile(c, co, ci, 64, TailStrategy::GuardWithIf);
        out.gpu_single_thread();
        out.update().gpu_single_thread();
        return;
    }
    partial.parallel(c, 8, TailStrategy::GuardWithIf);
    partial.update().parallel(c, 8, TailStrategy::GuardWithIf);
}

}  // namespace halformer
