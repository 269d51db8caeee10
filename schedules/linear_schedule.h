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
};

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

// GPU tunables (GeneratorParams gpu_tile_n, gpu_tile_m, gpu_reg_n, gpu_reg_m;
// 0 picks the default).
struct GpuMatmulKnobs {
    int tile_n = 0, tile_m = 0;  // outputs per block
    int reg_n = 0, reg_m = 0;    // outputs per thread (register block)
};

// GPU matmul, prefill shapes (the structure of Halide's apps/cuda_mat_mul).
// A block computes a tile_n × tile_m tile of outputs with
// (tile_n/reg_n) × (tile_m/reg_m) threads; each thread keeps its
// reg_n × reg_m accumulators in registers (computed inside the thread loops,
// constant-size, fully unrolled) and runs the k loop over them: per k,
// reg_n + reg_m loads (from L1: the block's threads share the rows) feed
// reg_n·reg_m FMAs. Edge tiles compute whole register blocks on clamped rows
// and store only what is inside.
//
// Tried and dropped (2026-11-22, Halide 14): staging the W and X panels per
// k chunk in shared memory needs the accumulators at block level; v14 then
// gave every thread a private copy of the whole tile (a 2048-float local
// array: spilled) and the k tail was wrong on PoCL.
inline void schedule_matmul_gpu(LinearStages s, const GpuMatmulKnobs &kn) {
    using namespace Halide;
    const int rn = or_default(kn.reg_n, 4), rm = or_default(kn.reg_m, 4);
    const int tn = or_default(kn.tile_n, 64), tm = or_default(kn.tile_m, 32);
    Var om = s.out_rows.empty() ? s.m : Var(s.out_rows);
    Var nb("nb"), mb("mb"), ni("ni"), mi("mi"), nt("nt"), mt("mt"), nr("nr"), mr("mr");
    s.out.tile(s.n, om, nb, mb, ni, mi, tn, tm, TailStrategy::GuardWithIf)
        .tile(ni, mi, nt, mt, nr, mr, rn, rm, TailStrategy::GuardWithIf)
        .reorder(nr, mr, nt, mt, nb, mb)
        .gpu_blocks(nb, mb)
        .gpu_threads(nt, mt)
        .unroll(nr)
        .unroll(mr);
    s.acc.compute_at(s.out, nt)
        .store_in(MemoryType::Register)
        .bound_extent(s.n, rn)
        .bound_extent(s.m, rm)
        .unroll(s.n)
        .unroll(s.m);
    s.acc.update().reorder(s.n, s.m, s.r.x).unroll(s.n).unroll(s.m);
}

// GPU matmul, decode shapes (a few rows): one warp-sized group of threads per
// output column cooperates over k (thread u sums k = u, u + 32, …: a warp
// reads one contiguous stretch of the W row), then one thread combines the
// 32 partials; `cols` columns per block.
inline void schedule_dot_matmul_gpu(LinearStages s, const GpuMatmulKnobs &kn) {
    using namespace Halide;
    const int lanes = 32, cols = or_default(kn.tile_n, 8);
    Var nb("nb"), nc("nc"), u("u");
    RVar ko("ko"), ki("ki");
    s.out.split(s.n, nb, nc, cols, TailStrategy::GuardWithIf)
        .reorder(nc, s.m, nb)
        .gpu_blocks(nb)
        .gpu_threads(nc);
    Func part = s.acc.update().split(s.r.x, ko, ki, lanes, TailStrategy::GuardWithIf).rfactor(ki, u);
    s.acc.compute_at(s.out, nb).gpu_threads(s.n);
    s.acc.update().gpu_threads(s.n);
    part.compute_at(s.out, nb).gpu_threads(u, s.n);
    part.update().reorder(ko, u, s.n).gpu_threads(u, s.n);
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
