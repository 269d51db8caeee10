// How attention_backward runs (algorithm:
// generators/attention_backward_generator.cpp).
#pragma once

#include "schedule_common.h"

namespace halformer {

struct AttentionBackwardStages {
    Halide::Func dq, dkv;
    Halide::Func kt, vt, qt, dot;
    Halide::Func s1_acc, s1, m1, row_max, row_sum, lse, delta;
    Halide::Func s2, dp2, ds2, dq_acc;
    Halide::Func s3, dp3, p3, ds3, dk_acc, dv_acc;
    Halide::Var d, c, i, j, h, b;
    Halide::RDom rd, rj, ri;
};

struct AttentionBackwardKnobs {
    int query_tile;  // queries per tile in passes 1–2
    int key_tile;    // keys per tile in pass 3
};

// A score-like reduction f(x, y, h, b) += a(rd, y)·bt(x, rd), consumed by
// `user` (computed per tile of `tile` y's at at.loop, over all x): `user` is
// split into blocks of 2 vectors of x, and f is computed per block as a
// 2-vector × tile register block (its accumulators pinned in vector
// registers, unrolled), running the whole rd chain before it is stored.
// Measured 2026-11-23 (sapphirerapids, 2 threads, B 64 × H 4 × T 24 × dk 64,
// causal): the whole backward 16.8 ms with the accumulators in memory, where
// every FMA loaded and stored one.
inline void schedule_register_scores(Halide::Func f, Halide::Func user, Halide::Func at, Halide::Var loop,
                                     Halide::Var x, Halide::Var y, int tile, Halide::RDom rd, int lanes) {
    using namespace Halide;
    Var xo("xo"), xi("xi");
    user.compute_at(at, loop)
        .split(x, xo, xi, 2 * lanes, TailStrategy::RoundUp)
        .reorder(xi, y, xo)
        .vectorize(xi, lanes);
    f.compute_at(user, xo)
        .store_in(MemoryType::Register)
        .bound_extent(x, 2 * lanes)
        .bound_extent(y, tile)
        .vectorize(x, lanes)
        .unroll(x)
        .unroll(y);
    f.update().reorder(x, y, rd).vectorize(x, lanes).unroll(x).unroll(y);
}

// Parallel over (head, sequence) in each pass. Transposed copies of K, V, Q
// and dO are made once (T·dk floats per head). Pass 1 and 2 work on tiles of
// query_tile queries against all keys (query_tile × Tkv floats of scores),
// pass 3 on tiles of key_tile keys against all queries: the working set is
// linear in T.
inline void schedule_attention_backward_cpu(AttentionBackwardStages s, const AttentionBackwardKnobs &kn,
                                            const Halide::Target &t) {
    using namespace Halide;
    const int lanes = f32_lanes(t);
    const int tq = std::max(1, kn.query_tile), tk = std::max(1, kn.key_tile);
    Var hb("hb"), io("io"), ii("ii"), jo("jo"), ji("ji");
    // Transposes in lanes × lanes tiles (dense row loads, shuffled in
    // registers; a vector over the strided dimension would be a gather).
    Var ti("ti"), tdi("tdi"), tyo("tyo"), tdo("tdo");
    for (auto [f, x] : {std::pair{s.kt, s.j}, std::pair{s.vt, s.j}, std::pair{s.qt, s.i}, std::pair{s.dot, s.i}}) {
        f.compute_root()
            .fuse(s.h, s.b, hb)
            .parallel(hb)
            .tile(x, s.d, tyo, tdo, ti, tdi, lanes, lanes, TailStrategy::GuardWithIf)
            .vectorize(ti)
            .unroll(tdi);
    }
    // Pass 1: log-sum-exp and Δ per query.
    s.lse.compute_root()
        .split(s.i, io, ii, tq, TailStrategy::GuardWithIf)
        .reorder(ii, io, s.h, s.b)
        .fuse(s.h, s.b, hb)
        .parallel(hb);
    schedule_register_scores(s.s1_acc, s.s1, s.lse, io, s.j, s.i, tq, s.rd, lanes);
    s.s1.store_at(s.lse, hb);
    s.row_max.compute_at(s.lse, io);
    s.row_max.update().atomic().vectorize(s.rj.x, lanes);
    s.row_sum.compute_at(s.lse, io);
    s.row_sum.update().atomic().vectorize(s.rj.x, lanes);
    s.delta.compute_root().fuse(s.h, s.b, hb).parallel(hb);
    s.delta.update().atomic().vectorize(s.rd.x, lanes);

    // Pass 2: dQ.
    s.dq.compute_root()
        .split(s.i, io, ii, tq, TailStrategy::GuardWithIf)
        .reorder(s.d, ii, io, s.h, s.b)
        .fuse(s.h, s.b, hb)
        .parallel(hb)
        .vectorize(s.d, lanes, TailStrategy::GuardWithIf);
    // ds = p·(dP − Δ) per block of keys, with its two reductions in registers.
    {
        Var xo("jo2"), xi("ji2");
        s.ds2.compute_at(s.dq, io)
            .store_at(s.dq, hb)  // one allocation per task, not per tile
            .split(s.j, xo, xi, 2 * lanes, TailStrategy::RoundUp)
            .reorder(xi, s.i, xo)
            .vectorize(xi, lanes);
        for (Func f : {s.s2, s.dp2}) {
            f.compute_at(s.ds2, xo)
                .store_in(MemoryType::Register)
                .bound_extent(s.j, 2 * lanes)
                .bound_extent(s.i, tq)
                .vectorize(s.j, lanes)
                .unroll(s.j)
                .unroll(s.i);
            f.update().reorder(s.j, s.i, s.rd).vectorize(s.j, lanes).unroll(s.j).unroll(s.i);
        }
    }
    s.dq_acc.compute_at(s.dq, io).store_at(s.dq, hb).vectorize(s.d, lanes, TailStrategy::GuardWithIf);
    s.dq_acc.update().reorder(s.d, s.rj, s.i).vectorize(s.d, lanes, TailStrategy::GuardWithIf);

    // Pass 3: dK and dV.
    s.dkv.compute_root()
        .split(s.j, jo, ji, tk, TailStrategy::GuardWithIf)
        .reorder(s.d, s.c, ji, jo, s.h, s.b)
        .fuse(s.h, s.b, hb)
        .parallel(hb)
        .vectorize(s.d, lanes, TailStrategy::GuardWithIf);
    schedule_register_scores(s.s3, s.p3, s.dkv, jo, s.i, s.j, tk, s.rd, lanes);
    schedule_register_scores(s.dp3, s.ds3, s.dkv, jo, s.i, s.j, tk, s.rd, lanes);
    s.p3.store_at(s.dkv, hb);
    s.ds3.store_at(s.dkv, hb);
    for (Func f : {s.dk_acc, s.dv_acc}) {
        f.compute_at(s.dkv, jo).store_at(s.dkv, hb).vectorize(s.d, lanes, TailStrategy::GuardWithIf);
        f.update().reorder(s.d, s.ri, s.j).vectorize(s.d, lanes, TailStrategy::GuardWithIf);
    }
}

// GPU: every stage is one kernel over its outputs. The per-tile scores
// (ds for dQ; p and ds for dK|dV) live in global scratch per block (their
// tile × T floats outgrow shared memory), computed by the block's threads;
// each output thread then runs its reduction in a register.
inline void schedule_attention_backward_gpu(AttentionBackwardStages s, int tile_knob) {
    using namespace Halide;
    const int tile = or_default(tile_knob, 8), tx = 32;
    Var hb("hb"), xo("xo"), xi("xi"), yo("yo"), yi("yi");
    // f(x, y, h, b) over the whole (x, y) plane, blocks of tx × 8.
    auto plane = [&](Func f, Var x, Var y) {
        f.compute_root()
            .split(x, xo, xi, tx, TailStrategy::GuardWithIf)
            .split(y, yo, yi, 8, TailStrategy::GuardWithIf)
            .fuse(s.h, s.b, hb)
            .reorder(xi, yi, xo, yo, hb)
            .gpu_blocks(xo, yo, hb)
            .gpu_threads(xi, yi);
    };
    plane(s.kt, s.j, s.d);
    plane(s.vt, s.j, s.d);
    plane(s.qt, s.i, s.d);
    plane(s.dot, s.i, s.d);
    // Row statistics: a block per tile of queries; the tile's scores in
    // scratch, then one thread per query folds them. Δ: a thread per query.
    s.lse.compute_root()
        .split(s.i, yo, yi, tile, TailStrategy::GuardWithIf)
        .fuse(s.h, s.b, hb)
        .reorder(yi, yo, hb)
        .gpu_blocks(yo, hb)
        .gpu_threads(yi);
    s.s1.compute_at(s.lse, yo)
        .store_in(MemoryType::Heap)
        .split(s.j, xo, xi, tx, TailStrategy::GuardWithIf)
        .reorder(xo, xi, s.i)
        .gpu_threads(xi, s.i);
    s.s1_acc.compute_at(s.s1, xi);
    s.row_max.compute_at(s.lse, yi);
    s.row_sum.compute_at(s.lse, yi);
    s.delta.compute_root()
        .split(s.i, xo, xi, tx, TailStrategy::GuardWithIf)
        .fuse(s.h, s.b, hb)
        .reorder(xi, xo, hb)
        .gpu_blocks(xo, hb)
        .gpu_threads(xi);
    s.delta.update()
        .split(s.i, xo, xi, tx, TailStrategy::GuardWithIf)
        .fuse(s.h, s.b, hb)
        .reorder(s.rd, xi, xo, hb)
        .gpu_blocks(xo, hb)
        .gpu_threads(xi);

    // dq(d, i): a block per tile of queries; ds2 for the tile in scratch.
    s.dq.compute_root()
        .split(s.d, xo, xi, tx, TailStrategy::GuardWithIf)
        .split(s.i, yo, yi, tile, TailStrategy::GuardWithIf)
        .fuse(s.h, s.b, hb)
        .reorder(xi, yi, xo, yo, hb)
        .gpu_blocks(yo, hb)
        .gpu_threads(xi, yi);
    s.ds2.compute_at(s.dq, yo)
        .store_in(MemoryType::Heap)
        .split(s.j, xo, xi, tx, TailStrategy::GuardWithIf)
        .reorder(xo, xi, s.i)
        .gpu_threads(xi, s.i);
    s.s2.compute_at(s.ds2, xi);
    s.dp2.compute_at(s.ds2, xi);
    s.dq_acc.compute_at(s.dq, xi);

    // dkv(d, c, j): a block per tile of keys; p3 and ds3 in scratch.
    s.dkv.compute_root()
        .split(s.d, xo, xi, tx, TailStrategy::GuardWithIf)
        .split(s.j, yo, yi, tile, TailStrategy::GuardWithIf)
        .fuse(s.h, s.b, hb)
        .reorder(xi, yi, s.c, xo, yo, hb)
        .gpu_blocks(yo, hb)
        .gpu_threads(xi, yi);
    for (Func f : {s.p3, s.ds3}) {
        f.compute_at(s.dkv, yo)
            .store_in(MemoryType::Heap)
            .split(s.i, xo, xi, tx, TailStrategy::GuardWithIf)
            .reorder(xo, xi, s.j)
            .gpu_threads(xi, s.j);
    }
    s.s3.compute_at(s.p3, xi);
    s.dp3.compute_at(s.ds3, xi);
    // dK and dV per key tile: stored through a wrapper, each value's sum
    // over the queries accumulated in its thread's register (scheduled on
    // the reductions themselves, every FMA stored its sum to global scratch:
    // tests/check_gpu_accumulators.py).
    for (Func f : {s.dk_acc, s.dv_acc}) {
        Func w = f.in();
        w.compute_at(s.dkv, yo)
            .store_in(MemoryType::Heap)
            .split(s.d, xo, xi, tx, TailStrategy::GuardWithIf)
            .reorder(xo, xi, s.j)
            .gpu_threads(xi, s.j);
        f.compute_at(w, xo).store_in(MemoryType::Register);
    }
}

}  // namespace halformer
