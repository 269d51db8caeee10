// activation: out = act(z), elementwise (relu, gelu, gelu_tanh as in
// generators/common.h). Training keeps the FFN's pre-activation z for the
// backward pass (act'(z)) and makes the activation from it with this kernel.
//
//   z   [M, F]  Halide (f, m)
//   out [M, F]
#include "Halide.h"
#include "common.h"
#include "../schedules/elementwise_schedule.h"

namespace {

using namespace Halide;
using namespace halformer;

class ActivationOp : public Generator<ActivationOp> {
public:
    GeneratorParam<Activation> activation{"activation", Activation::ReLU, activation_names()};
    GeneratorParam<std::string> tuned_as{"tuned_as", ""};

    Input<Buffer<float, 2>> z{"z"};
    Output<Buffer<float, 2>> out{"out"};

    void generate() {
        /* THE ALGORITHM */
        out(f, m) = activate(z(f, m), activation);

        /* ESTIMATES: Transformer-base FFN hidden, 1024 tokens */
        z.set_estimates({{0, 2048}, {0, 1024}});
        out.set_estimates({{0, 2048}, {0, 1024}});
    }

    void schedule() {
        if (leave_to_autoscheduler(auto_schedule)) return;
        Tuned rec(tuned_as, get_target());
        if (rec.apply_schedule(get_pipeline(), get_target())) return;
        schedule_elementwise_2d(out, f, m, get_target());
    }

private:
    Var f{"f"}, m{"m"};
};

}  // namespace

HALIDE_REGISTER_GENERATOR(ActivationOp, activation)
