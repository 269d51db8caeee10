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

#include "hf_softmax.h"

#include <HalideBuffer.h>

#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>

using namespace halformer;

namespace {

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
            if (k.kernel == "hf_softmax") rec = &r;
    }
    if (!rec) {
        std::printf("check_dispatch: no record of %s tunes hf_softmax: nothing to check\n", isa_name(isa));
        return 77;
    }
    // Before anything reads the CPU's identity.
    const std::string cpu = mode == "record" ? rec->cpu : "GenuineIntel family 6 model 1";
    setenv("HALFORMER_CPU", cpu.c_str(), 1);
    if (this_cpu().key() != cpu) return fail("HALFORMER_CPU not read: this_cpu() is " + this_cpu().key());

    // One call of a kernel the record tunes: its wrapper picks its variant.
    Halide::Runtime::Buffer<float> x(37, 3), y(37, 3);
    for (int r = 0; r < 3; r++)
        for (int i = 0; i < 37; i++) x(i, r) = std::sin(0.3f * i + r);
    if (hf_softmax(x, y) != 0) return fail("hf_softmax failed");
    for (int r = 0; r < 3; r++) {
        double sum = 0;
        for (int i = 0; i < 37; i++) sum += y(i, r);
        if (std::fabs(sum - 1) > 1e-5) return fail("a softmax row sums to " + std::to_string(sum));
    }

    const auto choices = kernel_set_choices();
    if (choices.size() != 1) {
        std::string list;
        for (const auto &c : choices) list += " " + c.record + (c.taken ? " (taken)" : " (left)");
        return fail("expected the wrapper to weigh one record's variant, it weighed " +
                    std::to_string(choices.size()) + ":" + list);
    }
    const bool want = mode == "record";
    if (choices[0].record != rec->name || choices[0].taken != want) {
        return fail("the wrapper weighed " + choices[0].record + (choices[0].taken ? " and took it" : " and left it") +
                    "; expected " + rec->name + (want ? " taken" : " left"));
    }
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
