// main() of the arm-64-linux op tests (run under qemu-aarch64 in CI): the
// same suites as the x86 build, on the NEON kernels, without the x86 variant
// and device selection of tests/test_isa.cpp.
#include <gtest/gtest.h>

#include <cstdio>

int main(int argc, char **argv) {
    testing::InitGoogleTest(&argc, argv);
    std::printf("kernels: arm-64-linux (NEON)\n");
    return RUN_ALL_TESTS();
}
