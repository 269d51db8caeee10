// main() of the runtime tests: exit code 77 (ctest: skipped) when
// HALFORMER_DEVICE names a GPU API with no driver or device here.
#include "halformer/device.h"

#include <gtest/gtest.h>

#include <cstdio>
#include <cstdlib>

int main(int argc, char **argv) {
    testing::InitGoogleTest(&argc, argv);
    if (const char *dev = std::getenv("HALFORMER_DEVICE")) {
        const halformer::Device d = halformer::parse_device(dev);
        const std::string problem = halformer::device_problem(d);
        if (!problem.empty()) {
            std::printf("%s: skipped\n", problem.c_str());
            return 77;
        }
        std::printf("models run on %s\n", halformer::device_description(d).c_str());
    }
    return RUN_ALL_TESTS();
}
