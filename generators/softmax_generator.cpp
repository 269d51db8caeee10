// softmax / log_softmax over the last axis, max-subtracted, optional additive mask.
//
//   x     [R, N]   Halide (n, r)
//   mask  [R, N]   Halide (n, r)   only when mask=true; additive (0 or -inf)
//   y     [R, N]   Halide (n, r)
//
// Numerics: the row max is subtracted before exp, so logits of ±1e4 (or any
// finite size) cannot overflow. Masked entries (-inf after the mask) are
// clamped to a finite sentinel and excluded by comparison, never by inf
// arithmetic: a fully masked row gives zeros for softmax and -inf for
// log_softmax, never NaN.
#include "Halide.h"
#include "common.h"
#include "../schedules/softmax_schedule.h"

namespace {

using namespace Halide;
using namespace halformer;

class Softmax : public Generator<Softmax> {
public:
    GeneratorParam<bool> log_out{"log", false};
    GeneratorParam<bool> has_mask{"mask", false};

    Input<Buffer<float, 2>> x{"x"};
    Input<Buffer<float, 2>> *mask = nullptr;
    Output<Buffer<float, 2>> y{"y"};

    void configure() {
        if (has_mask) mask = add_input<Buffer<float, 2>>("mask");
    }

    void generate() {
        /* THE ALGORITHM */
        Expr N = x.dim(0).extent();
        Expr v = x(n, r);
        if (has_mask) v += (*mask)(n, r);
        s(n, r) = max(v, kMasked);  // -inf → finite sentinel
        k = RDom(0, N, "k");
        row_max(r) = kMasked;
        row_max(r) = max(row_max(r), s(k, r));
        Expr live = s(n, r) > kMaskedHalf;
        e(n, r) = select(live, exp(s(n, r) - row_max(r)), 0.0f);
        row_sum(r) = 0.0f;
        row_sum(r) += e(k, r);
        if (log_out) {
            y(n, r) = select(live, s(n, r) - row_max(r) - log(row_sum(r)),
                             Expr(-std::numeric_limits<float>::infinity()));
        } else {
            y(n, r) = select(row_sum(r) > 0.0f, e(n, r) / row_sum(r), 0.0f);
        }

        /* ESTIMATES: 8 heads × 128 queries of 128 scores */
        x.set_estimates({{0, 128}, {0, 1024}});
        if (has_mask) mask->set_estimates({{0, 128}, {0, 1024}});
        y.set_estimates({{0, 128}, {0, 1024}});
    }

    void schedule() {
        if (leave_to_autoscheduler(auto_schedule)) return;
        Tuned rec(tuned_as, get_target());
        if (rec.apply_schedule(get_pipeline(), get_target())) return;
        if (get_target().has_gpu_feature()) {
            schedule_softmax_gpu({y, s, e, row_max, row_sum, n, r, k}, rec.get("gpu_threads", gpu_threads));
            return;
        }
        schedule_softmax_cpu({y, s, e, row_max, row_sum, n, r, k}, get_target());
    }

    GeneratorParam<int> gpu_threads{"gpu_threads", 0};  // GPU threads per row (0: 256)
    // The kernel name tuned records know this build by (set by the build; see
    // schedules/tuned.h). Empty: hand values only.
    GeneratorParam<std::string> tuned_as{"tuned_as", ""};

private:
    Var n{"n"}, r{"r"};
    Func s{"s"}, e{"e"}, row_max{"row_max"}, row_sum{"row_sum"};
    RDom k;
};

}  // namespace

HALIDE_REGISTER_GENERATOR(Softmax, softmax)
