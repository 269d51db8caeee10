// adam: one fused optimizer step over a flat parameter vector (every tensor of
// the model in one buffer), in place: param, m and v are outputs aliased to
// the inputs of the same name.
//
//   param, grad, m, v  [P]
//   lr                 this step's learning rate (the schedule is the
//                      runtime's: d_model^-0.5·min(step^-0.5, step·warmup^-1.5))
//   beta1, beta2, eps  the paper's 0.9, 0.98, 1e-9
//   bias1, bias2       1 − β1^t and 1 − β2^t (bias corrections)
//   grad_scale         multiplies the gradient first: global-norm clipping
//                      (min(1, max_norm / (‖g‖ + 1e-6))), 1 otherwise
//   weight_decay       L2 as torch.optim.Adam: g += wd·param
//
// As torch.optim.Adam (1.13, the default non-amsgrad, non-maximize path):
//   g = grad_scale·grad + wd·param
//   m = β1·m + (1 − β1)·g;  v = β2·v + (1 − β2)·g²
//   param −= lr/bias1 · m / (√v/√bias2 + eps)
#include "Halide.h"
#include "common.h"
#include "../schedules/elementwise_schedule.h"

namespace {

using namespace Halide;
using namespace halformer;

class Adam : public Generator<Adam> {
public:
    GeneratorParam<std::string> tuned_as{"tuned_as", ""};

    Input<Buffer<float, 1>> param{"param"};
    Input<Buffer<float, 1>> grad{"grad"};
    Input<Buffer<float, 1>> m_in{"m"};
    Input<Buffer<float, 1>> v_in{"v"};
    Input<float> lr{"lr"};
    Input<float> beta1{"beta1"};
    Input<float> beta2{"beta2"};
    Input<float> eps{"eps"};
    Input<float> bias1{"bias1"};
    Input<float> bias2{"bias2"};
    Input<float> grad_scale{"grad_scale"};
    Input<float> weight_decay{"weight_decay"};
    // (param, m, v) as one Tuple-valued output: the kernel takes three output
    // buffers, and one loop computes all three per element, so each element's
    // old param, m and v are read before any of them is written (the
    // outputs alias the inputs).
    Output<Func> out{"out", {Float(32), Float(32), Float(32)}, 1};

    void generate() {
        /* THE ALGORITHM */
        Expr g = grad_scale * grad(i) + weight_decay * param(i);
        Expr m = beta1 * m_in(i) + (1.0f - beta1) * g;
        Expr v = beta2 * v_in(i) + (1.0f - beta2) * g * g;
        out(i) = {param(i) - lr / bias1 * m / (sqrt(v) / sqrt(bias2) + eps), m, v};

        /* ESTIMATES: the paper's base model, 63 M parameters */
        for (auto *b : {&param, &grad, &m_in, &v_in}) b->set_estimates({{0, 63000000}});
        lr.set_estimate(1e-3f);
        beta1.set_estimate(0.9f);
        beta2.set_estimate(0.98f);
        eps.set_estimate(1e-9f);
        bias1.set_estimate(0.1f);
        bias2.set_estimate(0.02f);
        grad_scale.set_estimate(1.0f);
        weight_decay.set_estimate(0.0f);
        out.set_estimates({{0, 63000000}});
    }

    void schedule() {
        if (leave_to_autoscheduler(auto_schedule)) return;
        Tuned rec(tuned_as, get_target());
        if (rec.apply_schedule(get_pipeline(), get_target())) return;
        schedule_elementwise_1d(out, i, get_target());
    }

private:
    Var i{"i"};
};

}  // namespace

HALIDE_REGISTER_GENERATOR(Adam, adam)
