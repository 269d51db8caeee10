// How gather and scatter run (algorithms: generators/gather_generator.cpp,
// generators/scatter_generator.cpp).
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

struct ScatterStages {
    Halide::Func out, row;
    Halide::Var w;
    Halide::RDom ri;
};

// Scatter: the indices are checked up front; then rows over threads (their
// destinations are distinct, so no two threads write one row), each
// vectorized.
inline void schedule_scatter_cpu(ScatterStages s, const Halide::Target &t) {
    using namespace Halide;
    s.row.compute_root();
    s.out.update()
        .allow_race_conditions()
        .parallel(s.ri.x, 8, TailStrategy::GuardWithIf)
        .vectorize(s.w, f32_lanes(t), TailStrategy::GuardWithIf);
}

// GPU: one block per source row, threads along it (coalesced writes).
inline void schedule_scatter_gpu(ScatterStages s, int threads_knob) {
    using namespace Halide;
    const int threads = or_default(threads_knob, 128);
    Var o("w_o"), i("w_i");
    s.row.compute_root();
    // The pure stage writes nothing (undef), but on the device: the
    // pipeline then never needs the output on the host (the paged cache
    // lives on the device only).
    s.out.gpu_single_thread();
    s.out.update()
        .allow_race_conditions()
        .split(s.w, o, i, threads, TailStrategy::GuardWithIf)
        .reorder(o, i, s.ri.x)
        .gpu_blocks(s.ri.x)
        .gpu_threads(i);
}

}  // namespace halformer
