// gather: rows of a batch picked by index, per time step — the KV-cache
// reorder of beam search (each beam takes its parent's cache) and the
// repetition of the encoder memory's K|V for every beam of a sentence.
//
//   src  [T, R_in, W]    Halide (w, r, t)    time-major rows (a KV cache)
//   idx  [R_out] int32   Halide (j)          source row of each output row
//   out  [T, R_out, W]   Halide (w, j, t)    out[t, j, :] = src[t, idx[j], :]
//
// An index outside [0, R_in) is an error (checked once per row, before any
// row is written), never a read out of bounds.
#include "Halide.h"
#include "common.h"
#include "../schedules/gather_schedule.h"

namespace {

using namespace Halide;
using namespace halformer;

class Gather : public Generator<Gather> {
public:
    // The kernel name tuned records know this build by (set by the build; see
    // schedules/tuned.h). Empty: hand values only.
    GeneratorParam<std::string> tuned_as{"tuned_as", ""};
    GeneratorParam<int> gpu_threads{"gpu_threads", 0};  // GPU threads per row (0: 128)

    Input<Buffer<float, 3>> src{"src"};
    Input<Buffer<int32_t, 1>> idx{"idx"};
    Output<Buffer<float, 3>> out{"out"};

    void generate() {
        /* THE ALGORITHM */
        Expr R = src.dim(1).extent();
        Expr i = idx(j);
        row(j) = require(i >= 0 && i < R, i, "gather: row index", i, "is outside [0,", R, ")");
        out(w, j, t) = src(w, clamp(row(j), 0, R - 1), t);

        /* ESTIMATES: a base-model layer's K|V cache, 64 positions × 8 rows */
        src.set_estimates({{0, 1024}, {0, 8}, {0, 64}});
        idx.set_estimates({{0, 8}});
        out.set_estimates({{0, 1024}, {0, 8}, {0, 64}});
    }

    void schedule() {
        if (leave_to_autoscheduler(auto_schedule)) return;
        Tuned rec(tuned_as, get_target());
        if (rec.apply_schedule(get_pipeline(), get_target())) return;
        if (get_target().has_gpu_feature()) {
            schedule_gather_gpu({out, row, w, j, t}, rec.get("gpu_threads", gpu_threads));
            return;
        }
        schedule_gather_cpu({out, row, w, j, t}, get_target());
    }

private:
    Var w{"w"}, j{"j"}, t{"t"};
    Func row{"row"};
};

}  // namespace

HALIDE_REGISTER_GENERATOR(Gather, gather)
