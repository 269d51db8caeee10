// ffn: the position-wise feed-forward network, Linear → activation → Linear
//   y = act(x·W1ᵀ + b1)·W2ᵀ + b2 [+ residual]
//
//   x        [M, D]   Halide (d, m)
//   w1       [F, D]   Halide (d, f)    nn.Linear(D, F).weight (linear1)
//   b1       [F]
//   w2       [D, F]   Halide (f, e)    nn.Linear(F, D).weight (linear2)
//   b2       [D]
//   residual [M, D]   Halide (e, m)    only when residual=true (pre-LN)
//   y        [M, D]   Halide (e, m)
//
// act ∈ {relu (the paper), gelu, gelu_tanh}. The hidden [M, F] is a Func:
// the schedule decides whether it is written out whole or only per block of
// rows (fused).
#include "Halide.h"
#include "common.h"
#include "../schedules/ffn_schedule.h"

namespace {

using namespace Halide;
using namespace halformer;

class FFN : public Generator<FFN> {
public:
    GeneratorParam<Activation> activation{"activation", Activation::ReLU, activation_names()};
    GeneratorParam<bool> residual_add{"residual", false};
    // Schedule knobs (schedules/ffn_schedule.h).
    GeneratorParam<int> fuse_rows{"fuse_rows", 0};
    GeneratorParam<int> vectors_n{"vectors_n", 0};
    GeneratorParam<int> rows_m{"rows_m", 0};
    // GPU schedule knobs (schedules/linear_schedule.h, GpuMatmulKnobs).
    GeneratorParam<int> gpu_tile_n{"gpu_tile_n", 0};
    GeneratorParam<int> gpu_tile_m{"gpu_tile_m", 0};
    GeneratorParam<int> gpu_reg_n{"gpu_reg_n", 0};
    GeneratorParam<int> gpu_reg_m{"gpu_reg_m", 0};
    // The kernel name tuned records know this build by (set by the build; see
    // schedules/tuned.h). Empty: hand values only.
    GeneratorParam<std::string> tuned_as{"tuned_as", ""};

    Input<Buffer<float, 2>> x{"x"};
    Input<Buffer<float, 2>> w1{"w1"};
    Input<Buffer<float, 1>> b1{"b1"};
    Input<Buffer<float, 2>> w2{"w2"};
    Input<Buffer<float, 1>> b2{"b2"};
    Input<Buffer<float, 2>> *residual = nullptr;
    Output<Buffer<float, 2>> y{"y"};

    void configure() {
        if (residual_add) residual = add_input<Buffer<float, 2>>("residual");
    }

    void generate() {
        /* THE ALGORITHM */
        Expr D = x.dim(0).extent(), M = x.dim(1).extent(), F = w1.dim(1).extent();
        mm1 = define_matmul(x, M, D, w1, F, "ffn1");
        hidden(n, m) = activate(mm1.acc(n, m) + b1(clamp(n, 0, F - 1)), activation);
        mm2 = define_matmul(hidden, M, F, w2, D, "ffn2");
        Expr v = mm2.acc(n, m) + b2(n);
        if (residual_add) v += (*residual)(n, m);
        y(n, m) = v;

        /* ESTIMATES: Transformer-base, 128 tokens */
        x.set_estimates({{0, 512}, {0, 128}});
        w1.set_estimates({{0, 512}, {0, 2048}});
        b1.set_estimates({{0, 2048}});
        w2.set_estimates({{0, 2048}, {0, 512}});
        b2.set_estimates({{0, 512}});
        if (residual_add) residual->set_estimates({{0, 512}, {0, 128}});
        y.set_estimates({{0, 512}, {0, 128}});
    }

    void schedule() {
        if (leave_to_autoscheduler(auto_schedule)) return;
        Tuned rec(tuned_as, get_target());
        if (rec.apply_schedule(get_pipeline(), get_target())) return;
        if (get_target().has_gpu_feature()) {
            schedule_ffn_gpu(matmul_stages(hidden, mm1, n, m), matmul_stages(y, mm2, n, m),
                             GpuMatmulKnobs{rec.get("gpu_tile_n", gpu_tile_n), rec.get("gpu_tile_m", gpu_tile_m),
                           rec.get("gpu_reg_n", gpu_reg_n), rec.get("gpu_reg_m", gpu_reg_m)});
            return;
        }
        schedule_ffn_cpu({hidden, mm1.acc, mm1.wt, n, m, mm1.r},
                         {y, mm2.acc, mm2.wt, n, m, mm2.r},
                         {rec.get("fuse_rows", fuse_rows),
                          {rec.get("vectors_n", vectors_n), rec.get("rows_m", rows_m), false}},
                         get_target());
    }

private:
    Var n{"n"}, m{"m"};
    Func hidden{"hidden"};
    Matmul mm1, mm2;
};

}  // namespace

HALIDE_REGISTER_GENERATOR(FFN, ffn)
