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
    GeneratorParam<int> gpu_threads{"gpu_threads", 0};  // GPU: lanes (threads) a row (0: 256)

    Input<Buffer<float, 2>> logits{"logits"};
    Input<float> temperature{"temperature"};
    Input<int32_t> top_k{"top_k"};
    Input<float> top_p{"top_p"};
    Input<Buffer<float, 1>> u{"u"};
    Output<Buffer<int32_t, 1>> ids{"ids"};

    void generate() {
        /* THE ALGORITHM */
        Expr V = logits.dim(0).extent();
        // Every reduction over the row is split into L lanes: lane t takes
        // ids t, t + L, t + 2L, ... in order, and every value computed from
        // the reductions (thresholds, search states, the draw) is a Func of
        // (t, r), one copy per lane, each copy folding all L parts in lane
        // order. So lane t never waits for another lane's scalar: on a GPU a
        // row is a block of L threads, each stage a loop over t (a block
        // whose per-row scalars ran on one thread put its barriers inside
        // them in Halide 14). On a CPU L = 1: one lane, the plain reduction,
        // and the schedule splits it into vectors itself.
        const int L = lanes();

        // Order-preserving int32 image of a float: −x ↦ −bits(x), so −0 and
        // +0 meet at 0; NaN becomes −inf.
        Expr bits = reinterpret<int32_t>(logits(v, r));
        Expr mag = bits & 0x7fffffff;
        key(v, r) = select(mag > 0x7f800000, kNegInf, select(bits < 0, -mag, bits));

        Func kmax = reduce("kmax", Expr(true), {Expr(kNegInf)}, {Op::Max}, [&](Expr e) { return std::vector<Expr>{key(e, r)}; });
        end_phase(kmax);
        Func kmin = reduce("kmin", Expr(true), {Expr(kPosInf)}, {Op::Min}, [&](Expr e) { return std::vector<Expr>{key(e, r)}; });
        Expr kmax_t = kmax(t, r);

        // Weights. The float of a finite key (±inf keys give 0: never used).
        auto finite_float = [&](Expr k) {
            Expr b = select(k == kNegInf || k == kPosInf, 0, select(k < 0, (-k) | int32_t(0x80000000), k));
            return reinterpret<float>(b);
        };
        Expr tbits = reinterpret<int32_t>(temperature);
        Expr greedy = tbits <= 0 || tbits > 0x7f800000;  // <= 0, −0 or NaN
        Expr temp = clamp(reinterpret<float>(select(greedy, 0x3f800000, min(tbits, 0x7f7fffff))), 1e-30f, 1e30f);
        // (x − max) / t from halves, clamped at −100 before the division:
        // finite for any finite x, max and t.
        Expr half_diff = finite_float(key(v, r)) * 0.5f - finite_float(kmax_t) * 0.5f;
        Expr d = max(half_diff, -50.0f * temp) / (0.5f * temp);
        Expr plain = !greedy && kmax_t != kPosInf && key(v, r) != kNegInf && d > -87.0f;
        w(v, t, r) = select(key(v, r) == kmax_t, 1.0f, plain, exp(d), 0.0f);

        // Masses are summed in double: a row's float weights then add up
        // with an error far below their own rounding (~1e-7), whatever the
        // schedule's summation order. (Float sums of 37000 weights in the
        // serial order an autoscheduler may pick were off by 2-4e-5 of the
        // total: enough to draw the neighbouring candidate.)
        const Expr zero = cast<double>(0);

        // count(key >= t) or mass(key >= t) at each threshold, over the row
        // (none when `on` is false): one Func, one value per threshold.
        auto measure = [&](const std::string &name, const std::vector<Expr> &thr, Expr on, bool count) {
            std::vector<Expr> init(thr.size(), count ? Expr(0) : zero);
            return reduce(name, on, init, std::vector<Op>(thr.size(), Op::Add), [&](Expr e) {
                std::vector<Expr> terms;
                for (const Expr &x : thr) {
                    Expr in = key(e, r) >= x;
                    terms.push_back(count ? select(in, 1, 0) : select(in, cast<double>(w(e, t, r)), zero));
                }
                return terms;
            });
        };
        // The largest t in [lo, hi] for which pred(measure at t) holds
        // (given that it holds at lo and that pred is monotone): a search
        // that splits [lo, hi] into 2^bits parts per step (bits = 1: a
        // bisection), so ceil(32 / bits) steps, each one Func of the row
        // holding the step's 2^bits − 1 measures, one pass over the row.
        const int B = search_bits, parts = 1 << B, steps = (32 + B - 1) / B;
        if (B < 1 || B > 4) throw std::invalid_argument("sample: search_bits must be 1 to 4");
        auto search = [&](const std::string &name, Expr lo, Expr hi, Expr on, bool count,
                          std::function<Expr(Expr)> pred) {
            Func st(name + "_0");
            st(t, r) = Tuple(lo, hi);
            scalar(st);
            for (int i = 0; i < steps; i++) {
                Expr l = st(t, r)[0], h = st(t, r)[1];
                Expr size = cast<int64_t>(h) - l + 1;
                std::vector<Expr> thr;
                for (int j = 1; j < parts; j++) thr.push_back(cast<int32_t>(cast<int64_t>(l) + ((size * j) >> B)));
                Func m = measure(name + "_m" + std::to_string(i), thr, on, count);
                Expr nl = l, nh = h;
                for (int j = 0; j < parts - 1; j++) nl = select(pred(value(m, j, parts - 1)), thr[j], nl);
                for (int j = parts - 2; j >= 0; j--) nh = select(pred(value(m, j, parts - 1)), nh, thr[j] - 1);
                Func next(name + "_" + std::to_string(i + 1));
                next(t, r) = Tuple(nl, max(nh, nl));
                scalar(next);
                st = next;
            }
            return Expr(st(t, r)[0]);
        };

        // Top-k: count(key >= t) >= k.
        Expr on_k = top_k > 0 && top_k < V;
        // (Off, no step's test holds and the search stays at kmin. No select
        // on on_k alone around a Func: Mullapudi2016 fails on those.)
        tk(t, r) = search("topk", kmin(t, r), kmax_t, on_k, true, [&](Expr c) { return on_k && c >= top_k; });
        scalar(tk);
        end_phase(tk);
        Func mass_k = measure("mass_k", {tk(t, r)}, Expr(true), false);

        // Top-p: mass(key >= t) >= p · mass_k.
        Expr pbits = reinterpret<int32_t>(top_p);
        Expr p = select((pbits & 0x7fffffff) > 0x7f800000, 1.0f, top_p);
        // (on_p reads top_p itself so that the autoschedulers, which need
        // the reduction domains' extents at the estimates, can fold it; a
        // NaN top_p is either off, or on with p = 1: the same candidates.)
        Expr on_p = top_p < 1.0f;
        tp(t, r) = search("topp", tk(t, r), kmax_t, on_p, false,
                          [&](Expr m) { return on_p && m >= cast<double>(p) * mass_k(t, r); });
        scalar(tp);
        end_phase(tp);
        Func mass_p = measure("mass_p", {tp(t, r)}, Expr(true), false);
        total(t, r) = mass_p(t, r);
        scalar(total);

        // The draw's target: u of the candidates' mass.
        Expr ubits = reinterpret<int32_t>(u(r));
        Expr uc = reinterpret<float>(select(ubits <= 0 || ubits > 0x7f800000, 0, min(ubits, 0x3f7fffff)));
        target(t, r) = cast<double>(uc) * total(t, r);
        scalar(target);
        end_phase(target);

        // The lowest candidate key with a nonzero weight: where the draw's
        // level search starts (the max itself weighs 1).
        Func low = reduce("low", Expr(true), {Expr(kPosInf)}, {Op::Min}, [&](Expr e) {
            return std::vector<Expr>{select(key(e, r) >= tp(t, r) && w(e, t, r) > 0.0f, key(e, r), kPosInf)};
        });
        // The draw level: mass(key >= t) > target.
        level(t, r) = search("level", low(t, r), kmax_t, Expr(true), false, [&](Expr m) { return m > target(t, r); });
        scalar(level);
        end_phase(level);

        // Mass strictly better than the level.
        Func above = reduce("above", Expr(true), {zero}, {Op::Add}, [&](Expr e) {
            return std::vector<Expr>{select(key(e, r) > level(t, r), cast<double>(w(e, t, r)), zero)};
        });

        // Among the level's tokens, in id order: the mass of each chunk of
        // kChunk ids (clamped reads past V count nothing), lane t taking
        // chunks t, t + L, ... (chunk_mass(t, c, r): chunk c·L + t) ...
        Expr chunks = (V + kChunk - 1) / kChunk;
        RDom rj(0, kChunk, "rj");
        Expr cv = (c * L + t) * kChunk + rj;
        Expr cvc = clamp(cv, 0, V - 1);
        chunk_mass(t, c, r) = zero;
        chunk_mass(t, c, r) += select(cv < V && key(cvc, r) == level(t, r), cast<double>(w(cvc, t, r)), zero);
        stage(chunk_mass);
        chunk_rvar = rj.x;
        // ... the first chunk whose cumulative mass exceeds the target (else
        // the last with any: the target rounded up to the total) ...
        RDom rs(0, chunks, "rs");
        scan_rvar = rs.x;
        chunk_scan(t, r) = Tuple(above(t, r), -1, zero, -1, zero);  // cum, found, its cum, last, its cum
        {
            Expr cum = chunk_scan(t, r)[0], found = chunk_scan(t, r)[1];
            Expr m = chunk_mass(rs % L, rs / L, r);
            Expr hit = found < 0 && cum + m > target(t, r);
            chunk_scan(t, r) = Tuple(cum + m, select(hit, rs, found), select(hit, cum, chunk_scan(t, r)[2]),
                                     select(m > zero, rs, chunk_scan(t, r)[3]),
                                     select(m > zero, cum, chunk_scan(t, r)[4]));
        }
        stage(chunk_scan);
        Expr hit_chunk = chunk_scan(t, r)[1] >= 0;
        Expr cstar = select(hit_chunk, chunk_scan(t, r)[1], chunk_scan(t, r)[3]);
        Expr cum0 = select(hit_chunk, chunk_scan(t, r)[2], chunk_scan(t, r)[4]);
        // ... and the first id inside it (else its last id of the level).
        RDom ri(0, kChunk, "ri");
        Expr iv = cstar * kChunk + ri;
        Expr ivc = clamp(iv, 0, V - 1);
        pick(t, r) = Tuple(cum0, -1, -1);  // cum, found, last
        {
            Expr tied = iv < V && key(ivc, r) == level(t, r);
            Expr wv = select(tied, cast<double>(w(ivc, t, r)), zero);
            Expr hit = pick(t, r)[1] < 0 && tied && pick(t, r)[0] + wv > target(t, r);
            pick(t, r) = Tuple(pick(t, r)[0] + wv, select(hit, iv, pick(t, r)[1]), select(tied, iv, pick(t, r)[2]));
        }
        stage(pick);
        Expr drawn = select(pick(t, r)[1] >= 0, pick(t, r)[1], pick(t, r)[2]);
        result(t, r) = select(kmax_t == kNegInf, 0, drawn);
        scalar(result);
        ids(r) = result(0, r);

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
                       chunk_scan, scan_rvar, pick, phases, phase_roots, v, t, r, c};
        if (get_target().has_gpu_feature()) {
            schedule_sample_gpu(s);
            return;
        }
        schedule_sample_cpu(s, {rec.get("vectors", vectors)}, get_target());
    }

