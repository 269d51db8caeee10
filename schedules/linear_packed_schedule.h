// How linear_packed runs on CPUs: a register-blocked matmul over weights
// that pack_weights laid out as panels at load time (generators/packing.h),
// so no call transposes or converts a weight.
#pragma once

#include "schedule_common.h"

namespace halformer {

struct LinearPackedStages {
    Halide::Func y;       // y(n, m)
    Halide::Func acc;     // acc(j, p, mi, mo): one panel's sums for one block of rows
    Halide::Func xin;     // xin(rr, mi, kk, mo): the activations in the product's type
    Halide::Func absmax;  // int8: absmax(m), the row's largest |x| (else undefined)
    Halide::Func step;    // int8: step(m)
    Halide::Var n, m, j, p, mi, mo, rr, kk;
    Halide::RDom r;       // r.x: the kf products one lane sums; r.y: k groups
};

// Register block height: `knob`, or as many rows as the vector registers
// hold beside one panel's weight vectors and a broadcast.
inline int linear_packed_rows(int knob, const Halide::Target &t) {
    const int panel_vectors = std::max(1, 48 / f32_lanes(t));
    return or_default(knob, std::max(1, (vector_registers(t) - panel_vectors - 2) / panel_vectors));
}

struct LinearPackedKnobs {
    int rows;    // register block height (the algorithm's row block)
    int kf;      // products per lane of one dot-product step (1 | 2 | 4)
};

// Halide 14 vectorizes a row's kf activations, read once and broadcast to
// every lane, as broadcast(cast<float>(bf16 × kf), lanes): x86 codegen then
// misses the vdpbf16ps pattern (lossless_cast cannot see through a broadcast
// of a vector). Rewriting it as cast(broadcast(...)) lets the dot-product
// pattern match; the value is the same.
class WidenAfterBroadcast : public Halide::Internal::IRMutator {
    using IRMutator::visit;
    Halide::Expr visit(const Halide::Internal::Broadcast *op) override {
        using namespace Halide::Internal;
        if (const Cast *c = op->value.as<Cast>()) {
            Halide::Type from = c->value.type();
            if (from.is_vector() && (from.is_bfloat() || from.bits() == 8)) {
                return Cast::make(op->type, Broadcast::make(mutate(c->value), op->lanes));
            }
        }
        return IRMutator::visit(op);
    }
};

// Each (panel, block of rows) task keeps a kPanel × rows block of sums in
// vector registers and runs the whole k loop over it: per k group, kPanel/16
// weight vectors loaded once and one broadcast per row feed one FMA /
// vdpbf16ps / vpdpbusd per (vector, row). The activations are converted
// (bf16) or quantized (int8) once per call, not once per panel.
inline void schedule_linear_packed_cpu(LinearPackedStages s, const LinearPackedKnobs &knobs,
                                       Halide::Pipeline pipeline, const Halide::Target &t) {
    using namespace Halide;
    const int lanes = f32_lanes(t);
    const int rows = knobs.rows;
    Var no("no"), ni("ni"), mo("ymo"), mi("ymi"), task("task"), tasks("tasks"), jo("jo"), jv("jv");
    s.y.compute_root()
        .split(s.n, no, ni, 48, TailStrategy::GuardWithIf)
        .split(s.m, mo, mi, rows, TailStrategy::GuardWithIf)
        .reorder(ni, mi, mo, no)
        .fuse(mo, no, task)
        // 8 blocks a task (one task per block: the task overhead showed;
        // measured 2026-11-23 int8 128 × 512 → 2048 583 → 628 GOP/s)
        .split(task, tasks, task, 8, TailStrategy::GuardWithIf)
        .parallel(tasks)
        .vectorize(ni, lanes, TailStrategy::GuardWithIf);
    s.acc.compute_at(s.y, task)
        .store_in(MemoryType::Register)
        .bound_extent(s.j, 48)
        .bound_extent(s.p, 1)
        .bound_extent(s.mi, rows)
        .bound_extent(s.mo, 1)
        .vectorize(s.j, lanes)
        .unroll(s.j)
        .unroll(s.mi);
    RVar rx(s.r.x), ry(s.r.y);
    s.acc.update()
        .split(s.j, jo, jv, lanes)
        .reorder(rx, jv, jo, s.mi, ry)
        .atomic(true)
        .vectorize(jv)
        .unroll(jo)
        .unroll(s.mi);
    if (knobs.kf > 1) s.acc.update().vectorize(rx);
    s.xin.compute_root()
        .bound(s.rr, 0, knobs.kf)
        .bound(s.mi, 0, rows)
        .reorder(s.rr, s.mi, s.kk, s.mo)
        .parallel(s.mo)
        .unroll(s.rr)
        .unroll(s.mi)
        .vectorize(s.kk, lanes, TailStrategy::GuardWithIf);
    if (s.absmax.defined()) {
        s.absmax.compute_root().parallel(s.m, 8);
        s.step.compute_root();
    }
    pipeline.add_custom_lowering_pass(new WidenAfterBroadcast);
}

}  // namespace halformer
