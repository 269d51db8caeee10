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
    const halformer::Isa limit = halformer::isa_limit();
    if (!halformer::cpu_supports(limit)) {
        std::printf("this CPU cannot run the %s variant: skipped\n", halformer::isa_name(limit));
        return 77;
    }
    return 0;
}
