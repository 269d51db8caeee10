// attention: multi-head scaled dot-product attention
//   O = softmax(Q·Kᵀ · scale + mask) · V          (scale = 1/√d_k by default)
//
//   q       [B, H, Tq,  dk]  Halide (d, i, h, b)
//   k, v    [B, Hkv, Tkv, dk]  Halide (d, j, g, b)  Hkv key/value heads: H
//                            itself (multi-head), or a divisor of H
//                            (grouped-query attention; 1: multi-query):
//                            query head h reads key/value head h / (H / Hkv)
//   kv_len  [B] int32        valid keys per sequence (key padding); keys at
//                            j ≥ kv_len[b] are masked
//   q_offset                 position of query 0 among the keys: with
//                            causal=true, query i sees keys j ≤ i + q_offset
//                            (0 for self-attention over a whole sequence,
//                            L − Tq when Tq new queries follow a cache of L − Tq)
//   scale                    score scale, normally 1/√dk
//   o       [B, H, Tq,  dk]  Halide (d, i, h, b)
//   block_table [B, NB] int32  only with page > 0: the paged KV cache (vLLM's
//                            paged attention). k and v are a pool of blocks
//                            of `page` rows each, Halide (d, j, h, row) with
//                            any stride of j (0 for a pool without a
//                            position dimension); key j of sequence b is
//                            row block_table(j / page, b) · page + j % page.
//                            NB ≥ ⌈Tkv / page⌉. Beams share their ancestors'
//                            blocks through their tables, read in place;
//                            an entry out of the pool reads a clamped block;
//                            masked keys may be rows never written (NaN):
//                            they add nothing
//   bias    [H, 2R+1]        only with position_bias=true: an additive bias
//                            by relative position, Halide (n, h) with dim 0
//                            from −R to R; the score of query i and key j
//                            gains bias(clamp(j − (i + q_offset), −R, R), h)
//                            (T5's bucketed table, generators/position_bias_
//                            generator.cpp: constant beyond ±R)
//   softcap                  only with soft_cap=true (Gemma 2): the scaled
//                            score s becomes softcap · tanh(s / softcap)
//                            before any mask (softcap > 0)
//   window                   only with sliding_window=true (Mistral): a
//                            query at position p sees keys j > p − window
//                            as well (window ≤ 0: no limit). p = min(i +
//                            q_offset, kv_len[b] − 1): a decoding step's
//                            rows end at their own kv_len
//
// The cases of the seeds: self-attention (Tq = Tkv, kv_len = T), causal
// (decoder self-attention), key padding (kv_len per sequence), cross-attention
// (Tq ≠ Tkv), incremental decoding (Tq small, q_offset = cache length). All are
// one algorithm; q, k, v, o may be strided views (e.g. into a fused QKV
// projection [M, 3·d_model]).
//
// Memory grows linearly with T: keys are split into blocks of `key_block`;
// each block keeps its own max, sum and partial output (the flash-attention /
// flash-decoding decomposition), and the blocks are combined by rescaling
// with exp(block max − row max). A schedule never needs a T×T matrix.
// Masked scores become a finite sentinel and are excluded by comparison: a
// fully masked row gives zeros (not NaN), and scores of ±1e4 cannot overflow
// because every exp() argument is ≤ 0.
#include "Halide.h"
#include "common.h"
#include "../schedules/attention_schedule.h"

namespace {

using namespace Halide;
using namespace halformer;

class Attention : public Generator<Attention> {
public:
    GeneratorParam<bool> causal{"causal", false};
    GeneratorParam<int> key_block{"key_block", 64};
    GeneratorParam<int> page{"page", 0};  // > 0: keys through block_table (rows per block)
    GeneratorParam<bool> position_bias{"position_bias", false};
    GeneratorParam<bool> sliding_window{"sliding_window", false};
    GeneratorParam<bool> soft_cap{"soft_cap", false};
    // Schedule knobs (schedules/attention_schedule.h).
    GeneratorParam<int> query_tile{"query_tile", 8};
    GeneratorParam<int> heads_per_task{"heads_per_task", 1};
    GeneratorParam<int> score_vectors{"score_vectors", 2};
    GeneratorParam<int> value_vectors{"value_vectors", 2};
    GeneratorParam<int> gpu_query_tile{"gpu_query_tile", 0};  // GPU: queries per block (0: 32)
    // The kernel name tuned records know this build by (set by the build; see
    // schedules/tuned.h). Empty: hand values only.
    GeneratorParam<std::string> tuned_as{"tuned_as", ""};

