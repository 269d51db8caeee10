#include "target.h"

#include "halformer/error.h"
#include "schedules/schedule_common.h"

#include <initializer_list>
#include <sstream>

namespace tune {

namespace {

// Whether host has every one of features that t has.
bool runs_on(const Halide::Target &t, const Halide::Target &host,
             std::initializer_list<Halide::Target::Feature> features) {
    for (auto f : features)
        if (t.has_feature(f) && !host.has_feature(f)) return false;
    return true;
}

// The most specific build variant this CPU runs.
Halide::Target host_variant(const std::map<std::string, std::string> &targets, const Halide::Target &host,
                            std::string *record_name) {
    for (const char *n : {"sapphirerapids", "avx512", "avx2", "sse41"}) {
        if (!targets.count(n)) continue;
        Halide::Target t(targets.at(n));
        if (runs_on(t, host, {Halide::Target::AVX512_SapphireRapids, Halide::Target::AVX512_Skylake,
                              Halide::Target::AVX2, Halide::Target::FMA, Halide::Target::F16C})) {
            *record_name = n;
            return t;
        }
    }
    throw halformer::Error("no build target runs on this CPU");
}

}  // namespace

std::map<std::string, std::string> build_targets() {
    std::map<std::string, std::string> out;
    std::stringstream ss(HALFORMER_X86_TARGETS);  // comma-separated
    for (std::string t; std::getline(ss, t, ',');)
        if (!t.empty()) out[halformer::tuned_target_name(Halide::Target(t))] = t;
    return out;
}

Halide::Target resolve_target(const std::string &name, std::string *record_name) {
    auto targets = build_targets();
    Halide::Target host = Halide::get_host_target();
    if (name == "host") return host_variant(targets, host, record_name);
    if (name == "cuda" || name == "opencl" || name == "gpu") {
        throw halformer::Error(
            "--target " + name + ": GPU schedules are not searched by halformer tune yet (it times on this "
            "machine's CPU). Their numbers are GeneratorParams (gpu_tile_n, gpu_tile_m, gpu_reg_n, gpu_reg_m, "
            "gpu_threads, gpu_query_tile): set them in generators/CMakeLists.txt and time with "
            "bench/gpu/run_gpu.sh on the GPU");
    }
    if (!targets.count(name)) {
        std::string known;
        for (const auto &[k, v] : targets) known += " " + k;
        throw halformer::Error("--target " + name + ": not a build target (known:" + known + ", host)");
    }
    Halide::Target t(targets.at(name));
    if (!runs_on(t, host, {Halide::Target::AVX512_SapphireRapids, Halide::Target::AVX512_Skylake,
                           Halide::Target::AVX2, Halide::Target::FMA}))
        throw halformer::Error("--target " + name + ": this CPU cannot run it, so it cannot be timed here");
    *record_name = name;
    return t;
}

}  // namespace tune
