// What this build of the kernels was compiled with: the tuned records
// (schedules/tuned/<target>/record.json) applied to each x86 variant.
#pragma once

#include "halformer/isa.h"

#include <string>
#include <vector>

namespace halformer {

struct TunedKernel {
    std::string kernel;  // e.g. "hf_linear"
    std::string params;  // "rows_m=8,vectors_n=2", or "autoscheduled" (the record's schedule)
};

struct TunedRecord {
    std::string target;   // the variant's name: "sapphirerapids", "avx2", ...
    std::string machine;  // where it was tuned
    std::string date;
    std::string path;     // the record, relative to the source tree
    std::vector<TunedKernel> kernels;
};

// Every record the kernels were built with (none with -DHALFORMER_TUNED=OFF).
const std::vector<TunedRecord> &tuned_records();
// The record for one variant, or nullptr: that variant runs the hand schedules.
const TunedRecord *tuned_record(Isa isa);

}  // namespace halformer
