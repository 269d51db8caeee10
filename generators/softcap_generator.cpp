// softcap: y = cap · tanh(x / cap), Gemma 2's final-logit soft-capping (its
// attention's cap is a parameter of the attention kernels: soft_cap=true)
//
//   x    [R, N]   Halide (n, r)   logits, any row stride
//   cap  scalar   > 0 (an error otherwise)
//   y    [R, N]   Halide (n, r)   (may be x itself: elementwise)
#include "Halide.h"
#include "common.h"
#include "../schedules/elementwise_schedule.h"

namespace {

using namespace Halide;
using namespace halformer;

class SoftCap : public Generator<SoftCap> {
public:
    GeneratorParam<std::string> tuned_as{"tuned_as", ""};

    Input<Buffer<float, 2>> x{"x"};
    Input<float> cap{"cap"};
    Output<Buffer<float, 2>> y{"y"};

    void generate() {
        /* THE ALGORITHM */
        y(n, r) = cap * tanh_via_exp(x(n, r) / cap);
        add_requirement(cap > 0.0f, "softcap: the cap is", cap, "(it must be positive)");

        /* ESTIMATES: 4 rows of a 256000-token vocabulary */
        x.set_estimates({{0, 256000}, {0, 4}});
        cap.set_estimate(30.0f);
        y.set_estimates({{0, 256000}, {0, 4}});
    }

    void schedule() {
        if (leave_to_autoscheduler(auto_schedule)) return;
        schedule_elementwise_2d(y, n, r, get_target());
    }

private:
    Var n{"n"}, r{"r"};
};

}  // namespace

HALIDE_REGISTER_GENERATOR(SoftCap, softcap)
