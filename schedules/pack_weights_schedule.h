// How pack_weights runs (algorithm: generators/pack_weights_generator.cpp).
#pragma once

#include "schedule_common.h"

namespace halformer {

struct PackWeightsStages {
    Halide::Func wp;       // the packed panels (output)
    bool int8;             // int8 adds the per-column scale and sums below
    Halide::Func absmax, scale, colsum, q;
    Halide::Var p, n, k;   // panel, output column, input feature
};

// Runs once per weight at load: simple and parallel is enough. The int8
// outputs may be narrower than a task: guarded, never shifted inwards.
inline void schedule_pack_weights_cpu(PackWeightsStages s, const Halide::Target &t) {
    using namespace Halide;
    s.wp.compute_root().parallel(s.p);
    if (!s.int8) return;
    s.absmax.compute_root().parallel(s.n, 64);
    s.scale.compute_root();
    Var no("no"), ni("ni");
    s.colsum.compute_root().split(s.n, no, ni, 64, TailStrategy::GuardWithIf).parallel(no);
    s.q.compute_root().parallel(s.n, 16).vectorize(s.k, f32_lanes(t), TailStrategy::GuardWithIf);
}

}  // namespace halformer
