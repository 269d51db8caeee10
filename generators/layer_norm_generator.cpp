// layer_norm: y = γ·(h − μ)/√(σ² + ε) + β with h = x [+ residual]
// (the seeds' "Add & Norm": LayerNorm(x + Sublayer(x))).
//
//   x        [R, D]   Halide (d, r)
//   residual [R, D]   Halide (d, r)   only when residual=true
//   gamma    [D], beta [D]
//   eps      scalar runtime parameter (PyTorch's default is 1e-5)
//   y        [R, D]   Halide (d, r)
//
// Numerics: the corrected two-pass algorithm, not E[h²] − E[h]² (which
// cancels catastrophically for rows with a large mean): a first mean μ₀, then
// the deviations from it give both the variance and a correction of μ₀'s own
// rounding error (μ = μ₀ + Σ(h − μ₀)/D, σ² = Σ(h − μ₀)²/D − (Σ(h − μ₀)/D)²).
// The biased variance (÷ D), as nn.LayerNorm.
//
// rms=true: RMSNorm (T5LayerNorm), y = γ·h/√(mean(h²) + ε) — no mean
// subtracted, no β input (the kernel's inputs are x, gamma, eps [, residual]).
//
// add_after=true: the norm of a sub-layer's output joining the stream after
// it (OLMo 2, Gemma 2/3's post-norms: x + Norm(Sublayer(x))):
// y = residual + norm(x), h = x; the same inputs as residual=true.
#include "Halide.h"
#include "common.h"
#include "../schedules/layer_norm_schedule.h"

namespace {

using namespace Halide;
using namespace halformer;

class LayerNorm : public Generator<LayerNorm> {
public:
    GeneratorParam<bool> residual_add{"residual", false};
    GeneratorParam<bool> rms{"rms", false};
    GeneratorParam<bool> add_after{"add_after", false};
    GeneratorParam<int> rows_per_task{"rows_per_task", 4};
    GeneratorParam<int> gpu_threads{"gpu_threads", 0};  // GPU threads per row (0: 256)
    // The kernel name tuned records know this build by (set by the build; see
    // schedules/tuned.h). Empty: hand values only.
    GeneratorParam<std::string> tuned_as{"tuned_as", ""};

    Input<Buffer<float, 2>> x{"x"};
    Input<Buffer<float, 1>> gamma{"gamma"};
    Input<Buffer<float, 1>> *beta = nullptr;
    Input<float> *eps = nullptr;
    Input<Buffer<float, 2>> *residual = nullptr;
    Output<Buffer<float, 2>> y{"y"};

    void configure() {
        // Declared here so that the order stays x, gamma, [beta,] eps.
        if (!rms) beta = add_input<Buffer<float, 1>>("beta");
        eps = add_input<float>("eps");
        if (residual_add || add_after) residual = add_input<Buffer<float, 2>>("residual");
    }

    void generate() {
        /* THE ALGORITHM */
        Expr D = x.dim(0).extent();
        Expr v = x(d, r);
        if (residual_add && add_after) {
            throw std::invalid_argument("layer_norm: residual (added before the norm) and add_after (after it) "
                                        "exclude each other");
        }
        if (residual_add) v += (*residual)(d, r);
        h(d, r) = v;
        k = RDom(0, D, "k");
        if (rms) {
            sq(r) = 0.0f;
            sq(r) += h(k, r) * h(k, r);
            Expr out = h(d, r) * (1.0f / sqrt(sq(r) / cast<float>(D) + *eps)) * gamma(d);
            y(d, r) = add_after ? (*residual)(d, r) + out : out;
        } else {
            sum(r) = 0.0f;
            sum(r) += h(k, r);
            Expr mean0 = sum(r) / cast<float>(D);
            dev(r) = 0.0f;
            dev(r) += h(k, r) - mean0;
            sq(r) = 0.0f;
            sq(r) += (h(k, r) - mean0) * (h(k, r) - mean0);
            Expr shift = dev(r) / cast<float>(D);
            Expr mean = mean0 + shift;
            Expr var = max(sq(r) / cast<float>(D) - shift * shift, 0.0f);
            Expr inv_std = 1.0f / sqrt(var + *eps);
            Expr out = (h(d, r) - mean) * inv_std * gamma(d) + (*beta)(d);
            y(d, r) = add_after ? (*residual)(d, r) + out : out;
        }

        /* ESTIMATES: Transformer-base, 128 tokens */
        x.set_estimates({{0, 512}, {0, 128}});
        if (residual) residual->set_estimates({{0, 512}, {0, 128}});
        gamma.set_estimates({{0, 512}});
        if (beta) beta->set_estimates({{0, 512}});
        eps->set_estimate(1e-5f);
        y.set_estimates({{0, 512}, {0, 128}});
    }

    void schedule() {
        if (leave_to_autoscheduler(auto_schedule)) return;
        Tuned rec(tuned_as, get_target());
        if (rec.apply_schedule(get_pipeline(), get_target())) return;
        if (get_target().has_gpu_feature()) {
            schedule_layer_norm_gpu({y, h, sum, dev, sq, d, r, k}, rec.get("gpu_threads", gpu_threads), rms);
            return;
        }
        schedule_layer_norm_cpu({y, h, sum, dev, sq, d, r, k}, {rec.get("rows_per_task", rows_per_task)},
                                get_target(), rms);
    }

private:
    Var d{"d"}, r{"r"};
    Func h{"h"}, sum{"sum"}, dev{"dev"}, sq{"sq"};
    RDom k;
};

}  // namespace

HALIDE_REGISTER_GENERATOR(LayerNorm, layer_norm)
