// pack_weights: W [N, K] (float32, nn.Linear layout) → the packed panels the
// linear_packed kernels read (generators/packing.h), run once per weight
// when a model is loaded in a precision.
//
//   w       [N, K]    Halide (k, n)           float32
//   wp      packed    Halide (r, j, kk, p)    f32 | bf16 | int8; its extents give Kp and Np
//   scale   [Np]      Halide (n)              int8 only: max_k |W(n, k)| / 127 (1 for a zero row)
//   colsum  [Np]      Halide (n)              int8 only: Σ_k q(n, k)
//
// Padding (k ≥ K, n ≥ N) is zero. bf16 rounds to nearest, ties to even.
#include "Halide.h"
#include "packing.h"
#include "../schedules/pack_weights_schedule.h"

namespace {

using namespace Halide;
using namespace halformer;

class PackWeights : public Generator<PackWeights> {
public:
    GeneratorParam<WeightFormat> format{"format", WeightFormat::BF16, weight_format_names()};
    GeneratorParam<std::string> tuned_as{"tuned_as", ""};

    Input<Buffer<float, 2>> w{"w"};
    Output<Buffer<>> *wp = nullptr;
    Output<Buffer<float, 1>> *scale = nullptr;
    Output<Buffer<int32_t, 1>> *colsum = nullptr;

    void configure() {
        wp = add_output<Buffer<>>("wp", packed_type(format), 4);
        if (format == WeightFormat::Int8) {
            scale = add_output<Buffer<float, 1>>("scale");
            colsum = add_output<Buffer<int32_t, 1>>("colsum");
        }
    }

    void generate() {
        /* THE ALGORITHM */
        const int kf = k_group(format);
        Expr K = w.dim(0).extent(), N = w.dim(1).extent();
        wz(k, n) = select(k < K && n < N, w(clamp(k, 0, K - 1), clamp(n, 0, N - 1)), 0.0f);
        Expr col = p * kPanel + j, kk_r = kk * kf + r;
        switch ((WeightFormat)format) {
        case WeightFormat::F32:
            (*wp)(r, j, kk, p) = wz(kk_r, col);
            break;
        case WeightFormat::BF16:
            (*wp)(r, j, kk, p) = cast(BFloat(16), wz(kk_r, col));
            break;
        case WeightFormat::Int8: {
            RDom rk(0, K, "rk");
            absmax(n) = maximum(abs(wz(rk, n)));
            (*scale)(n) = int8_step(absmax(n));
            q(k, n) = quantize_i8(wz(k, n), (*scale)(n));
            (*colsum)(n) = sum(cast<int32_t>(q(rk, n)));
            (*wp)(r, j, kk, p) = q(kk_r, col);
            break;
        }
        }
        w.set_estimates({{0, 512}, {0, 2048}});
        wp->set_estimates({{0, kf}, {0, kPanel}, {0, 512 / kf}, {0, 2048 / kPanel}});
        if (scale) scale->set_estimates({{0, 2048}});
        if (colsum) colsum->set_estimates({{0, 2048}});
    }

    void schedule() {
        if (leave_to_autoscheduler(auto_schedule)) return;
        const bool int8 = format == WeightFormat::Int8;
        schedule_pack_weights_cpu({Func(*wp), int8, absmax, int8 ? Func(*scale) : Func(), int8 ? Func(*colsum) : Func(), q,
                                   p, n, k},
                                  get_target());
    }

private:
    Var r{"r"}, j{"j"}, kk{"kk"}, p{"p"}, k{"k"}, n{"n"};
    Func wz{"wz"}, absmax{"absmax"}, q{"q"};
};

}  // namespace

HALIDE_REGISTER_GENERATOR(PackWeights, pack_weights)
