// Kernel sets per microarchitecture, chosen at run time (schedules/tuned.h,
// runtime/src/halide_hooks.cpp): with the CPU identity faked
// (HALFORMER_CPU), a tuned kernel's wrapper must take the record's variant
// on the record's CPU and the hand variant on any other, and the runtime
// must say so (tuned_record, record_note).
//
//   check_dispatch record   the CPU is the record's: its kernel set runs
//   check_dispatch other    an unknown CPU of the same features: hand values
//
// Exit 77 (skipped) where the variant this CPU runs has no tuned record.
#include "halformer/build_info.h"
#include "halformer/isa.h"

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

    // The wrapper weighs the variants of this target's records in turn (a
    // target may have records for several CPUs) and takes the first whose
    // CPU this is: the record's must be weighed, taken only on its CPU, and
    // no other record's taken.
    const bool want = mode == "record";
    std::string list;
    bool weighed = false;
    for (const auto &c : kernel_set_choices()) {
        list += " " + c.record + (c.taken ? " (taken)" : " (left)");
        if (c.record == rec->name) weighed = true;
        if (c.taken != (want && c.record == rec->name)) {
            return fail(std::string("the wrapper ") + (c.taken ? "took " : "left ") + c.record + " on " + cpu);
        }
    }
    if (!weighed) return fail("the wrapper never weighed " + rec->name + "'s variant; it weighed:" + list);
    const TunedRecord *runs = tuned_record(isa);
    if ((runs == rec) != want) return fail("tuned_record() does not say which set runs");
    const std::string note = record_note(runs);
    const bool says = want ? note.find(rec->path) != std::string::npos && note.find("runs on this") != std::string::npos
                           : note.find("hand schedules") != std::string::npos && note.find(rec->name) != std::string::npos;
    if (!says) return fail("record_note says: " + note);
    std::printf("check_dispatch: %s on %s: %s (%s)\n", isa_name(isa), cpu.c_str(),
                want ? "the record's kernel set" : "the hand kernel set", note.c_str());
    return 0;
}
