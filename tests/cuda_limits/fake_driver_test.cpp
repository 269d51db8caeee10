// The fake CUDA driver's own checks (ctest cuda_limits.driver): each limit
// it enforces refuses a launch just past it and accepts one at it, with the
// code a real driver returns, on a one-instruction PTX kernel. Linked
// against the driver itself; no GPU, no Halide.
#include <cstdio>
#include <string>

extern "C" {
int cuInit(unsigned);
int cuModuleLoadDataEx(void **module, const void *image, unsigned n, int *options, void **values);
int cuModuleGetFunction(void **fn, void *module, const char *name);
int cuLaunchKernel(void *fn, unsigned gx, unsigned gy, unsigned gz, unsigned bx, unsigned by, unsigned bz,
                   unsigned shared, void *stream, void **params, void **extra);
const char *halformer_fake_cuda_last_error();
}

int main() {
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
    expect("1024 threads", launch(1, 1, 1, 1024, 1, 1, 0), 0, nullptr);
    expect("1025 threads", launch(1, 1, 1, 1025, 1, 1, 0), 1, "1025 threads");
    expect("32 x 32 threads", launch(1, 1, 1, 32, 32, 1, 0), 0, nullptr);
    expect("33 x 32 threads", launch(1, 1, 1, 33, 32, 1, 0), 1, "1056 threads");
    expect("block z 64", launch(1, 1, 1, 1, 1, 64, 0), 0, nullptr);
    expect("block z 65", launch(1, 1, 1, 1, 1, 65, 0), 1, "per-dimension");
    expect("grid y 65535", launch(1, 65535, 1, 32, 1, 1, 0), 0, nullptr);
    expect("grid y 65536", launch(1, 65536, 1, 32, 1, 1, 0), 1, "grid 1x65536x1");
    expect("grid z 65536", launch(1, 1, 65536, 32, 1, 1, 0), 1, "grid 1x1x65536");
    expect("grid x 2^31 - 1", launch(2147483647u, 1, 1, 32, 1, 1, 0), 0, nullptr);
    expect("zero grid", launch(0, 1, 1, 32, 1, 1, 0), 1, "zero");
    expect("48 KiB shared", launch(1, 1, 1, 32, 1, 1, 49152), 0, nullptr);
    expect("48 KiB + 4 shared", launch(1, 1, 1, 32, 1, 1, 49156), 1, "49156 bytes of shared memory");
    return failures ? 1 : 0;
}
