#include <gtest/gtest.h>

#include <cstdio>
#include <cstdlib>

#include "device_skip.h"
#include "halformer/isa.h"

// The variant the kernels run in this process: what HALFORMER_ISA asked for
// (ctest runs the whole suite once per variant), capped by the CPU.
TEST(Isa, SelectedVariantHonoursTheLimit) {
    const halformer::Isa limit = halformer::isa_limit();
    const halformer::Isa sel = halformer::selected_isa();
    EXPECT_LE((int)sel, (int)limit);
    EXPECT_TRUE(halformer::cpu_supports(sel));
    std::printf("kernel variant under test: %s (limit %s)\n", halformer::isa_name(sel),
                halformer::isa_name(limit));
}

// Under an emulated CPU (ctest's ops.host-avx2 and ops.host-sse41 run the
// suite under qemu-x86_64 -cpu Haswell / Nehalem) HALFORMER_EXPECT_ISA names
// the variant such a CPU must get with no HALFORMER_ISA: the emulated CPUID
// really lacks the next variant's features, so the wrappers chose by the CPU.
TEST(Isa, EmulatedHostGetsItsVariant) {
    const char *expect = std::getenv("HALFORMER_EXPECT_ISA");
    if (!expect) GTEST_SKIP() << "not under an emulated CPU (HALFORMER_EXPECT_ISA unset)";
    const halformer::Isa want = halformer::parse_isa(expect);
    EXPECT_EQ(halformer::selected_isa(), want) << "selected " << halformer::isa_name(halformer::selected_isa());
    if (want != halformer::Isa::SapphireRapids) {
        EXPECT_FALSE(halformer::cpu_supports((halformer::Isa)((int)want + 1)))
            << "the emulated CPU runs the variant above " << expect;
    }
}

TEST(Isa, ParsesNamesAndRejectsOthers) {
    for (auto i : halformer::all_isas()) EXPECT_EQ(halformer::parse_isa(halformer::isa_name(i)), i);
    EXPECT_THROW(halformer::parse_isa("avx9"), std::invalid_argument);
}

// Exit code 77 (ctest: skipped) when HALFORMER_ISA names a variant this CPU
// cannot run, or HALFORMER_DEVICE a GPU API with no driver or device here.
int main(int argc, char **argv) {
    testing::InitGoogleTest(&argc, argv);
    if (int skip = skip_without_test_isa()) return skip;
    if (int skip = skip_without_test_device()) return skip;
    return RUN_ALL_TESTS();
}
