// A fake CUDA driver (libcuda.so.1) that runs no kernel but checks every
// launch against the limits of a real device: how the CUDA builds of the
// kernels are tested on a machine without a GPU (ctest's ops.cuda_limits).
//
// Halide's CUDA runtime finds the driver with dlopen("libcuda.so") and
// dlsym(RTLD_DEFAULT, "cuInit"), and Halformer's device probe loads
// "libcuda.so.1" with RTLD_GLOBAL; this library, named libcuda.so.1 in a
// folder of its own and put first on LD_LIBRARY_PATH, answers both. Memory
// is host memory (malloc), copies are memcpy, and cuLaunchKernel checks the
// launch and returns without running anything; the op suite, in its launch
// check mode (tests/kernels.h), then computes the values with the kernel's
// CPU build, so its assertions still hold while every CUDA launch it makes,
// at every shape it tests, is checked.
//
// The limits (those of compute capability 8.0 to 9.0: A100, H100):
//   threads per block ≤ 1024; block x, y ≤ 1024, z ≤ 64
//   grid x ≤ 2^31 − 1, grid y and z ≤ 65535; every dimension ≥ 1
//   shared memory per block (static + dynamic) ≤ 48 KiB (no opt-in: Halide
//     14 never asks for more)
//   registers: each warp takes ceil(regs·32 / 256)·256 of the SM's 65536
//     per block; regs per thread ≤ 255. The registers a kernel uses are what
//     NVIDIA's ptxas reports for the PTX at the JIT's register cap (the
//     CU_JIT_MAX_REGISTERS the runtime passes: HL_CUDA_JIT_MAX_REGISTERS),
//     for HALFORMER_FAKE_CUDA_ARCH (default sm_90); without ptxas (not a
//     Debian package) the register check is left out and the summary says so.
// A launch over a limit returns what the driver returns
// (CUDA_ERROR_INVALID_VALUE; CUDA_ERROR_LAUNCH_OUT_OF_RESOURCES for
// registers), after printing which limit, and halformer_fake_cuda_last_error()
// names it for the test's failure message.
//
// Environment:
//   HALFORMER_FAKE_CUDA_PTXAS   ptxas to use (default: ptxas on PATH, then
//                               /usr/local/cuda/bin/ptxas); "none": no register check
//   HALFORMER_FAKE_CUDA_ARCH    the ptxas target (default sm_90)
//   HALFORMER_FAKE_CUDA_CACHE   a folder for ptxas results, by PTX hash
//   HALFORMER_FAKE_CUDA_REPORT  a file the summary of every kernel launched
//                               (largest geometry seen) is written to at exit,
//                               with the launches and copies counted
//   HALFORMER_FAKE_CUDA_ZERO_READS=1  copies to the host read zeros (see
//                               cuMemcpyDtoH_v2)
#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <map>
#include <memory>
#include <mutex>
#include <sstream>
#include <string>
#include <vector>

#include <sys/stat.h>
#include <unistd.h>

