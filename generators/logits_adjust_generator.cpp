// logits_adjust: a decoding step's logits with per-row changes (the decoding
// controls: CTRL's repetition penalty, banned tokens)
//   out = logits; then for each entry e < N:
//     out[rows[e], ids[e]] = adjust(out[rows[e], ids[e]], factor[e])
//   adjust(l, θ) = −1e30 where θ = 0 (a banned token: no-repeat n-grams, a
//                  minimum length's eos), else l / θ where l > 0, else l · θ
//                  (θ > 1 makes a token already seen less likely)
//
//   logits  [R, V]   Halide (v, r)
//   rows    [N] int32  the entry's row;  ids [N] int32  its token
//   factor  [N]      θ per entry
//   out     [R, V]   Halide (v, r)
//
// Each (row, id) is given once (the caller merges repeats); an entry's row
// outside [0, R) or id outside [0, V) is an error (nonzero), checked for
// every entry before anything is written, never a write out of bounds.
#include "Halide.h"
#include "common.h"
#include "../schedules/logits_adjust_schedule.h"

namespace {

using namespace Halide;
using namespace halformer;

class LogitsAdjust : public Generator<LogitsAdjust> {
public:
    GeneratorParam<int> gpu_threads{"gpu_threads", 0};  // GPU threads per row (0: 128)
    // The kernel name tuned records know this build by (set by the build; see
    // schedules/tuned.h). Empty: hand values only.
    GeneratorParam<std::string> tuned_as{"tuned_as", ""};

    Input<Buffer<float, 2>> logits{"logits"};
    Input<Buffer<int32_t, 1>> rows{"rows"};
    Input<Buffer<int32_t, 1>> ids{"ids"};
    Input<Buffer<float, 1>> factor{"factor"};
    Output<Buffer<float, 2>> out{"out"};

    void generate() {
        /* THE ALGORITHM */
        Expr V = logits.dim(0).extent(), R = logits.dim(1).extent(), N = ids.dim(0).extent();
        Expr id = ids(e), row = rows(e);
        entry_id(e) = require(id >= 0 && id < V, id, "logits_adjust: entry", e, "has token id", id,
                              "outside the vocabulary [0,", V, ")");
        entry_row(e) = require(row >= 0 && row < R, row, "logits_adjust: entry", e, "has row", row,
                               "outside [0,", R, ")");
        out(v, r) = logits(v, r);
        RDom k(0, N);
        Expr kv = clamp(entry_id(k), 0, V - 1), kr = clamp(entry_row(k), 0, R - 1), th = factor(k);
        Expr l = out(kv, kr);
        out(kv, kr) = select(th == 0.0f, -1e30f, select(l > 0.0f, l / th, l * th));

        /* ESTIMATES: 4 rows of a 32000-token vocabulary, 64 entries */
        logits.set_estimates({{0, 32000}, {0, 4}});
        rows.set_estimates({{0, 64}});
        ids.set_estimates({{0, 64}});
        factor.set_estimates({{0, 64}});
        out.set_estimates({{0, 32000}, {0, 4}});
    }

    void schedule() {
        if (leave_to_autoscheduler(auto_schedule)) return;
        Tuned rec(tuned_as, get_target());
        if (rec.apply_schedule(get_pipeline(), get_target())) return;
        if (get_target().has_gpu_feature()) {
            schedule_logits_adjust_gpu({out, entry_id, entry_row, v, r}, rec.get("gpu_threads", gpu_threads));
            return;
        }
        schedule_logits_adjust_cpu({out, entry_id, entry_row, v, r}, get_target());
    }

private:
    Var v{"v"}, r{"r"}, e{"e"};
    Func entry_id{"entry_id"}, entry_row{"entry_row"};
};

}  // namespace

HALIDE_REGISTER_GENERATOR(LogitsAdjust, logits_adjust)
