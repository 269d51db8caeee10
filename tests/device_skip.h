// For the test mains: HALFORMER_DEVICE names the device the suite runs its
// kernels on (cpu, opencl, cuda). Returns 77 (ctest: skipped) and says why
// when that device has no driver or hardware here, else 0.
#pragma once

#include "halformer/device.h"
#include "halformer/isa.h"

#include <cstdio>
#include <cstdlib>
#include <string>

inline int skip_without_test_device() {
    const char *dev = std::getenv("HALFORMER_DEVICE");
    if (!dev) return 0;
    const halformer::Device d = halformer::parse_device(dev);
    const std::string problem = halformer::device_problem(d);
    if (!problem.empty()) {
        std::printf("%s: skipped\n", problem.c_str());
        return 77;
    }
    std::printf("kernels run on %s\n", halformer::device_description(d).c_str());
    return 0;
}

// HALFORMER_ISA names the kernel variant a suite runs (ctest runs it once per
// variant): 77 (skipped) when this CPU cannot run it, else 0.
inline int skip_without_test_isa() {
#if !defined(__x86_64__)
    // One variant on other architectures: an x86 variant asked for is skipped.
    if (std::getenv("HALFORMER_ISA")) {
        std::printf("HALFORMER_ISA names an x86 variant; this is not an x86-64 build: skipped\n");
        return 77;
    }
    return 0;
#endif
    // No HALFORMER_ISA: the best variant this CPU runs, whichever it is.
    if (!std::getenv("HALFORMER_ISA")) return 0;
    const halformer::Isa limit = halformer::isa_limit();
    if (!halformer::cpu_supports(limit)) {
        std::printf("this CPU cannot run the %s variant: skipped\n", halformer::isa_name(limit));
        return 77;
    }
    return 0;
}
