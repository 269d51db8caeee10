// scatter: rows written at their own places of a larger buffer, in place —
// the paged KV cache's write (each sequence's new K|V go to the row its
// block table gives; the inverse of gather).
//
//   src  [N, W]         Halide (w, i)   the rows to write
//   idx  [N] int32      Halide (i)      destination row of source row i
//   out  [R, W]         Halide (w, r)   out[idx[i], :] = src[i, :]; every
//                                       other row keeps what it holds
//
// The destinations must be distinct (the caller's block tables make them
// so). An index outside [0, R) is an error (checked for every row before
// any is written), never a write out of bounds.
#include "Halide.h"
#include "common.h"
#include "../schedules/gather_schedule.h"

namespace {

using namespace Halide;
using namespace halformer;

class Scatter : public Generator<Scatter> {
public:
    // The kernel name tuned records know this build by (set by the build; see
    // schedules/tuned.h). Empty: hand values only.
    GeneratorParam<std::string> tuned_as{"tuned_as", ""};
    GeneratorParam<int> gpu_threads{"gpu_threads", 0};  // GPU threads per row (0: 128)

    Input<Buffer<float, 2>> src{"src"};
    Input<Buffer<int32_t, 1>> idx{"idx"};
    Output<Buffer<float, 2>> out{"out"};

    void generate() {
        /* THE ALGORITHM */
        out(w, r) = undef<float>();
        Expr R = out.dim(1).extent();
        Expr k = idx(i);
        row(i) = require(k >= 0 && k < R, k, "scatter: row index", k, "is outside [0,", R, ")");
        ri = RDom(0, src.dim(1).extent(), "ri");
        out(w, clamp(row(ri), 0, R - 1)) = src(w, ri);

        /* ESTIMATES: one decode step's K|V of 8 rows into a 4096-row cache */
        src.set_estimates({{0, 1024}, {0, 8}});
        idx.set_estimates({{0, 8}});
        out.set_estimates({{0, 1024}, {0, 4096}});
    }

    void schedule() {
        if (leave_to_autoscheduler(auto_schedule)) return;
        Tuned rec(tuned_as, get_target());
        if (rec.apply_schedule(get_pipeline(), get_target())) return;
        if (get_target().has_gpu_feature()) {
            schedule_scatter_gpu({out, row, w, ri}, rec.get("gpu_threads", gpu_threads));
            return;
        }
        schedule_scatter_cpu({out, row, w, ri}, get_target());
    }

private:
    Var w{"w"}, r{"r"}, i{"i"};
    RDom ri;
    Func row{"row"};
};

}  // namespace

HALIDE_REGISTER_GENERATOR(Scatter, scatter)
