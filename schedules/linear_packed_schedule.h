// How linear_packed runs on CPUs: a register-blocked matmul over weights
// that pack_weights laid out as panels at load time (generators/packing.h),
// so no call transposes or converts a weight.
#pragma once

#include "schedule_common.h"

#include <stdexcept>
#include <string>

namespace halformer {

struct LinearPackedStages {
    Halide::Func y;       // y(n, m)
    Halide::Func acc;     // acc(j, p, mi, mo): one panel's sums for one block of rows
    Halide::Func blk;     // int8: blk(j, p, mi, mo, b), block b's exact int32 sums (else undefined)
    Halide::Func xin;     // xin(rr, mi, kk, mo): the activations in the product's type
    Halide::Func xsign;   // int8 sign form: xsign(rr, mi, kk, mo), -1 where the code is negative (else undefined)
    Halide::Func absmax;  // int8: absmax(b, m), the largest |x| of row m's block b (else undefined)
    Halide::Func step;    // int8: step(b, m)
    Halide::Func inv_step;  // int8: 1 / step(b, m)
    Halide::Func negsum;  // int8 sign form: negsum(b, m), Σ |q| over the block's negative codes; q4: Σ q (else undefined)
    Halide::Var n, m, j, p, mi, mo, rr, kk, b;
    Halide::RDom r;       // r.x: the kf products one lane sums; r.y: k groups (int8: a block's)
    Halide::RDom rb;      // int8: the blocks (else one)
};

// Register block width, in vectors of 32-bit lanes: `knob`, else 2 vectors
// for float32 on AVX2, the whole 48-wide panel everywhere else: AVX-512 (3
// vectors), one-row blocks (the _dot kernels stream the panel with every
// accumulator a chain of its own), bf16 and int8, and SSE4.1. It must
// divide the panel. With 16 vector registers a whole panel is 6 (AVX2) or
// 12 (SSE4.1) vectors and leaves room for one row: each FMA then needs a
// weight load of its own, and the panel (48 × K floats, 96 KiB at K = 512)
// streams from L2 for every row. 2 vectors × 6 rows is the classic AVX2
// block: 2 loads and 6 broadcasts per 12 FMAs, over a slice of the panel
// (16 × K floats) that stays in L1/L2 while the rows pass. Measured 2026-11-29 (AVX2 AMD EPYC Zen 3, 2 threads, the
// tuner's --try, float32 1024 × 512 → 2048): 26.8 → 12.2–13.7 ms, 1024 ×
// 2048 → 512 29.9 → 16.6 ms (3 vectors × 4 rows: 16.5 and 19.9). int8's
// sign form is bound by its three integer ops per product, not by loads:
// 2 × 4, 2 × 6, 3 × 3 and 1 × 8 were all within the noise of the whole
// panel there, so it keeps the panel (a record may narrow it). SSE4.1 (no
// FMA; 4 lanes) was no faster with 2 vectors × 6 rows than with its panel
// of 12 × 1 (same day: 1024 × 512 → 2048 40.8–50.4 against 34.3–47.5 ms).
inline int linear_packed_vectors(int knob, int rows_knob, const Halide::Target &t, int kf) {
    const int panel_vectors = std::max(1, 48 / f32_lanes(t));
    const bool narrow = f32_lanes(t) == 8 && vector_registers(t) == 16 && rows_knob != 1 && kf == 1;
    const int vn = or_default(knob, narrow ? 2 : panel_vectors);
    if (vn < 1 || panel_vectors % vn != 0) {
        throw std::invalid_argument("linear_packed: vectors_n " + std::to_string(vn) + " does not divide the " +
                                    std::to_string(panel_vectors) + " vectors of a 48-wide panel");
    }
    return vn;
}

// Register block height: `knob`, or as many rows as the vector registers
// hold beside the block's weight vectors and a broadcast; at most 12
// accumulators for float32 and int8 (kf 1, 4). Measured 2026-11-25
// (sapphirerapids, AMD EPYC, 2 threads, 512 → 2048, oneDNN = 1, 3 vectors):
// f32 M=128 0.98 with 4 rows against 0.94 with 9, M=32 0.90 / 0.83; int8
// M=128 0.84 / 0.80, M=1024 0.87 / 0.87. 12 accumulators are enough chains
// for two FMA ports of latency 4 (Intel) and leave the loads room; bf16
// keeps the full register file.
inline int linear_packed_rows(int knob, int vectors, const Halide::Target &t, int kf) {
    const int fit = std::max(1, (vector_registers(t) - vectors - 2) / vectors);
    return or_default(knob, kf == 2 ? fit : std::max(1, std::min(fit, 12 / vectors)));
}

// The two forms of int8 products (generators/linear_packed_generator.cpp),
// equal in every sum. `offset` is one vpdpbusd per 4 products where the
// target has VNNI (Halide 14: avx512_sapphirerapids). Without it Halide 14
// lowers that 4-way sum by widening both bytes to int16 and adding the
// vpmaddwd pairs across lanes: slower than float32 (measured 2026-11-27,
// AVX2 AMD EPYC, 128 × 512 → 2048: 90 GOP/s against oneDNN's 304). `sign`
// is oneDNN's AVX2 inner loop, vpmaddubsw then vpmaddwd with ones, made
// exact (PairInt8Products below). The knob: "offset", "sign" or "" (the
// target's).
enum class Int8Form { Offset, Sign };

inline Int8Form int8_form(const std::string &knob, const Halide::Target &t) {
    if (knob == "offset") return Int8Form::Offset;
    if (knob == "sign") return Int8Form::Sign;
    if (!knob.empty()) throw std::invalid_argument("int8_form must be offset, sign or empty, not " + knob);
    return t.has_feature(Halide::Target::AVX512_SapphireRapids) ? Int8Form::Offset : Int8Form::Sign;
}

// The sign form's 4-way int32 sums as x86 without VNNI does them best:
//   vector_reduce(Add, i32(widening_mul(u8, i8)), 4 → 1)
// becomes
//   vector_reduce(Add, widening_mul(vector_reduce(SaturatingAdd, widening_mul(u8, i8), 2 → 1), 1), 2 → 1)
// which Halide 14's x86 code generation emits as vpmaddubsw (pairs of
// products in int16, saturating) and vpmaddwd against ones (pairs of pairs
// in int32), added to the sums. It saturates nowhere because the unsigned
// factor is |q| ≤ 127 and the signed one within [-128, 126] (the sign form); the
// pass rewrites only sums whose unsigned factor is read from `xin`, the
// Func that holds |q|. With `xin` empty (q4's kernels, where every such sum
// is a 4-bit code q ≤ 15 times an int8 code: |pair| ≤ 2·15·128) it takes
// every one, its factors in either order (Halide narrows q4's products to
// an int16 widening_mul(i8, u8)).
class PairInt8Products : public Halide::Internal::IRMutator {
public:
    explicit PairInt8Products(std::string xin) : xin_(std::move(xin)) {}

private:
    using IRMutator::visit;
    std::string xin_;