namespace {

using CUresult = int;
constexpr CUresult kSuccess = 0, kInvalidValue = 1, kNotFound = 500, kOutOfResources = 701;

constexpr int kMaxThreads = 1024, kMaxBlockXY = 1024, kMaxBlockZ = 64;
constexpr long long kMaxGridX = 2147483647LL, kMaxGridYZ = 65535;
constexpr int kMaxShared = 48 * 1024, kRegsPerBlock = 65536, kMaxRegsPerThread = 255;

struct Function {
    std::string name;
    int regs = -1;         // from ptxas; -1: unknown
    int static_shared = 0; // bytes, from ptxas
    // The largest launch seen, for the summary.
    long long launches = 0;
    int max_threads = 0, max_shared = 0;
    long long max_grid[3] = {0, 0, 0};
};

struct Module {
    std::vector<std::unique_ptr<Function>> functions;
    int max_regs = 0;
};

struct State {
    std::mutex mu;
    std::vector<std::unique_ptr<Module>> modules;
    std::string last_error;
    std::string ptxas;
    bool ptxas_looked = false;
    long long violations = 0;
    // Transfers, for counting a decoding step's (host to device, device to
    // host: calls and bytes).
    long long htod = 0, dtoh = 0, htod_bytes = 0, dtoh_bytes = 0;
    long long allocs = 0, frees = 0;  // (a free waits for the device)
};
// Never destroyed: Halide's runtime releases its context from a destructor
// of its own at exit, which may run after this library's.
State &g = *new State;

std::string env(const char *name, const char *fallback = "") {
    const char *v = std::getenv(name);
    return v ? v : fallback;
}

std::string find_ptxas() {
    std::string p = env("HALFORMER_FAKE_CUDA_PTXAS");
    if (p == "none") return "";
    if (!p.empty()) return access(p.c_str(), X_OK) == 0 ? p : "";
    std::stringstream path(env("PATH"));
    std::string dir;
    while (std::getline(path, dir, ':')) {
        std::string c = dir + "/ptxas";
        if (!dir.empty() && access(c.c_str(), X_OK) == 0) return c;
    }
    return access("/usr/local/cuda/bin/ptxas", X_OK) == 0 ? "/usr/local/cuda/bin/ptxas" : "";
}

uint64_t fnv1a(const std::string &s) {
    uint64_t h = 1469598103934665603ULL;
    for (unsigned char c : s) h = (h ^ c) * 1099511628211ULL;
    return h;
}

std::string read_file(const std::string &path) {
    std::ifstream f(path, std::ios::binary);
    std::stringstream ss;
    ss << f.rdbuf();
    return ss.str();
}

// ptxas -v's report for a module: "Compiling entry function 'NAME'" then
// "Used N registers, ... S bytes smem" per entry. Cached by hash of the PTX
// and the settings.
std::string ptxas_report(const std::string &ptx, int max_regs) {
    if (!g.ptxas_looked) {
        g.ptxas = find_ptxas();
        g.ptxas_looked = true;
    }
    if (g.ptxas.empty()) return "";
    const std::string arch = env("HALFORMER_FAKE_CUDA_ARCH", "sm_90");
    const std::string key = std::to_string(fnv1a(ptx + "|" + arch + "|" + std::to_string(max_regs)));
    const std::string cache = env("HALFORMER_FAKE_CUDA_CACHE");
    if (!cache.empty()) {
        std::string hit = read_file(cache + "/" + key + ".txt");
        if (!hit.empty()) return hit;
    }
    char dir[] = "/tmp/fake_cuda_XXXXXX";
    if (!mkdtemp(dir)) return "";
    const std::string in = std::string(dir) + "/k.ptx", log = std::string(dir) + "/log";
    std::ofstream(in, std::ios::binary) << ptx;
    const std::string cmd = "'" + g.ptxas + "' -arch=" + arch + " -v --maxrregcount=" + std::to_string(max_regs) +
                            " '" + in + "' -o /dev/null > '" + log + "' 2>&1";
    const int rc = std::system(cmd.c_str());
    std::string out = read_file(log);
    std::remove(in.c_str());
    std::remove(log.c_str());
    rmdir(dir);
    if (rc != 0) {
        std::fprintf(stderr, "fake CUDA: ptxas failed on a module (registers unchecked for it):\n%s\n",
                     out.substr(0, 2000).c_str());
        return "";
    }
    if (!cache.empty()) {
        mkdir(cache.c_str(), 0755);
        std::ofstream(cache + "/" + key + ".txt", std::ios::binary) << out;
    }
    return out;
}

void read_ptxas(Module &m, const std::string &report) {
    std::stringstream ss(report);
    std::string line;
    Function *cur = nullptr;
    while (std::getline(ss, line)) {
        size_t q = line.find("entry function '");
        if (q != std::string::npos) {
            q += 16;
            const std::string name = line.substr(q, line.find('\'', q) - q);
            cur = nullptr;
            for (auto &f : m.functions)
                if (f->name == name) cur = f.get();
            continue;
        }
        if (!cur) continue;
        size_t u = line.find("Used ");
        if (u != std::string::npos && line.find(" registers", u) != std::string::npos) {
            cur->regs = std::atoi(line.c_str() + u + 5);
            size_t s = line.find(" bytes smem");
            if (s != std::string::npos) {
                size_t b = line.rfind(' ', s - 1);
                cur->static_shared = std::atoi(line.c_str() + (b == std::string::npos ? 0 : b + 1));
            }
        }
    }
}

CUresult load_module(void **module, const void *image, int max_regs) {
    if (!module || !image) return kInvalidValue;
    const std::string ptx(static_cast<const char *>(image));
    auto m = std::make_unique<Module>();
    m->max_regs = max_regs;
    // ".visible .entry NAME(" for each kernel.
    size_t pos = 0;
    while ((pos = ptx.find(".entry ", pos)) != std::string::npos) {
        pos += 7;
        size_t end = ptx.find_first_of("( \n", pos);
        auto f = std::make_unique<Function>();
        f->name = ptx.substr(pos, end - pos);
        m->functions.push_back(std::move(f));
    }
    if (m->functions.empty()) return 218;  // CUDA_ERROR_INVALID_PTX
    read_ptxas(*m, ptxas_report(ptx, max_regs));
    *module = m.get();
    g.modules.push_back(std::move(m));
    return kSuccess;
}

CUresult refuse(const Function &f, CUresult rc, const std::string &what) {
    g.last_error = "kernel " + f.name + ": " + what;
    g.violations++;
    std::fprintf(stderr, "fake CUDA: launch refused, %s\n", g.last_error.c_str());
    return rc;
}

// The summary, at exit.
__attribute__((destructor)) void summary() {
    std::string path = env("HALFORMER_FAKE_CUDA_REPORT");
    size_t kernels = 0, launched = 0;
    long long launches = 0;
    bool regs_known = true;
    std::ostringstream rows;
    for (auto &m : g.modules) {
        for (auto &f : m->functions) {
            kernels++;
            if (!f->launches) continue;
            launched++;
            launches += f->launches;
            regs_known = regs_known && f->regs >= 0;
            rows << f->name << " launches=" << f->launches << " max_threads=" << f->max_threads
                 << " max_grid=" << f->max_grid[0] << "x" << f->max_grid[1] << "x" << f->max_grid[2]
                 << " max_shared=" << f->max_shared + f->static_shared << " regs=" << f->regs << "\n";
        }
    }
    std::fprintf(stderr,
                 "fake CUDA: %lld launches of %zu kernels (%zu in the modules loaded); %lld refused; "
                 "registers %s; copies %lld to the device (%lld bytes), %lld to the host (%lld bytes)\n",
                 launches, launched, kernels, g.violations,
                 g.ptxas.empty() ? "not checked (no ptxas)" : ("checked with " + g.ptxas).c_str(), g.htod,
                 g.htod_bytes, g.dtoh, g.dtoh_bytes);
    if (!path.empty()) {
        std::ofstream out(path);
        out << "launches " << launches << "\nkernels " << launched << "\nrefused " << g.violations
            << "\nto_device " << g.htod << " " << g.htod_bytes << "\nto_host " << g.dtoh << " " << g.dtoh_bytes
            << "\nallocs " << g.allocs << "\nfrees " << g.frees
            << "\nregisters " << (g.ptxas.empty() ? "unchecked" : regs_known ? "checked" : "partly") << "\n"
            << rows.str();
    }
}

}  // namespace

