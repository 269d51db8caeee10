// rotary: rotary position embedding (RoFormer; the "rotate half" form of
// GPT-NeoX and LLaMA), applied to queries or keys before attention. A user's
// op, built outside Halformer's tree with halformer_add_kernel (see
// CMakeLists.txt); the algorithm only — how it runs is rotary_schedule.h.
//
//   x          [B, H, T, dk]   Halide (d, t, h, b)   dim 0 unit stride, any
//                                                     other strides (a view
//                                                     into a fused QKV)
//   start_pos  int32           position of t = 0 (the cache length when decoding)
//   base       float           θ of ω_i = θ^(−2i/dk) (10000)
//   y          [B, H, T, dk]   Halide (d, t, h, b)
//
// With p = start_pos + t and i < dk/2:
//   y[i]        = x[i]·cos(p·ω_i) − x[i + dk/2]·sin(p·ω_i)
//   y[i + dk/2] = x[i + dk/2]·cos(p·ω_i) + x[i]·sin(p·ω_i)
// The angle p·ω_i is formed in double and reduced modulo 2π before the float
// cos/sin, so positions in the tens of thousands keep float accuracy.
#include "Halide.h"
#include "rotary_schedule.h"

namespace {

using namespace Halide;

class Rotary : public Generator<Rotary> {
public:
    GeneratorParam<int> rows_per_task{"rows_per_task", 8};

    Input<Buffer<float, 4>> x{"x"};
    Input<int32_t> start_pos{"start_pos"};
    Input<float> base{"base"};
    Output<Buffer<float, 4>> y{"y"};

    void generate() {
        Expr dk = x.dim(0).extent();
        Expr half = dk / 2;
        // The angle table, one row per position: cos and sin of p·ω_i.
        Expr i = cast<double>(d % half);
        Expr omega = pow(cast<double>(base), Expr(-2.0) * i / cast<double>(dk));
        Expr angle = cast<double>(start_pos + t) * omega;
        Expr two_pi = Expr(6.283185307179586);
        Expr reduced = cast<float>(angle - floor(angle / two_pi) * two_pi);
        cs(d, t) = Tuple(cos(reduced), sin(reduced));

        Expr first = d < half;
        // (d + dk/2) mod dk is the partner in either half, and keeps the
        // read inside x for any d (bounds inference sees [0, dk)).
        Expr partner = x((d + half) % dk, t, h, b);
        Expr rotated = select(first, -partner, partner);
        y(d, t, h, b) = x(d, t, h, b) * cs(d, t)[0] + rotated * cs(d, t)[1];

        x.set_estimates({{0, 64}, {0, 128}, {0, 8}, {0, 8}});
        start_pos.set_estimate(0);
        base.set_estimate(10000.0f);
        y.set_estimates({{0, 64}, {0, 128}, {0, 8}, {0, 8}});
    }

    void schedule() {
        if (halformer::leave_to_autoscheduler(auto_schedule)) return;
        RotaryStages s{y, cs, d, t, h, b};
        if (get_target().has_gpu_feature()) {
            schedule_rotary_gpu(s);
        } else {
            schedule_rotary_cpu(s, rows_per_task, get_target());
        }
    }

private:
    Var d{"d"}, t{"t"}, h{"h"}, b{"b"};
    Func cs{"cs"};
};

}  // namespace

HALIDE_REGISTER_GENERATOR(Rotary, rotary)
