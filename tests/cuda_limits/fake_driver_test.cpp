// The fake CUDA driver's own checks (ctest cuda_limits.driver): each limit
// it enforces refuses a launch just past it and accepts one at it, with the
// code a real driver returns, on a one-instruction PTX kernel. Linked
// against the driver itself; no GPU, no Halide.
#include <cstdio>
#include <cstdlib>
#include <string>

#include <sys/stat.h>
#include <unistd.h>

extern "C" {
int cuInit(unsigned);
int cuModuleLoadDataEx(void **module, const void *image, unsigned n, int *options, void **values);
int cuModuleGetFunction(void **fn, void *module, const char *name);
int cuLaunchKernel(void *fn, unsigned gx, unsigned gy, unsigned gz, unsigned bx, unsigned by, unsigned bz,
                   unsigned shared, void *stream, void **params, void **extra);
const char *halformer_fake_cuda_last_error();
}

int main() {
    // A stand-in for ptxas that reports 65 registers for every kernel, so
    // that the register limit is checked with no CUDA toolkit.
    char script[] = "/tmp/fake_ptxas_XXXXXX";
    const int fd = mkstemp(script);
    if (fd < 0) return 2;
    const std::string body = "#!/bin/sh\necho \"ptxas info    : Compiling entry function 'tiny' for 'sm_90'\"\n"
                             "echo \"ptxas info    : Used 65 registers, 8 bytes smem, 360 bytes cmem[0]\"\n";
    if (write(fd, body.data(), body.size()) != (ssize_t)body.size()) return 2;
    close(fd);
    chmod(script, 0755);
    setenv("HALFORMER_FAKE_CUDA_PTXAS", script, 1);
    unsetenv("HALFORMER_FAKE_CUDA_CACHE");
    const char *ptx = ".version 7.0\n.target sm_80\n.address_size 64\n"
                      ".visible .entry tiny(.param .u64 tiny_param_0)\n{\n\tret;\n}\n";
    void *mod = nullptr, *fn = nullptr;
    int failures = 0;
    auto expect = [&](const char *what, int got, int want, const char *needle) {
        const std::string err = halformer_fake_cuda_last_error();
        const bool ok = got == want && (!needle || err.find(needle) != std::string::npos);
        std::printf("%s %s: code %d (want %d)%s%s\n", ok ? "ok  " : "FAIL", what, got, want,
                    needle ? ", " : "", needle ? err.c_str() : "");
        failures += !ok;
    };
    expect("cuInit", cuInit(0), 0, nullptr);
    expect("module", cuModuleLoadDataEx(&mod, ptx, 0, nullptr, nullptr), 0, nullptr);
    expect("function", cuModuleGetFunction(&fn, mod, "tiny"), 0, nullptr);
    expect("unknown function", cuModuleGetFunction(&fn, mod, "other"), 500, nullptr);
    cuModuleGetFunction(&fn, mod, "tiny");
    unsigned long long arg = 0;
    void *params[] = {&arg};
    auto launch = [&](unsigned gx, unsigned gy, unsigned gz, unsigned bx, unsigned by, unsigned bz, unsigned sh) {
        return cuLaunchKernel(fn, gx, gy, gz, bx, by, bz, sh, nullptr, params, nullptr);
    };
    expect("1024 threads", launch(1, 1, 1, 1024, 1, 1, 0), 701, "65 registers");  // 32 warps of 2304
    expect("512 threads", launch(1, 1, 1, 512, 1, 1, 0), 0, nullptr);
    expect("1025 threads", launch(1, 1, 1, 1025, 1, 1, 0), 1, "1025 threads");
    expect("32 x 16 threads", launch(1, 1, 1, 32, 16, 1, 0), 0, nullptr);
    expect("33 x 32 threads", launch(1, 1, 1, 33, 32, 1, 0), 1, "1056 threads");
    expect("block z 64", launch(1, 1, 1, 1, 1, 64, 0), 0, nullptr);  // (64 threads: 2 warps)
    expect("block z 65", launch(1, 1, 1, 1, 1, 65, 0), 1, "per-dimension");
    expect("grid y 65535", launch(1, 65535, 1, 32, 1, 1, 0), 0, nullptr);
    expect("grid y 65536", launch(1, 65536, 1, 32, 1, 1, 0), 1, "grid 1x65536x1");
    expect("grid z 65536", launch(1, 1, 65536, 32, 1, 1, 0), 1, "grid 1x1x65536");
    expect("grid x 2^31 - 1", launch(2147483647u, 1, 1, 32, 1, 1, 0), 0, nullptr);
    expect("zero grid", launch(0, 1, 1, 32, 1, 1, 0), 1, "zero");
    expect("48 KiB + 4 shared", launch(1, 1, 1, 32, 1, 1, 49156), 1, "49164 bytes of shared memory");
    expect("a good launch after a refused one", launch(1, 1, 1, 32, 1, 1, 0), 0, nullptr);
    if (*halformer_fake_cuda_last_error()) {
        std::printf("FAIL the last error outlived its launch: %s\n", halformer_fake_cuda_last_error());
        failures++;
    }
    // 65 registers: a warp takes ceil(65·32 / 256)·256 = 2304 of the 65536,
    // so 28 warps fit and 29 do not; the 8 bytes of static shared memory
    // count against the 48 KiB.
    expect("65 registers x 896 threads", launch(1, 1, 1, 896, 1, 1, 0), 0, nullptr);
    expect("65 registers x 928 threads", launch(1, 1, 1, 928, 1, 1, 0), 701, "65 registers per thread x 928 threads");
    expect("48 KiB - 8 dynamic + 8 static", launch(1, 1, 1, 32, 1, 1, 49144), 0, nullptr);
    expect("48 KiB dynamic + 8 static", launch(1, 1, 1, 32, 1, 1, 49152), 1, "49160 bytes of shared memory");
    std::remove(script);
    return failures ? 1 : 0;
}
