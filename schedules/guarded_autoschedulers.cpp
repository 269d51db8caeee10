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
//
// GuardedAdams2019Greedy is GuardedAdams2019 with its beam search at width 1
// (Halide's HL_BEAM_SIZE=1: one greedy pass instead of five passes of a
// 32-wide beam): seconds a kernel instead of minutes (the attention for two
// targets: 7 s against 278 s), for builds that test the autoscheduled
// kernels rather than time them (HALFORMER_ADAMS2019_SEARCH=greedy).
#include "Halide.h"

#include <cstdlib>
#include <optional>
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

// Sets an environment variable for the life of the object, then puts back
// what was there.
class ScopedEnv {
public:
    ScopedEnv(const char *name, const char *value) : name_(name) {
        if (const char *old = std::getenv(name)) old_ = old;
        setenv(name, value, 1);
    }
    ~ScopedEnv() {
        if (old_) setenv(name_, old_->c_str(), 1);
        else unsetenv(name_);
    }
    ScopedEnv(const ScopedEnv &) = delete;
    ScopedEnv &operator=(const ScopedEnv &) = delete;

private:
    const char *name_;
    std::optional<std::string> old_;
};

// Registers "Guarded" + name + suffix; beam, when given, is the beam width
// the autoscheduler searches with.
void register_guarded(const std::string &name, const std::string &suffix = "",
                      const char *beam = nullptr) {
    Pipeline::add_autoscheduler(
        "Guarded" + name + suffix,
        [name, suffix, beam](const Pipeline &p, const Target &target, const MachineParams &params,
                             AutoSchedulerResults *results) {
            Pipeline pipeline = p;
            std::optional<ScopedEnv> width;
            if (beam) width.emplace("HL_BEAM_SIZE", beam);
            AutoSchedulerResults r = pipeline.auto_schedule(name, target, params);
            guard_tails(pipeline);
            for (const char *tail : {"TailStrategy::ShiftInwards", "TailStrategy::RoundUp",
                                     "TailStrategy::Auto"}) {
                r.schedule_source = replace_all(r.schedule_source, tail, "TailStrategy::GuardWithIf");
            }
            r.schedule_source = "// " + name + (beam ? std::string(" (beam ") + beam + ")" : "") +
                                ", every split's tail then made GuardWithIf " +
                                "(schedules/guarded_autoschedulers.cpp)\n" + r.schedule_source;
            r.scheduler_name = "Guarded" + name + suffix;
            if (results) *results = r;
        });
}

struct Registrar {
    Registrar() {
        for (const char *name : {"Adams2019", "Mullapudi2016", "Li2018"}) register_guarded(name);
        register_guarded("Adams2019", "Greedy", "1");
    }
} registrar;

}  // namespace
}  // namespace halformer
