// moe_route and moe_combine: the two steps of a mixture-of-experts
// feed-forward (Mixtral, Qwen3-MoE) that are not a projection. Between
// them the runtime groups each expert's tokens and runs that expert's
// gated FFN over them with the FFN kernels (runtime/src/model/layers/moe.cpp), so
// a decoding step reads only the chosen experts' weights.
//
// moe_route: the router's top-k experts of each token and their weights
//   logits   [M, E]   Halide (e, m)   the router's scores (x·Wrᵀ)
//   k                int32: experts per token (the outputs' first extent)
//   renormalize      int32: 1 divides the k weights by their sum (Mixtral;
//                    Qwen3-MoE's norm_topk_prob), 0 keeps softmax's
//   weights  [M, k]   Halide (j, m)   softmax(logits)[ids(j, m)] (renormalized
//                    or not), best first
//   ids      [M, k]   Halide (j, m)   int32, the experts, best first
//
//   p_e = exp(l_e − max) / Σ_e' exp(l_e' − max) in float32, as transformers'
//   routers compute it; the top k by score, ties to the lower expert (the
//   scan runs in increasing e and only a strictly larger score displaces
//   an entry); renormalized: p_e / Σ_top-k p. 1 ≤ k ≤ kMaxTopK (8, Qwen3-MoE's
//   num_experts_per_tok) and k ≤ E, else an error naming both. A NaN score
//   is never chosen.
//
// moe_combine: the experts' outputs weighted, joined to the stream
//   y        [R, D]   Halide (d, row)  every chosen (token, expert)'s FFN
//                    output, grouped by expert
//   slot     [M, k]   Halide (j, m)    int32: the row of y of token m's j-th
//                    expert
//   weights  [M, k]   Halide (j, m)    moe_route's
//   residual [M, D]   Halide (d, m)
//   out      [M, D]   Halide (d, m)   residual + Σ_j weights(j, m) · y(slot(j, m))
//
// The sum runs in j order in strict float: a token's bits do not depend on
// the batch beside it. A slot outside [0, R) is an error, checked before
// anything is read.
#include "Halide.h"
#include "common.h"
#include "../schedules/moe_schedule.h"

#include <limits>

namespace {

using namespace Halide;
using namespace halformer;

constexpr int kMaxTopK = 8;

class MoeRoute : public Generator<MoeRoute> {
public:
    GeneratorParam<std::string> tuned_as{"tuned_as", ""};

    Input<Buffer<float, 2>> logits{"logits"};
    Input<int32_t> k{"k"};
    Input<int32_t> renormalize{"renormalize"};
    Output<Buffer<float, 2>> weights{"weights"};
    Output<Buffer<int32_t, 2>> ids{"ids"};

    void generate() {
        /* THE ALGORITHM */
        Expr E = logits.dim(0).extent(), K = clamp(k, 1, kMaxTopK);
        const Expr neg_inf = Expr(-std::numeric_limits<float>::infinity());
        r = RDom(0, E, "r");
        // The kMaxTopK best (score, expert), kept sorted (topk_generator.cpp's insertion).
        std::vector<Expr> init;
        for (int e = 0; e < kMaxTopK; e++) init.push_back(neg_inf);
        for (int e = 0; e < kMaxTopK; e++) init.push_back(-1);
        best(m) = Tuple(init);
        Expr s = logits(r, m);
        Expr x = select(is_nan(s), neg_inf, s);
        std::vector<Expr> next(2 * kMaxTopK);
        for (int e = 0; e < kMaxTopK; e++) {
            Expr above = x > best(m)[e];
            if (e == 0) {
                next[e] = select(above, x, best(m)[e]);
                next[kMaxTopK + e] = select(above, r, best(m)[kMaxTopK + e]);
            } else {
                Expr above_prev = x > best(m)[e - 1];
                next[e] = select(above_prev, best(m)[e - 1], select(above, x, best(m)[e]));
                next[kMaxTopK + e] =
                    select(above_prev, best(m)[kMaxTopK + e - 1], select(above, r, best(m)[kMaxTopK + e]));
            }
        }
        best(m) = Tuple(next);
        std::vector<Expr> vs, is;
        for (int e = 0; e < kMaxTopK; e++) {
            vs.push_back(best(m)[e]);
            is.push_back(best(m)[kMaxTopK + e]);
        }
        top_score(j, m) = mux(j, vs);
        top_id(j, m) = mux(j, is);
        // Softmax over every expert, from the row's max (the best score).
        Expr mx = best(m)[0];
        total(m) = 0.0f;
        total(m) = strict_float(total(m) + exp(select(is_nan(s), neg_inf, s) - mx));
        RDom rk(0, K, "rk");
        chosen(m) = 0.0f;
        chosen(m) = strict_float(chosen(m) + exp(top_score(rk, m) - mx));
        Expr w = exp(top_score(j, m) - mx) / select(renormalize != 0, chosen(m), total(m));
        weights(j, m) = w;
        ids(j, m) = top_id(j, m);
        add_requirement(k >= 1 && k <= kMaxTopK && k <= E, "moe_route:", k, "experts per token of", E,
                        "(at most", kMaxTopK, "and at most the experts)");
        add_requirement(weights.dim(0).extent() == k && ids.dim(0).extent() == k, "moe_route: outputs of",
                        weights.dim(0).extent(), "and", ids.dim(0).extent(), "entries a token for k =", k);

        /* ESTIMATES: Mixtral's 8 experts, top 2, 128 tokens */
        logits.set_estimates({{0, 8}, {0, 128}});
        k.set_estimate(2);
        renormalize.set_estimate(1);
        weights.set_estimates({{0, 2}, {0, 128}});
        ids.set_estimates({{0, 2}, {0, 128}});
    }

