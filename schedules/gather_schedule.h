// How gather runs (algorithm: generators/gather_generator.cpp).
#pragma once

#include "schedule_common.h"

namespace halformer {

struct GatherStages {
    Halide::Func out, row;
    Halide::Var w, j, t;
};

// The row indices are checked up front (host, a few ints); then a copy:
// rows over threads (time steps × rows fused), each row vectorized.
inline void schedule_gather_cpu(GatherStages s, const Halide::Target &t) {
    using namespace Halide;
    Var jt("jt");
    s.row.compute_root();
    s.out.compute_root()
        .fuse(s.j, s.t, jt)
        .parallel(jt, 8, TailStrategy::GuardWithIf)
        .vectorize(s.w, f32_lanes(t), TailStrategy::GuardWithIf);
}

// GPU: one block per (row, time step), threads along the row (coalesced).
inline void schedule_gather_gpu(GatherStages s, int threads_knob) {
    using namespace Halide;
    const int threads = or_default(threads_knob, 128);
    Var jt("jt");
    s.row.compute_root();
    s.out.compute_root().fuse(s.j, s.t, jt);
    gpu_row_blocks(s.out, s.w, jt, threads);
}

}  // namespace halformer
