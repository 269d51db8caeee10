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
// hold beside one panel's weight vectors and a broadcast; at most 4 for
// float32 and int8 (kf 1, 4). Measured 2026-11-25 (sapphirerapids, AMD EPYC,
// 2 threads, 512 → 2048, oneDNN = 1): f32 M=128 0.98 with 4 rows against
// 0.94 with 9, M=32 0.90 / 0.83; int8 M=128 0.84 / 0.80, M=1024 0.87 / 0.87.
// 12 accumulators are enough chains for two FMA ports of latency 4 (Intel)
// and leave the loads room; bf16 keeps the full 9.
inline int linear_packed_rows(int knob, const Halide::Target &t, int kf) {
    const int panel_vectors = std::max(1, 48 / f32_lanes(t));
    const int fit = std::max(1, (vector_registers(t) - panel_vectors - 2) / panel_vectors);
    return or_default(knob, kf == 2 ? fit : std::min(fit, 4));
}

struct LinearPackedKnobs {
    int rows;         // register block height (the algorithm's row block)
    int kf;           // products per lane of one dot-product step (1 | 2 | 4)
    int task_blocks;  // register blocks per parallel task (0: 8, or 2 for one-row blocks)
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
    Var no("no"), ni("ni"), nio("nio"), mo("ymo"), mi("ymi"), task("task"), tasks("tasks"), jo("jo"), jv("jv");
    s.y.compute_root()
        .split(s.n, no, ni, 48, TailStrategy::GuardWithIf)
        .split(s.m, mo, mi, rows, TailStrategy::GuardWithIf)
        .reorder(ni, mi, mo, no)
        .fuse(mo, no, task)
        // 8 blocks a task (one task per block: the task overhead showed;
        // measured 2026-11-23 int8 128 × 512 → 2048 583 → 628 GOP/s);
        // one-row blocks (decode) are few: 2 a task keeps the threads even.
        .split(task, tasks, task, or_default(knobs.task_blocks, rows == 1 ? 2 : 8), TailStrategy::GuardWithIf)
        .parallel(tasks)
        // The panel's vectors unrolled: each reads its sums at a constant
        // index (vectorized over the whole panel, acc(n % 48) became a gather
        // from the stack: measured 2026-11-25, int8 1024 × 512 → 2048 at 0.57 of
        // oneDNN before, 0.87 after).
        .split(ni, nio, ni, lanes, TailStrategy::GuardWithIf)
        .vectorize(ni)
        .unroll(nio)
        .unroll(mi);
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
