#include "target.h"

#include "halformer/device.h"
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
    if (name == "cuda" || name == "opencl") {
        // The GPU build's own device features (HALFORMER_CUDA_TARGET, the
        // most specific CUDA capability it compiles; HALFORMER_OPENCL_TARGET)
        // on this host: the JIT runs the candidates on this machine's GPU
        // (libcuda, or an OpenCL driver: PoCL on a CPU).
        const std::string built = name == "cuda" ? HALFORMER_CUDA_TARGET : HALFORMER_OPENCL_TARGET;
        if (built.empty()) throw halformer::Error("--target " + name + ": this build has no " + name + " target");
        const Halide::Target gpu(built);
        Halide::Target t = host;
        for (auto f : {Halide::Target::CUDA, Halide::Target::CUDACapability30, Halide::Target::CUDACapability32,
                       Halide::Target::CUDACapability35, Halide::Target::CUDACapability50,
                       Halide::Target::CUDACapability61, Halide::Target::CUDACapability70,
                       Halide::Target::CUDACapability75, Halide::Target::CUDACapability80,
                       Halide::Target::CUDACapability86, Halide::Target::OpenCL, Halide::Target::CLDoubles})
            if (gpu.has_feature(f)) t = t.with_feature(f);
        // The device must be there: its problem, not a failure per candidate.
        const halformer::Device dev = name == "cuda" ? halformer::Device::CUDA : halformer::Device::OpenCL;
        const std::string problem = halformer::device_problem(dev);
        if (!problem.empty()) throw halformer::Error("--target " + name + ": " + problem);
        // PoCL compiles each kernel with LLVM 15, in this process beside
        // libHalide's LLVM 14: the two crash (a segfault inside PoCL's
        // compile). The runtime's kernels are compiled ahead of time and never
        // meet libHalide, so PoCL runs them; the tuner's JIT cannot.
        if (halformer::device_description(dev).find("Portable Computing Language") != std::string::npos)
            throw halformer::Error("--target opencl: this OpenCL is PoCL, whose LLVM crashes beside libHalide's in "
                                   "the tuner's process; tune on a GPU's own OpenCL driver, or --target cuda");
        *record_name = name;
        return t;
    }
    if (name == "gpu") throw halformer::Error("--target gpu: say which, cuda or opencl");
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
