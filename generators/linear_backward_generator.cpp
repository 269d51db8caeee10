// linear_backward: the gradients of Y = act(X·Wᵀ + b), split in two kernels
// by what they reduce over.
//
// part=data:   dX = dY·W                 (reduces over N)
//   dy       [M, N]   Halide (n, m)   gradient of the layer's output
//   w        [N, K]   Halide (k, n)   PyTorch nn.Linear.weight layout
//   z        [M, K]   Halide (k, m)   only with activation ≠ none: the
//                                     pre-activation of the layer that
//                                     PRODUCED X; the result is then
//                                     dZ = (dY·W) ⊙ act'(z), i.e. the
//                                     gradient is carried through that
//                                     layer's activation as well
//   dx_in    [M, K]                   only with accumulate=true: dX is added
//                                     to it (the runtime passes the output
//                                     buffer again: each point reads only its
//                                     own old value before writing it)
//   dx       [M, K]   Halide (k, m)
//
// part=weight: dW += dYᵀ·X, db += Σ_m dY  (reduces over M; always adds to
//   the gradients given, so gradient accumulation and tied weights need no
//   extra pass)
//   dy       [M, N]   Halide (n, m)
//   x        [M, K]   Halide (k, m)   the layer's input
//   dw_in    [N, K], db_in [N]        the gradients so far (aliased outputs)
//   dw       [N, K]   Halide (k, n),  db [N]
//
// Both are the forward's matmul (generators/common.h, define_matmul) with
// the roles of the dimensions exchanged, so the same panel schedules apply:
// the vectorized output dimension (k) is contiguous in W and in X as they
// are stored, so no operand is transposed.
#include "Halide.h"
#include "common.h"
#include "../schedules/linear_backward_schedule.h"

namespace {

using namespace Halide;
using namespace halformer;

enum class Part { Data, Weight };

// d act(z) / dz, matching common.h's activate().
Expr activation_derivative(Expr z, Activation act) {
    switch (act) {
    case Activation::None:
        return 1.0f;
    case Activation::ReLU:
        return select(z > 0.0f, 1.0f, 0.0f);
    case Activation::GELU: {
        // Φ(z) + z·φ(z)
        Expr cdf = 0.5f * (1.0f + erf_f32(z * 0.70710678118654752f));
        Expr pdf = 0.3989422804014327f * exp(-0.5f * z * z);
        return cdf + z * pdf;
    }
    case Activation::GELUTanh: {
        Expr u = 0.79788456080286536f * (z + 0.044715f * z * z * z);
        Expr th = tanh(u);
        Expr du = 0.79788456080286536f * (1.0f + 3.0f * 0.044715f * z * z);
        return 0.5f * (1.0f + th) + 0.5f * z * (1.0f - th * th) * du;
    }
    case Activation::SiLU: {
        // σ(z)·(1 + z·(1 − σ(z)))
        Expr s = sigmoid_f32(z);
        return s * (1.0f + z * (1.0f - s));
    }
    case Activation::Tanh: {
        Expr th = tanh(z);
        return 1.0f - th * th;
    }
    }
    return 1.0f;
}

class LinearBackward : public Generator<LinearBackward> {
public:
    GeneratorParam<Part> part{"part", Part::Data, {{"data", Part::Data}, {"weight", Part::Weight}}};
    GeneratorParam<Activation> activation{"activation", Activation::None, activation_names()};
    GeneratorParam<bool> accumulate{"accumulate", false};
    // part=weight: vectorize along N (dY's rows) instead of K, then
    // transpose into dW: for wide outputs (the vocabulary projection), where
    // panels of X across K would re-read all of dY once per panel.
    GeneratorParam<bool> by_rows{"by_rows", false};
    // Schedule knobs (schedules/linear_schedule.h).
    GeneratorParam<int> vectors_n{"vectors_n", 0};
    GeneratorParam<int> rows_m{"rows_m", 0};
    GeneratorParam<int> gpu_tile_n{"gpu_tile_n", 0};
    GeneratorParam<int> gpu_tile_m{"gpu_tile_m", 0};
    GeneratorParam<int> gpu_reg_n{"gpu_reg_n", 0};
    GeneratorParam<int> gpu_reg_m{"gpu_reg_m", 0};
    GeneratorParam<std::string> tuned_as{"tuned_as", ""};

    Input<Buffer<float, 2>> dy{"dy"};
    Input<Buffer<float, 2>> *w = nullptr, *z = nullptr, *dx_in = nullptr;
    Input<Buffer<float, 2>> *x = nullptr, *dw_in = nullptr;
    Input<Buffer<float, 1>> *db_in = nullptr;
    Output<Buffer<float, 2>> *dx = nullptr, *dw = nullptr;
    Output<Buffer<float, 1>> *db = nullptr;

