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
    GeneratorParam<int> chunk{"chunk", 512};  // scores per first-stage list

    Input<Buffer<float, 2>> scores{"scores"};
    Output<Buffer<float, 2>> values{"values"};
    Output<Buffer<int32_t, 2>> ids{"ids"};

    void generate() {
        /* THE ALGORITHM */
        // Two stages: the k best of each chunk of `chunk` scores, then the k
        // best of those candidates. Candidates are merged in increasing id
        // order (chunk by chunk, each chunk's list best first with equal
        // values in id order), so the tie rule holds across chunks too.
        const int K = k, C = chunk;
        Expr N = scores.dim(0).extent();
        Expr chunks = (N + C - 1) / C;
        const Expr neg_inf = Expr(-std::numeric_limits<float>::infinity());
        std::vector<Expr> init;
        for (int e = 0; e < K; e++) init.push_back(neg_inf);
        for (int e = 0; e < K; e++) init.push_back(-1);
        // Inserts (x, id) into the sorted list held by f(args): only a
        // strictly larger score displaces an entry (-inf never enters).
        auto insert = [&](Func f, std::vector<Expr> args, Expr x, Expr id) {
            std::vector<Expr> vals(K), idx(K), next(2 * K);
            for (int e = 0; e < K; e++) {
                vals[e] = f(args)[e];
                idx[e] = f(args)[K + e];
            }
            for (int e = 0; e < K; e++) {
                Expr above = x > vals[e];
                if (e == 0) {
                    next[e] = select(above, x, vals[e]);
                    next[K + e] = select(above, id, idx[e]);
                } else {
                    Expr above_prev = x > vals[e - 1];
                    next[e] = select(above_prev, vals[e - 1], select(above, x, vals[e]));
                    next[K + e] = select(above_prev, idx[e - 1], select(above, id, idx[e]));
                }
            }
            f(args) = Tuple(next);
        };
        RDom r(0, C, "r");
        Expr n = c * C + r;
        part(c, m) = Tuple(init);
        // NaN becomes -inf before any comparison: Halide compiles without
        // strict floats, so a comparison with NaN is not guaranteed false
        // (is_nan is always evaluated strictly).
        Expr x = scores(min(n, N - 1), m);
        insert(part, {c, m}, select(n < N && !is_nan(x), x, neg_inf), n);
        RDom rc(0, K, 0, chunks, "rc");
        best(m) = Tuple(init);
        std::vector<Expr> pv, pi;
        for (int e = 0; e < K; e++) {
            pv.push_back(part(rc.y, m)[e]);
            pi.push_back(part(rc.y, m)[K + e]);
        }
        insert(best, {m}, K == 1 ? pv[0] : mux(rc.x, pv), K == 1 ? pi[0] : mux(rc.x, pi));

        std::vector<Expr> vs, is;
        for (int e = 0; e < K; e++) {
            vs.push_back(best(m)[e]);
            is.push_back(best(m)[K + e]);
        }
        values(j, m) = mux(j, vs);
        ids(j, m) = mux(j, is);

        /* ESTIMATES: 32 sentences × beam 4 over 37000 words */
        scores.set_estimates({{0, 37000}, {0, 128}});
        values.set_estimates({{0, K}, {0, 128}});
        ids.set_estimates({{0, K}, {0, 128}});
    }

    void schedule() {
        if (auto_schedule) return;
        schedule_topk_cpu({values, ids, best, part, j, m, c}, get_target());
    }

private:
    Var j{"j"}, m{"m"}, c{"c"};
    Func best{"best"}, part{"part"};
};

}  // namespace

HALIDE_REGISTER_GENERATOR(TopK, topk)
