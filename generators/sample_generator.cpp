// sample: one token id per row, drawn from softmax(logits / temperature)
// after top-k and top-p cuts, with no sort, so that only the ids leave the
// kernels.
//
//   logits       [rows, V]   Halide (v, r)   dim 0 unit stride; dim 1 any stride
//   temperature  float       > 0
//   top_k        int32       0 or >= V: no top-k cut
//   top_p        float       in (0, 1]; 1: no top-p cut
//   u            [rows]      Halide (r)      one uniform draw in [0, 1) per row
//   ids          [rows]      Halide (r)      int32
//
// The rule, per row (a double-precision copy of it is tests/test_sample.cpp's
// reference):
//   weights      w_v = exp((logit_v − max) / temperature); a logit equal to
//                the row's max weighs exactly 1.
//   top-k        candidates: the logits >= the k-th best logit (every token
//                tied with the k-th best value is kept, so there may be more
//                than k).
//   top-p        among those, the smallest set of best values (again with
//                every tie at the cut) whose weight is at least top_p of the
//                candidates' total.
//   draw         the candidates ordered best first, ties lower id first; the
//                id is the first whose cumulative weight exceeds u · total.
//                (So with ties at the max, top_k = 1 or a tiny top_p draw
//                uniformly among the tied maxima, lowest id for u < 1/ties.)
// Hostile values, by rule:
//   NaN logits count as −inf. −inf logits weigh 0 and are never drawn; a row
//   with no logit above −inf returns id 0. +inf logits: the row's max; the
//   +inf tokens weigh 1 each, every other token 0.
//   temperature <= 0 or NaN is greedy (only the max logits weigh anything);
//   temperatures are clamped to [1e-30, 1e30]; weights under exp(-87) are 0.
//   top_k < 0 is no cut; top_p NaN is no cut, top_p <= 0 keeps the best value.
//   u is clamped into [0, 1) (NaN: 0); if u · total rounds up to the total,
//   the last candidate with a nonzero weight is drawn.
//
// How, without a sort: each cut is a bisection on the order-preserving int32
// image of the logits (key), 32 steps, each step one vectorizable reduction
// over the vocabulary:
//   top-k threshold tk = the largest t with count(key >= t) >= top_k
//   top-p threshold tp = the largest t >= tk with mass(key >= t) >= top_p · mass(key >= tk)
//   draw level L       = the largest t with mass(key >= t) > u · mass(key >= tp)
// then the draw among the tokens tied at L, in id order: masses of L's tokens
// per chunk of ids, a serial scan over the chunks, a serial scan inside the
// chosen one. Halide has no recursion between Funcs, so every step is its own
// Func, unrolled here; a cut that is off (top_k 0, top_p 1) gives its steps
// an empty reduction domain. The weights are computed once per row and read
// by every mass step.
//
// Numerics: Halide compiles floats with no-NaN / no-inf assumptions, so no
// inf or NaN ever enters float arithmetic or a float comparison: NaN and inf
// are recognised on the bits, masses and weights stay finite, and the
// temperature clamp keeps (logit − max) / temperature finite.
#include "Halide.h"
#include "common.h"
#include "../schedules/sample_schedule.h"

#include <limits>
#include <stdexcept>

namespace {

using namespace Halide;
using namespace halformer;

constexpr int32_t kNegInf = -0x7f800000;  // key of −inf (and of NaN)
constexpr int32_t kPosInf = 0x7f800000;   // key of +inf
constexpr int kChunk = 256;               // ids per chunk in the draw among ties

class Sample : public Generator<Sample> {
public:
    // The kernel name tuned records know this build by (set by the build; see
    // schedules/tuned.h). Empty: hand values only.
    GeneratorParam<std::string> tuned_as{"tuned_as", ""};
    // Each search step splits the remaining key range into 2^search_bits
    // parts (an algorithm choice: fewer passes over the row, more compares
    // per element; see schedules/sample_schedule.h for the measurements).
    GeneratorParam<int> search_bits{"search_bits", 2};
    // Hand schedule knobs (schedules/sample_schedule.h).
    GeneratorParam<int> vectors{"vectors", 0};          // CPU: partial-sum vectors per reduction (0: 4)
    GeneratorParam<int> gpu_threads{"gpu_threads", 0};  // GPU rows (threads) per block (0: 32)

