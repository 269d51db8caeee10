// How ffn runs (algorithm: generators/ffn_generator.cpp).
#pragma once

#include "linear_schedule.h"

namespace halformer {

struct FFNKnobs {
    int fuse_rows;      // 0: hidden written out whole; R > 0: per block of R rows
    LinearKnobs matmul;
};

// Both products use the panel matmul schedule. Unfused (fuse_rows = 0) the
// hidden [M, F] is a root buffer (1 MiB at M = 128, F = 2048) and each
// product is parallel over its column panels. Fused, the output is split
// into blocks of fuse_rows rows spread over threads; each block computes its
// hidden rows (fuse_rows × F, L2-resident) just before the second product,
// and both weights are packed once per call.
inline void schedule_ffn_cpu(LinearStages first, LinearStages second, const FFNKnobs &knobs,
                             const Halide::Target &t) {
    using namespace Halide;
    second.out.compute_root();
    if (knobs.fuse_rows <= 0) {
        first.out.compute_root();
        schedule_panel_matmul(first, knobs.matmul, t, true, false);
        schedule_panel_matmul(second, knobs.matmul, t, true, false);
        return;
    }
    Var mb("mb"), mr("mr");
    second.out.split(second.m, mb, mr, knobs.fuse_rows, TailStrategy::GuardWithIf)
        .parallel(mb);
    first.out.compute_at(second.out, mb);
    LinearStages inner = second;
    inner.out_rows = mr.name();
    schedule_panel_matmul(first, knobs.matmul, t, false, true);
    schedule_panel_matmul(inner, knobs.matmul, t, false, true);
}

// GPU: both products with the register-blocked GPU matmul; the hidden [M, F] goes
// through global memory (a fused block would need F floats per row in shared
// memory).
inline void schedule_ffn_gpu(LinearStages first, LinearStages second, const GpuMatmulKnobs &kn) {
    first.out.compute_root();
    second.out.compute_root();
    schedule_matmul_gpu(first, kn);
    schedule_matmul_gpu(second, kn);
}

}  // namespace halformer
