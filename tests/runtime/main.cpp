// main() of the runtime tests: exit code 77 (ctest: skipped) when
// HALFORMER_ISA names a kernel variant this CPU cannot run (runtime.avx512 on
// an AVX2-only CPU would otherwise run the avx2 kernels and pass, claiming a
// variant it never ran), or HALFORMER_DEVICE a GPU API with no driver or
// device here.
#include "../device_skip.h"

#include <gtest/gtest.h>

int main(int argc, char **argv) {
    testing::InitGoogleTest(&argc, argv);
    if (int skip = skip_without_test_isa()) return skip;
    if (int skip = skip_without_test_device()) return skip;
    return RUN_ALL_TESTS();
}
