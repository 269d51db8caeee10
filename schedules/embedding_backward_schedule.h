// How embedding_backward runs (algorithm:
// generators/embedding_backward_generator.cpp).
#pragma once

#include "schedule_common.h"

namespace halformer {

// A scatter-add f(d, row(r)) += …: the tokens in order (serial: two tokens
// may hit the same row), d split across threads and vectorized.
inline void schedule_scatter_rows_cpu(Halide::Func f, Halide::Var d, Halide::RDom r, const Halide::Target &t) {
    using namespace Halide;
    const int lanes = f32_lanes(t);
    Var dout("dout"), din("din");
    f.compute_root();
    f.update()
        .split(d, dout, din, 4 * lanes, TailStrategy::GuardWithIf)
        .reorder(din, r.x, r.y, dout)
        .parallel(dout)
        .vectorize(din, lanes);
}

// GPU: threads over d, each looping over the tokens in order.
inline void schedule_scatter_rows_gpu(Halide::Func f, Halide::Var d, Halide::RDom r, int threads_knob) {
    using namespace Halide;
    const int threads = or_default(threads_knob, 64);
    Var dout("dout"), din("din");
    f.compute_root();
    f.update()
        .split(d, dout, din, threads, TailStrategy::GuardWithIf)
        .reorder(r.x, r.y, din, dout)
        .gpu_blocks(dout)
        .gpu_threads(din);
}

}  // namespace halformer
