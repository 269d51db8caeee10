// How logits_adjust runs (algorithm: generators/logits_adjust_generator.cpp).
#pragma once

#include "schedule_common.h"

namespace halformer {

struct LogitsAdjustStages {
    Halide::Func out, entry_id, entry_row;
    Halide::Var v, r;
};

// Every entry is checked up front; the copy runs rows over threads, each
// vectorized; the entries (a few per row) are applied one after another.
inline void schedule_logits_adjust_cpu(LogitsAdjustStages s, const Halide::Target &t) {
    using namespace Halide;
    s.entry_id.compute_root();
    s.entry_row.compute_root();
    s.out.compute_root().parallel(s.r).vectorize(s.v, f32_lanes(t) * 4, TailStrategy::GuardWithIf);
}

// GPU: the copy one block per row, threads along it (coalesced); the
// entries on one thread (a few hundred at most: far below the copy). The
// checks run on the host before the kernel.
inline void schedule_logits_adjust_gpu(LogitsAdjustStages s, int threads_knob) {
    using namespace Halide;
    const int threads = or_default(threads_knob, 128);
    s.entry_id.compute_root();
    s.entry_row.compute_root();
    s.out.compute_root();
    gpu_row_blocks(s.out, s.v, s.r, threads);
    s.out.update(0).gpu_single_thread();
}

}  // namespace halformer
