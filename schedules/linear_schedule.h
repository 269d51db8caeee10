// How linear (Y = act(X·Wᵀ + b) [+ R]) runs, and the matmul schedules that
// ffn and the output head reuse. The algorithms are in generators/; this file
// only decides loops and storage.
#pragma once

#include "schedule_common.h"

namespace halformer {

// The Funcs and Vars of a matmul stage that a schedule touches.
struct LinearStages {
    Halide::Func out;   // out(n, m): consumes acc(n, m) pointwise
    Halide::Func acc;   // acc(n, m) = Σ_k x(k, m)·wt(n, k)
    Halide::Func wt;    // wt(n, k): W transposed
    Halide::Var n, m;
    Halide::RDom r;     // over k
    // The loop variable of out's rows when it differs from acc's m (out
    // already split by an enclosing schedule); empty: m.
    std::string out_rows = "";
    // The operands as define_matmul (generators/common.h) names them: W as
    // read wk(k, n), X as read xk(k, m) and transposed xt(m, k). Inline
    // unless a schedule places them (the GPU prefill schedule does).
    Halide::Func wk, xk, xt;
    Halide::Expr rows, cols;  // M and N (as define_matmul clamps them)
};

// The stages of a generator's Matmul (generators/common.h) whose output is `out`.
template <typename MM>
inline LinearStages matmul_stages(Halide::Func out, const MM &mm, Halide::Var n, Halide::Var m) {
    return {out, mm.acc, mm.wt, n, m, mm.r, "", mm.wk, mm.xk, mm.xt, mm.rows, mm.cols};
}

// Tunable numbers (GeneratorParams of the generators).
struct LinearKnobs {
    int vectors_n;  // register block width, in vectors (dot: outputs per block) (0: default)
    int rows_m;     // register block height, in rows (0: per target)
    bool dot;       // true: the decode shape class (M ≤ ~4): dot products along k
};

// Panel strategy (prefill, M ≳ 8). For each panel of tn = vectors_n·lanes
// output columns, W is transposed once into a panel wt(n, k) (tn × K floats,
// L2-resident); each register block of tn × rows outputs then runs a K-long
// chain of broadcast-FMAs with its accumulators pinned in vector registers.
// `out` must already be placed (compute_root or compute_at); `parallel`
// spreads panels over threads; with `pack_root` W is transposed once per call
// for all panels instead (when `out` is itself computed per block of rows).
inline void schedule_panel_matmul(LinearStages s, const LinearKnobs &knobs,
                                  const Halide::Target &t, bool parallel, bool pack_root) {
    using namespace Halide;
    const int lanes = f32_lanes(t);
    // 3 vectors wide (9 rows at 32 registers): measured 2026-11-22
    // (sapphirerapids, 2 threads) 1024 × 512 → 2048 at 393–403 GFLOP/s
    // (84–86% of the FMA peak) against 262 with 2 vectors; 128 × 2048 → 512
    // loses (162 vs 204: only 11 panels for the threads).
    const int vn = or_default(knobs.vectors_n, 3);
    // vn·rows accumulators + vn loads + one broadcast must fit the register file.
    const int rows = or_default(knobs.rows_m, (vector_registers(t) - vn - 2) / vn);
    const int tn = vn * lanes;
    Var no("no"), ni("ni"), mo("mo"), mi("mi");
    Var om = s.out_rows.empty() ? s.m : Var(s.out_rows);
    s.out.split(s.n, no, ni, tn, TailStrategy::GuardWithIf)
        .split(om, mo, mi, rows, TailStrategy::GuardWithIf)
        .reorder(ni, mi, mo, no)
        .vectorize(ni, lanes);
    if (parallel) s.out.parallel(no);
    s.acc.compute_at(s.out, mo)
        .store_in(MemoryType::Register)
        .bound_extent(s.n, tn)
        .bound_extent(s.m, rows)
        .vectorize(s.n, lanes)
        .unroll(s.n)
        .unroll(s.m);
    s.acc.update()
        .reorder(s.n, s.m, s.r)
        .vectorize(s.n, lanes)
        .unroll(s.n)
        .unroll(s.m);
    if (pack_root) {
        s.wt.compute_root().vectorize(s.n, lanes, TailStrategy::GuardWithIf).parallel(Var("k"), 16);
    } else {
        s.wt.compute_at(s.out, no).bound_extent(s.n, tn).vectorize(s.n, lanes);
    }
}

// Dot-product strategy (decode, M ≤ ~4): W is read once, in place, along k.
// Per block of `block` outputs and one row: `block` vector accumulators of
// partial sums over k (an rfactor of the reduction), one x vector load and
// `block` W-row loads per step, then one horizontal add per output. Nothing
// is transposed or packed, so the kernel streams W at memory speed.
inline void schedule_dot_matmul(LinearStages s, const LinearKnobs &knobs, const Halide::Target &t) {
    using namespace Halide;
    const int lanes = f32_lanes(t);
    const int block = or_default(knobs.vectors_n, 8);
    Var no("no"), ni("ni"), u("u");
    RVar ro("ro"), ri("ri");
    s.out.split(s.n, no, ni, block, TailStrategy::GuardWithIf).reorder(ni, s.m, no).parallel(no);
    Func partial = s.acc.update().split(s.r.x, ro, ri, lanes, TailStrategy::GuardWithIf).rfactor(ri, u);
    s.acc.compute_at(s.out, s.m).bound_extent(s.n, block).unroll(s.n);
    s.acc.update().atomic().vectorize(ri).unroll(s.n);
    partial.compute_at(s.acc, s.m)
        .reorder_storage(u, s.n, s.m)  // rfactor puts u last; each lane vector must be contiguous
        .store_in(MemoryType::Register)
        .bound_extent(u, lanes)
        .vectorize(u)
        .unroll(s.n);
    partial.update().reorder(u, s.n, ro).vectorize(u).unroll(s.n);
}

inline void schedule_linear_cpu(LinearStages s, const LinearKnobs &knobs,
                                const Halide::Target &t) {
    s.out.compute_root();
    if (knobs.dot) {
        // Decode. Measured 2026-11-22 (sapphirerapids, 2 threads): the base
        // model's batch-1 decoder step (weights streamed from memory) takes
        // 5.75 ms with this schedule against 11.8 ms with one-row panel
        // blocks, which transpose every weight panel on every call.
        schedule_dot_matmul(s, knobs, t);
    } else {
        schedule_panel_matmul(s, knobs, t, /*parallel=*/true, /*pack_root=*/false);
    }
}

// GPU tunables (GeneratorParams gpu_tile_n, gpu_tile_m, gpu_reg_n, gpu_reg_m,
// gpu_k_unroll; 0 picks the default).
struct GpuMatmulKnobs {
    int tile_n = 0, tile_m = 0;  // outputs per block
    int reg_n = 0, reg_m = 0;    // outputs per thread (register block)
    int k_unroll = 0;            // prefill: k steps unrolled
};

// A GPU transpose t(a, b) = src(b, a) into a buffer of its own, through
// shared memory: a block reads a 32 × 32 tile of src with its threads along
// src's contiguous dimension b (coalesced), and writes t along a
// (coalesced); 32 × 8 threads, 4 elements each. The shared tile's rows are
// padded to 33 floats (no bank conflicts on the transposed read). t is
// computed over [0, a_extent): the matmul passes whole tiles (64 and 16 at
// the defaults), so t's rows start and end at multiples of 4 and a
// consumer's float4 loads along a are aligned.
inline void schedule_transpose_gpu(Halide::Func t, Halide::Func src, Halide::Var a, Halide::Var b,
                                   Halide::Expr a_extent) {
    using namespace Halide;
    Var ab("ab"), bb("bb"), ai("ai"), bi("bi"), bt("bt"), br("br");
    t.compute_root()
        .bound(a, 0, a_extent)
        .tile(a, b, ab, bb, ai, bi, 32, 32, TailStrategy::GuardWithIf)
        .split(bi, bt, br, 4, TailStrategy::GuardWithIf)
        .reorder(br, ai, bt, ab, bb)
        .gpu_blocks(ab, bb)
        .gpu_threads(ai, bt);
    Var ao("ao"), ar("ar");
    src.compute_at(t, ab)
        .align_storage(b, 33)
        .split(a, ao, ar, 4, TailStrategy::GuardWithIf)
        .reorder(ar, b, ao)
        .gpu_threads(b, ao);
}

// GPU matmul, prefill shapes: the schedule of Halide's apps/cuda_mat_mul
// (measured on an H100 at 0.55-0.74× cuBLAS fp32), which wants the W
// operand contiguous along n and the X operand contiguous along m: a block
// computes a tile_n × tile_m tile with (tile_n/reg_n) × (tile_m/reg_m)
// threads, each keeping reg_n × reg_m accumulators in registers, and per k
// step loads reg_n floats of W and reg_m of X as float4 vectors (from L1:
// the block's threads share the rows) for reg_n·reg_m FMAs, k unrolled.
//
// W arrives [N, K] (k contiguous), so both operands are first transposed into
// buffers of their own (schedule_transpose_gpu: 2 kernels, W's and X's
// bytes read and written once: about 40/M of the matmul's time at 30
// TFLOP/s and 3 TB/s). Reading W along k in place, as the schedule did
// before, gave a warp 16 distinct rows per load instruction and no
// vectors: 18 L1 wavefronts per FMA cycle, which is the 3.6 TFLOP/s
// measured on the H100 (issue 40). Edge tiles compute whole register
// blocks on clamped rows and store only what is inside.
//
// Tried and dropped (2026-11-22, Halide 14): staging the panels per k chunk
// in shared memory needs the accumulators at block level, and v14 then
// gives every thread a private copy of the whole tile
// (FuseGPUThreadLoops' ExtractRegisterAllocations).
inline void schedule_matmul_gpu(LinearStages s, const GpuMatmulKnobs &kn) {
    using namespace Halide;
    const int rn = or_default(kn.reg_n, 4), rm = or_default(kn.reg_m, 8);
    const int tn = or_default(kn.tile_n, 64), tm = or_default(kn.tile_m, 16);
    const int ku = or_default(kn.k_unroll, 8);
    Var om = s.out_rows.empty() ? s.m : Var(s.out_rows);
    Var k("k");
    Var nb("nb"), mb("mb"), ni("ni"), mi("mi"), nt("nt"), mt("mt"), nr("nr"), mr("mr");
    RVar ko("ko"), ki("ki");
    s.out.tile(s.n, om, nb, mb, ni, mi, tn, tm, TailStrategy::GuardWithIf)
        .tile(ni, mi, nt, mt, nr, mr, rn, rm, TailStrategy::GuardWithIf)
        .reorder(nr, mr, nt, mt, nb, mb)
        .gpu_blocks(nb, mb)
        .gpu_threads(nt, mt)
        .unroll(nr)
        .unroll(mr);
    // The loads are aligned float4s only if the tiles start at multiples of 4:
    // an output buffer's coordinates start at 0 (the runtime's always do; a
    // Func inside the pipeline starts at 0 by its bounds).
    s.out.output_buffer().dim(0).set_min(0).dim(1).set_min(0);
    // Whole tiles: every block reads whole tiles of both (clamped past the edge).
    schedule_transpose_gpu(s.wt, s.wk, s.n, k, (s.cols + tn - 1) / tn * tn);
    schedule_transpose_gpu(s.xt, s.xk, s.m, k, (s.rows + tm - 1) / tm * tm);
    s.acc.compute_at(s.out, nt)
        .store_in(MemoryType::Register)
        .bound_extent(s.n, rn)
        .bound_extent(s.m, rm)
        .vectorize(s.n)
        .unroll(s.m);
    s.acc.update()
        .split(s.r.x, ko, ki, ku, TailStrategy::GuardWithIf)
        .reorder(s.n, s.m, ki, ko)
        .vectorize(s.n)
        .unroll(s.m)
        .unroll(ki);
    // X's reg_m values for one k, as float4 loads (W's are the vectorized n).
    s.xt.in(s.acc).compute_at(s.acc, ki).bound_extent(s.m, rm).vectorize(s.m, std::min(rm, 4)).unroll(s.m);
}

// GPU matmul, decode shapes (a few rows: W is read once, at memory speed).
// A block computes `cols` output columns × `rows` rows with 32·cols
// threads: thread (u, n) walks k = u, u + 32, … of W's row n (a warp reads
// one contiguous stretch of the row: coalesced) and keeps `rows` partial
// sums in registers, one per row of X (rows·cols FMAs for cols + rows loads
// per k step); then the 32·cols·rows partials go to shared memory
// (4·32·cols·rows bytes: 4 KiB at the defaults) and one thread per output
// adds its 32. A block takes its columns for every row, `rows` at a time
// (a serial loop in the block), so its stretch of W (cols rows of W) is
// read from memory once and again from cache for the later rows. The grid
// is N / cols blocks; the threads, shared memory and registers of a block do
// not grow with the shape (the old schedule kept every row's partials in
// shared memory: 1 KiB a row, over CUDA's 48 KiB from 47 rows, and 1024
// threads). The runtime uses it on a GPU up to 32 rows (layers.h: dot_rows).
// (The rows as a second grid dimension, rows fastest, stopped Halide 14's
// loop partitioning with an internal error on OpenCL.)
inline void schedule_dot_matmul_gpu(LinearStages s, const GpuMatmulKnobs &kn) {
    using namespace Halide;
    const int lanes = 32, cols = or_default(kn.tile_n, 8), rows = or_default(kn.tile_m, 4);
    Var om = s.out_rows.empty() ? s.m : Var(s.out_rows);
    Var nb("nb"), nc("nc"), mb("mb"), mi("mi"), u("u");
    RVar ko("ko"), ki("ki");
    s.out.split(s.n, nb, nc, cols, TailStrategy::GuardWithIf)
        .split(om, mb, mi, rows, TailStrategy::GuardWithIf)
        .reorder(nc, mi, mb, nb)
        .gpu_blocks(nb)
        .gpu_threads(nc, mi);
    Func part = s.acc.update().split(s.r.x, ko, ki, lanes, TailStrategy::GuardWithIf).rfactor(ki, u);
    Func staged = part.in();  // the partials, in shared memory
    // Whole blocks (bound_extent) past the last row or column: define_matmul
    // clamps the reads there, and out stores only what is inside.
    s.acc.compute_at(s.out, mb).bound_extent(s.n, cols).bound_extent(s.m, rows).gpu_threads(s.n, s.m);
    s.acc.update().gpu_threads(s.n, s.m);
    staged.compute_at(s.out, mb)
        .bound_extent(s.n, cols)
        .bound_extent(s.m, rows)
        .reorder(s.m, u, s.n)
        .gpu_threads(u, s.n)
        .unroll(s.m);
    part.compute_at(staged, u).store_in(MemoryType::Register).bound_extent(s.m, rows).unroll(s.m);
    part.update().reorder(s.m, ko).unroll(s.m);
}

inline void schedule_linear_gpu(LinearStages s, const GpuMatmulKnobs &kn, bool dot) {
    s.out.compute_root();
    if (dot) {
        schedule_dot_matmul_gpu(s, kn);
    } else {
        schedule_matmul_gpu(s, kn);
    }
}

}  // namespace halformer
