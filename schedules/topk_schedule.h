// How topk runs (algorithm: generators/topk_generator.cpp).
#pragma once

#include "schedule_common.h"

namespace halformer {

struct TopKStages {
    Halide::Func values, ids, best;
    Halide::Var j, m;
};

// Rows over threads; the k-entry sorted list lives in registers for the scan
// of a row (a serial scan: the comparisons are cheap next to the projection
// that produced the row). Both outputs are written from one computation.
inline void schedule_topk_cpu(TopKStages s, const Halide::Target &) {
    using namespace Halide;
    s.values.compute_root().parallel(s.m);
    s.ids.compute_root().parallel(s.m);
    s.best.compute_root().parallel(s.m);
    s.best.update().parallel(s.m);
}

}  // namespace halformer
