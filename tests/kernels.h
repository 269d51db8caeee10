// The generated kernels under test, grouped by signature: each op's hand
// schedule and its two autoscheduled builds.
#pragma once

#include <gtest/gtest.h>

#include <string>
#include <vector>

#include <HalideBuffer.h>

#include <cstdlib>
#include <utility>

// The device the op tests run the kernels on: HALFORMER_DEVICE=cpu (the
// default), opencl or cuda. On a device each call gets its inputs copied to
// the device and its outputs copied back, so every assertion compares the
// device's results with the same double-precision references as the CPU's.
enum class TestDevice { CPU, OpenCL, CUDA };
inline TestDevice test_device() {
    static const TestDevice d = [] {
        const char *e = std::getenv("HALFORMER_DEVICE");
        std::string s = e ? e : "cpu";
        if (s == "opencl") return TestDevice::OpenCL;
        if (s == "cuda") return TestDevice::CUDA;
        return TestDevice::CPU;
    }();
    return d;
}

// One kernel's builds: the x86 one (multi-variant) and, for the hand
// schedules, the GPU ones. Called like the kernel itself.
template <typename Fn>
struct Kernel {
    Fn cpu = nullptr, opencl = nullptr, cuda = nullptr;
    Fn pick() const {
        switch (test_device()) {
        case TestDevice::OpenCL: return opencl;
        case TestDevice::CUDA: return cuda;
        default: return cpu;
        }
    }
    template <typename... A>
    int operator()(A &&...args) const {
        (drop_device(args), ...);
        int rc = pick()(raw(args)...);
        int sync = 0;
        ((sync = sync ? sync : to_host(args)), ...);
        (drop_device(args), ...);
        return rc ? rc : sync;
    }

private:
    template <typename T, int D, int S>
    static halide_buffer_t *raw(Halide::Runtime::Buffer<T, D, S> &b) { return b.raw_buffer(); }
    template <typename T>
    static T raw(T v) { return v; }
    template <typename T, int D, int S>
    static int to_host(Halide::Runtime::Buffer<T, D, S> &b) { return b.copy_to_host(); }
    template <typename T>
    static int to_host(const T &) { return 0; }
    template <typename T, int D, int S>
    static void drop_device(Halide::Runtime::Buffer<T, D, S> &b) {
        b.device_free();
        b.set_host_dirty(true);  // the host copy is the one to upload next time
    }
    template <typename T>
    static void drop_device(const T &) {}
};

// HF_KERNEL(hf_x): the hand-scheduled kernel on the device under test.
#ifdef HALFORMER_TEST_GPU
#define HF_DECLARE_GPU(base) extern "C" decltype(base) base##_opencl, base##_cuda;
#define HF_KERNEL(base) Kernel<decltype(&base)>{base, base##_opencl, base##_cuda}
#else
#define HF_DECLARE_GPU(base)
#define HF_KERNEL(base) Kernel<decltype(&base)>{base, nullptr, nullptr}
#endif
#define HF_CPU_ONLY(fn) Kernel<decltype(&fn)>{fn, nullptr, nullptr}

