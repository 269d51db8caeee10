// How output_head runs (algorithm: generators/output_head_generator.cpp).
#pragma once

#include "linear_schedule.h"

namespace halformer {

// The logits [M, V] are a root buffer computed by the matmul schedule (panel
// or dot); the projection is > 99% of the work. Then one pass per row for the
// max and the sum of exponentials, and one that writes the log-probabilities.
inline void schedule_output_head_cpu(LinearStages logits, Halide::Func out, Halide::Func row_max,
                                     Halide::Func row_sum, Halide::RDom k,
                                     const LinearKnobs &knobs, const Halide::Target &t) {
    using namespace Halide;
    const int lanes = f32_lanes(t);
    schedule_linear_cpu(logits, knobs, t);
    Var n = logits.n, m = logits.m;
    out.compute_root().parallel(m).vectorize(n, lanes, TailStrategy::GuardWithIf);
    row_max.compute_at(out, m);
    row_max.update().atomic().vectorize(k.x, lanes);
    row_sum.compute_at(out, m);
    row_sum.update().atomic().vectorize(k.x, lanes);
}

// GPU: the logits by the GPU matmul (or the decode-shape dot schedule), then
// one block per row for the max, the sum of exponentials and the output.
inline void schedule_output_head_gpu(LinearStages logits, Halide::Func out,
                                     Halide::Func row_max, Halide::Func row_sum, Halide::RDom k,
                                     const GpuMatmulKnobs &kn, bool dot, int threads_knob) {
    using namespace Halide;
    const int threads = gpu_row_threads(threads_knob);
    schedule_linear_gpu(logits, kn, dot);
    out.compute_root();
    gpu_row_blocks(out, logits.n, logits.m, threads);
    gpu_block_reduce(row_max, k.x, out, logits.m, threads);
    gpu_block_reduce(row_sum, k.x, out, logits.m, threads);
}

}  // namespace halformer
