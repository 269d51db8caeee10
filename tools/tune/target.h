// The build targets the tuner can tune for: the x86 variants the build
// compiles, by their record names (sapphirerapids, avx512, avx2, sse41), and
// the GPU APIs (cuda, opencl): their kernels' GPU schedules, timed on this
// machine's GPU.
#pragma once

#include "Halide.h"

#include <map>
#include <string>

namespace tune {

// Record name → Halide target string, from HALFORMER_X86_TARGETS.
std::map<std::string, std::string> build_targets();

// The target of --target NAME ("host": the most specific variant this CPU
// runs; cuda or opencl: this host with the GPU build's device features),
// with its record name in *record_name; an Error when it is no build target
// or one this CPU cannot run.
Halide::Target resolve_target(const std::string &name, std::string *record_name);

}  // namespace tune