    void configure() {
        if (part == Part::Data) {
            w = add_input<Buffer<float, 2>>("w");
            if (activation != Activation::None) z = add_input<Buffer<float, 2>>("z");
            if (accumulate) dx_in = add_input<Buffer<float, 2>>("dx_in");
            dx = add_output<Buffer<float, 2>>("dx");
        } else {
            x = add_input<Buffer<float, 2>>("x");
            dw_in = add_input<Buffer<float, 2>>("dw_in");
            db_in = add_input<Buffer<float, 1>>("db_in");
            dw = add_output<Buffer<float, 2>>("dw");
            db = add_output<Buffer<float, 1>>("db");
        }
    }

    void generate() {
        /* THE ALGORITHM */
        Expr N = dy.dim(0).extent(), M = dy.dim(1).extent();
        Var a("a"), c("c");
        if (part == Part::Data) {
            // dx(k, m) = Σ_n dy(n, m)·w(k, n): the matmul's "W" is w read as
            // (n, k) → w(k, n), its rows (k) contiguous.
            Expr K = (*w).dim(0).extent();
            wsrc(a, c) = (*w)(c, a);
            mm = define_matmul(dy, M, N, wsrc, K, "dx");
            Expr v = mm.acc(k, m);
            if (activation != Activation::None) v *= activation_derivative((*z)(k, m), activation);
            if (accumulate) v += (*dx_in)(k, m);
            (*dx)(k, m) = v;
        } else {
            Expr K = (*x).dim(0).extent();
            if (by_rows) {
                // acc(n, k) = Σ_m dy(n, m)·x(k, m): n vectorized, rows k; kept
                // whole (N × K), then added to dw transposed.
                xsrc(a, c) = (*x)(c, a);
                dyt(a, c) = dy(c, a);
                mm = define_matmul(xsrc, K, M, dyt, N, "dwt");
                acc_t(k, m) = mm.acc(k, m);
                (*dw)(k, m) = (*dw_in)(k, m) + acc_t(m, k);
            } else {
                // dw(k, n) = Σ_m dy(n, m)·x(k, m): rows n, reduction over m.
                dyt(a, c) = dy(c, a);
                xsrc(a, c) = (*x)(c, a);
                mm = define_matmul(dyt, N, M, xsrc, K, "dw");
                (*dw)(k, m) = (*dw_in)(k, m) + mm.acc(k, m);
            }
            rb = RDom(0, M, "rb");
            bsum(k) = 0.0f;
            bsum(k) += dy(k, rb);
            (*db)(k) = (*db_in)(k) + bsum(k);
        }

        /* ESTIMATES: a Transformer-base FFN (512 → 2048), 1024 tokens */
        dy.set_estimates({{0, 2048}, {0, 1024}});
        if (part == Part::Data) {
            w->set_estimates({{0, 512}, {0, 2048}});
            if (z) z->set_estimates({{0, 512}, {0, 1024}});
            if (dx_in) dx_in->set_estimates({{0, 512}, {0, 1024}});
            dx->set_estimates({{0, 512}, {0, 1024}});
        } else {
            x->set_estimates({{0, 512}, {0, 1024}});
            dw_in->set_estimates({{0, 512}, {0, 2048}});
            db_in->set_estimates({{0, 2048}});
            dw->set_estimates({{0, 512}, {0, 2048}});
            db->set_estimates({{0, 2048}});
        }
    }

    void schedule() {
        if (leave_to_autoscheduler(auto_schedule)) return;
        Tuned rec(tuned_as, get_target());
        if (rec.apply_schedule(get_pipeline(), get_target())) return;
        Func out = part == Part::Data ? Func(*dx) : by_rows ? acc_t : Func(*dw);
        LinearStages s = matmul_stages(out, mm, k, m);
        if (get_target().has_gpu_feature()) {
            schedule_linear_gpu(s, GpuMatmulKnobs{rec.get("gpu_tile_n", gpu_tile_n), rec.get("gpu_tile_m", gpu_tile_m),
                                                  rec.get("gpu_reg_n", gpu_reg_n), rec.get("gpu_reg_m", gpu_reg_m)},
                                false);
            if (part == Part::Weight) schedule_column_sum_gpu(Func(*db), bsum, k);
            if (by_rows) schedule_transposed_add_gpu(Func(*dw), k, m);
            return;
        }
        schedule_linear_cpu(s, {rec.get("vectors_n", vectors_n), rec.get("rows_m", rows_m), false}, get_target());
        if (part == Part::Weight) schedule_column_sum_cpu(Func(*db), bsum, k, rb, get_target());
        if (by_rows) schedule_transposed_add_cpu(Func(*dw), k, m, get_target());
    }

private:
    // The output column is named "n" (k of the forward): the matmul stages
    // of define_matmul and the panel schedules call it that.
    Var k{"n"}, m{"m"};
    Func wsrc{"w_by_row"}, dyt{"dy_transposed"}, xsrc{"x_by_row"}, bsum{"bias_sum"}, acc_t{"dw_transposed"};
    RDom rb;
    Matmul mm;
};

}  // namespace

HALIDE_REGISTER_GENERATOR(LinearBackward, linear_backward)
