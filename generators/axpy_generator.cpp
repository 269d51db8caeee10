// axpy: y = a·y_in + b·x over a flat vector (y may alias y_in). The
// trainer's vector arithmetic: zeroing gradients (a = b = 0 writes zeros,
// whatever y held, NaN included), scaling, and averaging checkpoints
// (y = y + x/k).
//
//   y_in, x  [P]
//   a, b     scalars; a = 0 (b = 0) drops y_in (x) entirely, not 0·value
//   y        [P]
#include "Halide.h"
#include "common.h"
#include "../schedules/elementwise_schedule.h"

namespace {

using namespace Halide;
using namespace halformer;

class Axpy : public Generator<Axpy> {
public:
    GeneratorParam<std::string> tuned_as{"tuned_as", ""};

    Input<Buffer<float, 1>> y_in{"y_in"};
    Input<Buffer<float, 1>> x{"x"};
    Input<float> a{"a"};
    Input<float> b{"b"};
    Output<Buffer<float, 1>> y{"y"};

    void generate() {
        /* THE ALGORITHM */
        y(i) = select(a == 0.0f, 0.0f, a * y_in(i)) + select(b == 0.0f, 0.0f, b * x(i));

        /* ESTIMATES */
        y_in.set_estimates({{0, 63000000}});
        x.set_estimates({{0, 63000000}});
        a.set_estimate(1.0f);
        b.set_estimate(1.0f);
        y.set_estimates({{0, 63000000}});
    }

    void schedule() {
        if (leave_to_autoscheduler(auto_schedule)) return;
        Tuned rec(tuned_as, get_target());
        if (rec.apply_schedule(get_pipeline(), get_target())) return;
        schedule_elementwise_1d(y, i, get_target());
    }

private:
    Var i{"i"};
};

}  // namespace

HALIDE_REGISTER_GENERATOR(Axpy, axpy)