    Input<Buffer<float, 2>> logits{"logits"};
    Input<float> temperature{"temperature"};
    Input<int32_t> top_k{"top_k"};
    Input<float> top_p{"top_p"};
    Input<Buffer<float, 1>> u{"u"};
    Output<Buffer<int32_t, 1>> ids{"ids"};

    void generate() {
        /* THE ALGORITHM */
        Expr V = logits.dim(0).extent();

        // Order-preserving int32 image of a float: −x ↦ −bits(x), so −0 and
        // +0 meet at 0; NaN becomes −inf.
        Expr bits = reinterpret<int32_t>(logits(v, r));
        Expr mag = bits & 0x7fffffff;
        key(v, r) = select(mag > 0x7f800000, kNegInf, select(bits < 0, -mag, bits));

        RDom rall(0, V, "rall");
        kmax(r) = kNegInf;
        kmax(r) = max(kmax(r), key(rall, r));
        kmin(r) = kPosInf;
        kmin(r) = min(kmin(r), key(rall, r));
        add_reduction(kmax, rall.x);
        add_reduction(kmin, rall.x);

        // Weights. The float of a finite key (±inf keys give 0: never used).
        auto finite_float = [&](Expr k) {
            Expr b = select(k == kNegInf || k == kPosInf, 0, select(k < 0, (-k) | int32_t(0x80000000), k));
            return reinterpret<float>(b);
        };
        Expr tbits = reinterpret<int32_t>(temperature);
        Expr greedy = tbits <= 0 || tbits > 0x7f800000;  // <= 0, −0 or NaN
        Expr t = clamp(reinterpret<float>(select(greedy, 0x3f800000, min(tbits, 0x7f7fffff))), 1e-30f, 1e30f);
        // (x − max) / t from halves, clamped at −100 before the division:
        // finite for any finite x, max and t.
        Expr half_diff = finite_float(key(v, r)) * 0.5f - finite_float(kmax(r)) * 0.5f;
        Expr d = max(half_diff, -50.0f * t) / (0.5f * t);
        Expr plain = !greedy && kmax(r) != kPosInf && key(v, r) != kNegInf && d > -87.0f;
        w(v, r) = select(key(v, r) == kmax(r), 1.0f, plain, exp(d), 0.0f);

        // Masses are summed in double: a row's float weights then add up
        // with an error far below their own rounding (~1e-7), whatever the
        // schedule's summation order. (Float sums of 37000 weights in the
        // serial order an autoscheduler may pick were off by 2-4e-5 of the
        // total: enough to draw the neighbouring candidate.)
        const Expr zero = cast<double>(0);

        // count(key >= t) or mass(key >= t) at each threshold t, over a
        // reduction domain: one Func of the row, one value per threshold.
        auto measure = [&](const std::string &name, const std::vector<Expr> &thr, RDom dom, bool count) {
            Func f(name);
            const int n = (int)thr.size();
            std::vector<Expr> init(n, count ? Expr(0) : zero), next;
            if (n == 1) {
                f(r) = init[0];
            } else {
                f(r) = Tuple(init);
            }
            for (int j = 0; j < n; j++) {
                Expr in = key(dom, r) >= thr[j];
                Expr add = count ? select(in, 1, 0) : select(in, cast<double>(w(dom, r)), zero);
                next.push_back((n == 1 ? Expr(f(r)) : Expr(f(r)[j])) + add);
            }
            if (n == 1) {
                f(r) = next[0];
            } else {
                f(r) = Tuple(next);
            }
            add_reduction(f, dom.x);
            return f;
        };
        auto value = [&](Func f, int j) { return f.outputs() == 1 ? Expr(f(r)) : Expr(f(r)[j]); };
        // The largest t in [lo, hi] for which pred(measure at t) holds
        // (given that it holds at lo and that pred is monotone): a search
        // that splits [lo, hi] into 2^bits parts per step (bits = 1: a
        // bisection), so ceil(32 / bits) steps, each one Func of the row
        // holding the step's 2^bits − 1 measures, one pass over the row.
        const int B = search_bits, parts = 1 << B, steps = (32 + B - 1) / B;
        if (B < 1 || B > 4) throw std::invalid_argument("sample: search_bits must be 1 to 4");
        auto search = [&](const std::string &name, Expr lo, Expr hi, RDom dom, bool count,
                          std::function<Expr(Expr)> pred) {
            Func st(name + "_0");
            st(r) = Tuple(lo, hi);
            scalars.push_back(st);
            for (int i = 0; i < steps; i++) {
                Expr l = st(r)[0], h = st(r)[1];
                Expr size = cast<int64_t>(h) - l + 1;
                std::vector<Expr> thr;
                for (int j = 1; j < parts; j++) thr.push_back(cast<int32_t>(cast<int64_t>(l) + ((size * j) >> B)));
                Func m = measure(name + "_m" + std::to_string(i), thr, dom, count);
                Expr nl = l, nh = h;
                for (int j = 0; j < parts - 1; j++) nl = select(pred(value(m, j)), thr[j], nl);
                for (int j = parts - 2; j >= 0; j--) nh = select(pred(value(m, j)), nh, thr[j] - 1);
                Func next(name + "_" + std::to_string(i + 1));
                next(r) = Tuple(nl, max(nh, nl));
                scalars.push_back(next);
                st = next;
            }
            return Expr(st(r)[0]);
        };
        auto mass_at_least = [&](const std::string &name, Expr thr, RDom dom) {
            return measure(name, {thr}, dom, false);
        };

        // Top-k: count(key >= t) >= k.
        Expr on_k = top_k > 0 && top_k < V;
        RDom rk(0, select(on_k, V, 0), "rk");
        // (Off, no step's test holds and the search stays at kmin. No select
        // on on_k alone around a Func: Mullapudi2016 fails on those.)
        tk(r) = search("topk", kmin(r), kmax(r), rk, true, [&](Expr c) { return on_k && c >= top_k; });
        scalars.push_back(tk);
        Func mass_k = mass_at_least("mass_k", tk(r), rall);

        // Top-p: mass(key >= t) >= p · mass_k.
        Expr pbits = reinterpret<int32_t>(top_p);
        Expr p = select((pbits & 0x7fffffff) > 0x7f800000, 1.0f, top_p);
        // (on_p reads top_p itself so that the autoschedulers, which need
        // the reduction domains' extents at the estimates, can fold it; a
        // NaN top_p is either off, or on with p = 1: the same candidates.)
        Expr on_p = top_p < 1.0f;
        RDom rp(0, select(on_p, V, 0), "rp");
        tp(r) = search("topp", tk(r), kmax(r), rp, false, [&](Expr m) { return on_p && m >= cast<double>(p) * mass_k(r); });
        scalars.push_back(tp);
        Func mass_p = mass_at_least("mass_p", tp(r), rall);
        total(r) = mass_p(r);
        scalars.push_back(total);

        // The lowest candidate key with a nonzero weight: where the draw's
        // level search starts (the max itself weighs 1).
        low(r) = kPosInf;
        low(r) = min(low(r), select(key(rall, r) >= tp(r) && w(rall, r) > 0.0f, key(rall, r), kPosInf));
        add_reduction(low, rall.x);

        // The draw level: mass(key >= t) > target.
        Expr ubits = reinterpret<int32_t>(u(r));
        Expr uc = reinterpret<float>(select(ubits <= 0 || ubits > 0x7f800000, 0, min(ubits, 0x3f7fffff)));
        target(r) = cast<double>(uc) * total(r);
        scalars.push_back(target);
        level(r) = search("level", low(r), kmax(r), rall, false, [&](Expr m) { return m > target(r); });
        scalars.push_back(level);
        // Mass strictly better than the level.
        above(r) = zero;
        above(r) += select(key(rall, r) > level(r), cast<double>(w(rall, r)), zero);
        add_reduction(above, rall.x);

        // Among the level's tokens, in id order: the mass of each chunk of
        // kChunk ids (clamped reads past V count nothing) ...
        Expr chunks = (V + kChunk - 1) / kChunk;
        RDom rj(0, kChunk, "rj");
        Expr cv = c * kChunk + rj;
        Expr cvc = clamp(cv, 0, V - 1);
        chunk_mass(c, r) = zero;
        chunk_mass(c, r) += select(cv < V && key(cvc, r) == level(r), cast<double>(w(cvc, r)), zero);
        chunk_rvar = rj.x;
        // ... the first chunk whose cumulative mass exceeds the target (else
        // the last with any: the target rounded up to the total) ...
        RDom rs(0, chunks, "rs");
        scan_rvar = rs.x;
        chunk_scan(r) = Tuple(above(r), -1, zero, -1, zero);  // cum, found, its cum, last, its cum
        {
            Expr cum = chunk_scan(r)[0], found = chunk_scan(r)[1];
            Expr m = chunk_mass(rs, r);
            Expr hit = found < 0 && cum + m > target(r);
            chunk_scan(r) = Tuple(cum + m, select(hit, rs, found), select(hit, cum, chunk_scan(r)[2]),
                                  select(m > zero, rs, chunk_scan(r)[3]),
                                  select(m > zero, cum, chunk_scan(r)[4]));
        }
        Expr hit_chunk = chunk_scan(r)[1] >= 0;
        Expr cstar = select(hit_chunk, chunk_scan(r)[1], chunk_scan(r)[3]);
        Expr cum0 = select(hit_chunk, chunk_scan(r)[2], chunk_scan(r)[4]);
        // ... and the first id inside it (else its last id of the level).
        RDom ri(0, kChunk, "ri");
        Expr iv = cstar * kChunk + ri;
        Expr ivc = clamp(iv, 0, V - 1);
        pick(r) = Tuple(cum0, -1, -1);  // cum, found, last
        {
            Expr tied = iv < V && key(ivc, r) == level(r);
            Expr wv = select(tied, cast<double>(w(ivc, r)), zero);
            Expr hit = pick(r)[1] < 0 && tied && pick(r)[0] + wv > target(r);
            pick(r) = Tuple(pick(r)[0] + wv, select(hit, iv, pick(r)[1]), select(tied, iv, pick(r)[2]));
        }
        Expr drawn = select(pick(r)[1] >= 0, pick(r)[1], pick(r)[2]);
        ids(r) = select(kmax(r) == kNegInf, 0, drawn);

        /* ESTIMATES: a decode step of 8 rows over 37000 words */
        logits.set_estimates({{0, 37000}, {0, 8}});
        temperature.set_estimate(0.8f);
        top_k.set_estimate(50);
        top_p.set_estimate(0.9f);
        u.set_estimates({{0, 8}});
        ids.set_estimates({{0, 8}});
    }

