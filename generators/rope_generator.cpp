// rope: rotary position embedding (RoPE; Su et al. 2021), applied to the
// query and key heads after their projections (Llama, Mistral, Qwen2, GPT-NeoX)
//
//   x         [M, H, 2, D/2] Halide (i, p, h, m)  each row's H heads of D
//                                dims as pairs: element (i, 0) rotates with
//                                (i, 1). A view chooses the pairing: the
//                                halves layout (transformers' rotate_half:
//                                i, i + D/2) has strides (1, D/2, D, row);
//                                the interleaved one (GPT-J: 2i, 2i + 1)
//                                (2, 1, D, row)
//   positions [M] int32          each row's position
//   inv_freq  [D/2] float        pair i's frequency θ_i = base^(−2i/D), with
//                                any rope_scaling applied by the caller
//                                (linear: θ_i / factor; llama3: per
//                                frequency band)
//   y         [M, H, 2, D/2]     Halide (i, p, h, m), the same pairing
//
//   a = float(position) · θ_i (in float32, as transformers computes it)
//   y(i, 0) = x(i, 0)·cos a − x(i, 1)·sin a
//   y(i, 1) = x(i, 1)·cos a + x(i, 0)·sin a
//
// inv_freq must have D/2 entries and positions M: fewer is Halide's bounds
// error naming the buffer, more an error that gives both counts. Out of
// place (a row's pairs read each other).
#include "Halide.h"
#include "common.h"
#include "../schedules/rope_schedule.h"

namespace {

using namespace Halide;
using namespace halformer;

class Rope : public Generator<Rope> {
public:
    GeneratorParam<int> gpu_threads{"gpu_threads", 0};  // GPU threads per head (0: 64)
    // The kernel name tuned records know this build by (set by the build; see
    // schedules/tuned.h). Empty: hand values only.
    GeneratorParam<std::string> tuned_as{"tuned_as", ""};

    Input<Buffer<float, 4>> x{"x"};
    Input<Buffer<int32_t, 1>> positions{"positions"};
    Input<Buffer<float, 1>> inv_freq{"inv_freq"};
    Output<Buffer<float, 4>> y{"y"};

    void generate() {
        /* THE ALGORITHM */
        Expr half = x.dim(0).extent(), M = x.dim(3).extent();
        angle(i, m) = cast<float>(positions(m)) * inv_freq(i);
        cosine(i, m) = cos(angle(i, m));
        sine(i, m) = sin(angle(i, m));
        Expr a = x(i, 0, h, m), b = x(i, 1, h, m), c = cosine(i, m), s = sine(i, m);
        y(i, p, h, m) = select(p == 0, a * c - b * s, b * c + a * s);
        // Any strides: the pairing is the view's (interleaved: pairs (2i, 2i + 1)).
        x.dim(0).set_stride(Expr());
        y.dim(0).set_stride(Expr());
        x.dim(1).set_bounds(0, 2);
        y.dim(1).set_bounds(0, 2);
        add_requirement(inv_freq.dim(0).extent() == half, "rope: inv_freq has", inv_freq.dim(0).extent(),
                        "frequencies for heads of", half, "pairs");
        add_requirement(positions.dim(0).extent() == M, "rope:", positions.dim(0).extent(), "positions for", M,
                        "rows");

        /* ESTIMATES: Llama's 32 heads of 128 dims, 128 tokens */
        x.set_estimates({{0, 64}, {0, 2}, {0, 32}, {0, 128}});
        positions.set_estimates({{0, 128}});
        inv_freq.set_estimates({{0, 64}});
        y.set_estimates({{0, 64}, {0, 2}, {0, 32}, {0, 128}});
    }

    void schedule() {
        if (leave_to_autoscheduler(auto_schedule)) return;
        Tuned rec(tuned_as, get_target());
        if (rec.apply_schedule(get_pipeline(), get_target())) return;
        RopeStages s{y, cosine, sine, i, p, h, m};
        if (get_target().has_gpu_feature()) {
            schedule_rope_gpu(s, rec.get("gpu_threads", gpu_threads));
            return;
        }
        schedule_rope_cpu(s, get_target());
    }

private:
    Var i{"i"}, p{"p"}, h{"h"}, m{"m"};
    Func angle{"angle"}, cosine{"cosine"}, sine{"sine"};
};

}  // namespace

HALIDE_REGISTER_GENERATOR(Rope, rope)