extern "C" {

// For the tests: the last limit a launch broke ("" when none).
const char *halformer_fake_cuda_last_error() { return g.last_error.c_str(); }

CUresult cuInit(unsigned) { return kSuccess; }
CUresult cuDeviceGetCount(int *n) { return n ? (*n = 1, kSuccess) : kInvalidValue; }
CUresult cuDeviceGet(int *d, int ordinal) { return d && ordinal == 0 ? (*d = 0, kSuccess) : kInvalidValue; }
CUresult cuDeviceGetName(char *name, int len, int) {
    if (!name || len <= 0) return kInvalidValue;
    std::snprintf(name, len, "fake device with sm_90 launch limits (no kernel runs)");
    return kSuccess;
}
CUresult cuDeviceTotalMem_v2(size_t *bytes, int) { return bytes ? (*bytes = size_t(80) << 30, kSuccess) : kInvalidValue; }
CUresult cuDeviceGetAttribute(int *v, int attr, int) {
    if (!v) return kInvalidValue;
    switch (attr) {
    case 1: *v = kMaxThreads; break;                 // MAX_THREADS_PER_BLOCK
    case 2: case 3: *v = kMaxBlockXY; break;         // MAX_BLOCK_DIM_X, _Y
    case 4: *v = kMaxBlockZ; break;                  // MAX_BLOCK_DIM_Z
    case 5: *v = int(kMaxGridX); break;              // MAX_GRID_DIM_X
    case 6: case 7: *v = int(kMaxGridYZ); break;     // MAX_GRID_DIM_Y, _Z
    case 8: *v = kMaxShared; break;                  // MAX_SHARED_MEMORY_PER_BLOCK
    case 10: *v = 32; break;                         // WARP_SIZE
    case 12: *v = kRegsPerBlock; break;              // MAX_REGISTERS_PER_BLOCK
    case 16: *v = 132; break;                        // MULTIPROCESSOR_COUNT
    case 75: *v = 9; break;                          // COMPUTE_CAPABILITY_MAJOR
    case 76: *v = 0; break;                          // COMPUTE_CAPABILITY_MINOR
    default: *v = 0;
    }
    return kSuccess;
}

CUresult cuCtxCreate_v2(void **ctx, unsigned, int) { return ctx ? (*ctx = &g, kSuccess) : kInvalidValue; }
CUresult cuCtxDestroy_v2(void *) { return kSuccess; }
CUresult cuProfilerStop() { return kSuccess; }
CUresult cuCtxGetApiVersion(void *, unsigned *v) { return v ? (*v = 12000, kSuccess) : kInvalidValue; }
CUresult cuCtxGetDevice(int *d) { return d ? (*d = 0, kSuccess) : kInvalidValue; }
CUresult cuCtxPushCurrent_v2(void *) { return kSuccess; }
CUresult cuCtxPopCurrent_v2(void **ctx) {
    if (ctx) *ctx = &g;
    return kSuccess;
}
CUresult cuCtxSynchronize() { return kSuccess; }
CUresult cuStreamSynchronize(void *) { return kSuccess; }
CUresult cuPointerGetAttribute(void *, int, unsigned long long) { return kSuccess; }

CUresult cuModuleLoadData(void **module, const void *image) {
    std::lock_guard<std::mutex> lock(g.mu);
    return load_module(module, image, kMaxRegsPerThread);
}
CUresult cuModuleLoadDataEx(void **module, const void *image, unsigned n, int *options, void **values) {
    std::lock_guard<std::mutex> lock(g.mu);
    int max_regs = kMaxRegsPerThread;
    for (unsigned i = 0; i < n && options && values; i++) {
        if (options[i] == 0) max_regs = std::min<int>(int(uintptr_t(values[i])), kMaxRegsPerThread);  // CU_JIT_MAX_REGISTERS
    }
    return load_module(module, image, max_regs);
}
CUresult cuModuleUnload(void *) { return kSuccess; }
CUresult cuModuleGetFunction(void **fn, void *module, const char *name) {
    std::lock_guard<std::mutex> lock(g.mu);
    if (!fn || !module || !name) return kInvalidValue;
    for (auto &f : static_cast<Module *>(module)->functions) {
        if (f->name == name) {
            *fn = f.get();
            return kSuccess;
        }
    }
    return kNotFound;
}

CUresult cuMemAlloc_v2(unsigned long long *ptr, size_t bytes) {
    if (!ptr) return kInvalidValue;
    void *p = std::malloc(std::max<size_t>(bytes, 1));
    if (!p) return 2;  // CUDA_ERROR_OUT_OF_MEMORY
    {
        std::lock_guard<std::mutex> lock(g.mu);
        g.allocs++;
    }
    *ptr = reinterpret_cast<uintptr_t>(p);
    return kSuccess;
}
CUresult cuMemFree_v2(unsigned long long ptr) {
    {
        std::lock_guard<std::mutex> lock(g.mu);
        g.frees++;
    }
    std::free(reinterpret_cast<void *>(uintptr_t(ptr)));
    return kSuccess;
}
CUresult cuMemcpyHtoD_v2(unsigned long long dst, const void *src, size_t n) {
    {
        std::lock_guard<std::mutex> lock(g.mu);
        g.htod++;
        g.htod_bytes += (long long)n;
    }
    std::memcpy(reinterpret_cast<void *>(uintptr_t(dst)), src, n);
    return kSuccess;
}
CUresult cuMemcpyDtoH_v2(void *dst, unsigned long long src, size_t n) {
    {
        std::lock_guard<std::mutex> lock(g.mu);
        g.dtoh++;
        g.dtoh_bytes += (long long)n;
    }
    // No kernel ran, so what a program reads back is meaningless; with
    // HALFORMER_FAKE_CUDA_ZERO_READS=1 it is zeros, so that a decoding loop
    // (token ids come back) runs on to count its steps' launches and copies.
    static const bool zero = env("HALFORMER_FAKE_CUDA_ZERO_READS") == "1";
    if (zero) {
        std::memset(dst, 0, n);
        return kSuccess;
    }
    std::memcpy(dst, reinterpret_cast<const void *>(uintptr_t(src)), n);
    return kSuccess;
}
CUresult cuMemcpyDtoD_v2(unsigned long long dst, unsigned long long src, size_t n) {
    std::memmove(reinterpret_cast<void *>(uintptr_t(dst)), reinterpret_cast<const void *>(uintptr_t(src)), n);
    return kSuccess;
}
CUresult cuMemcpyHtoDAsync_v2(unsigned long long d, const void *s, size_t n, void *) { return cuMemcpyHtoD_v2(d, s, n); }
CUresult cuMemcpyDtoHAsync_v2(void *d, unsigned long long s, size_t n, void *) { return cuMemcpyDtoH_v2(d, s, n); }
CUresult cuMemcpyDtoDAsync_v2(unsigned long long d, unsigned long long s, size_t n, void *) { return cuMemcpyDtoD_v2(d, s, n); }
CUresult cuMemcpy3D_v2(const void *) { return kInvalidValue; }  // Halide 14 copies chunk by chunk

CUresult cuLaunchKernel(void *fn, unsigned gx, unsigned gy, unsigned gz, unsigned bx, unsigned by, unsigned bz,
                        unsigned shared, void *, void **params, void **) {
    std::lock_guard<std::mutex> lock(g.mu);
    g.last_error.clear();  // this launch's verdict only
    if (!fn) return kInvalidValue;
    Function &f = *static_cast<Function *>(fn);
    f.launches++;
    const long long threads = (long long)bx * by * bz;
    f.max_threads = std::max<int>(f.max_threads, int(std::min<long long>(threads, 1 << 30)));
    f.max_shared = std::max<int>(f.max_shared, int(shared));
    const unsigned grid[3] = {gx, gy, gz};
    for (int i = 0; i < 3; i++) f.max_grid[i] = std::max<long long>(f.max_grid[i], grid[i]);
    auto dims = [](unsigned x, unsigned y, unsigned z) {
        return std::to_string(x) + "x" + std::to_string(y) + "x" + std::to_string(z);
    };
    if (!params) return refuse(f, kInvalidValue, "no kernel parameters");
    if (gx == 0 || gy == 0 || gz == 0 || bx == 0 || by == 0 || bz == 0)
        return refuse(f, kInvalidValue, "a zero grid or block dimension (grid " + dims(gx, gy, gz) + ", block " +
                                            dims(bx, by, bz) + ")");
    if (threads > kMaxThreads)
        return refuse(f, kInvalidValue, std::to_string(threads) + " threads per block (block " + dims(bx, by, bz) +
                                            "), more than " + std::to_string(kMaxThreads));
    if (bx > kMaxBlockXY || by > kMaxBlockXY || bz > kMaxBlockZ)
        return refuse(f, kInvalidValue, "block " + dims(bx, by, bz) + " over the per-dimension limits 1024x1024x64");
    if (gx > kMaxGridX || gy > kMaxGridYZ || gz > kMaxGridYZ)
        return refuse(f, kInvalidValue, "grid " + dims(gx, gy, gz) + " over the limits 2147483647x65535x65535");
    const long long smem = (long long)shared + f.static_shared;
    if (smem > kMaxShared)
        return refuse(f, kInvalidValue, std::to_string(smem) + " bytes of shared memory per block (" +
                                            std::to_string(shared) + " dynamic), more than 48 KiB");
    if (f.regs >= 0) {
        const long long per_warp = (((long long)f.regs * 32 + 255) / 256) * 256;
        const long long need = per_warp * ((threads + 31) / 32);
        if (need > kRegsPerBlock)
            return refuse(f, kOutOfResources, std::to_string(f.regs) + " registers per thread x " +
                                                  std::to_string(threads) + " threads = " + std::to_string(need) +
                                                  " registers per block, more than 65536");
    }
    return kSuccess;
}

}  // extern "C"
