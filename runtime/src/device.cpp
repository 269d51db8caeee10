// Device choice and driver probing. Halide's GPU runtimes load their driver
// with dlopen("libcuda.so") / dlopen("libOpenCL.so"): names that exist only
// with development packages. Loading the versioned library first with
// RTLD_GLOBAL makes its symbols visible to Halide's lookup, so a plain driver
// install is enough.
#include "halformer/device.h"
#include "halformer/error.h"

#include <HalideRuntime.h>
#include <HalideRuntimeCuda.h>
#include <HalideRuntimeOpenCL.h>

#include <dlfcn.h>
#include <stdlib.h>

#include <algorithm>
#include <mutex>

namespace halformer {

namespace {

void *load_global(const char *const *names) {
    for (const char *const *n = names; *n; n++) {
        if (void *h = dlopen(*n, RTLD_NOW | RTLD_GLOBAL)) return h;
    }
    return nullptr;
}

struct Probe {
    std::string problem, description;
    int capability = 0;  // CUDA: major·10 + minor
    int align = 0;       // OpenCL: the largest CL_DEVICE_MEM_BASE_ADDR_ALIGN, bytes
};

// CUDA driver API, the few entry points used here.
using CuInit = int (*)(unsigned);
using CuDeviceGetCount = int (*)(int *);
using CuDeviceGet = int (*)(int *, int);
using CuDeviceGetName = int (*)(char *, int, int);
using CuDeviceGetAttribute = int (*)(int *, int, int);

Probe probe_cuda() {
    // Halide's CUDA runtime caps a kernel at 64 registers per thread unless
    // told otherwise; the register-blocked matmul needs more (Halide's own
    // cuda_mat_mul app runs with 256). A value the user set is kept.
    setenv("HL_CUDA_JIT_MAX_REGISTERS", "256", 0);
    static const char *const names[] = {"libcuda.so.1", "libcuda.so", nullptr};
    void *lib = load_global(names);
    if (!lib) return {"CUDA: no NVIDIA driver (libcuda.so.1 not found)", ""};
    auto init = (CuInit)dlsym(lib, "cuInit");
    auto count = (CuDeviceGetCount)dlsym(lib, "cuDeviceGetCount");
    auto get = (CuDeviceGet)dlsym(lib, "cuDeviceGet");
    auto name = (CuDeviceGetName)dlsym(lib, "cuDeviceGetName");
    auto attr = (CuDeviceGetAttribute)dlsym(lib, "cuDeviceGetAttribute");
    if (!init || !count || !get || !name || !attr) return {"CUDA: libcuda.so.1 lacks the driver API", ""};
    if (int rc = init(0)) return {"CUDA: cuInit failed (CUresult " + std::to_string(rc) + "): no usable GPU", ""};
    int n = 0;
    if (count(&n) || n == 0) return {"CUDA: the driver reports no CUDA device", ""};
    int dev = 0, major = 0, minor = 0;
    char buf[256] = {};
    get(&dev, 0);
    name(buf, sizeof(buf) - 1, dev);
    attr(&major, 75, dev);  // CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR
    attr(&minor, 76, dev);  // ..._MINOR
    return {"", std::string("CUDA: ") + buf + " (sm_" + std::to_string(major * 10 + minor) + ")",
            major * 10 + minor};
}

// OpenCL, the few entry points used here.
using ClGetPlatformIDs = int (*)(unsigned, void **, unsigned *);
using ClGetPlatformInfo = int (*)(void *, unsigned, size_t, void *, size_t *);
using ClGetDeviceIDs = int (*)(void *, uint64_t, unsigned, void **, unsigned *);
using ClGetDeviceInfo = int (*)(void *, unsigned, size_t, void *, size_t *);

Probe probe_opencl() {
    static const char *const names[] = {"libOpenCL.so.1", "libOpenCL.so", nullptr};
    void *lib = load_global(names);
    if (!lib) {
        return {"OpenCL: no OpenCL loader (libOpenCL.so.1 not found; on Debian install "
                "ocl-icd-libopencl1 and a driver, e.g. pocl-opencl-icd)", ""};
    }
    auto platforms = (ClGetPlatformIDs)dlsym(lib, "clGetPlatformIDs");
    auto pinfo = (ClGetPlatformInfo)dlsym(lib, "clGetPlatformInfo");
    auto devices = (ClGetDeviceIDs)dlsym(lib, "clGetDeviceIDs");
    auto dinfo = (ClGetDeviceInfo)dlsym(lib, "clGetDeviceInfo");
    if (!platforms || !pinfo || !devices || !dinfo) return {"OpenCL: libOpenCL.so.1 lacks the OpenCL API", ""};
    void *plat[4] = {};
    unsigned np = 0;
    if (platforms(4, plat, &np) || np == 0) {
        return {"OpenCL: no OpenCL platform (no driver installed in /etc/OpenCL/vendors; "
                "e.g. pocl-opencl-icd)", ""};
    }
    void *devs[16] = {};
    unsigned nd = 0;
    const uint64_t kAll = 0xFFFFFFFF;  // CL_DEVICE_TYPE_ALL
    if (devices(plat[0], kAll, 16, devs, &nd) || nd == 0) return {"OpenCL: the platform has no device", ""};
    // Sub-ranges handed to kernels must start at the base-address alignment
    // of whichever device Halide picks: take the largest.
    unsigned align_bits = 0;
    for (unsigned i = 0; i < std::min(nd, 16u); i++) {
        unsigned a = 0;
        if (dinfo(devs[i], 0x1019, sizeof(a), &a, nullptr) == 0) align_bits = std::max(align_bits, a);  // CL_DEVICE_MEM_BASE_ADDR_ALIGN
    }
    char pname[256] = {}, dname[256] = {};
    pinfo(plat[0], 0x0902, sizeof(pname) - 1, pname, nullptr);  // CL_PLATFORM_NAME
    dinfo(devs[0], 0x102B, sizeof(dname) - 1, dname, nullptr);   // CL_DEVICE_NAME
    return {"", std::string("OpenCL: ") + pname + " / " + dname, 0, (int)std::max(align_bits / 8, 4u)};
}

const Probe &probe(Device d) {
    static std::once_flag once[2];
    static Probe result[2];
    const int i = d == Device::CUDA ? 0 : 1;
    std::call_once(once[i], [&] { result[i] = i == 0 ? probe_cuda() : probe_opencl(); });
    return result[i];
}

}  // namespace

// For the CUDA kernels' wrapper (halide_hooks.cpp): a build that lists an
// sm_86 target in HALFORMER_CUDA_TARGETS runs it only on a device of compute
// capability 8.6 or newer, else the sm_80 one.
int cuda_capability() {
    return probe(Device::CUDA).capability;
}

// For DeviceContext: the byte alignment an OpenCL sub-buffer must have.
int opencl_base_alignment() {
    return probe(Device::OpenCL).align;
}

const char *device_name(Device d) {
    switch (d) {
    case Device::CPU: return "cpu";
    case Device::CUDA: return "cuda";
    case Device::OpenCL: return "opencl";
    }
    return "?";
}

Device parse_device(const std::string &name) {
    for (Device d : {Device::CPU, Device::CUDA, Device::OpenCL}) {
        if (name == device_name(d)) return d;
    }
    throw Error("unknown device '" + name + "' (expected cpu, cuda or opencl)");
}

std::string device_problem(Device d) {
    if (d == Device::CPU) return std::string();
#ifndef HALFORMER_HAS_GPU
    // Whatever drivers the machine has, this build cannot use them.
    return std::string("device ") + device_name(d) +
           ": this build has no GPU kernels (configured with HALFORMER_GPU=OFF)";
#else
    return probe(d).problem;
#endif
}

void require_device(Device d) {
    std::string p = device_problem(d);
    if (!p.empty()) throw Error("device " + std::string(device_name(d)) + " is not usable: " + p);
}

std::string device_description(Device d) {
    if (d == Device::CPU) return "CPU";
    const Probe &p = probe(d);
    return p.problem.empty() ? p.description : p.problem;
}

const halide_device_interface_t *device_interface(Device d) {
#ifdef HALFORMER_HAS_GPU
    switch (d) {
    case Device::CUDA: return halide_cuda_device_interface();
    case Device::OpenCL: return halide_opencl_device_interface();
    default: return nullptr;
    }
#else
    (void)d;
    return nullptr;  // a build without GPU kernels has no GPU runtime either
#endif
}

}  // namespace halformer
