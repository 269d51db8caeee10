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

// The launch check (ctest's ops.cuda_limits): HALFORMER_DEVICE=cuda with
// HALFORMER_CUDA_LAUNCH_CHECK=1, run on the fake CUDA driver
// (tests/cuda_limits/fake_cuda_driver.cpp), which checks every launch against
// a real device's limits and runs nothing. Each call then launches the CUDA
// build (a launch over a limit fails the call, as on a GPU) and computes the
// values with the same algorithm's CPU build, so that every assertion of the
// suite holds and every CUDA launch it makes, at every shape, is checked.
inline bool cuda_launch_check() {
    static const bool on = [] {
        const char *e = std::getenv("HALFORMER_CUDA_LAUNCH_CHECK");
        return test_device() == TestDevice::CUDA && e && std::string(e) == "1";
    }();
    return on;
}

// One kernel's builds: the x86 one (multi-variant) and, for the hand
// schedules, the GPU ones; `host`: for a GPU-only build (Li2018's), the CPU
// build of the same algorithm, which the launch check computes values with.
// Called like the kernel itself.
template <typename Fn>
struct Kernel {
    Fn cpu = nullptr, opencl = nullptr, cuda = nullptr, host = nullptr;
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
        if (cuda_launch_check()) {
            // Nothing ran: forget the device copies (the host ones are as
            // they were) and compute on the CPU.
            (forget_device(args), ...);
            Fn values = cpu ? cpu : host;
            return rc ? rc : values(raw(args)...);
        }
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
    template <typename T, int D, int S>
    static void forget_device(Halide::Runtime::Buffer<T, D, S> &b) {
        b.set_device_dirty(false);
        b.device_free();
        b.set_host_dirty(false);
    }
    template <typename T>
    static void forget_device(const T &) {}
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
    {#base "_li2018", Kernel<decltype(&base)>{nullptr, base##_li2018_opencl, base##_li2018_cuda, base}}
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

#include "halformer/isa.h"
#include "halformer/kernel_error.h"
#if defined(HALFORMER_TEST_AUTOSCHEDULED) && __has_include("halformer_autoscheduled.h")
#include "halformer_autoscheduled.h"  // HALFORMER_AUTOSCHEDULED_ISAS (the build's generated/)
#endif

#include <cstdio>
#include <sstream>

#include <dlfcn.h>

// Under an emulated CPU (ctest's ops.host-avx2 / ops.host-sse41 run the
// suite in qemu-x86_64, some 20 times slower): the heaviest tests check
// fewer, smaller cases there (the same code paths; the native runs check
// them all).
inline bool emulated_cpu() { return std::getenv("HALFORMER_EXPECT_ISA") != nullptr; }

inline bool is_cpu_autoscheduled(const std::string &name) {
    return name.find("adams2019") != std::string::npos || name.find("mullapudi2016") != std::string::npos;
}
inline bool is_autoscheduled(const std::string &name) {
    return is_cpu_autoscheduled(name) || name.find("li2018") != std::string::npos;
}

// The variant the CPU autoscheduled builds (Adams2019, Mullapudi2016) run in
// this process, or nullptr when none of the variants they were built for
// (HALFORMER_AUTOSCHEDULE_TARGET) is the selected one or below it: then they
// would run code of a variant the suite does not claim to test (a wrapper
// falls back to its last target unconditionally), so they are left out.
// Like the hand kernels' wrappers: the highest built variant within the
// limit that this CPU runs.
inline const char *autoscheduled_variant() {
#ifdef HALFORMER_AUTOSCHEDULED_ISAS
    static const char *v = [] () -> const char * {
        const halformer::Isa sel = halformer::selected_isa();
        const char *best = nullptr;
        int best_rank = -1;
        std::stringstream ss(HALFORMER_AUTOSCHEDULED_ISAS);
        std::string name;
        while (std::getline(ss, name, ',')) {
            const halformer::Isa isa = halformer::parse_isa(name);
            if ((int)isa <= (int)sel && halformer::cpu_supports(isa) && (int)isa > best_rank) {
                best_rank = (int)isa;
                best = halformer::isa_name(isa);
            }
        }
        if (best) {
            std::printf("autoscheduled kernels run the %s variant (built for %s)\n", best,
                        HALFORMER_AUTOSCHEDULED_ISAS);
        } else {
            std::printf("autoscheduled kernels left out: built for %s only, none of which is %s or "
                        "below (HALFORMER_AUTOSCHEDULE_TARGET)\n",
                        HALFORMER_AUTOSCHEDULED_ISAS, halformer::isa_name(sel));
        }
        return best;
    }();
    return v;
#else
    return nullptr;
#endif
}

// The implementations a suite runs on the device under test: on a GPU, the
// hand schedules only (the autoschedulers used here make CPU schedules); on
// the CPU, the autoscheduled builds only where one of their variants is
// the one under test (autoscheduled_variant).
template <typename Fn>
inline std::vector<Impl<Fn>> on_device(std::vector<Impl<Fn>> all) {
    std::vector<Impl<Fn>> out;
    for (auto &i : all) {
        if (!i.fn.pick()) continue;
        if (test_device() == TestDevice::CPU && is_cpu_autoscheduled(i.name) && !autoscheduled_variant()) continue;
        out.push_back(i);
    }
    return out;
}

// Calls a kernel and fails the test with Halide's message if it returns
// nonzero. Every build, hand or autoscheduled, must serve every shape the
// tests use: the autoscheduled builds guard their tails
// (schedules/guarded_autoschedulers.cpp), so a shape smaller than their
// tiles is computed, not refused, and a refusal is a failure like any other.
// Halide's message, and under the launch check the limit the launch broke.
inline std::string kernel_failure() {
    std::string m = halformer::last_kernel_error();
    if (cuda_launch_check()) {
        using LastError = const char *(*)();
        if (auto f = (LastError)dlsym(RTLD_DEFAULT, "halformer_fake_cuda_last_error")) {
            m += std::string(" (") + f() + ")";
        }
    }
    return m;
}

#define HF_CALL(call)                                \
    do {                                             \
        int rc_ = (call);                            \
        ASSERT_EQ(rc_, 0) << kernel_failure();       \
    } while (0)

// The fixture of the parameterized op tests.
template <typename Fn>
class OpTest : public testing::TestWithParam<Impl<Fn>> {};
