// sum_squares: Σ x², in double precision — the global gradient norm for
// clipping (‖g‖ = √Σ g² over every parameter's gradient, one flat buffer).
//
//   x    [P]
//   out  0-D float64
//
// Accumulated in float64: 63 M squares in float32 would lose ~1e-4 of the
// sum, enough to move the clipping factor visibly against PyTorch's.
#include "Halide.h"
#include "common.h"
#include "../schedules/elementwise_schedule.h"

namespace {

using namespace Halide;
using namespace halformer;

class SumSquares : public Generator<SumSquares> {
public:
    GeneratorParam<int> chunk{"chunk", 4096};
    GeneratorParam<std::string> tuned_as{"tuned_as", ""};

    Input<Buffer<float, 1>> x{"x"};
    Output<Buffer<double, 0>> out{"out"};

    void generate() {
        /* THE ALGORITHM: per chunk partial sums, then their sum */
        Expr P = x.dim(0).extent();
        const int C = chunk;
        RDom rc(0, C, "rc");
        Expr idx = c * C + rc;
        partial(c) = cast<double>(0);
        partial(c) += select(idx < P, cast<double>(x(min(idx, P - 1))) * cast<double>(x(min(idx, P - 1))), Expr(0.0));
        RDom rp(0, (P + C - 1) / C, "rp");
        out() = cast<double>(0);
        out() += partial(rp);

        /* ESTIMATES: the paper's base model */
        x.set_estimates({{0, 63000000}});
    }

    void schedule() {
        if (leave_to_autoscheduler(auto_schedule)) return;
        Tuned rec(tuned_as, get_target());
        if (rec.apply_schedule(get_pipeline(), get_target())) return;
        schedule_chunked_sum(out, partial, c, get_target());
    }

private:
    Var c{"c"};
    Func partial{"partial"};
};

}  // namespace

HALIDE_REGISTER_GENERATOR(SumSquares, sum_squares)
