// The generated kernels under test, grouped by signature: each op's hand
// schedule and its two autoscheduled builds.
#pragma once

#include <gtest/gtest.h>

#include <string>
#include <vector>

#define HF_IMPL3(base) {#base, base}, {#base "_adams2019", base##_adams2019}, \
    {#base "_mullapudi2016", base##_mullapudi2016}

template <typename Fn>
struct Impl {
    std::string name;
    Fn fn;
};

template <typename Fn>
inline std::string impl_name(const testing::TestParamInfo<Impl<Fn>> &info) {
    return info.param.name;
}

#include "halformer/kernel_error.h"

inline bool is_autoscheduled(const std::string &name) {
    return name.find("adams2019") != std::string::npos ||
           name.find("mullapudi2016") != std::string::npos;
}

// Calls a kernel and fails the test with Halide's message if it returns
// nonzero. The autoscheduled builds are only valid for shapes at least as
// large as their tiles (Adams2019 and Mullapudi2016 split with ShiftInwards):
// on a smaller shape they must return Halide's bounds error, never a wrong
// answer; the rest of the case is then skipped (HF_CALL_OR_NEXT moves on to
// the next shape of a loop).
inline bool current_test_is_autoscheduled() {
    return is_autoscheduled(testing::UnitTest::GetInstance()->current_test_info()->name());
}
#define HF_AUTO_TOO_SMALL(rc) \
    ((rc) == halide_error_code_access_out_of_bounds && current_test_is_autoscheduled())
#define HF_CALL(call)                                                               \
    do {                                                                            \
        int rc_ = (call);                                                           \
        if (HF_AUTO_TOO_SMALL(rc_)) GTEST_SKIP() << halformer::last_kernel_error(); \
        ASSERT_EQ(rc_, 0) << halformer::last_kernel_error();                        \
    } while (0)
#define HF_CALL_OR_NEXT(call)                                \
    {                                                        \
        int rc_ = (call);                                    \
        if (HF_AUTO_TOO_SMALL(rc_)) continue;                \
        ASSERT_EQ(rc_, 0) << halformer::last_kernel_error(); \
    }