    void schedule() {
        if (leave_to_autoscheduler(auto_schedule)) return;
        Tuned rec(tuned_as, get_target());
        if (rec.apply_schedule(get_pipeline(), get_target())) return;
        SampleStages s{ids, key, w, reductions, reduction_rvars, scalars, chunk_mass, chunk_rvar,
                       chunk_scan, scan_rvar, pick, v, r, c};
        if (get_target().has_gpu_feature()) {
            schedule_sample_gpu(s, rec.get("gpu_threads", gpu_threads));
            return;
        }
        schedule_sample_cpu(s, {rec.get("vectors", vectors)}, get_target());
    }

private:
    void add_reduction(Func f, RVar rv) {
        reductions.push_back(f);
        reduction_rvars.push_back(rv);
    }

    Var v{"v"}, r{"r"}, c{"c"};
    Func key{"key"}, w{"w"}, kmax{"kmax"}, kmin{"kmin"}, tk{"tk"}, tp{"tp"}, total{"total"};
    Func low{"low"}, target{"target"}, level{"level"}, above{"above"};
    Func chunk_mass{"chunk_mass"}, chunk_scan{"chunk_scan"}, pick{"pick"};
    RVar chunk_rvar, scan_rvar;
    std::vector<Func> reductions, scalars;
    std::vector<RVar> reduction_rvars;
};

}  // namespace

HALIDE_REGISTER_GENERATOR(Sample, sample)
