// Tuned records: schedule parameters that `halformer tune` found for one
// target, applied by the AOT build in place of the hand values.
//
// The records are machine-written JSON (schedules/tuned/<target>/record.json).
// At configure time CMake turns each record's "kernels" table into rows of
// the generated halformer_tuned_records.inc (cmake/HalformerTuned.cmake):
//
//   {"sapphirerapids", "hf_linear", "rows_m=8,vectors_n=2"},
//
// A record may also carry, per kernel, an autoscheduled schedule that won
// (schedules/tuned/<target>/<kernel>.schedule.h, machine-written C++); the
// build includes those below and Tuned::apply_schedule() applies one in
// place of the hand schedule.
//
// A generator's schedule() looks its kernel up with Tuned(tuned_as, target):
// the kernel name comes from the generator parameter `tuned_as`, which the
// build sets on hand-scheduled kernels only. A target or kernel without a
// record keeps the hand values.
#pragma once

#include "Halide.h"

#include "halformer_tuned_schedules.inc"

#include <cstdlib>
#include <map>
#include <string>

namespace halformer {

struct TunedRow {
    const char *target;  // tuned_target_name() of the record's target
    const char *kernel;  // kernel (function) name, e.g. "hf_linear"
    const char *params;  // "name=value,name=value"
};

using TunedScheduleFn = void (*)(Halide::Pipeline, Halide::Target);
struct TunedScheduleRow {
    const char *target;
    const char *kernel;
    TunedScheduleFn apply;
};

inline const TunedScheduleRow *tuned_schedule_rows(int *count) {
    static const TunedScheduleRow rows[] = {
#include "halformer_tuned_schedule_rows.inc"
        {nullptr, nullptr, nullptr}};
    *count = (int)(sizeof(rows) / sizeof(rows[0])) - 1;
    return rows;
}

// The records this build was configured with (possibly none).
inline const TunedRow *tuned_rows(int *count) {
    static const TunedRow rows[] = {
#include "halformer_tuned_records.inc"
        {nullptr, nullptr, nullptr}};
    *count = (int)(sizeof(rows) / sizeof(rows[0])) - 1;
    return rows;
}

// The name a record's directory has for a compile target: the x86 variants
// of HALFORMER_X86_TARGETS (the names halformer::Isa uses), arm64, or the GPU
// API.
inline std::string tuned_target_name(const Halide::Target &t) {
    using T = Halide::Target;
    if (t.has_feature(T::CUDA)) return "cuda";
    if (t.has_feature(T::OpenCL)) return "opencl";
    if (t.arch == T::ARM) return t.bits == 64 ? "arm64" : "arm32";
    if (t.arch == T::X86) {
        if (t.has_feature(T::AVX512_SapphireRapids)) return "sapphirerapids";
        if (t.has_feature(T::AVX512_Skylake)) return "avx512";
        if (t.has_feature(T::AVX2)) return "avx2";
        return "sse41";
    }
    return "other";
}

// "a=1,b=2" → {a: 1, b: 2}
inline std::map<std::string, int> parse_tuned_params(const std::string &text) {
    std::map<std::string, int> out;
    size_t pos = 0;
    while (pos < text.size()) {
        size_t end = text.find(',', pos);
        if (end == std::string::npos) end = text.size();
        std::string item = text.substr(pos, end - pos);
        size_t eq = item.find('=');
        if (eq != std::string::npos) out[item.substr(0, eq)] = std::atoi(item.c_str() + eq + 1);
        pos = end + 1;
    }
    return out;
}

class Tuned {
public:
    Tuned(const std::string &kernel, const Halide::Target &t) {
        if (kernel.empty()) return;
        const std::string target = tuned_target_name(t);
        int n = 0;
        const TunedScheduleRow *sched = tuned_schedule_rows(&n);
        for (int i = 0; i < n; i++)
            if (target == sched[i].target && kernel == sched[i].kernel) schedule_ = sched[i].apply;
        const TunedRow *rows = tuned_rows(&n);
        for (int i = 0; i < n; i++) {
            if (target == rows[i].target && kernel == rows[i].kernel) {
                values_ = parse_tuned_params(rows[i].params);
                found_ = true;
            }
        }
    }
    bool found() const { return found_ || schedule_; }
    // Applies the record's autoscheduled schedule, if it has one for this
    // kernel and target; false: schedule by hand (with get()'s values).
    bool apply_schedule(const Halide::Pipeline &p, const Halide::Target &t) const {
        if (!schedule_) return false;
        schedule_(p, t);
        return true;
    }
    // The record's value for a knob, or the hand value.
    int get(const std::string &name, int hand) const {
        auto it = values_.find(name);
        return it == values_.end() ? hand : it->second;
    }

private:
    bool found_ = false;
    std::map<std::string, int> values_;
    TunedScheduleFn schedule_ = nullptr;
};

}  // namespace halformer
