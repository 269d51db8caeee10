// How pool runs (algorithm: generators/pool_generator.cpp).
#pragma once

#include "schedule_common.h"

namespace halformer {

struct PoolStages {
    Halide::Func out, len, pooled, sum;
    Halide::RVar sum_rvar;
    Halide::Func sq;
    Halide::RVar sq_rvar;
    bool mean, normalize;
    Halide::Var d, r;
};

// One sequence per thread task: its lengths checked up front, the sum over
// its positions vectorized along d (double lanes), the norm over d.
// A few sequences × D values: far below a layer's cost.
inline void schedule_pool_cpu(PoolStages s, const Halide::Target &t) {
    using namespace Halide;
    const int lanes = t.natural_vector_size<double>();
    s.len.compute_root();
    s.out.compute_root().parallel(s.r).vectorize(s.d, lanes, TailStrategy::GuardWithIf);
    if (s.mean) {
        s.sum.compute_at(s.out, s.r).vectorize(s.d, lanes, TailStrategy::GuardWithIf);
        s.sum.update().reorder(s.d, s.sum_rvar).vectorize(s.d, lanes, TailStrategy::GuardWithIf);
    }
    if (s.normalize) {
        s.pooled.compute_at(s.out, s.r).vectorize(s.d, lanes, TailStrategy::GuardWithIf);
        s.sq.compute_at(s.out, s.r);
    }
}

// GPU: one block per sequence, threads over d; the norm's sum on one thread
// per block (D values), between barriers.
inline void schedule_pool_gpu(PoolStages s) {
    using namespace Halide;
    const int threads = 128;
    Var o("d_o"), i("d_i");
    s.len.compute_root();
    s.out.compute_root();
    gpu_row_blocks(s.out, s.d, s.r, threads);
    if (s.mean) {
        s.sum.compute_at(s.out, s.r).split(s.d, o, i, threads, TailStrategy::GuardWithIf).gpu_threads(i);
        s.sum.update().split(s.d, o, i, threads, TailStrategy::GuardWithIf).reorder(s.sum_rvar, i, o).gpu_threads(i);
    }
    if (s.normalize) {
        s.pooled.compute_at(s.out, s.r).split(s.d, o, i, threads, TailStrategy::GuardWithIf).gpu_threads(i);
        s.sq.compute_at(s.out, s.r);
    }
}

}  // namespace halformer
