// Which compiled x86 variant of the kernels runs.
//
// Every hand-scheduled kernel is compiled for four x86 variants and a wrapper
// picks, per call, the most specific one the CPU supports. An application (or
// a test, or a benchmark) may cap that choice, to compare variants on one
// machine or to reproduce a result from an older CPU:
//
//   halformer::set_isa_limit(halformer::Isa::AVX2);   // or HALFORMER_ISA=avx2
#pragma once

#include <string>
#include <vector>

namespace halformer {

enum class Isa { SSE41 = 0, AVX2 = 1, AVX512 = 2, SapphireRapids = 3 };

// All variants, lowest first.
const std::vector<Isa> &all_isas();
const char *isa_name(Isa isa);
// Parses "sse41", "avx2", "avx512", "sapphirerapids"; throws on anything else.
Isa parse_isa(const std::string &name);
// True if this CPU can run the variant.
bool cpu_supports(Isa isa);
// The variant the kernels will run now: the highest one that is both
// supported by the CPU and within the limit.
Isa selected_isa();
// The name of the CPU code the kernels run: selected_isa()'s name on x86-64,
// "arm64" in the arm-64-linux build (one variant, NEON; HALFORMER_ISA does
// not apply there).
const char *running_variant();
// Caps the variant the kernels choose (the highest, by default). Throws if the
// CPU cannot run `limit`, or if a kernel has already run: each kernel's
// wrapper chooses once, on its first call, and keeps that choice. The environment variable HALFORMER_ISA sets the
// initial limit.
void set_isa_limit(Isa limit);
Isa isa_limit();

}  // namespace halformer