    void schedule() {
        if (leave_to_autoscheduler(auto_schedule)) return;
        MoeRouteStages st{weights, ids, best, total, chosen, top_score, top_id, j, m};
        if (get_target().has_gpu_feature()) {
            schedule_moe_route_gpu(st);
            return;
        }
        schedule_moe_route_cpu(st, get_target());
    }

private:
    Var j{"j"}, m{"m"};
    Func best{"best"}, total{"total"}, chosen{"chosen"}, top_score{"top_score"}, top_id{"top_id"};
    RDom r;
};

class MoeCombine : public Generator<MoeCombine> {
public:
    GeneratorParam<std::string> tuned_as{"tuned_as", ""};

    Input<Buffer<float, 2>> y{"y"};
    Input<Buffer<int32_t, 2>> slot{"slot"};
    Input<Buffer<float, 2>> weights{"weights"};
    Input<Buffer<float, 2>> residual{"residual"};
    Output<Buffer<float, 2>> out{"out"};

    void generate() {
        /* THE ALGORITHM */
        Expr R = y.dim(1).extent(), K = slot.dim(0).extent();
        Expr s = slot(j, m);
        row(j, m) = require(s >= 0 && s < R, s, "moe_combine: token", m, "expert", j, "has row", s,
                            "outside the experts' outputs [0,", R, ")");
        RDom rk(0, K, "rk");
        sum(d, m) = residual(d, m);
        sum(d, m) = strict_float(sum(d, m) + weights(rk, m) * y(d, clamp(row(rk, m), 0, R - 1)));
        out(d, m) = sum(d, m);
        add_requirement(weights.dim(0).extent() == K, "moe_combine:", weights.dim(0).extent(), "weights for", K,
                        "experts per token");

        /* ESTIMATES: d_model 4096, 128 tokens, top 2 */
        y.set_estimates({{0, 4096}, {0, 256}});
        slot.set_estimates({{0, 2}, {0, 128}});
        weights.set_estimates({{0, 2}, {0, 128}});
        residual.set_estimates({{0, 4096}, {0, 128}});
        out.set_estimates({{0, 4096}, {0, 128}});
    }

    void schedule() {
        if (leave_to_autoscheduler(auto_schedule)) return;
        MoeCombineStages st{out, sum, row, d, m, j};
        if (get_target().has_gpu_feature()) {
            schedule_moe_combine_gpu(st);
            return;
        }
        schedule_moe_combine_cpu(st, get_target());
    }

private:
    Var d{"d"}, m{"m"}, j{"j"};
    Func sum{"sum"}, row{"row"};
};

}  // namespace

HALIDE_REGISTER_GENERATOR(MoeRoute, moe_route)
HALIDE_REGISTER_GENERATOR(MoeCombine, moe_combine)
