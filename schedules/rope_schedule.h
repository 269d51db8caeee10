// How rope runs (algorithm: generators/rope_generator.cpp).
#pragma once

#include "schedule_common.h"

namespace halformer {

struct RopeStages {
    Halide::Func out, cosine, sine;
    Halide::Var i, p, h, m;
};

// Rows over threads; a row's cos and sin once (D/2 of each), shared by its
// heads; each head's two halves in one pass, vectorized along the pairs.
inline void schedule_rope_cpu(RopeStages s, const Halide::Target &t) {
    using namespace Halide;
    const int lanes = f32_lanes(t);
    s.out.compute_root()
        .reorder(s.i, s.p, s.h, s.m)
        .unroll(s.p)
        .vectorize(s.i, lanes, TailStrategy::GuardWithIf)
        .parallel(s.m);
    for (Func f : {s.cosine, s.sine}) f.compute_at(s.out, s.m).vectorize(s.i, lanes, TailStrategy::GuardWithIf);
}

// GPU: a block per (row, head) (rows on grid x: a prefill's rows may pass
// grid y's 65535), threads along the pairs (coalesced in the halves
// layout), both elements of a pair per thread; cos and sin per thread (a
// row's heads recompute them: cheaper than a pass through memory).
inline void schedule_rope_gpu(RopeStages s, int threads_knob) {
    using namespace Halide;
    const int threads = or_default(threads_knob, 64);
    Var io("io"), ii("ii");
    s.out.compute_root()
        .reorder(s.p, s.i, s.h, s.m)
        .unroll(s.p)
        .split(s.i, io, ii, threads, TailStrategy::GuardWithIf)
        .reorder(s.p, io, ii, s.m, s.h)
        .gpu_blocks(s.m, s.h)
        .gpu_threads(ii);
}

}  // namespace halformer
