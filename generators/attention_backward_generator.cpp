// attention_backward: gradients of O = softmax(Q·Kᵀ·scale + mask)·V with
// respect to Q, K and V (the flash-attention backward: the probabilities are
// recomputed from Q and K, never stored).
//
//   q, o, dout [B, H, Tq,  dk]  Halide (d, i, h, b)   o: the forward output
//   k, v       [B, H, Tkv, dk]  Halide (d, j, h, b)
//   kv_len     [B] int32        valid keys per sequence (as the forward)
//   q_offset, scale             as the forward (causal: j ≤ i + q_offset)
//   dq         [B, H, Tq, dk]   Halide (d, i, h, b)
//   dkv        [B, H, Tkv, 2, dk] Halide (d, c, j, h, b): c = 0 is dK,
//                               c = 1 is dV (the runtime binds c with the
//                               stride between K and V in its fused K|V or
//                               Q|K|V gradient buffer)
//
// With P = softmax rows, dP = dO·Vᵀ, Δ_i = Σ_d dO(d, i)·O(d, i) (= Σ_j P·dP):
//   dS = P ⊙ (dP − Δ),  dQ = scale·dS·K,  dK = scale·dSᵀ·Q,  dV = Pᵀ·dO.
// Three passes, each linear in T in memory: (1) per tile of queries, the row
// log-sum-exp over all keys; (2) per tile of queries, dQ; (3) per tile of
// keys, dK and dV over all queries. Masked scores are excluded by comparison
// (no inf or NaN enters the arithmetic): a fully masked row has P = 0 and
// gets zero gradients, as the forward gives it a zero output.
#include "Halide.h"
#include "common.h"
#include "../schedules/attention_backward_schedule.h"

namespace {

using namespace Halide;
using namespace halformer;

class AttentionBackward : public Generator<AttentionBackward> {
public:
    GeneratorParam<bool> causal{"causal", false};
    // Schedule knobs (schedules/attention_backward_schedule.h).
    GeneratorParam<int> query_tile{"query_tile", 8};
    GeneratorParam<int> key_tile{"key_tile", 8};
    GeneratorParam<int> gpu_tile{"gpu_tile", 0};
    GeneratorParam<std::string> tuned_as{"tuned_as", ""};

    Input<Buffer<float, 4>> q{"q"};
    Input<Buffer<float, 4>> k{"k"};
    Input<Buffer<float, 4>> v{"v"};
    Input<Buffer<float, 4>> o{"o"};
    Input<Buffer<float, 4>> dout{"dout"};
    Input<Buffer<int32_t, 1>> kv_len{"kv_len"};
    Input<int32_t> q_offset{"q_offset"};
    Input<float> scale{"scale"};
    Output<Buffer<float, 4>> dq{"dq"};
    Output<Buffer<float, 5>> dkv{"dkv"};

