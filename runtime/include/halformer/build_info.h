// What this build of the kernels was compiled with: the tuned records
// (schedules/tuned/<record>/record.json), each compiled as its own kernel set
// of one x86 variant and run on its microarchitecture only.
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
    std::string name;     // the record's directory: "avx2", "avx2-intel-6-60", ...
    std::string target;   // the variant's name: "sapphirerapids", "avx2", ...
    int marker = -1;      // its kernels' marker feature among the variant's records (schedules/tuned.h)
    std::string machine;  // where it was tuned, in words
    std::string cpu;      // its microarchitecture, CpuInfo::key() (empty in records older than the key)
    std::string date;
    std::string path;     // the record, relative to the source tree
    std::vector<TunedKernel> kernels;
};

// The CPU this process runs on (/proc/cpuinfo, /sys's cache sizes): what a
// tuned record says it was made on. HALFORMER_CPU="GenuineIntel family 6
// model 207" stands in for /proc/cpuinfo's vendor, family and model (read
// once, before the first kernel call: to see or test which kernel set
// another CPU would run).
struct CpuInfo {
    std::string vendor;  // "AuthenticAMD", "GenuineIntel", ...
    int family = 0, model = 0;
    std::string name;    // "model name"
    int threads = 0;     // online CPUs
    int l1d_kb = 0, l2_kb = 0, l3_kb = 0;
    // The microarchitecture, "AuthenticAMD family 25 model 17": records tuned
    // on the same key were made on this kind of core.
    std::string key() const;
    // The key, threads and caches in words.
    std::string describe() const;
};
const CpuInfo &this_cpu();

// Whether a record was tuned on this CPU's microarchitecture. A record
// without a key matches nothing.
bool record_matches_cpu(const TunedRecord &r);

// A line for a run that uses `r` (null: the hand schedules): which record,
// made where; for the hand schedules, the records this variant has for
// other CPUs.
std::string record_note(const TunedRecord *r);

// Which float32 inference projections run on weights packed once into
// 48-column panels (hf_linear_f32*) on this CPU (the rest: W as stored,
// hf_linear*):
//   All    every one: an AVX-512 or AVX2 variant runs (or
//          HALFORMER_FP32_PACK=1);
//   Steps  those of a decoding step's shape (up to 4 rows) only, prefill on
//          W as stored: the SSE4.1 variant (its registers leave a 48-wide
//          panel one-row blocks). Both paths sum in k order, so a row's bits
//          do not depend on its batch;
//   None   none: HALFORMER_FP32_PACK=0 (no second copy of the weights; a
//          one-row step then takes dot products along k, and a row's bits
//          can depend on its batch), or a build without the packed kernels.
// A model reads it once, when it is made or loaded.
enum class Fp32Packing { None, Steps, All };
Fp32Packing fp32_packing();
// Whether this build has the packed bf16 / int8 kernels (x86 builds do; the
// ARM one does not, and runs float32 only).
bool lowp_kernels();

// Every record the kernels were built with (none with -DHALFORMER_TUNED=OFF).
const std::vector<TunedRecord> &tuned_records();
// The record one variant runs on this CPU, or nullptr: the hand schedules
// (no record of that variant was made on this microarchitecture).
const TunedRecord *tuned_record(Isa isa);

// Whether a kernel's wrapper may take the variant of `isa` tuned by the
// record with `marker`: the record was made on this CPU's microarchitecture.
// Called by the runtime's variant hook (each kernel asks once, on its first
// call); every answer is kept in kernel_set_choices().
bool tuned_variant_runs_here(Isa isa, int marker);
struct KernelSetChoice {
    std::string record;  // the record whose variant a kernel weighed
    bool taken;          // this CPU is the record's: its kernels run
};
std::vector<KernelSetChoice> kernel_set_choices();

}  // namespace halformer
