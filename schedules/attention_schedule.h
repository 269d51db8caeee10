// How attention runs (algorithm: generators/attention_generator.cpp).
#pragma once

#include "schedule_common.h"

#include <algorithm>

namespace halformer {

struct AttentionStages {
    Halide::Func out, kt, score, masked, block_max, p, block_sum, block_out;
    Halide::Func row_max, weight, denom, numer;
    Halide::Var d, j, i, h, b, kb;
    Halide::RDom rd, rj, rb;
    Halide::Func q;  // the query input (the schedules stage its tile)
    Halide::Func v;  // the value input (the CPU schedule copies a head's rows)
};

struct AttentionKnobs {
    int query_tile;  // queries computed together (register block height)
    int key_block;   // keys per block (set in the algorithm; here for sizing)
    int heads_per_task = 1;  // (head, sequence) pairs per parallel task
    int score_vectors = 2;   // score register block width, in vectors of keys
    int value_vectors = 2;   // P·V register block width, in vectors of head dims
};

// The per-key-block softmax and P·V and their combination, all computed
// per iteration of out's loop `at`, vectorized along keys or head dims.
inline void schedule_key_blocks_cpu(AttentionStages &s, Halide::Var at, int lanes) {
    using Halide::TailStrategy;
    s.block_max.compute_at(s.out, at);
    s.block_max.update().atomic().vectorize(s.rj.x, lanes);
    s.p.compute_at(s.out, at).vectorize(s.j, lanes, TailStrategy::GuardWithIf);
    s.block_sum.compute_at(s.out, at);
    s.block_sum.update().atomic().vectorize(s.rj.x, lanes);
    s.block_out.compute_at(s.out, at).vectorize(s.d, lanes, TailStrategy::GuardWithIf);
    s.block_out.update().reorder(s.d, s.rj, s.kb, s.i).vectorize(s.d, lanes, TailStrategy::GuardWithIf);
    s.row_max.compute_at(s.out, at);
    s.weight.compute_at(s.out, at);
    s.denom.compute_at(s.out, at);
    s.numer.compute_at(s.out, at).vectorize(s.d, lanes, TailStrategy::GuardWithIf);
    s.numer.update().reorder(s.d, s.rb, s.i).vectorize(s.d, lanes, TailStrategy::GuardWithIf);
}

// Decode (one query per head and sequence, or a few: the beams of a source):
// K is read in place, never transposed. A key's score is a dot
// product along d, which is contiguous in the cache: vector partial sums over
// d (an rfactor), one horizontal add per key. Measured 2026-11-23
// (sapphirerapids, 2 threads, causal, 8 heads × 64, a time-major cache):
// 128 rows × 33 steps 3.19 → 1.78 ms, 4 rows × 128 steps 3.2× faster than the
// transposing schedule, which spent most of its time gathering K across the
// cache's rows (512 KB apart). The partial sums live per key (16 floats in
// a register), not per head: a per-head buffer of 16 floats a key passed
// 128 KiB at 2048 keys, where malloc maps fresh pages for every head;
// measured 2026-11-24 (same machine, 8 sequences × 8 heads, contiguous
// caches) 2.0 → 26 GB/s at 2048 keys, 3.3–3.5× at 128–512, and 1.8–2.9× in
// the runtime's time-major caches (128 rows × 33 keys, 4 × 128, 1 × 1000).
inline void schedule_attention_decode_cpu(AttentionStages s, const Halide::Target &t) {
    using namespace Halide;
    const int lanes = f32_lanes(t);
    Var u("u"), at = s.h;
    RVar ro("ro"), ri("ri");
    // Parallel over sequences, everything per (head, sequence): the bounds
    // of a fused (head, sequence) loop would cover every head.
    s.out.compute_root()
        .reorder(s.d, s.i, s.h, s.b)
        .parallel(s.b)
        .vectorize(s.d, lanes, TailStrategy::GuardWithIf);
    s.kt.compute_inline();
    Func part = s.score.update().split(s.rd.x, ro, ri, lanes, TailStrategy::GuardWithIf).rfactor(ri, u);
    s.score.compute_at(s.out, at);
    s.score.update().atomic().vectorize(ri);
    part.compute_at(s.score, s.j).vectorize(u);
    part.update().reorder(u, ro, s.j).vectorize(u);
    schedule_key_blocks_cpu(s, at, lanes);
}

// Parallel over (batch, head). Per head, K is transposed once into kt(j, d) so
// that scores vectorize over keys with a broadcast query element, and V is
// copied contiguous. Per tile of query_tile queries: the tile's scores over
// all keys (query_tile × Tkv floats: linear in T, about 64 KiB at T = 2048),
// then per key block the max and exp, then P·V and the rescaled combination.
// The working set per thread is O(T·(dk + query_tile)); no T×T matrix exists
// at any time. Both matrix products (Q·Kᵀ and P·V) accumulate in registers:
// measured 2026-11-24 (sapphirerapids, 2 threads, 1 × 8 heads × 64, QKV rows
// of a fused projection; FMA peak probe 231 GFLOP/s that day) against the
// schedule before, which accumulated through memory: T = 128 0.75 → 0.32 ms,
// T = 512 11.8 → 4.1 ms (46 → 132 GFLOP/s), T = 2048 269 → 71 ms (3.8×).
inline void schedule_attention_cpu(AttentionStages s, const AttentionKnobs &knobs,
                                   const Halide::Target &t) {
    using namespace Halide;
    const int lanes = f32_lanes(t);
    const int tq = std::max(1, knobs.query_tile);
    Var hb("hb"), io("io"), ii("ii"), jo("jo"), ji("ji"), jv("jv"), jl("jl");
    if (tq == 1) {
        schedule_attention_decode_cpu(s, t);
        return;
    }
    s.out.compute_root()
        .split(s.i, io, ii, tq, TailStrategy::GuardWithIf)
        .reorder(s.d, ii, io, s.h, s.b)
        .fuse(s.h, s.b, hb)
        .vectorize(s.d, lanes, TailStrategy::GuardWithIf);
    // One query per (head, sequence) is little work: hand each thread a
    // batch of them, not one task each.
    if (knobs.heads_per_task > 1) {
        s.out.parallel(hb, knobs.heads_per_task, TailStrategy::GuardWithIf);
    } else {
        s.out.parallel(hb);
    }

    s.kt.compute_at(s.out, hb).vectorize(s.j, lanes, TailStrategy::GuardWithIf);

    // Scores: the tile's scores over all keys live in a wrapper; each block
    // of score_vectors vectors of keys × tq queries is reduced over d in
    // registers (a small constant-size accumulator, as in Halide's matmul
    // apps), then stored once.
    const int kv = std::max(1, knobs.score_vectors) * lanes;
    Func sw = s.score.in();
    sw.compute_at(s.out, io)
        .bound_extent(s.i, tq)
        .split(s.j, jo, ji, kv, TailStrategy::GuardWithIf)
        .reorder(ji, s.i, jo)
        .vectorize(ji, lanes)
        .unroll(s.i);
    s.score.compute_at(sw, jo)
        .bound_extent(s.j, kv)
        .split(s.j, jv, jl, lanes)
        .reorder(jl, jv, s.i)
        .vectorize(jl)
        .unroll(jv)
        .unroll(s.i);
    s.score.update()
        .split(s.j, jv, jl, lanes)
        .reorder(jl, jv, s.i, s.rd)
        .vectorize(jl)
        .unroll(jv)
        .unroll(s.i);

    s.block_max.compute_at(s.out, io);
    s.block_max.update().atomic().vectorize(s.rj.x, lanes);
    s.p.compute_at(s.out, io).vectorize(s.j, lanes, TailStrategy::GuardWithIf);
    s.block_sum.compute_at(s.out, io);
    s.block_sum.update().atomic().vectorize(s.rj.x, lanes);
    s.row_max.compute_at(s.out, io);
    s.weight.compute_at(s.out, io);
    s.denom.compute_at(s.out, io);

    // P·V per block of value_vectors vectors of head dims and per key block,
    // into tq × value_vectors register accumulators, then folded into numer
    // with the block's weight: per key, value_vectors loads of v and
    // tq × value_vectors FMAs with a broadcast p. The block's extent along d
    // is constant (v reads as zero past dk), so the accumulators stay in
    // registers.
    const int dv = std::max(1, knobs.value_vectors) * lanes;
    Var dO("dO"), dI("dI"), dv_o("dv_o"), dv_i("dv_i");
    s.numer.compute_at(s.out, io)
        .bound_extent(s.i, tq)
        .vectorize(s.d, lanes, TailStrategy::GuardWithIf);
    s.numer.update()
        .split(s.d, dO, dI, dv, TailStrategy::GuardWithIf)
        .reorder(dI, s.i, s.rb, dO)
        .vectorize(dI, lanes)
        .unroll(s.i);
    s.block_out.compute_at(s.numer, s.rb)
        .bound_extent(s.i, tq)
        .bound_extent(s.d, dv)
        .split(s.d, dv_o, dv_i, lanes)
        .reorder(dv_i, dv_o, s.i, s.kb)
        .vectorize(dv_i)
        .unroll(dv_o)
        .unroll(s.i);
    s.block_out.update()
        .split(s.d, dv_o, dv_i, lanes)
        .reorder(dv_i, dv_o, s.i, s.rj, s.kb)
        .vectorize(dv_i)
        .unroll(dv_o)
        .unroll(s.i);

    // The head's values, copied contiguous once per (head, sequence): the
    // rows of a fused QKV projection lie 3·d_model floats apart, so each key
    // of the P·V loop would touch its own page.
    Func vw = s.v.in(s.block_out);
    vw.compute_at(s.out, hb).vectorize(vw.args()[0], lanes, TailStrategy::GuardWithIf);

    // The tile's queries, stored query-minor, so that the score loop
    // broadcasts each from one base pointer at a constant offset.
    Func qw = s.q.in(s.score);
    qw.compute_at(s.out, io)
        .reorder_storage(qw.args()[1], qw.args()[0]);
}

// The GPU attention block's shared memory. Halide 14 lets stages whose
// lifetimes do not overlap share a space, which on these kernels (read from
// their OpenCL code) gives three: the query tile, later p; a chunk of keys,
// later the row statistics; a chunk of V.
struct AttentionGpuShared {
    int query_tile, key_chunk;  // floats per head dim: the query tile's, a key chunk's (padded)
    int p = 0, v = 0;           // floats of a key block's p and of a chunk of its V rows (0: read in place)
    // Bytes a block needs at head size dk (an int, or an Expr for the
    // generator's requirement).
    template <typename T>
    T bytes(T dk) const {
        using Halide::max;
        using std::max;
        return 4 * (max(query_tile * dk, T(p)) + max(key_chunk * dk, T(2 * query_tile)) + v);
    }
    // The widest head within `limit` bytes (heads at least p / query_tile wide).
    int max_head(int limit) const { return (limit / 4 - v) / (query_tile + key_chunk); }
};

// The block's shape: tq queries (the knob; at least 2: with one, Halide 14
// hoists the d-tail guard of block_out and numer over their pure and update
// stages and puts a barrier inside that branch, a divergent barrier: wrong
// results on PoCL at head sizes below 32, undefined on a GPU; seen
// 2026-11-22 in the kernel's stmt with one query a block), tx = 32 threads
// along keys or head dims, `rows` queries a thread and ty = tq / rows
// thread rows.
struct AttentionGpuBlock {
    int tq, tx = 32, rows, ty;
    explicit AttentionGpuBlock(int query_tile_knob)
        : tq(std::max(2, or_default(query_tile_knob, 32))),
          rows(tq >= 8 && tq % 4 == 0 ? 4 : tq >= 4 && tq % 2 == 0 ? 2 : 1),
          ty(tq / rows) {}
    // Its shared memory (the keys paged: V and p read in place).
    AttentionGpuShared shared(int key_block, bool paged) const {
        AttentionGpuShared use{tq, tx + 1};
        if (!paged) {
            use.p = key_block * tq;
            use.v = key_block * tx;
        }
        return use;
    }
};

// GPU: one block per (tile of query_tile queries, head, sequence), 32 × ty
// threads: x over keys, head dims or key blocks, y over groups of `rows`
// queries (ty = query_tile / rows; rows = 4 from 8 queries a tile up, so the
// default tile of 32 runs 256 threads). In the block, in order, with a
// barrier between stages: the tile's scores against all keys, the per-key-
// block max, p = exp(s − max), the per-block sums and partial P·V, the row's
// max and denominator over blocks, then the combination.
// Every reduction accumulates in registers and is stored once: each stage's
// storage is a wrapper (`Func::in()`) and the reduction itself is computed
// per thread (MemoryType::Register). Q·Kᵀ and P·V keep `rows` queries' sums
// a thread, so each load of K or V serves `rows` FMAs. (Scheduled on the
// reductions themselves, as before 2026-11-27, P·V's and the combination's
// every FMA loaded and stored global scratch or shared memory, and the tile
// held 8 queries: 0.02× SDPA on an H100. tests/check_gpu_accumulators.py
// now fails any CUDA kernel whose inner loop does that.)
// Shared memory holds the query tile (dk × query_tile floats, staged once
// per block), one chunk of 32 keys at a time (33 · dk floats), the row
// statistics and, for P·V, a key block's p and a chunk of its V rows:
// (query_tile + 33) · dk + key_block · 32 floats, 24.3 KiB at dk = 64 and
// 40.5 KiB at dk = 128 with 32 queries a block (AttentionGpuShared, which
// the generator makes a requirement of: at most kGpuSharedBytes a block,
// so that a wider head is an error that names its size, not a launch that
// fails). Everything that grows with the keys (the tile's scores and p,
// query_tile × Tkv floats each, the per-block max, sum and weight, the
// partial outputs) lives in global scratch per block (MemoryType::Heap),
// so no length of sequence outgrows shared memory. (Until 2026-11-29 K and
// V were read in place: each warp load of K touched 32 rows of K. The Q·Kᵀ
// loop's PTX is 30 instructions per 8 FMAs with both operands in shared
// memory, 29 before, about 46 with the queries read from global memory instead:
// shared loads take 32-bit addresses at constant offsets.)
inline AttentionGpuShared schedule_attention_gpu(AttentionStages s, int query_tile_knob, int key_block, bool paged) {
    using namespace Halide;
    const AttentionGpuBlock blk(query_tile_knob);
    const int tq = blk.tq, tx = blk.tx, rows = blk.rows, ty = blk.ty;
    Var io("io"), ii("ii"), xo("xo"), xi("xi"), yo("yo"), yi("yi");
    s.out.compute_root()
        .split(s.i, io, ii, tq, TailStrategy::GuardWithIf)
        .split(ii, yo, yi, rows)
        .split(s.d, xo, xi, tx, TailStrategy::GuardWithIf)
        .reorder(xo, yi, xi, yo, io, s.h, s.b)
        .gpu_blocks(io, s.h, s.b)
        .gpu_threads(xi, yo);
    // A Func over (x, i, ...) computed per block for the whole tile (rows
    // past the sequence's end read a clamped query and are never stored, so
    // loops need no guard along i), threads (x % 32, i / rows).
    auto per_block = [&](Func f, Var x, MemoryType mem) -> Func {
        f.compute_at(s.out, io).store_in(mem)
            .bound_extent(s.i, tq)
            .split(x, xo, xi, tx, TailStrategy::GuardWithIf)
            .split(s.i, yo, yi, rows)
            .reorder(xo, yi, xi, yo)
            .gpu_threads(xi, yo);
        return f;
    };
    // A reduction each of whose values is one thread's: stored through a
    // per-block wrapper, accumulated in that thread's register.
    auto in_registers = [&](Func f, Var x) {
        Func w = f.in();
        per_block(w, x, MemoryType::Heap);
        f.compute_at(w, xo).store_in(MemoryType::Register);
    };
    // The same for a per-query reduction (the row's max and denominator).
    auto per_query = [&](Func f) {
        Func w = f.in();
        w.compute_at(s.out, io).store_in(MemoryType::GPUShared)
            .bound_extent(s.i, tq)
            .split(s.i, xo, xi, tx, TailStrategy::GuardWithIf)
            .reorder(xo, xi)
            .gpu_threads(xi);
        f.compute_at(w, xo).store_in(MemoryType::Register);
    };
    // The tile's queries, staged once per block. Its rows are clamped at the
    // end of the sequence, so their count varies: a guarded split keeps the
    // thread count constant.
    Func qs = s.q.in(s.score);
    Var q0 = qs.args()[0], q1 = qs.args()[1], qo("qo"), qi("qi");
    qs.compute_at(s.out, io)
        .store_in(MemoryType::GPUShared)
        .split(q0, xo, xi, tx, TailStrategy::GuardWithIf)
        .split(q1, qo, qi, ty, TailStrategy::GuardWithIf)
        .reorder(xo, qo, xi, qi)
        .gpu_threads(xi, qi);
    // Q·Kᵀ: key chunks of tx keys in a serial loop of the block; per chunk,
    // a thread per key and group of queries, `rows` sums in registers (the
    // queries from shared memory, one address across a warp).
    Func sw = s.score.in();
    per_block(sw, s.j, MemoryType::Heap).reorder(yi, xi, yo, xo).unroll(yi);
    s.score.compute_at(sw, xi).store_in(MemoryType::Register).unroll(s.i);
    s.score.update().reorder(s.i, s.j, s.rd).unroll(s.i);
    // The chunk's keys staged in shared memory, key-minor (a warp's threads,
    // one key each, read consecutive words at every d): the block's threads
    // load them along d (coalesced), and the rows are padded to tx + 1
    // words so that those stores do not collide in a bank. Read in place,
    // each warp load of K touched tx rows of K (tx L1 wavefronts for `rows`
    // FMAs, the matmul's problem of issue 40). Past the last key the chunk
    // reads clamped rows (never stored: their scores are masked).
    Var kdo("kdo"), kdi("kdi"), kjo("kjo"), kji("kji");
    s.kt.compute_at(sw, xo)
        .store_in(MemoryType::GPUShared)
        .bound_extent(s.j, tx)
        .align_storage(s.j, tx + 1)
        .split(s.d, kdo, kdi, tx, TailStrategy::GuardWithIf)
        .split(s.j, kjo, kji, ty, TailStrategy::GuardWithIf)
        .reorder(kdo, kjo, kdi, kji)
        .gpu_threads(kdi, kji);
    in_registers(s.block_max, s.kb);
    per_block(s.p, s.j, MemoryType::Heap);
    in_registers(s.block_sum, s.kb);
    // P·V: the key blocks in a serial loop of the block, and in it the head
    // dims in chunks of tx; per chunk, threads over (d, query groups), `rows`
    // sums over the block's keys in registers. Unless the keys are paged,
    // the block's p (key_block × query_tile floats) and the chunk's V
    // (key_block × tx) are first staged in shared memory by the block's
    // threads, both loaded along their contiguous dimension, so that the
    // loop's loads take 32-bit shared addresses at constant offsets (read in
    // place, its PTX spent 58 instructions per 8 FMAs, mostly on 64-bit
    // global addresses and V's clamped rows; staged, 28). A paged cache's rows come
    // through the block table, so V's region there is the whole pool: the
    // decode kernels read it in place.
    Func bo = s.block_out.in();
    per_block(bo, s.d, MemoryType::Heap).reorder(yi, xi, yo, xo, s.kb).unroll(yi);
    s.block_out.compute_at(bo, xi).store_in(MemoryType::Register).unroll(s.i);
    s.block_out.update().reorder(s.i, s.d, s.kb, s.rj).unroll(s.i);
    if (!paged) {
        Var a0("a0"), a1("a1"), b0("b0"), b1("b1");
        Func vs = s.v.in(s.block_out);
        vs.compute_at(bo, xo)
            .store_in(MemoryType::GPUShared)
            .split(vs.args()[0], a0, a1, tx, TailStrategy::GuardWithIf)
            .split(vs.args()[1], b0, b1, ty, TailStrategy::GuardWithIf)
            .reorder(a0, b0, a1, b1)
            .gpu_threads(a1, b1);
        Func ps = s.p.in(s.block_out);
        ps.compute_at(bo, s.kb)
            .store_in(MemoryType::GPUShared)
            .split(s.j, a0, a1, tx, TailStrategy::GuardWithIf)
            .split(s.i, b0, b1, ty, TailStrategy::GuardWithIf)
            .reorder(a0, b0, a1, b1)
            .gpu_threads(a1, b1);
    }
    per_query(s.row_max);
    per_block(s.weight, s.kb, MemoryType::Heap);
    per_query(s.denom);
    // The combination over blocks, per output element, in a register.
    s.numer.compute_at(s.out, xo).store_in(MemoryType::Register);
    return blk.shared(key_block, paged);
}

}  // namespace halformer