    bool reads_xin(const Halide::Expr &e) const {
        struct Finder : Halide::Internal::IRVisitor {
            const std::string &name;
            bool found = false;
            explicit Finder(const std::string &n) : name(n) {}
            using IRVisitor::visit;
            void visit(const Halide::Internal::Load *op) override {
                found = found || op->name == name;
                IRVisitor::visit(op);
            }
        } finder(xin_);
        e.accept(&finder);
        return finder.found;
    }

    Halide::Expr visit(const Halide::Internal::VectorReduce *op) override {
        using namespace Halide;
        using namespace Halide::Internal;
        const int lanes = op->type.lanes(), factor = op->value.type().lanes() / std::max(1, lanes);
        const Cast *c = op->value.as<Cast>();
        const Call *mul = c ? c->value.as<Call>() : nullptr;
        if (op->op != VectorReduce::Add || factor != 4 || op->type.element_of() != Int(32) || !mul ||
            !mul->is_intrinsic(Call::widening_mul)) {
            return IRMutator::visit(op);
        }
        Expr u = mul->args[0], v = mul->args[1];
        if (xin_.empty() && u.type().element_of() == Int(8) && v.type().element_of() == UInt(8)) std::swap(u, v);
        if (u.type().element_of() != UInt(8) || v.type().element_of() != Int(8) || (!xin_.empty() && !reads_xin(u))) {
            return IRMutator::visit(op);
        }
        Expr product = Call::make(Int(16, u.type().lanes()), Call::widening_mul, {u, v}, Call::PureIntrinsic);
        Expr pairs = VectorReduce::make(VectorReduce::SaturatingAdd, product, lanes * 2);
        Expr ones = Broadcast::make(make_const(Int(16), 1), lanes * 2);
        Expr quads = Call::make(Int(32, lanes * 2), Call::widening_mul, {pairs, ones}, Call::PureIntrinsic);
        return VectorReduce::make(VectorReduce::Add, quads, lanes);
    }
};

struct LinearPackedKnobs {
    int rows;         // register block height (the algorithm's row block)
    int cols;         // register block width in columns (the algorithm's panel slice)
    int kf;           // products per lane of one dot-product step (1 | 2 | 4)
    int task_blocks;  // register blocks per parallel task (0: the schedule's choice, below)
    // q4 on x86 without VNNI: its 4-way u8 × i8 sums in vpmaddubsw's pairs
    // (PairInt8Products; int8's sign form pairs its own).
    bool pair_q4 = false;
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

// Each (slice of a panel, block of rows) task keeps a cols × rows block of
// sums in vector registers and runs the whole k loop over it: per k group,
// cols/lanes weight vectors loaded once and one broadcast per row feed one
// FMA / vdpbf16ps / vpdpbusd per (vector, row). The activations are
// converted (bf16) or quantized (int8) once per call, not once per panel.
inline void schedule_linear_packed_cpu(LinearPackedStages s, const LinearPackedKnobs &knobs,
                                       Halide::Pipeline pipeline, const Halide::Target &t) {
    using namespace Halide;
    const int lanes = f32_lanes(t);
    const int rows = knobs.rows, cols = knobs.cols;
    Var no("no"), ni("ni"), nio("nio"), mo("ymo"), mi("ymi"), task("task"), tasks("tasks"), jo("jo"), jv("jv");
    // Register blocks a parallel task: the knob, else 8 (one task per block:
    // the task overhead showed; measured 2026-11-23 int8 128 × 512 → 2048
    // 583 → 628 GOP/s). One-row blocks (the _dot kernels; every kernel
    // where 16 vector registers hold one row) take a share of the call's
    // blocks, from 1 (decode: few blocks, every thread busy) to 32 (measured
    // 2026-11-27, AVX2 AMD EPYC, int8 1024 × 512 → 2048: 9.6 ms against
    // 10.5 with 2 a task).
    Expr blocks = ((s.y.output_buffer().dim(0).extent() + cols - 1) / cols) *
                  ((s.y.output_buffer().dim(1).extent() + rows - 1) / rows);
    Expr blocks_per_task = knobs.task_blocks > 0 ? Expr(knobs.task_blocks)
                           : rows > 1            ? Expr(8)
                                                 : clamp(blocks / 64, 1, 32);
    s.y.compute_root()
        .split(s.n, no, ni, cols, TailStrategy::GuardWithIf)
        .split(s.m, mo, mi, rows, TailStrategy::GuardWithIf)
        .reorder(ni, mi, mo, no)
        .fuse(mo, no, task)
        .split(task, tasks, task, blocks_per_task, TailStrategy::GuardWithIf)
        .parallel(tasks)
        // The panel's vectors unrolled: each reads its sums at a constant
        // index (vectorized over the whole block, acc(n % 48) became a gather
        // from the stack: measured 2026-11-25, int8 1024 × 512 → 2048 at 0.57 of
        // oneDNN before, 0.87 after).
        .split(ni, nio, ni, lanes, TailStrategy::GuardWithIf)
        .vectorize(ni)
        .unroll(nio)
        .unroll(mi);
    s.acc.compute_at(s.y, task)
        .store_in(MemoryType::Register)
        .bound_extent(s.j, cols)
        .bound_extent(s.p, 1)
        .bound_extent(s.mi, rows)
        .bound_extent(s.mo, 1)
        .vectorize(s.j, lanes)
        .unroll(s.j)
        .unroll(s.mi);
    RVar rx(s.r.x), ry(s.r.y);
    // The products: into acc directly (f32, bf16), or into one block's
    // int32 sums (int8: blk, in registers too), which acc then rescales and
    // adds, block by block.
    Func sums = s.blk.defined() ? s.blk : s.acc;
    if (s.blk.defined()) {
        RVar rbv(s.rb.x);
        s.acc.update()
            .split(s.j, jo, jv, lanes)
            .reorder(jv, jo, s.mi, rbv)
            .vectorize(jv)
            .unroll(jo)
            .unroll(s.mi);
        s.blk.compute_at(s.acc, rbv)
            .store_in(MemoryType::Register)
            .bound_extent(s.j, cols)
            .bound_extent(s.p, 1)
            .bound_extent(s.mi, rows)
            .bound_extent(s.mo, 1)
            .bound_extent(s.b, 1)
            .vectorize(s.j, lanes)
            .unroll(s.j)
            .unroll(s.mi);
    }
    if (s.r.dimensions() == 3) {
        // q4: a byte's two nibbles one after the other, the byte loaded once.
        RVar rz(s.r.z);
        sums.update()
            .split(s.j, jo, jv, lanes)
            .reorder(rx, jv, jo, s.mi, rz, ry)
            .atomic(true)
            .vectorize(jv)
            .unroll(jo)
            .unroll(s.mi)
            .unroll(rz);
    } else {
        sums.update()
            .split(s.j, jo, jv, lanes)
            .reorder(rx, jv, jo, s.mi, ry)
            .atomic(true)
            .vectorize(jv)
            .unroll(jo)
            .unroll(s.mi);
    }
    if (knobs.kf > 1) sums.update().vectorize(rx);
    // The per-row stages run on the thread pool only for calls of 32 rows
    // or more: a decoding step's few rows are quicker copied by the calling
    // thread than handed to the pool (measured 2026-11-28, AVX2 AMD EPYC,
    // 2 threads, float32 1 × 512 → 2048: 0.0380 → 0.0336 ms).
    Expr many_rows = s.y.output_buffer().dim(1).extent() >= 32;
    for (Func f : {s.xin, s.xsign}) {
        if (!f.defined()) continue;
        f.compute_root()
            .bound(s.rr, 0, knobs.kf)
            .bound(s.mi, 0, rows)
            .reorder(s.rr, s.mi, s.kk, s.mo)
            .unroll(s.rr)
            .unroll(s.mi)
            .vectorize(s.kk, lanes, TailStrategy::GuardWithIf);
        f.specialize(many_rows).parallel(s.mo);
    }
    if (s.absmax.defined()) {
        s.absmax.compute_root();
        s.absmax.specialize(many_rows).parallel(s.m, 8);
        s.step.compute_root();
        s.step.specialize(many_rows).parallel(s.m, 8);
        s.inv_step.compute_root();
        s.inv_step.specialize(many_rows).parallel(s.m, 8);
    }
    if (s.negsum.defined()) {
        s.negsum.compute_root();
        s.negsum.specialize(many_rows).parallel(s.m, 8);
    }
    pipeline.add_custom_lowering_pass(new WidenAfterBroadcast);
    if (s.xsign.defined()) pipeline.add_custom_lowering_pass(new PairInt8Products(s.xin.name()));
    if (knobs.pair_q4) pipeline.add_custom_lowering_pass(new PairInt8Products(""));
}

}  // namespace halformer
