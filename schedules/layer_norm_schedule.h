// How layer_norm runs (algorithm: generators/layer_norm_generator.cpp).
#pragma once

#include "schedule_common.h"

namespace halformer {

struct LayerNormStages {
    Halide::Func out, h, sum, dev, sq;
    Halide::Var d, r;
    Halide::RDom k;  // over d
};

struct LayerNormKnobs {
    int rows_per_task;
};

// Row by row: h = x + residual is formed once into a D-float row buffer (L1),
// the two reductions run vectorized over it, and the output pass reads it
// again. Memory traffic is the minimum: read x (and residual) once, write y.
inline void schedule_layer_norm_cpu(LayerNormStages s, const LayerNormKnobs &knobs,
                                    const Halide::Target &t, bool rms = false) {
    using namespace Halide;
    const int lanes = f32_lanes(t);
    Var ro("ro"), ri("ri");
    s.out.compute_root()
        .split(s.r, ro, ri, std::max(1, knobs.rows_per_task), TailStrategy::GuardWithIf)
        .parallel(ro)
        .vectorize(s.d, lanes, TailStrategy::GuardWithIf);
    s.h.compute_at(s.out, ri).vectorize(s.d, lanes, TailStrategy::GuardWithIf);
    if (!rms) {  // RMSNorm has only the sum of squares
        s.sum.compute_at(s.out, ri);
        s.sum.update().atomic().vectorize(s.k.x, lanes);
        s.dev.compute_at(s.out, ri);
        s.dev.update().atomic().vectorize(s.k.x, lanes);
    }
    s.sq.compute_at(s.out, ri);
    s.sq.update().atomic().vectorize(s.k.x, lanes);
}

// GPU: one block per row; h = x + residual is recomputed where used, and the
// three reductions (sum, shift, squares) are cooperative block reductions.
inline void schedule_layer_norm_gpu(LayerNormStages s, int threads_knob, bool rms = false) {
    using namespace Halide;
    const int threads = gpu_row_threads(threads_knob);
    s.out.compute_root();
    gpu_row_blocks(s.out, s.d, s.r, threads);
    if (!rms) {
        gpu_block_reduce(s.sum, s.k.x, s.out, s.r, threads);
        gpu_block_reduce(s.dev, s.k.x, s.out, s.r, threads);
    }
    gpu_block_reduce(s.sq, s.k.x, s.out, s.r, threads);
}

}  // namespace halformer
