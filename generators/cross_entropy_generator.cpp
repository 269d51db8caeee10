// cross_entropy: label-smoothed cross-entropy over the vocabulary, its
// gradient with respect to the logits, and the token count — one kernel over
// the output head's logits (the paper's ε_ls = 0.1).
//
//   logits  [M, V]  Halide (v, m)   pre-softmax output of the head
//   targets [M] int32               the token each row should predict; rows
//                                   whose target is pad_id are not counted
//   smoothing ε, pad_id
//   grad_scale                      multiplies dlogits (1 / tokens of the
//                                   whole batch: the loss is a mean)
//   dlogits [M, V]  Halide (v, m)   grad_scale·(softmax − q); may alias logits
//   loss    0-D                     Σ over counted rows of −Σ_v q_v·log p_v
//   tokens  0-D int32               counted rows
//
// q is PyTorch's label smoothing (F.cross_entropy(label_smoothing=ε)):
// q_v = (1 − ε)·[v = target] + ε/V over all V entries. log p_v = l_v − lse
// with lse = max + log Σ exp(l − max), so huge logits cannot overflow.
// Every row's statistics (lse and its loss) are computed before any dlogits
// are written, which is what makes dlogits in place over the logits safe.
// A target outside [0, V) is an error returned to the caller.
#include "Halide.h"
#include "common.h"
#include "../schedules/cross_entropy_schedule.h"

namespace {

using namespace Halide;
using namespace halformer;

class CrossEntropy : public Generator<CrossEntropy> {
public:
    GeneratorParam<int> rows_per_task{"rows_per_task", 4};
    GeneratorParam<int> gpu_threads{"gpu_threads", 0};
    GeneratorParam<std::string> tuned_as{"tuned_as", ""};

    Input<Buffer<float, 2>> logits{"logits"};
    Input<Buffer<int32_t, 1>> targets{"targets"};
    Input<float> smoothing{"smoothing"};
    Input<int32_t> pad_id{"pad_id"};
    Input<float> grad_scale{"grad_scale"};
    Output<Buffer<float, 2>> dlogits{"dlogits"};
    Output<Buffer<float, 0>> loss{"loss"};
    Output<Buffer<int32_t, 0>> tokens{"tokens"};

    void generate() {
        /* THE ALGORITHM */
        Expr V = logits.dim(0).extent(), M = logits.dim(1).extent();
        Expr fV = cast<float>(V);
        Expr t = targets(m);
        target(m) = require(t == pad_id || (t >= 0 && t < V), t,
                            "target id", t, "is outside the vocabulary [0,", V, ")");
        Expr tc = clamp(target(m), 0, V - 1);
        Expr counted = target(m) != pad_id;
        k = RDom(0, V, "k");
        row_max(m) = logits(0, m);
        row_max(m) = max(row_max(m), logits(k, m));
        row_sum(m) = 0.0f;
        row_sum(m) += exp(logits(k, m) - row_max(m));
        row_total(m) = 0.0f;
        row_total(m) += logits(k, m);
        Expr lse = row_max(m) + log(row_sum(m));
        Expr eps = smoothing;
        // −(1 − ε)·log p_t − (ε/V)·Σ_v log p_v
        Expr row_loss = -(1.0f - eps) * (logits(tc, m) - lse) - eps / fV * (row_total(m) - fV * lse);
        // (A product, not a select: a select would let Halide skip the row's
        // reductions under a branch, and GPU block reductions must not sit in one.)
        stats(m) = {lse, row_loss * cast<float>(counted)};

        Expr q = select(v == tc, 1.0f - eps, 0.0f) + eps / fV;
        dlogits(v, m) = select(counted, grad_scale * (exp(logits(v, m) - stats(m)[0]) - q), 0.0f);

        rm = RDom(0, M, "rm");
        loss() = 0.0f;
        loss() += stats(rm)[1];
        tokens() = 0;
        tokens() += select(target(rm) != pad_id, 1, 0);

        /* ESTIMATES: 1024 target tokens, the paper's 37000-word vocabulary */
        logits.set_estimates({{0, 37000}, {0, 1024}});
        targets.set_estimates({{0, 1024}});
        smoothing.set_estimate(0.1f);
        pad_id.set_estimate(0);
        grad_scale.set_estimate(1.0f / 1024);
        dlogits.set_estimates({{0, 37000}, {0, 1024}});
    }

    void schedule() {
        if (leave_to_autoscheduler(auto_schedule)) return;
        Tuned rec(tuned_as, get_target());
        if (rec.apply_schedule(get_pipeline(), get_target())) return;
        CrossEntropyStages s{dlogits, loss, tokens, target, row_max, row_sum, row_total, stats, v, m, k, rm};
        if (get_target().has_gpu_feature()) {
            schedule_cross_entropy_gpu(s, rec.get("gpu_threads", gpu_threads));
            return;
        }
        schedule_cross_entropy_cpu(s, rec.get("rows_per_task", rows_per_task), get_target());
    }

private:
    Var v{"v"}, m{"m"};
    Func target{"target"}, row_max{"row_max"}, row_sum{"row_sum"}, row_total{"row_total"}, stats{"stats"};
    RDom k, rm;
};

}  // namespace

HALIDE_REGISTER_GENERATOR(CrossEntropy, cross_entropy)
