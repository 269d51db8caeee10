// main() of the training tests: the kernel variant (HALFORMER_ISA) and the
// device (HALFORMER_DEVICE) are chosen as for the op and runtime suites;
// exit code 77 (ctest: skipped) when either is not available here.
#include "../device_skip.h"

#include <gtest/gtest.h>

int main(int argc, char **argv) {
    testing::InitGoogleTest(&argc, argv);
    if (int skip = skip_without_test_isa()) return skip;
    if (int skip = skip_without_test_device()) return skip;
    return RUN_ALL_TESTS();
}
