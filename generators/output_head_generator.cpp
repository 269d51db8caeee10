// output_head: the final projection to the vocabulary fused with log_softmax
//   y = log_softmax(x·Wᵀ + b) over the vocabulary
//
//   x     [M, D]   Halide (d, m)
//   w     [V, D]   Halide (d, v)   generator.weight (or the tied tgt_embed.weight)
//   bias  [V]                      zeros when the model has none
//   y     [M, V]   Halide (v, m)   log-probabilities
//
// Max-subtracted like softmax; logits of any finite size are safe.
#include "Halide.h"
#include "common.h"
#include "../schedules/output_head_schedule.h"

namespace {

using namespace Halide;
using namespace halformer;

class OutputHead : public Generator<OutputHead> {
public:
    // Schedule knobs (schedules/output_head_schedule.h).
    GeneratorParam<bool> dot{"dot", false};
    GeneratorParam<int> vectors_n{"vectors_n", 0};
    GeneratorParam<int> rows_m{"rows_m", 0};
    // GPU schedule knobs (schedules/linear_schedule.h, GpuMatmulKnobs).
    GeneratorParam<int> gpu_tile_n{"gpu_tile_n", 0};
    GeneratorParam<int> gpu_tile_m{"gpu_tile_m", 0};
    GeneratorParam<int> gpu_reg_n{"gpu_reg_n", 0};
    GeneratorParam<int> gpu_reg_m{"gpu_reg_m", 0};
    GeneratorParam<int> gpu_threads{"gpu_threads", 0};
    // The kernel name tuned records know this build by (set by the build; see
    // schedules/tuned.h). Empty: hand values only.
    GeneratorParam<std::string> tuned_as{"tuned_as", ""};

    Input<Buffer<float, 2>> x{"x"};
    Input<Buffer<float, 2>> w{"w"};
    Input<Buffer<float, 1>> bias{"bias"};
    Output<Buffer<float, 2>> y{"y"};

    void generate() {
        /* THE ALGORITHM */
        Expr D = x.dim(0).extent(), M = x.dim(1).extent(), V = w.dim(1).extent();
        mm = define_matmul(x, M, D, w, V, "head");
        logits(n, m) = mm.acc(n, m) + bias(clamp(n, 0, V - 1));
        k = RDom(0, V, "k");
        row_max(m) = Float(32).min();
        row_max(m) = max(row_max(m), logits(k, m));
        row_sum(m) = 0.0f;
        row_sum(m) += exp(logits(k, m) - row_max(m));
        y(n, m) = logits(n, m) - row_max(m) - log(row_sum(m));

        /* ESTIMATES: one decoding step of a batch of 32 × beam 4, 37000 words */
        x.set_estimates({{0, 512}, {0, 128}});
        w.set_estimates({{0, 512}, {0, 37000}});
        bias.set_estimates({{0, 37000}});
        y.set_estimates({{0, 37000}, {0, 128}});
    }

    void schedule() {
        if (leave_to_autoscheduler(auto_schedule)) return;
        Tuned rec(tuned_as, get_target());
        if (rec.apply_schedule(get_pipeline(), get_target())) return;
        if (get_target().has_gpu_feature()) {
            schedule_output_head_gpu(matmul_stages(logits, mm, n, m), y, row_max, row_sum, k,
                                     GpuMatmulKnobs{rec.get("gpu_tile_n", gpu_tile_n), rec.get("gpu_tile_m", gpu_tile_m),
                           rec.get("gpu_reg_n", gpu_reg_n), rec.get("gpu_reg_m", gpu_reg_m)}, dot, rec.get("gpu_threads", gpu_threads));
            return;
        }
        schedule_output_head_cpu({logits, mm.acc, mm.wt, n, m, mm.r}, y, row_max, row_sum, k,
                                 {rec.get("vectors_n", vectors_n), rec.get("rows_m", rows_m), dot},
                                 get_target());
    }

private:
    Var n{"n"}, m{"m"};
    Func logits{"logits"}, row_max{"row_max"}, row_sum{"row_sum"};
    Matmul mm;
    RDom k;
};

}  // namespace

HALIDE_REGISTER_GENERATOR(OutputHead, output_head)
