// pool: one vector per sequence from a stack's time-major output, for
// sentence embeddings (BERT: the first token's row, [CLS], or the mean of
// the valid rows), optionally scaled to unit L2 norm.
//
//   x     [T, R, D]   Halide (d, r, t)   row m = t·R + r (the runtime's
//                                        time-major activations); any strides
//   lens  [R] int32   Halide (r)         valid positions of each sequence
//   out   [R, D]      Halide (d, r)
//
//   mode=first  out[r] = x[0, r]
//   mode=mean   out[r] = Σ_{t < lens[r]} x[t, r] / lens[r]   (summed in double)
//   normalize   out[r] /= max(‖out[r]‖₂, 1e-12)   (torch.nn.functional.normalize)
//
// A length outside [1, T] is an error returned to the caller (nonzero);
// nothing past T is read.
#include "Halide.h"
#include "common.h"
#include "../schedules/pool_schedule.h"

namespace {

using namespace Halide;
using namespace halformer;

enum class Mode { First, Mean };

class Pool : public Generator<Pool> {
public:
    GeneratorParam<Mode> mode{"mode", Mode::Mean, {{"first", Mode::First}, {"mean", Mode::Mean}}};
    GeneratorParam<bool> normalize{"normalize", false};
    GeneratorParam<std::string> tuned_as{"tuned_as", ""};

    Input<Buffer<float, 3>> x{"x"};
    Input<Buffer<int32_t, 1>> lens{"lens"};
    Output<Buffer<float, 2>> out{"out"};

    void generate() {
        /* THE ALGORITHM */
        Expr D = x.dim(0).extent(), T = x.dim(2).extent();
        Expr n = lens(r);
        len(r) = require(n >= 1 && n <= T, n, "sequence length", n, "is outside [1,", T, "]");
        if (mode == Mode::First) {
            // (Through len: a bad length is refused in this mode too.)
            pooled(d, r) = select(len(r) >= 1, cast<double>(x(d, r, 0)), cast<double>(0));
        } else {
            RDom rt(0, T, "rt");
            sum(d, r) = cast<double>(0);
            sum(d, r) += select(rt < len(r), cast<double>(x(d, r, rt)), cast<double>(0));
            sum_rvar = rt.x;
            pooled(d, r) = sum(d, r) / cast<double>(len(r));
        }
        if (normalize) {
            RDom rd(0, D, "rd");
            sq(r) = cast<double>(0);
            sq(r) += pooled(rd, r) * pooled(rd, r);
            sq_rvar = rd.x;
            out(d, r) = cast<float>(pooled(d, r) / max(sqrt(sq(r)), Expr(1e-12)));
        } else {
            out(d, r) = cast<float>(pooled(d, r));
        }

        /* ESTIMATES: 8 sequences of 128 tokens of a BERT-base encoder */
        x.set_estimates({{0, 768}, {0, 8}, {0, 128}});
        lens.set_estimates({{0, 8}});
        out.set_estimates({{0, 768}, {0, 8}});
    }

    void schedule() {
        if (leave_to_autoscheduler(auto_schedule)) return;
        Tuned rec(tuned_as, get_target());
        if (rec.apply_schedule(get_pipeline(), get_target())) return;
        PoolStages s{out, len, pooled, sum, sum_rvar, sq, sq_rvar, mode == Mode::Mean, normalize, d, r};
        if (get_target().has_gpu_feature()) {
            schedule_pool_gpu(s);
            return;
        }
        schedule_pool_cpu(s, get_target());
    }

private:
    Var d{"d"}, r{"r"};
    Func len{"len"}, pooled{"pooled"}, sum{"sum"}, sq{"sq"};
    RVar sum_rvar, sq_rvar;
};

}  // namespace

HALIDE_REGISTER_GENERATOR(Pool, pool)
