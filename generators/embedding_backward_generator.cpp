// embedding_backward: gradients of out[b, t, :] = table[tokens[b, t], :]·scale
// + PE(start_pos + t) (generators/embedding_generator.cpp), added to the
// gradients the caller holds.
//
//   slots  [B, T] int32  Halide (t, b)  the token at (b, t) as a slot: its
//                                       index among the batch's distinct ids
//   rows   [U] int32                    the table row of each slot (distinct)
//   dout   [B, T, D]     Halide (d, t, b)
//   scale                as the forward (√D or 1)
//   start_pos            as the forward (learned positions only)
//   dtable [V, D]        Halide (d, v): dtable[rows[u]] += Σ over the slot's
//                        tokens of dout·scale
//   dpos   [P, D]        only with pe=learned: dpos[start_pos + t] += Σ_b dout
//
// The batch's sums are formed first (U × D, in slot order), then each is
// added once to its row: the table receives old + (this batch's sum), the
// same association as every other gradient kernel's old + Σ, so splitting a
// batch across ranks and adding their sums gives exactly what one process
// gets from the same shards in turn. The runtime maps ids to slots (a
// lookup, no arithmetic); a tied output projection's gradient is already in
// the same table when this runs.
// The outputs are updated in place (their pure definition is undef: the
// kernel adds to what the buffers hold). Slots and rows are clamped, so a
// bad map cannot write outside the buffers.
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

    Input<Buffer<int32_t, 2>> slots{"slots"};
    Input<Buffer<int32_t, 1>> rows{"rows"};
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
        Expr U = rows.dim(0).extent(), T = slots.dim(0).extent(), B = slots.dim(1).extent();
        r = RDom(0, T, 0, B, "r");
        Expr slot = clamp(slots(r.x, r.y), 0, U - 1);
        batch_sum(d, u) = 0.0f;
        batch_sum(d, slot) += dout(d, r.x, r.y) * scale;
        dtable(d, v) = undef<float>();
        Expr V = dtable.dim(1).extent();
        ru = RDom(0, U, "ru");
        dtable(d, clamp(rows(ru), 0, V - 1)) += batch_sum(d, ru);
        if (learned) {
            rb = RDom(0, B, "rb");
            pos_sum(d, t) = 0.0f;
            pos_sum(d, t) += dout(d, t, rb);
            (*dpos)(d, v) = undef<float>();
            Expr P = dpos->dim(1).extent();
            rt = RDom(0, T, "rt");
            (*dpos)(d, clamp(start_pos + rt, 0, P - 1)) += pos_sum(d, rt);
        }

        /* ESTIMATES: 1024 tokens of a 37000-word vocabulary */
        slots.set_estimates({{0, 32}, {0, 32}});
        rows.set_estimates({{0, 512}});
        dout.set_estimates({{0, 512}, {0, 32}, {0, 32}});
        scale.set_estimate(22.6f);
        start_pos.set_estimate(0);
        dtable.set_estimates({{0, 512}, {0, 37000}});
        if (dpos) dpos->set_estimates({{0, 512}, {0, 1024}});
    }

    void schedule() {
        if (leave_to_autoscheduler(auto_schedule)) return;
        Tuned rec(tuned_as, get_target());
        if (rec.apply_schedule(get_pipeline(), get_target())) return;
        const int threads = rec.get("gpu_threads", gpu_threads);
        schedule_scatter_rows({batch_sum, dtable, d, u, r, ru}, threads, get_target());
        if (learned) schedule_scatter_rows({pos_sum, *dpos, d, t, rb, rt}, threads, get_target());
    }

private:
    Var d{"d"}, v{"v"}, u{"u"}, t{"t"};
    Func batch_sum{"batch_sum"}, pos_sum{"pos_sum"};
    RDom r, ru, rb, rt;
};

}  // namespace

HALIDE_REGISTER_GENERATOR(EmbeddingBackward, embedding_backward)