    Input<Buffer<float, 4>> q{"q"};
    Input<Buffer<float, 4>> k{"k"};
    Input<Buffer<float, 4>> v{"v"};
    Input<Buffer<int32_t, 1>> kv_len{"kv_len"};
    Input<int32_t> q_offset{"q_offset"};
    Input<float> scale{"scale"};
    Output<Buffer<float, 4>> o{"o"};
    Input<Buffer<int32_t, 2>> *block_table = nullptr;
    Input<Buffer<float, 2>> *bias = nullptr;
    Input<int32_t> *window = nullptr;
    Input<float> *softcap = nullptr;

    void configure() {
        if (page > 0) block_table = add_input<Buffer<int32_t, 2>>("block_table");
        if (position_bias) bias = add_input<Buffer<float, 2>>("bias");
        if (sliding_window) window = add_input<int32_t>("window");
        if (soft_cap) softcap = add_input<float>("softcap");
    }

    void generate() {
        /* THE ALGORITHM */
        const int KB = Tuned(tuned_as, get_target()).get("key_block", key_block);
        Expr dk = q.dim(0).extent();
        Expr Tkv = k.dim(1).extent();
        // Grouped-query attention: query head h reads key/value head h / group.
        Expr H = q.dim(2).extent(), Hkv = k.dim(2).extent();
        // (Clamped, so that heads that do not divide reach the requirement
        // below instead of a bounds error.)
        Expr group = max(H / max(Hkv, 1), 1);
        Expr hk = min(h / group, Hkv - 1);
        Expr nblocks = (Tkv + KB - 1) / KB;
        rd = RDom(0, dk, "rd");

        // Keys past Tkv (in the last block) read a clamped row and are masked;
        // queries past Tq read a clamped row and are never stored (a schedule
        // may compute whole query tiles).
        Expr Tq = q.dim(1).extent();
        // The row of k and v that holds key jj (≥ 0) of sequence b.
        const int P = page;
        auto row = [&](Expr jj) -> Expr {
            if (P == 0) return b;
            Expr pool_blocks = max(k.dim(3).extent() / P, 1);
            return clamp((*block_table)(jj / P, b), 0, pool_blocks - 1) * P + jj % P;
        };
        kt(j, d, h, b) = k(d, min(j, Tkv - 1), hk, row(min(j, Tkv - 1)));
        score(j, i, h, b) = 0.0f;
        score(j, i, h, b) += q(rd, min(i, Tq - 1), h, b) * kt(j, rd, h, b);
        Expr limit = clamp(kv_len(b), 0, Tkv);
        Expr valid = j < limit;
        if (causal) valid = valid && j <= i + q_offset;
        if (window) {
            Expr query_position = min(i + q_offset, limit - 1);
            valid = valid && (*window <= 0 || j > query_position - *window);
        }
        Expr scaled = score(j, i, h, b) * scale;
        if (softcap) scaled = *softcap * tanh_via_exp(scaled / *softcap);
        if (position_bias) {
            scaled += (*bias)(clamp(j - (i + q_offset), bias->dim(0).min(), bias->dim(0).max()), h);
        }
        masked(j, i, h, b) = select(valid, scaled, kMasked);

        // Per key block: its max, exp(score − block max), their sum and the
        // partial output Σ p·v.
        rj = RDom(0, KB, "rj");
        Expr jb = kb * KB + rj;
        block_max(kb, i, h, b) = kMasked;
        block_max(kb, i, h, b) = max(block_max(kb, i, h, b), masked(jb, i, h, b));
        Expr mj = masked(j, i, h, b);
        p(j, i, h, b) = select(mj > kMaskedHalf, exp(mj - block_max(j / KB, i, h, b)), 0.0f);
        block_sum(kb, i, h, b) = 0.0f;
        block_sum(kb, i, h, b) += p(jb, i, h, b);
        // v reads as zero past the head size: a schedule may compute whole
        // vectors of head dims (the values past dk are never stored). The
        // clamp is `likely` in range, so loops over d split off the tail.
        Expr v_jb = v(clamp(likely(d), 0, dk - 1), min(jb, Tkv - 1), min(hk, v.dim(2).extent() - 1),
                      row(min(jb, Tkv - 1)));
        Expr pv = p(jb, i, h, b) * select(d < dk, v_jb, 0.0f);
        // Paged: a masked key's row may never have been written (the rest
        // of a row's last block, a fresh copy's tail), and 0 · NaN is NaN,
        // so a masked key adds exactly nothing.
        if (P > 0) pv = select(p(jb, i, h, b) > 0.0f, pv, 0.0f);
        block_out(d, kb, i, h, b) = 0.0f;
        block_out(d, kb, i, h, b) += pv;

        // Combine the blocks.
        rb = RDom(0, nblocks, "rb");
        row_max(i, h, b) = kMasked;
        row_max(i, h, b) = max(row_max(i, h, b), block_max(rb, i, h, b));
        weight(kb, i, h, b) = select(block_max(kb, i, h, b) > kMaskedHalf,
                                     exp(block_max(kb, i, h, b) - row_max(i, h, b)), 0.0f);
        // In strict float, in block order: LLVM vectorizes a reduction over
        // 16 or more blocks when it may reassociate, so a row's sums would
        // depend on how many key blocks its call has: a causal prefill in
        // query chunks (runtime/src/model/layers/causal_chunks.h) and a decoding
        // row beside longer ones would get other bits than one call or the
        // row alone (found by the tuner's check at 1024 keys).
        denom(i, h, b) = 0.0f;
        denom(i, h, b) = strict_float(denom(i, h, b) + weight(rb, i, h, b) * block_sum(rb, i, h, b));
        numer(d, i, h, b) = 0.0f;
        numer(d, i, h, b) = strict_float(numer(d, i, h, b) + weight(rb, i, h, b) * block_out(d, rb, i, h, b));
        o(d, i, h, b) = select(denom(i, h, b) > 0.0f, numer(d, i, h, b) / denom(i, h, b), 0.0f);
        if (softcap) {
            Expr cap = *softcap;
            add_requirement(cap > 0.0f, "attention: the soft-cap is", cap, "(it must be positive)");
        }
        add_requirement(Hkv > 0 && H % max(Hkv, 1) == 0 && v.dim(2).extent() == Hkv,
                        "attention:", H, "query heads are not a whole multiple of the", Hkv,
                        "key heads, or v has", v.dim(2).extent(), "heads where k has", Hkv);

        /* ESTIMATES: Transformer-base self-attention, 1 × 8 heads × 128 × 64 */
        q.set_estimates({{0, 64}, {0, 128}, {0, 8}, {0, 1}});
        k.set_estimates({{0, 64}, {0, 128}, {0, 8}, {0, 1}});
        v.set_estimates({{0, 64}, {0, 128}, {0, 8}, {0, 1}});
        kv_len.set_estimates({{0, 1}});
        q_offset.set_estimate(0);
        scale.set_estimate(0.125f);
        o.set_estimates({{0, 64}, {0, 128}, {0, 8}, {0, 1}});
        if (block_table) block_table->set_estimates({{0, (128 + P - 1) / std::max(P, 1)}, {0, 1}});
        if (bias) bias->set_estimates({{-128, 257}, {0, 8}});
        if (window) window->set_estimate(4096);
        if (softcap) softcap->set_estimate(50.0f);
    }

