// main() of the runtime tests: exit code 77 (ctest: skipped) when
// HALFORMER_DEVICE names a GPU API with no driver or device here.
#include "../device_skip.h"

#include <gtest/gtest.h>

int main(int argc, char **argv) {
    testing::InitGoogleTest(&argc, argv);
    if (int skip = skip_without_test_device()) return skip;
    return RUN_ALL_TESTS();
}
