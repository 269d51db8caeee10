// The autoschedulers as the build uses them: Adams2019, Mullapudi2016 and
// Li2018, each followed by one change to the schedule it applied, so that
// the kernel serves every shape, not only those at least as large as its
// tiles.
//
// Halide 14's autoschedulers pick tile sizes from the generator's estimates
// and split with tail strategies that assume every call is at least one
// tile large: ShiftInwards for outputs and for stages that read an input
// (Adams2019; Auto, which means the same, in Mullapudi2016 and Li2018), and
// RoundUp for the others. On a smaller call ShiftInwards moves the tile off
// the buffer and the kernel refuses the call with a bounds error ("Output
// buffer out is accessed at -232"), and RoundUp computes past the region
// asked for. Which calls are refused depends on the tiles, so on the target
// and the machine parameters the schedule was made for.
//
// GuardedAdams2019, GuardedMullapudi2016 and GuardedLi2018 run the
// autoscheduler of that name, then turn every split's tail strategy into
// GuardWithIf: the last tile is cut at the edge of the region asked for, so
// no stage reads or writes outside it, at any size. The loop nest, tiles,
// vectorization and parallelism stay the autoscheduler's; only the tails
// gain a bounds test. The schedule source written with `-e schedule` says the
// same. Registered when the generator program starts; the build names them
// (cmake/HalformerKernels.cmake), with the autoscheduler's plugin loaded.
#include "Halide.h"

#include <string>

namespace halformer {
namespace {

using namespace Halide;
using namespace Halide::Internal;

// Every split of every stage of every Func the pipeline computes becomes
// GuardWithIf. Returns the number changed.
int guard_tails(const Pipeline &p) {
    std::vector<Function> outputs;
    for (const Func &f : p.outputs()) outputs.push_back(f.function());
    int changed = 0;
    auto guard = [&](StageSchedule s) {  // a handle: the stage's own schedule
        for (Split &split : s.splits()) {
            if (split.is_split() && split.tail != TailStrategy::GuardWithIf) {
                split.tail = TailStrategy::GuardWithIf;
                changed++;
            }
        }
    };
    for (auto &named : build_environment(outputs)) {
        Function f = named.second;
        guard(f.definition().schedule());
        for (Definition update : f.updates()) guard(update.schedule());  // handles: shared
    }
    return changed;
}

std::string replace_all(std::string s, const std::string &from, const std::string &to) {
    for (size_t at = s.find(from); at != std::string::npos; at = s.find(from, at + to.size())) {
        s.replace(at, from.size(), to);
    }
    return s;
}

void register_guarded(const std::string &name) {
    Pipeline::add_autoscheduler(
        "Guarded" + name,
        [name](const Pipeline &p, const Target &target, const MachineParams &params,
               AutoSchedulerResults *results) {
            Pipeline pipeline = p;
            AutoSchedulerResults r = pipeline.auto_schedule(name, target, params);
            guard_tails(pipeline);
            for (const char *tail : {"TailStrategy::ShiftInwards", "TailStrategy::RoundUp",
                                     "TailStrategy::Auto"}) {
                r.schedule_source = replace_all(r.schedule_source, tail, "TailStrategy::GuardWithIf");
            }
            r.schedule_source = "// " + name + ", every split's tail then made GuardWithIf " +
                                "(schedules/guarded_autoschedulers.cpp)\n" + r.schedule_source;
            r.scheduler_name = "Guarded" + name;
            if (results) *results = r;
        });
}

struct Registrar {
    Registrar() {
        for (const char *name : {"Adams2019", "Mullapudi2016", "Li2018"}) register_guarded(name);
    }
} registrar;

}  // namespace
}  // namespace halformer