    void schedule() {
        if (leave_to_autoscheduler(auto_schedule)) return;
        AttentionStages s{o, kt, score, masked, block_max, p, block_sum, block_out,
                          row_max, weight, denom, numer,
                          d, j, i, h, b, kb, rd, rj, rb, q, v};
        Tuned rec(tuned_as, get_target());
        if (rec.apply_schedule(get_pipeline(), get_target())) return;
        if (get_target().has_gpu_feature()) {
            const AttentionGpuShared use =
                schedule_attention_gpu(s, rec.get("gpu_query_tile", gpu_query_tile), rec.get("key_block", key_block), page > 0);
            Expr dk = q.dim(0).extent();
            add_requirement(use.bytes(dk) <= kGpuSharedBytes, "attention: heads of", dk, "dims need",
                            use.bytes(dk), "bytes of GPU shared memory a block, more than the", kGpuSharedBytes,
                            "allowed; this GPU build takes heads of up to", use.max_head(kGpuSharedBytes), "dims");
            return;
        }
        schedule_attention_cpu(s,
                               {rec.get("query_tile", query_tile), rec.get("key_block", key_block),
                                rec.get("heads_per_task", heads_per_task),
                                rec.get("score_vectors", score_vectors),
                                rec.get("value_vectors", value_vectors)},
                               get_target());
    }

private:
    Var d{"d"}, j{"j"}, i{"i"}, h{"h"}, b{"b"}, kb{"kb"};
    Func kt{"k_transposed"}, score{"score"}, masked{"masked"}, block_max{"block_max"}, p{"p"};
    Func block_sum{"block_sum"}, block_out{"block_out"}, row_max{"row_max"};
    Func weight{"weight"}, denom{"denom"}, numer{"numer"};
    RDom rd, rj, rb;
};

}  // namespace

HALIDE_REGISTER_GENERATOR(Attention, attention)
