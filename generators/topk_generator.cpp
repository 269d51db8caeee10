// topk: the k largest scores of each row and their ids, in descending order
// (k = 1 is argmax, for greedy decoding; beam search takes k = 2·beam).
//
//   scores  [M, N]   Halide (n, m)
//   values  [M, k]   Halide (j, m)
//   ids     [M, k]   Halide (j, m)   int32
//
// Ties go to the lowest id: the scan runs in increasing id and only a
// strictly larger score displaces an entry. NaN scores are never selected.
// If a row has fewer than k scores above -inf, the missing entries are
// (-inf, -1).
#include "Halide.h"
#include "common.h"
#include "../schedules/topk_schedule.h"

namespace {

using namespace Halide;
using namespace halformer;

class TopK : public Generator<TopK> {
public:
    GeneratorParam<int> k{"k", 1};
    // The kernel name tuned records know this build by (set by the build; see
    // schedules/tuned.h). Empty: hand values only.
    GeneratorParam<std::string> tuned_as{"tuned_as", ""};

    Input<Buffer<float, 2>> scores{"scores"};
    Output<Buffer<float, 2>> values{"values"};
    Output<Buffer<int32_t, 2>> ids{"ids"};

    void generate() {
        /* THE ALGORITHM */
        const int K = k;
        Expr N = scores.dim(0).extent();
        r = RDom(0, N, "r");
        const Expr neg_inf = Expr(-std::numeric_limits<float>::infinity());
        if (K == 1) {
            // The argmax, scanned from the last id down: the max, and on a tie
            // the newer id (the lower one). Written in the form Halide proves
            // associative ({max(a, b), select(b < a, ia, ib)}), so a schedule
            // may split the row over threads (rfactor). A row without a
            // finite score (all -inf or NaN) gets id -1 below.
            Expr id = N - 1 - r;
            Expr s = scores(id, m);
            Expr x = select(is_nan(s), neg_inf, s);
            best(m) = Tuple(neg_inf, -1);
            best(m) = Tuple(max(best(m)[0], x), select(x < best(m)[0], best(m)[1], id));
        } else {
        std::vector<Expr> init;
        for (int e = 0; e < K; e++) init.push_back(neg_inf);
        for (int e = 0; e < K; e++) init.push_back(-1);
        best(m) = Tuple(init);
        // Insertion of (x, r) into the sorted list v_0 ≥ v_1 ≥ … ≥ v_{K−1}.
        // NaN becomes -inf before any comparison: Halide compiles without
        // strict floats, so a comparison with NaN is not guaranteed false
        // (is_nan is always evaluated strictly). A test caught NaN entering.
        Expr s = scores(r, m);
        Expr x = select(is_nan(s), neg_inf, s);
        std::vector<Expr> vals(K), idx(K), next;
        for (int e = 0; e < K; e++) {
            vals[e] = best(m)[e];
            idx[e] = best(m)[K + e];
        }
        std::vector<Expr> nv(K), ni(K);
        for (int e = 0; e < K; e++) {
            Expr above = x > vals[e];
            if (e == 0) {
                nv[e] = select(above, x, vals[e]);
                ni[e] = select(above, r, idx[e]);
            } else {
                Expr above_prev = x > vals[e - 1];
                nv[e] = select(above_prev, vals[e - 1], select(above, x, vals[e]));
                ni[e] = select(above_prev, idx[e - 1], select(above, r, idx[e]));
            }
        }
        for (int e = 0; e < K; e++) next.push_back(nv[e]);
        for (int e = 0; e < K; e++) next.push_back(ni[e]);
        best(m) = Tuple(next);
        }

        std::vector<Expr> vs, is;
        for (int e = 0; e < K; e++) {
            if (K == 1) {
                // No finite score: -inf and id -1. (is_nan, always strict:
                // a NaN the max let through in some build's code, where
                // comparisons with NaN are not guaranteed false, is that.)
                Expr none = is_nan(best(m)[0]) || best(m)[0] == neg_inf;
                vs.push_back(select(none, neg_inf, best(m)[0]));
                is.push_back(select(none, -1, best(m)[1]));
            } else {
                vs.push_back(best(m)[e]);
                is.push_back(best(m)[K + e]);
            }
        }
        values(j, m) = mux(j, vs);
        ids(j, m) = mux(j, is);

        /* ESTIMATES: 32 sentences × beam 4 over 37000 words */
        scores.set_estimates({{0, 37000}, {0, 128}});
        values.set_estimates({{0, K}, {0, 128}});
        ids.set_estimates({{0, K}, {0, 128}});
    }

    void schedule() {
        if (leave_to_autoscheduler(auto_schedule)) return;
        if (get_target().has_gpu_feature()) {
            schedule_topk_gpu({values, ids, best, j, m}, k, r, scores.dim(0).extent());
            return;
        }
        schedule_topk_cpu({values, ids, best, j, m}, get_target());
    }

private:
    Var j{"j"}, m{"m"};
    Func best{"best"};
    RDom r;
};

}  // namespace

HALIDE_REGISTER_GENERATOR(TopK, topk)
