// Kernel sets per microarchitecture, chosen at run time (schedules/tuned.h,
// runtime/src/halide_hooks.cpp): with the CPU identity faked
// (HALFORMER_CPU), a tuned kernel's wrapper must take the record's variant
// on the record's CPU and the hand variant on any other, and the runtime
// must say so (tuned_record, record_note).
//
//   check_dispatch record   the CPU is the record's: its kernel set runs
//   check_dispatch other    an unknown CPU of the same features: hand values
//
// The variant checked is the one the kernels run here (HALFORMER_ISA caps
// it: ctest runs both modes once per variant). A wrapper weighs every
// variant it holds (Halide 14 asks each one's features, the least specific
// first) and runs the most specific one it may: so a record of a lower
// variant made on the same CPU (this project's avx2 and sapphirerapids
// records name one Zen 4) is weighed and may say yes, and the selected
// variant's record still runs. Which function ran is not visible from here;
// the rule the wrapper follows is (Halide's call_cached_indirect_function,
// most specific first), and gdb on this test shows it (docs/tuning.md).
//
// Exit 77 (skipped) where the variant this CPU runs has no tuned record, or
// where HALFORMER_ISA names a variant this CPU cannot run.
#include "halformer/build_info.h"
#include "halformer/isa.h"

#include "device_skip.h"

#include "hf_layer_norm.h"

#include <HalideBuffer.h>

#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>

using namespace halformer;

namespace {

// A kernel every committed record tunes (each record's layer_norm task).
constexpr const char *kProbe = "hf_layer_norm";

// The marker features of the records' variants, in the order
// cmake/HalformerTuned.cmake assigns them (HALFORMER_TUNED_MARKERS): the
// variant a record's kernels were compiled for is its target plus this.
constexpr const char *kMarkerNames[] = {"arm_dot_prod", "arm_fp16", "armv81a", "cl_doubles", "cl_half", "cl_atomics64"};

int fail(const std::string &why) {
    std::fprintf(stderr, "check_dispatch: FAIL: %s\n", why.c_str());
    return 1;
}

}  // namespace

int main(int argc, char **argv) {
    const std::string mode = argc > 1 ? argv[1] : "";
    if (mode != "record" && mode != "other") {
        std::fprintf(stderr, "usage: check_dispatch record|other\n");
        return 2;
    }
    if (int skip = skip_without_test_isa()) return skip;
    const Isa isa = selected_isa();
    const TunedRecord *rec = nullptr;
    for (const auto &r : tuned_records()) {
        if (r.target != isa_name(isa)) continue;
        for (const auto &k : r.kernels)
            if (k.kernel == kProbe && !rec) rec = &r;
    }
    if (!rec) {
        std::printf("check_dispatch: no record of %s tunes %s: nothing to check\n", isa_name(isa), kProbe);
        return 77;
    }
    // Before anything reads the CPU's identity.
    const std::string cpu = mode == "record" ? rec->cpu : "GenuineIntel family 6 model 1";
    setenv("HALFORMER_CPU", cpu.c_str(), 1);
    if (this_cpu().key() != cpu) return fail("HALFORMER_CPU not read: this_cpu() is " + this_cpu().key());

    // One call of a kernel the record tunes: its wrapper picks its variant.
    Halide::Runtime::Buffer<float> x(37, 3), gamma(37), beta(37), y(37, 3);
    gamma.fill(1.0f);
    beta.fill(0.0f);
    for (int r = 0; r < 3; r++)
        for (int i = 0; i < 37; i++) x(i, r) = std::sin(0.3f * i + r);
    if (hf_layer_norm(x, gamma, beta, 1e-5f, y) != 0) return fail("hf_layer_norm failed");
    for (int r = 0; r < 3; r++) {
        double sum = 0, sq = 0;
        for (int i = 0; i < 37; i++) sum += y(i, r), sq += y(i, r) * y(i, r);
        if (std::fabs(sum / 37) > 1e-5 || std::fabs(sq / 37 - 1) > 1e-3)
            return fail("a normalized row has mean " + std::to_string(sum / 37) + " and mean square " +
                        std::to_string(sq / 37));
    }

    // The wrapper weighs the variants of the records of every target it may
    // run (a target may have records for several CPUs). Of the selected
    // variant's records, the record's must be weighed and be the only one
    // that may run, and only on its CPU; no record of a variant above the
    // selected one may be weighed at all; a lower variant's record of this
    // CPU may say yes (the wrapper prefers the more specific variant), and
    // every such record that tunes the probe must have been weighed.
    const bool want = mode == "record";
    std::string list;
    bool weighed = false;
    const auto choices = kernel_set_choices();
    for (const auto &c : choices) {
        list += " " + c.record + (c.taken ? " (may run)" : " (left)");
    }
    for (const auto &c : choices) {
        const TunedRecord *of = nullptr;
        for (const auto &r : tuned_records())
            if (r.name == c.record) of = &r;
        if (!of) return fail("the wrapper weighed a variant of no known record (" + c.record + "); it weighed:" + list);
        const Isa target = parse_isa(of->target);
        if ((int)target > (int)isa) {
            return fail("the wrapper weighed " + c.record + " (" + of->target + ") above the selected " +
                        isa_name(isa) + "; it weighed:" + list);
        }
        if (c.record == rec->name) weighed = true;
        if (target == isa && c.taken != (want && c.record == rec->name)) {
            return fail(std::string("the wrapper ") + (c.taken ? "took " : "left ") + c.record + " on " + cpu +
                        "; it weighed:" + list);
        }
        if (target != isa && c.taken != (of->cpu == cpu)) {
            return fail("the wrapper's answer for " + c.record + " (made on " + of->cpu + ") on " + cpu +
                        " was " + (c.taken ? "yes" : "no") + "; it weighed:" + list);
        }
    }
    if (!weighed) return fail("the wrapper never weighed " + rec->name + "'s variant; it weighed:" + list);
    for (const auto &r : tuned_records()) {
        if (r.cpu != cpu || parse_isa(r.target) >= isa || !cpu_supports(parse_isa(r.target))) continue;
        bool tunes = false, asked = false;
        for (const auto &k : r.kernels) tunes = tunes || k.kernel == kProbe;
        for (const auto &c : choices) asked = asked || c.record == r.name;
        if (tunes && !asked) {
            return fail("a record of this CPU for the lower variant " + r.target + " (" + r.name +
                        ") was refused without being weighed; it weighed:" + list);
        }
    }
    const TunedRecord *runs = tuned_record(isa);
    if ((runs == rec) != want) return fail("tuned_record() does not say which set runs");
    const std::string note = record_note(runs);
    const bool says = want ? note.find(rec->path) != std::string::npos && note.find("runs on this") != std::string::npos
                           : note.find("hand schedules") != std::string::npos && note.find(rec->name) != std::string::npos;
    if (!says) return fail("record_note says: " + note);
    // For check_dispatch_ran.sh, which reads the function that ran in gdb.
    const int marker = want ? rec->marker : -1;
    if (marker >= (int)(sizeof kMarkerNames / sizeof *kMarkerNames)) return fail("marker out of range");
    std::printf("check_dispatch: the variant that must run: %s, marker %s\n", isa_name(isa),
                marker >= 0 ? kMarkerNames[marker] : "none");
    std::printf("check_dispatch: %s on %s: %s (%s)\n", isa_name(isa), cpu.c_str(),
                want ? "the record's kernel set" : "the hand kernel set", note.c_str());
    return 0;
}
