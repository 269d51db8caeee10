// How embedding runs (algorithm: generators/embedding_generator.cpp).
#pragma once

#include "schedule_common.h"

namespace halformer {

struct EmbeddingStages {
    Halide::Func out, token, position, type;
    bool has_position, has_type;
    Halide::Var d, t, b;
};

struct EmbeddingKnobs {
    int tokens_per_task;  // token rows handed to one thread at a time
};

// The ids are checked once each, up front (a bad id fails before any row is
// written); then one row per token, vectorized over d, tokens over threads.
// The encoding's exp/sin/cos cost more than the copy: still < 1% of a layer.
inline void schedule_embedding_cpu(EmbeddingStages s, const EmbeddingKnobs &knobs,
                                   const Halide::Target &t) {
    using namespace Halide;
    const int lanes = f32_lanes(t);
    s.token.compute_root();
    if (s.has_position) s.position.compute_root();
    if (s.has_type) s.type.compute_root();
    Var tb("tb");
    s.out.compute_root()
        .fuse(s.t, s.b, tb)
        .parallel(tb, std::max(1, knobs.tokens_per_task), TailStrategy::GuardWithIf)
        .vectorize(s.d, lanes, TailStrategy::GuardWithIf);
}

// GPU: one block per token row, threads over d. The id and position checks
// (a few ints) run on the host before the kernel, so a bad id still fails
// before anything is written.
inline void schedule_embedding_gpu(EmbeddingStages s, int threads_knob) {
    using namespace Halide;
    const int threads = or_default(threads_knob, 128);
    s.token.compute_root();
    if (s.has_position) s.position.compute_root();
    if (s.has_type) s.type.compute_root();
    Var tb("tb");
    s.out.compute_root().fuse(s.t, s.b, tb);
    gpu_row_blocks(s.out, s.d, tb, threads);
}

}  // namespace halformer
