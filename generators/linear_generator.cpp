// linear: Y = act(X·Wᵀ + b) [+ R]
//
//   x        [M, K]   Halide (k, m)    activations, one row per token
//   w        [N, K]   Halide (k, n)    PyTorch nn.Linear.weight layout
//   bias     [N]      Halide (n)
//   residual [M, N]   Halide (n, m)    only when residual=true
//   gate     [M, N]   Halide (n, m)    only when gated=true: the gated
//                                      feed-forward's act(X·W0ᵀ)·(X·W1ᵀ)
//                                      (T5 v1.1) with gate = X·W1ᵀ
//   y        [M, N]   Halide (n, m)
//
// act ∈ {none, relu, gelu (erf form), gelu_tanh}; the residual is added after
// the activation (the pre-LN sub-layer's x + Sublayer(x)).
#include "Halide.h"
#include "common.h"
#include "../schedules/linear_schedule.h"

namespace {

using namespace Halide;
using namespace halformer;

class Linear : public Generator<Linear> {
public:
    GeneratorParam<Activation> activation{"activation", Activation::None, activation_names()};
    GeneratorParam<bool> residual_add{"residual", false};
    GeneratorParam<bool> gated{"gated", false};
    // Schedule knobs (see schedules/linear_schedule.h).
    GeneratorParam<bool> dot{"dot", false};
    GeneratorParam<int> vectors_n{"vectors_n", 0};
    GeneratorParam<int> rows_m{"rows_m", 0};
    // GPU schedule knobs (schedules/linear_schedule.h, GpuMatmulKnobs).
    GeneratorParam<int> gpu_tile_n{"gpu_tile_n", 0};
    GeneratorParam<int> gpu_tile_m{"gpu_tile_m", 0};
    GeneratorParam<int> gpu_reg_n{"gpu_reg_n", 0};
    GeneratorParam<int> gpu_reg_m{"gpu_reg_m", 0};
    GeneratorParam<int> gpu_k_unroll{"gpu_k_unroll", 0};
    // The kernel name tuned records know this build by (set by the build; see
    // schedules/tuned.h). Empty: hand values only.
    GeneratorParam<std::string> tuned_as{"tuned_as", ""};

    Input<Buffer<float, 2>> x{"x"};
    Input<Buffer<float, 2>> w{"w"};
    Input<Buffer<float, 1>> bias{"bias"};
    Input<Buffer<float, 2>> *residual = nullptr;
    Input<Buffer<float, 2>> *gate = nullptr;
    Output<Buffer<float, 2>> y{"y"};

    void configure() {
        if (residual_add) residual = add_input<Buffer<float, 2>>("residual");
        if (gated) gate = add_input<Buffer<float, 2>>("gate");
    }

    void generate() {
        /* THE ALGORITHM */
        Expr K = x.dim(0).extent(), M = x.dim(1).extent(), N = w.dim(1).extent();
        mm = define_matmul(x, M, K, w, N, "linear");
        Expr v = activate(mm.acc(n, m) + bias(n), activation);
        if (gated) v *= (*gate)(n, m);
        if (residual_add) v += (*residual)(n, m);
        y(n, m) = v;

        /* ESTIMATES: a Transformer-base FFN input, 128 tokens */
        x.set_estimates({{0, 512}, {0, 128}});
        w.set_estimates({{0, 512}, {0, 2048}});
        bias.set_estimates({{0, 2048}});
        if (residual_add) residual->set_estimates({{0, 2048}, {0, 128}});
        if (gated) gate->set_estimates({{0, 2048}, {0, 128}});
        y.set_estimates({{0, 2048}, {0, 128}});
    }

    void schedule() {
        if (leave_to_autoscheduler(auto_schedule)) return;
        Tuned rec(tuned_as, get_target());
        if (rec.apply_schedule(get_pipeline(), get_target())) return;
        if (get_target().has_gpu_feature()) {
            schedule_linear_gpu(matmul_stages(y, mm, n, m), GpuMatmulKnobs{rec.get("gpu_tile_n", gpu_tile_n), rec.get("gpu_tile_m", gpu_tile_m),
                           rec.get("gpu_reg_n", gpu_reg_n), rec.get("gpu_reg_m", gpu_reg_m),
                           rec.get("gpu_k_unroll", gpu_k_unroll)}, dot);
            return;
        }
        schedule_linear_cpu({y, mm.acc, mm.wt, n, m, mm.r},
                            {rec.get("vectors_n", vectors_n), rec.get("rows_m", rows_m), dot},
                            get_target());
    }

private:
    Var n{"n"}, m{"m"};
    Matmul mm;
};

}  // namespace

HALIDE_REGISTER_GENERATOR(Linear, linear)
