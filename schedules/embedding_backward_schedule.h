// How embedding_backward runs (algorithm:
// generators/embedding_backward_generator.cpp).
#pragma once

#include "schedule_common.h"

namespace halformer {

// sum(d, u) += … over the tokens (a scatter into the batch's slots), then
// out(d, row(u)) += sum(d, u) over the slots.
struct TableScatterStages {
    Halide::Func sum, out;
    Halide::Var d, u;
    Halide::RDom r_in, r_out;  // the tokens; the slots
};

inline void reorder_d_inside(Halide::Stage st, Halide::Var din, Halide::RDom r, Halide::Var dout) {
    std::vector<Halide::VarOrRVar> order{din};
    for (int i = 0; i < r.dimensions(); i++) order.push_back(r[i]);
    order.push_back(dout);
    st.reorder(order);
}

// CPU: the scatters run serially over tokens (two may share a slot) and in
// parallel over d, vectorized; the slots' sums are U × D floats (L2).
// GPU: threads over d, each looping over the tokens in order.
inline void schedule_scatter_rows(TableScatterStages s, int threads_knob, const Halide::Target &t) {
    using namespace Halide;
    Var dout("dout"), din("din");
    s.sum.compute_root();
    s.out.compute_root();
    if (t.has_gpu_feature()) {
        const int threads = or_default(threads_knob, 64);
        // The output's pure stage is undef (updated in place): placed on the
        // device too, or v14 treats the output as read on the host.
        s.out.gpu_single_thread();
        s.sum.split(s.d, dout, din, threads, TailStrategy::GuardWithIf).reorder(din, dout, s.u)
            .gpu_blocks(dout, s.u).gpu_threads(din);
        for (Stage st : {s.sum.update(), s.out.update()}) {
            st.split(s.d, dout, din, threads, TailStrategy::GuardWithIf);
        }
        reorder_d_inside(s.sum.update(), din, s.r_in, dout);
        reorder_d_inside(s.out.update(), din, s.r_out, dout);
        // The reduction loops stay inside each thread.
        s.sum.update().gpu_blocks(dout).gpu_threads(din);
        s.out.update().gpu_blocks(dout).gpu_threads(din);
        return;
    }
    const int lanes = f32_lanes(t);
    s.sum.vectorize(s.d, lanes, TailStrategy::GuardWithIf);
    for (Stage st : {s.sum.update(), s.out.update()}) {
        st.split(s.d, dout, din, 4 * lanes, TailStrategy::GuardWithIf);
    }
    reorder_d_inside(s.sum.update(), din, s.r_in, dout);
    reorder_d_inside(s.out.update(), din, s.r_out, dout);
    for (Stage st : {s.sum.update(), s.out.update()}) st.parallel(dout).vectorize(din, lanes);
}

}  // namespace halformer
