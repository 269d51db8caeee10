// How pack_weights runs (algorithm: generators/pack_weights_generator.cpp).
#pragma once

#include "schedule_common.h"

namespace halformer {

struct PackWeightsStages {
    Halide::Func wp;       // the packed panels (output)
    bool int8;             // int8 adds the per-block scales and sums below
    Halide::Func scale, colsum;  // outputs (j, b, p)
    Halide::Func bstep, bsum, q; // by column: bstep(n, b), bsum(n, b), q(k, n)
    Halide::Var p, n, k;   // panel, output column, input feature
};

// Runs once per weight at load: simple and parallel is enough. The int8
// outputs are computed by column first (bstep, bsum, q), then laid out.
inline void schedule_pack_weights_cpu(PackWeightsStages s, const Halide::Target &t) {
    using namespace Halide;
    s.wp.compute_root().parallel(s.p);
    if (!s.int8) return;
    s.bstep.compute_root().parallel(s.n, 64);
    s.q.compute_root().parallel(s.n, 16).vectorize(s.k, f32_lanes(t), TailStrategy::GuardWithIf);
    s.bsum.compute_root().parallel(s.n, 64);
    s.scale.compute_root().parallel(s.p);
    s.colsum.compute_root().parallel(s.p);
}

}  // namespace halformer