    void generate() {
        /* THE ALGORITHM */
        Expr dk = q.dim(0).extent(), Tq = q.dim(1).extent(), Tkv = k.dim(1).extent();
        Expr limit = clamp(kv_len(b), 0, Tkv);
        auto valid = [&](Expr jj, Expr ii) {
            Expr ok = jj < limit;
            if (causal) ok = ok && jj <= ii + q_offset;
            return ok;
        };
        rd = RDom(0, dk, "rd");
        // Rows past the ends are clamped: a schedule may compute whole tiles
        // of queries or keys; those values are never stored.
        Func qc("q_clamped"), kc("k_clamped"), vc("v_clamped"), oc("o_clamped"), dc("dout_clamped");
        qc(d, i, h, b) = q(d, min(i, Tq - 1), h, b);
        dc(d, i, h, b) = dout(d, min(i, Tq - 1), h, b);
        oc(d, i, h, b) = o(d, min(i, Tq - 1), h, b);
        kc(d, j, h, b) = k(d, min(j, Tkv - 1), h, b);
        vc(d, j, h, b) = v(d, min(j, Tkv - 1), h, b);
        // Transposed copies, so that every score and dP loop has a unit-stride
        // vector dimension (keys in passes 1–2, queries in pass 3).
        kt(j, d, h, b) = kc(d, j, h, b);
        vt(j, d, h, b) = vc(d, j, h, b);
        qt(i, d, h, b) = qc(d, i, h, b);
        dot(i, d, h, b) = dc(d, i, h, b);

        // (1) Row statistics: lse(i) = log Σ_j exp(s(j, i)) over valid keys.
        rj = RDom(0, Tkv, "rj");
        s1_acc(j, i, h, b) = 0.0f;
        s1_acc(j, i, h, b) += qc(rd, i, h, b) * kt(j, rd, h, b);
        s1(j, i, h, b) = s1_acc(j, i, h, b);
        m1(j, i, h, b) = select(valid(j, i), s1(j, i, h, b) * scale, kMasked);
        row_max(i, h, b) = kMasked;
        row_max(i, h, b) = max(row_max(i, h, b), m1(rj, i, h, b));
        Expr mj = m1(rj, i, h, b);
        row_sum(i, h, b) = 0.0f;
        row_sum(i, h, b) += select(mj > kMaskedHalf, exp(mj - row_max(i, h, b)), 0.0f);
        // A fully masked row keeps the sentinel: every P of it is 0.
        lse(i, h, b) = select(row_sum(i, h, b) > 0.0f, row_max(i, h, b) + log(row_sum(i, h, b)), -kMasked);
        delta(i, h, b) = 0.0f;
        delta(i, h, b) += dc(rd, i, h, b) * oc(rd, i, h, b);

        // (2) dQ, per query: keys vectorized.
        s2(j, i, h, b) = 0.0f;
        s2(j, i, h, b) += qc(rd, i, h, b) * kt(j, rd, h, b);
        dp2(j, i, h, b) = 0.0f;
        dp2(j, i, h, b) += dc(rd, i, h, b) * vt(j, rd, h, b);
        Expr p2 = select(valid(j, i), exp(s2(j, i, h, b) * scale - lse(i, h, b)), 0.0f);
        ds2(j, i, h, b) = p2 * (dp2(j, i, h, b) - delta(i, h, b));
        dq_acc(d, i, h, b) = 0.0f;
        dq_acc(d, i, h, b) += ds2(rj, i, h, b) * kc(d, rj, h, b);
        dq(d, i, h, b) = dq_acc(d, i, h, b) * scale;

        // (3) dK and dV, per key: queries vectorized.
        ri = RDom(0, Tq, "ri");
        s3(i, j, h, b) = 0.0f;
        s3(i, j, h, b) += qt(i, rd, h, b) * kc(rd, j, h, b);
        dp3(i, j, h, b) = 0.0f;
        dp3(i, j, h, b) += dot(i, rd, h, b) * vc(rd, j, h, b);
        p3(i, j, h, b) = select(valid(j, i), exp(s3(i, j, h, b) * scale - lse(i, h, b)), 0.0f);
        ds3(i, j, h, b) = p3(i, j, h, b) * (dp3(i, j, h, b) - delta(i, h, b));
        dk_acc(d, j, h, b) = 0.0f;
        dk_acc(d, j, h, b) += ds3(ri, j, h, b) * qc(d, ri, h, b);
        dv_acc(d, j, h, b) = 0.0f;
        dv_acc(d, j, h, b) += p3(ri, j, h, b) * dc(d, ri, h, b);
        dkv(d, c, j, h, b) = select(c == 0, dk_acc(d, j, h, b) * scale, dv_acc(d, j, h, b));

        /* ESTIMATES: Transformer-base self-attention, 8 × 8 heads × 64 × 64 */
        for (auto *in : {&q, &k, &v, &o, &dout}) in->set_estimates({{0, 64}, {0, 64}, {0, 8}, {0, 8}});
        kv_len.set_estimates({{0, 8}});
        q_offset.set_estimate(0);
        scale.set_estimate(0.125f);
        dq.set_estimates({{0, 64}, {0, 64}, {0, 8}, {0, 8}});
        dkv.set_estimates({{0, 64}, {0, 2}, {0, 64}, {0, 8}, {0, 8}});
    }

    void schedule() {
        if (leave_to_autoscheduler(auto_schedule)) return;
        Tuned rec(tuned_as, get_target());
        if (rec.apply_schedule(get_pipeline(), get_target())) return;
        AttentionBackwardStages s{dq, dkv, kt, vt, qt, dot, s1_acc, s1, m1, row_max, row_sum, lse, delta,
                                  s2, dp2, ds2, dq_acc, s3, dp3, p3, ds3, dk_acc, dv_acc,
                                  d, c, i, j, h, b, rd, rj, ri};
        if (get_target().has_gpu_feature()) {
            schedule_attention_backward_gpu(s, rec.get("gpu_tile", gpu_tile));
            return;
        }
        schedule_attention_backward_cpu(s, {rec.get("query_tile", query_tile), rec.get("key_tile", key_tile)},
                                        get_target());
    }

private:
    Var d{"d"}, c{"c"}, i{"i"}, j{"j"}, h{"h"}, b{"b"};
    Func kt{"k_transposed"}, vt{"v_transposed"}, qt{"q_transposed"}, dot{"dout_transposed"};
    Func s1_acc{"score_stats_acc"}, s1{"score_stats"}, m1{"masked_stats"}, row_max{"row_max"}, row_sum{"row_sum"}, lse{"lse"};
    Func delta{"delta"};
    Func s2{"score_q"}, dp2{"dp_q"}, ds2{"ds_q"}, dq_acc{"dq_acc"};
    Func s3{"score_kv"}, dp3{"dp_kv"}, p3{"p_kv"}, ds3{"ds_kv"}, dk_acc{"dk_acc"}, dv_acc{"dv_acc"};
    RDom rd, rj, ri;
};

}  // namespace

HALIDE_REGISTER_GENERATOR(AttentionBackward, attention_backward)