// The hand schedule and, where built, its autoscheduled builds: Adams2019 and
// Mullapudi2016 on the CPU, Li2018 on the GPU. HF_IMPL3_NO_LI: ops without a
// Li2018 build (embedding, topk).
#ifdef HALFORMER_TEST_AUTOSCHEDULED
#define HF_IMPL3_NO_LI(base) {#base, HF_KERNEL(base)}, {#base "_adams2019", HF_CPU_ONLY(base##_adams2019)}, \
    {#base "_mullapudi2016", HF_CPU_ONLY(base##_mullapudi2016)}
#define HF_DECLARE(base) HF_DECLARE_GPU(base) \
    extern "C" decltype(base) base##_adams2019, base##_mullapudi2016;
#ifdef HALFORMER_TEST_GPU
#define HF_IMPL3(base) HF_IMPL3_NO_LI(base), \
    {#base "_li2018", Kernel<decltype(&base)>{nullptr, base##_li2018_opencl, base##_li2018_cuda}}
#define HF_DECLARE_LI(base) HF_DECLARE(base) extern "C" decltype(base) base##_li2018_opencl, base##_li2018_cuda;
#else
#define HF_IMPL3(base) HF_IMPL3_NO_LI(base)
#define HF_DECLARE_LI(base) HF_DECLARE(base)
#endif
#else
#define HF_IMPL3(base) {#base, HF_KERNEL(base)}
#define HF_IMPL3_NO_LI(base) {#base, HF_KERNEL(base)}
#define HF_DECLARE(base) HF_DECLARE_GPU(base)
#define HF_DECLARE_LI(base) HF_DECLARE_GPU(base)
#endif

template <typename Fn>
struct Impl {
    std::string name;
    Kernel<Fn> fn;
};

template <typename Fn>
inline std::string impl_name(const testing::TestParamInfo<Impl<Fn>> &info) {
    return info.param.name;
}

// The implementations a suite runs on the device under test: on a GPU, the
// hand schedules only (the autoschedulers used here make CPU schedules).
template <typename Fn>
inline std::vector<Impl<Fn>> on_device(std::vector<Impl<Fn>> all) {
    std::vector<Impl<Fn>> out;
    for (auto &i : all) {
        if (i.fn.pick()) out.push_back(i);
    }
    return out;
}

#include "halformer/kernel_error.h"

inline bool is_autoscheduled(const std::string &name) {
    return name.find("adams2019") != std::string::npos || name.find("mullapudi2016") != std::string::npos ||
           name.find("li2018") != std::string::npos;
}

// Calls a kernel and fails the test with Halide's message if it returns
// nonzero. The autoscheduled builds are only valid for shapes at least as
// large as their tiles (Adams2019 and Mullapudi2016 split with ShiftInwards):
// on a smaller shape they must return Halide's bounds error, never a wrong
// answer, and that shape is skipped: HF_CALL returns from the function it is
// in (a test body or a helper checking one shape), HF_CALL_OR_NEXT moves on to
// the next shape of a loop. Every call that ran counts as a compared shape
// (its results are checked next); OpTest (the fixture of the parameterized op
// tests) fails a test that skipped shapes and compared none, so that no test
// passes having compared nothing.
inline bool current_test_is_autoscheduled() {
    return is_autoscheduled(testing::UnitTest::GetInstance()->current_test_info()->name());
}
#define HF_AUTO_TOO_SMALL(rc) \
    ((rc) == halide_error_code_access_out_of_bounds && current_test_is_autoscheduled())

// The current test's shapes: compared (the kernel ran) and skipped (too small
// for an autoscheduled build). Reset by OpTest::SetUp.
struct ShapeCount {
    int compared = 0, too_small = 0;
    std::string first_error;  // Halide's message for the first skipped shape
};
inline ShapeCount &shape_count() {
    static ShapeCount c;
    return c;
}
inline void hf_shape_too_small() {
    ShapeCount &c = shape_count();
    if (c.too_small++ == 0) c.first_error = halformer::last_kernel_error();
}

template <typename Fn>
class OpTest : public testing::TestWithParam<Impl<Fn>> {
protected:
    void SetUp() override { shape_count() = ShapeCount{}; }
    void TearDown() override {
        const ShapeCount &c = shape_count();
        if (c.too_small > 0 && c.compared == 0) {
            ADD_FAILURE() << "compared nothing: all " << c.too_small << " shapes were too small for "
                          << this->GetParam().name << " (" << c.first_error
                          << "); give the test a shape this build can run";
        } else if (c.too_small > 0) {
            testing::Test::RecordProperty("shapes_too_small", c.too_small);
        }
    }
};

#define HF_CALL(call)                                        \
    do {                                                     \
        int rc_ = (call);                                    \
        if (HF_AUTO_TOO_SMALL(rc_)) {                        \
            hf_shape_too_small();                            \
            return;                                          \
        }                                                    \
        ASSERT_EQ(rc_, 0) << halformer::last_kernel_error(); \
        shape_count().compared++;                            \
    } while (0)
#define HF_CALL_OR_NEXT(call)                                \
    {                                                        \
        int rc_ = (call);                                    \
        if (HF_AUTO_TOO_SMALL(rc_)) {                        \
            hf_shape_too_small();                            \
            continue;                                        \
        }                                                    \
        ASSERT_EQ(rc_, 0) << halformer::last_kernel_error(); \
        shape_count().compared++;                            \
    }
