// Tuned records: schedule parameters that `halformer tune` found for one
// target on one microarchitecture, applied by the AOT build beside the hand
// values.
//
// The records are machine-written JSON (schedules/tuned/<record>/record.json).
// At configure time CMake turns each record's "kernels" table into rows of
// the generated halformer_tuned_records.inc (cmake/HalformerTuned.cmake):
//
//   {"sapphirerapids", "hf_linear", "rows_m=8,vectors_n=2"},
//
// and lists every record's target, marker and CPU in
// halformer_tuned_record_list.inc. An x86 record's kernels get one more
// variant, whose target carries the record's marker feature (a feature x86
// code generation ignores: tuned_marker_features() below); the runtime runs
// that variant only on the record's CPU, the plain one elsewhere. GPU and ARM
// records (none yet) apply to their target's only build.
//
// A record may also carry, per kernel, an autoscheduled schedule that won
// (schedules/tuned/<record>/<kernel>.schedule.h, machine-written C++); the
// build includes those below and Tuned::apply_schedule() applies one in
// place of the hand schedule.
//
// A generator's schedule() looks its kernel up with Tuned(tuned_as, target):
// the kernel name comes from the generator parameter `tuned_as`, which the
// build sets on hand-scheduled kernels only. A target without a record (an
// x86 target without a marker) or a kernel the record does not name keeps
// the hand values.
#pragma once

#include "Halide.h"

#include "halformer_tuned_schedules.inc"

#include <cstdlib>
#include <map>
#include <string>
#include <utility>
#include <vector>

namespace halformer {

struct TunedRow {
    const char *record;  // the record's name (its directory), e.g. "avx2"
    const char *kernel;  // kernel (function) name, e.g. "hf_linear"
    const char *params;  // "name=value,name=value"
};

// A record: its name, its target (tuned_target_name()), its marker among
// that target's records (-1: none, GPU or ARM) and its CPU (CpuInfo::key()).
struct TunedRecordRow {
    const char *record;
    const char *target;
    int marker;
    const char *cpu;
};

inline const TunedRecordRow *tuned_record_rows(int *count) {
    static const TunedRecordRow rows[] = {
#include "halformer_tuned_record_list.inc"
        {nullptr, nullptr, -1, nullptr}};
    *count = (int)(sizeof(rows) / sizeof(rows[0])) - 1;
    return rows;
}

// The marker features, in the order cmake/HalformerTuned.cmake assigns them
// (HALFORMER_TUNED_MARKERS): features of other architectures or of OpenCL,
// which x86 code generation never reads.
inline const std::vector<std::pair<Halide::Target::Feature, const char *>> &tuned_marker_features() {
    using T = Halide::Target;
    static const std::vector<std::pair<T::Feature, const char *>> markers = {
        {T::ARMDotProd, "arm_dot_prod"}, {T::ARMFp16, "arm_fp16"}, {T::ARMv81a, "armv81a"},
        {T::CLDoubles, "cl_doubles"},    {T::CLHalf, "cl_half"},   {T::CLAtomics64, "cl_atomics64"}};
    return markers;
}

using TunedScheduleFn = void (*)(Halide::Pipeline, Halide::Target);
struct TunedScheduleRow {
    const char *record;
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

// An x86 target's marker (-1: none).
inline int tuned_marker(const Halide::Target &t) {
    // (A GPU build's host part is x86, and OpenCL's carries cl_doubles: its
    // record is its API's, with no marker.)
    if (t.arch != Halide::Target::X86 || t.has_gpu_feature()) return -1;
    const auto &m = tuned_marker_features();
    for (size_t i = 0; i < m.size(); i++)
        if (t.has_feature(m[i].first)) return (int)i;
    return -1;
}

// The record a compile target applies ("" for none): an x86 target's by its
// marker, a GPU or ARM target's by its name.
inline std::string tuned_record_for(const Halide::Target &t) {
    const std::string target = tuned_target_name(t);
    const int marker = tuned_marker(t);
    int n = 0;
    const TunedRecordRow *rows = tuned_record_rows(&n);
    for (int i = 0; i < n; i++)
        if (target == rows[i].target && marker == rows[i].marker) return rows[i].record;
    return "";
}

// A record's compile target: `plain` (the variant's target) with the
// record's marker.
inline Halide::Target tuned_target_of(const TunedRecordRow &r, Halide::Target plain) {
    if (r.marker >= 0) plain = plain.with_feature(tuned_marker_features()[(size_t)r.marker].first);
    return plain;
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
        const std::string record = tuned_record_for(t);
        if (record.empty()) return;
        int n = 0;
        const TunedScheduleRow *sched = tuned_schedule_rows(&n);
        for (int i = 0; i < n; i++)
            if (record == sched[i].record && kernel == sched[i].kernel) schedule_ = sched[i].apply;
        const TunedRow *rows = tuned_rows(&n);
        for (int i = 0; i < n; i++) {
            if (record == rows[i].record && kernel == rows[i].kernel) {
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
