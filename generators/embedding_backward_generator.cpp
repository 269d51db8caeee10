// embedding_backward: gradients of out[b, t, :] = table[tokens[b, t], :]·scale
// + PE(start_pos + t) (generators/embedding_generator.cpp), added in place
// to the gradients the caller holds (a scatter-add: a token that appears
// several times adds each of its rows; the tied output projection's gradient
// is already in the same table when the trainer calls this).
//
//   tokens [B, T] int32  Halide (t, b)
//   dout   [B, T, D]     Halide (d, t, b)
//   scale                as the forward (√D or 1)
//   start_pos            as the forward (learned positions only)
//   dtable [V, D]        Halide (d, v): in place, dtable += scatter(dout)·scale
//   dpos   [P, D]        only with pe=learned: dpos[start_pos + t] += Σ_b dout
//
// Both outputs are updated in place (their pure definition is undef: the
// kernel reads and adds to what the buffers hold). Rows of the table are
// updated serially over tokens, in parallel over d: no two threads ever add
// to the same element. Token ids were checked by the forward pass; here
// they are clamped, so nothing outside the table is written.
#include "Halide.h"
#include "common.h"
#include "../schedules/embedding_backward_schedule.h"

namespace {

using namespace Halide;
using namespace halformer;

class EmbeddingBackward : public Generator<EmbeddingBackward> {
public:
    GeneratorParam<bool> learned{"learned", false};
    GeneratorParam<int> gpu_threads{"gpu_threads", 0};
    GeneratorParam<std::string> tuned_as{"tuned_as", ""};

    Input<Buffer<int32_t, 2>> tokens{"tokens"};
    Input<Buffer<float, 3>> dout{"dout"};
    Input<float> scale{"scale"};
    Input<int32_t> start_pos{"start_pos"};
    Output<Buffer<float, 2>> dtable{"dtable"};
    Output<Buffer<float, 2>> *dpos = nullptr;

    void configure() {
        if (learned) dpos = add_output<Buffer<float, 2>>("dpos");
    }

    void generate() {
        /* THE ALGORITHM */
        dtable(d, v) = undef<float>();
        Expr V = dtable.dim(1).extent();
        r = RDom(0, tokens.dim(0).extent(), 0, tokens.dim(1).extent(), "r");
        Expr tok = clamp(tokens(r.x, r.y), 0, V - 1);
        dtable(d, tok) += dout(d, r.x, r.y) * scale;
        if (learned) {
            (*dpos)(d, v) = undef<float>();
            Expr P = dpos->dim(1).extent();
            (*dpos)(d, clamp(start_pos + r.x, 0, P - 1)) += dout(d, r.x, r.y);
        }

        /* ESTIMATES: 1024 tokens of a 37000-word vocabulary */
        tokens.set_estimates({{0, 32}, {0, 32}});
        dout.set_estimates({{0, 512}, {0, 32}, {0, 32}});
        scale.set_estimate(22.6f);
        start_pos.set_estimate(0);
        dtable.set_estimates({{0, 512}, {0, 37000}});
        if (dpos) dpos->set_estimates({{0, 512}, {0, 1024}});
    }

    void schedule() {
        if (auto_schedule) return;
        Tuned rec(tuned_as, get_target());
        if (rec.apply_schedule(get_pipeline(), get_target())) return;
        std::vector<Func> outs{dtable};
        if (dpos) outs.push_back(*dpos);
        for (Func f : outs) {
            if (get_target().has_gpu_feature()) {
                schedule_scatter_rows_gpu(f, d, r, rec.get("gpu_threads", gpu_threads));
            } else {
                schedule_scatter_rows_cpu(f, d, r, get_target());
            }
        }
    }

private:
    Var d{"d"}, v{"v"};
    RDom r;
};

}  // namespace

HALIDE_REGISTER_GENERATOR(EmbeddingBackward, embedding_backward)