private:
    enum class Op { Add, Max, Min };

    int lanes() {
        if (!get_target().has_gpu_feature()) return 1;
        return or_default(Tuned(tuned_as, get_target()).get("gpu_threads", gpu_threads), 256);
    }

    // Value j of a Func of n values, at lane t.
    Expr value(Func f, int j, int n) { return n == 1 ? Expr(f(t, r)) : Expr(f(t, r)[j]); }
    void define(Func f, const std::vector<Expr> &values) {
        if (values.size() == 1) {
            f(t, r) = values[0];
        } else {
            f(t, r) = Tuple(values);
        }
    }
    static Expr combine(Op op, Expr a, Expr b) { return op == Op::Add ? a + b : op == Op::Max ? max(a, b) : min(a, b); }

    // A reduction over the row's ids (none when `on` is false), `term` the
    // values one id adds: lane t's part over ids t, t + L, ..., then (L > 1)
    // each lane's copy of every lane's parts, folded in lane order.
    Func reduce(const std::string &name, Expr on, const std::vector<Expr> &init, const std::vector<Op> &ops,
                std::function<std::vector<Expr>(Expr)> term) {
        const int L = lanes(), n = (int)init.size();
        Expr V = logits.dim(0).extent();
        RDom dom(0, select(on, (V + (L - 1)) / L, 0), name + "_r");
        Expr e = L == 1 ? t + dom.x : t + L * dom.x;
        std::vector<Expr> terms = term(L == 1 ? e : min(e, V - 1)), next;
        Func part(L == 1 ? name : name + "_part");
        define(part, init);
        for (int j = 0; j < n; j++) {
            Expr x = L == 1 ? terms[j] : select(e < V, terms[j], init[j]);
            next.push_back(combine(ops[j], value(part, j, n), x));
        }
        define(part, next);
        reductions.push_back(part);
        reduction_rvars.push_back(dom.x);
        stage(part);
        if (L == 1) return part;
        Func fold(name);
        RDom lane(0, L, name + "_lane");
        define(fold, init);
        next.clear();
        for (int j = 0; j < n; j++) {
            Expr x = n == 1 ? Expr(part(lane.x, r)) : Expr(part(lane.x, r)[j]);
            next.push_back(combine(ops[j], value(fold, j, n), x));
        }
        define(fold, next);
        stage(fold);
        return fold;
    }

    // The stages in the algorithm's phases: the row's max; the top-k
    // threshold; the top-p threshold; the draw's target; its level; the
    // draw. Each phase but the last ends in the value later phases read
    // (phase_roots): a schedule may run each phase as a kernel of its own.
    void stage(Func f) { phases.back().push_back(f); }
    void scalar(Func f) {
        scalars.push_back(f);
        stage(f);
    }
    void end_phase(Func root) {
        phase_roots.push_back(root);
        phases.emplace_back();
    }

    Var v{"v"}, t{"t"}, r{"r"}, c{"c"};
    Func key{"key"}, w{"w"}, tk{"tk"}, tp{"tp"}, total{"total"};
    Func target{"target"}, level{"level"}, result{"result"};
    Func chunk_mass{"chunk_mass"}, chunk_scan{"chunk_scan"}, pick{"pick"};
    RVar chunk_rvar, scan_rvar;
    std::vector<Func> reductions, scalars, phase_roots;
    std::vector<std::vector<Func>> phases{1};
    std::vector<RVar> reduction_rvars;
};

}  // namespace

HALIDE_REGISTER_GENERATOR(Sample, sample)
