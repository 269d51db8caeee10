// dropout: out = [residual +] x · keep / (1 − p), keep ~ Bernoulli(1 − p)
//
//   x        [M, N]  Halide (n, m)
//   residual [M, N]  only when residual=true (the paper's x + Dropout(Sublayer(x)))
//   p                drop probability in [0, 1); 0 keeps everything (then this
//                    is an add, or a copy)
//   seed, step, tensor   the key of the mask: a counter-based generator
//                    (a hash of seed, step, tensor id and the element index
//                    n + m·N) — no state, so the backward pass re-creates the
//                    forward's mask exactly by calling this kernel on the
//                    gradient with the same key, and a run is reproducible
//                    on any machine, thread count or device
//   out      [M, N]
//
// The hash is lowbias32 (a 32-bit integer mixer: bias 0.17 in its author's
// avalanche tests) applied in a chain over the key words; the top 24 bits
// give u ∈ [0, 1), kept when u ≥ p.
#include "Halide.h"
#include "common.h"
#include "../schedules/elementwise_schedule.h"

namespace {

using namespace Halide;
using namespace halformer;

Expr mix32(Expr x) {
    x = x ^ (x >> 16);
    x = x * Expr(uint32_t(0x7feb352dU));
    x = x ^ (x >> 15);
    x = x * Expr(uint32_t(0x846ca68bU));
    x = x ^ (x >> 16);
    return x;
}

class Dropout : public Generator<Dropout> {
public:
    GeneratorParam<bool> residual_add{"residual", false};
    GeneratorParam<std::string> tuned_as{"tuned_as", ""};

    Input<Buffer<float, 2>> x{"x"};
    Input<float> p{"p"};
    Input<int32_t> seed{"seed"};
    Input<int32_t> step{"step"};
    Input<int32_t> tensor{"tensor"};
    Input<Buffer<float, 2>> *residual = nullptr;
    Output<Buffer<float, 2>> out{"out"};

    void configure() {
        if (residual_add) residual = add_input<Buffer<float, 2>>("residual");
    }

    void generate() {
        /* THE ALGORITHM */
        Expr N = x.dim(0).extent();
        Expr key = mix32(cast<uint32_t>(seed) ^ Expr(uint32_t(0x9e3779b9U)));
        key = mix32(key ^ cast<uint32_t>(step));
        key = mix32(key ^ cast<uint32_t>(tensor));
        Expr index = cast<uint32_t>(n) + cast<uint32_t>(m) * cast<uint32_t>(N);
        Expr u = cast<float>(mix32(key ^ mix32(index)) >> 8) * (1.0f / 16777216.0f);
        Expr kept = select(u >= p, x(n, m) * (1.0f / (1.0f - p)), 0.0f);
        Expr v = select(p > 0.0f, kept, x(n, m));
        if (residual_add) v += (*residual)(n, m);
        out(n, m) = v;

        /* ESTIMATES: Transformer-base, 1024 tokens */
        x.set_estimates({{0, 512}, {0, 1024}});
        if (residual) residual->set_estimates({{0, 512}, {0, 1024}});
        p.set_estimate(0.1f);
        seed.set_estimate(1);
        step.set_estimate(1);
        tensor.set_estimate(0);
        out.set_estimates({{0, 512}, {0, 1024}});
    }

    void schedule() {
        if (leave_to_autoscheduler(auto_schedule)) return;
        Tuned rec(tuned_as, get_target());
        if (rec.apply_schedule(get_pipeline(), get_target())) return;
        schedule_elementwise_2d(out, n, m, get_target());
    }

private:
    Var n{"n"}, m{"m"};
};

}  // namespace

HALIDE_REGISTER_GENERATOR(Dropout, dropout)
