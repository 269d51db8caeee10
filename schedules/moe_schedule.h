// How moe_route and moe_combine run (algorithm: generators/moe_generator.cpp).
// Both are small beside the experts' projections (a router row is E ≤ 128
// scores; combining reads k rows of D per token): rows over threads, d
// vectorized; on a GPU one thread per token (route) or per (d, token).
#pragma once

#include "schedule_common.h"

namespace halformer {

struct MoeRouteStages {
    Halide::Func weights, ids, best, total, chosen, top_score, top_id;
    Halide::Var j, m;
};

inline void schedule_moe_route_cpu(MoeRouteStages s, const Halide::Target &) {
    for (Halide::Func f : {s.best, s.total, s.chosen}) {
        f.compute_root().parallel(s.m);
        f.update().parallel(s.m);
    }
    s.weights.compute_root().parallel(s.m);
    s.ids.compute_root().parallel(s.m);
}

inline void schedule_moe_route_gpu(MoeRouteStages s) {
    using namespace Halide;
    Var mo("mo"), mi("mi");
    for (Func f : {s.best, s.total, s.chosen}) {
        f.compute_root().split(s.m, mo, mi, 32, TailStrategy::GuardWithIf).gpu_blocks(mo).gpu_threads(mi);
        f.update().split(s.m, mo, mi, 32, TailStrategy::GuardWithIf).gpu_blocks(mo).gpu_threads(mi);
    }
    for (Func f : {s.weights, s.ids}) {
        f.compute_root().split(s.m, mo, mi, 32, TailStrategy::GuardWithIf).gpu_blocks(mo).gpu_threads(mi);
    }
}

struct MoeCombineStages {
    Halide::Func out, sum, row;
    Halide::Var d, m, j;
};

inline void schedule_moe_combine_cpu(MoeCombineStages s, const Halide::Target &t) {
    using namespace Halide;
    const int lanes = f32_lanes(t);
    s.row.compute_root();
    s.out.compute_root().parallel(s.m).vectorize(s.d, lanes, TailStrategy::GuardWithIf);
    s.sum.compute_at(s.out, s.m).vectorize(s.d, lanes, TailStrategy::GuardWithIf);
    s.sum.update().vectorize(s.d, lanes, TailStrategy::GuardWithIf);
}

inline void schedule_moe_combine_gpu(MoeCombineStages s) {
    using namespace Halide;
    Var mo("mo"), mi("mi"), d_o("d_o"), d_i("d_i");
    s.row.compute_root();  // (the checks run on the host before the kernel: a GPU kernel cannot print)
    s.out.compute_root().gpu_tile(s.d, s.m, d_o, mo, d_i, mi, 64, 1, TailStrategy::GuardWithIf);
    s.sum.compute_at(s.out, d_i);
}

}  // namespace halformer
