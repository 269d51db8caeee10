// layer_norm_backward: gradients of y = γ·(h − μ)/√(σ² + ε) + β with
// h = x [+ residual] (generators/layer_norm_generator.cpp).
//
//   x, residual [R, D]  Halide (d, r)  the forward's inputs (residual only
//                                      with residual=true)
//   gamma [D], eps                     as the forward
//   dy    [R, D]                       gradient of y
//   dx_in [R, D]                       only with accumulate=true: the result
//                                      is added to it (aliased to dx: pre-LN's
//                                      x + Sublayer(LN(x)) sums two paths)
//   dgamma_in, dbeta_in [D]            the gradients so far (aliased outputs)
//   dx    [R, D]                       gradient of h (= of x and of residual)
//   dgamma, dbeta [D]                  dgamma_in + Σ_r dy·x̂, dbeta_in + Σ_r dy
//
// With x̂ = (h − μ)·rstd and g = dy·γ:
//   dh = rstd·(g − mean_d(g) − x̂·mean_d(g·x̂))
// μ and σ² are recomputed with the forward's corrected two-pass algorithm,
// so x̂ is the one the forward normalised with.
#include "Halide.h"
#include "common.h"
#include "../schedules/layer_norm_backward_schedule.h"

namespace {

using namespace Halide;
using namespace halformer;

class LayerNormBackward : public Generator<LayerNormBackward> {
public:
    GeneratorParam<bool> residual_add{"residual", false};
    GeneratorParam<bool> accumulate{"accumulate", false};
    GeneratorParam<int> rows_per_task{"rows_per_task", 4};
    GeneratorParam<int> gpu_threads{"gpu_threads", 0};
    GeneratorParam<std::string> tuned_as{"tuned_as", ""};

    Input<Buffer<float, 2>> x{"x"};
    Input<Buffer<float, 1>> gamma{"gamma"};
    Input<float> eps{"eps"};
    Input<Buffer<float, 2>> dy{"dy"};
    Input<Buffer<float, 1>> dgamma_in{"dgamma_in"};
    Input<Buffer<float, 1>> dbeta_in{"dbeta_in"};
    Input<Buffer<float, 2>> *residual = nullptr, *dx_in = nullptr;
    Output<Buffer<float, 2>> dx{"dx"};
    Output<Buffer<float, 1>> dgamma{"dgamma"};
    Output<Buffer<float, 1>> dbeta{"dbeta"};

    void configure() {
        if (residual_add) residual = add_input<Buffer<float, 2>>("residual");
        if (accumulate) dx_in = add_input<Buffer<float, 2>>("dx_in");
    }

    void generate() {
        /* THE ALGORITHM */
        Expr D = x.dim(0).extent(), R = x.dim(1).extent();
        Expr fD = cast<float>(D);
        Expr hv = x(d, r);
        if (residual_add) hv += (*residual)(d, r);
        h(d, r) = hv;
        k = RDom(0, D, "k");
        sum(r) = 0.0f;
        sum(r) += h(k, r);
        Expr mean0 = sum(r) / fD;
        dev(r) = 0.0f;
        dev(r) += h(k, r) - mean0;
        sq(r) = 0.0f;
        sq(r) += (h(k, r) - mean0) * (h(k, r) - mean0);
        Expr shift = dev(r) / fD;
        Expr var = max(sq(r) / fD - shift * shift, 0.0f);
        stats(r) = {mean0 + shift, 1.0f / sqrt(var + eps)};
        xhat(d, r) = (h(d, r) - stats(r)[0]) * stats(r)[1];
        g(d, r) = dy(d, r) * gamma(d);
        sum_g(r) = 0.0f;
        sum_g(r) += g(k, r);
        sum_gx(r) = 0.0f;
        sum_gx(r) += g(k, r) * xhat(k, r);
        Expr v = stats(r)[1] * (g(d, r) - sum_g(r) / fD - xhat(d, r) * sum_gx(r) / fD);
        if (accumulate) v += (*dx_in)(d, r);
        dx(d, r) = v;

        rr = RDom(0, R, "rr");
        gsum(d) = 0.0f;
        gsum(d) += dy(d, rr) * xhat(d, rr);
        bsum(d) = 0.0f;
        bsum(d) += dy(d, rr);
        dgamma(d) = dgamma_in(d) + gsum(d);
        dbeta(d) = dbeta_in(d) + bsum(d);

        /* ESTIMATES: Transformer-base, 1024 tokens */
        x.set_estimates({{0, 512}, {0, 1024}});
        dy.set_estimates({{0, 512}, {0, 1024}});
        if (residual) residual->set_estimates({{0, 512}, {0, 1024}});
        if (dx_in) dx_in->set_estimates({{0, 512}, {0, 1024}});
        gamma.set_estimates({{0, 512}});
        dgamma_in.set_estimates({{0, 512}});
        dbeta_in.set_estimates({{0, 512}});
        eps.set_estimate(1e-5f);
        dx.set_estimates({{0, 512}, {0, 1024}});
        dgamma.set_estimates({{0, 512}});
        dbeta.set_estimates({{0, 512}});
    }

    void schedule() {
        if (leave_to_autoscheduler(auto_schedule)) return;
        Tuned rec(tuned_as, get_target());
        if (rec.apply_schedule(get_pipeline(), get_target())) return;
        LayerNormBackwardStages s{dx, dgamma, dbeta, h, sum, dev, sq, stats, xhat, g, sum_g, sum_gx,
                                  gsum, bsum, d, r, k, rr};
        if (get_target().has_gpu_feature()) {
            schedule_layer_norm_backward_gpu(s, rec.get("gpu_threads", gpu_threads));
            return;
        }
        schedule_layer_norm_backward_cpu(s, rec.get("rows_per_task", rows_per_task), get_target());
    }

private:
    Var d{"d"}, r{"r"};
    Func h{"h"}, sum{"sum"}, dev{"dev"}, sq{"sq"}, stats{"stats"}, xhat{"xhat"}, g{"g"};
    Func sum_g{"sum_g"}, sum_gx{"sum_gx"}, gsum{"gamma_sum"}, bsum{"beta_sum"};
    RDom k, rr;
};

}  // namespace

HALIDE_REGISTER_GENERATOR(LayerNormBackward, layer_norm_backward)
