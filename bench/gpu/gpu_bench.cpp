// The GPU builds of the kernels, timed on the device: linear at Transformer
// shapes and attention at long sequences, each checked against the CPU build
// first. Data stays on the device; each timing is the median over repeats of
// `iters` back-to-back launches closed by a device sync.
//
//   halformer_bench_gpu [--device cuda|opencl] [--iters N] [--repeats N]
//
// Exit code 77 when the device is missing. Each shape is timed with the hand GPU schedule, then with Li2018's
// ("<op>_li2018"). Prints one JSON object per line: {"op", "shape", "ms", "rate", "unit",
// "rel_err_vs_cpu"}. bench/gpu/run_gpu.sh runs it beside PyTorch (cuBLAS,
// SDPA) on the same GPU.
#include "halformer/device.h"
#include "halformer/kernel_error.h"

#include "hf_attention.h"
#include "hf_attention_causal.h"
#include "hf_layer_norm.h"
#include "hf_linear.h"
#include "hf_softmax.h"

#include <HalideBuffer.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <functional>
#include <random>
#include <string>
#include <vector>

// The hand GPU schedules and Li2018's (for comparison).
#define DECLARE_GPU(base)                                        \
    extern "C" decltype(base) base##_cuda, base##_opencl;        \
    extern "C" decltype(base) base##_li2018_cuda, base##_li2018_opencl;
DECLARE_GPU(hf_linear)
DECLARE_GPU(hf_attention)
DECLARE_GPU(hf_attention_causal)
DECLARE_GPU(hf_layer_norm)
DECLARE_GPU(hf_softmax)

using Halide::Runtime::Buffer;
using halformer::Device;

namespace {

Device g_dev = Device::CUDA;
int g_iters = 20, g_repeats = 7;
bool g_li = false;  // time Li2018's schedule instead of the hand one

template <typename F>
F pick(F cpu, F cuda, F opencl, F li_cuda, F li_opencl) {
    if (g_dev == Device::CUDA) return g_li ? li_cuda : cuda;
    if (g_dev == Device::OpenCL) return g_li ? li_opencl : opencl;
    return cpu;
}
#define PICK(base) pick(base, base##_cuda, base##_opencl, base##_li2018_cuda, base##_li2018_opencl)

std::string op_name(const char *op) { return g_li ? std::string(op) + "_li2018" : std::string(op); }

Buffer<float> random_buffer(std::vector<int> dims, uint32_t seed, float scale = 1.0f) {
    Buffer<float> b(dims);
    std::mt19937 rng(seed);
    std::uniform_real_distribution<float> u(-scale, scale);
    b.for_each_value([&](float &x) { x = u(rng); });
    return b;
}

void to_device(Buffer<float> &b) {
    b.set_host_dirty();
    if (b.copy_to_device(halformer::device_interface(g_dev))) throw std::runtime_error("copy to device failed");
}

double rel_err(Buffer<float> &a, Buffer<float> &ref) {
    double num = 0, den = 0;
    const float *p = a.data(), *q = ref.data();
    for (size_t i = 0; i < a.number_of_elements(); i++) {
        num += (double)(p[i] - q[i]) * (p[i] - q[i]);
        den += (double)q[i] * q[i];
    }
    return std::sqrt(num / std::max(den, 1e-30));
}

// Median ms per call of `run` (which launches one kernel), with the device
// synchronised before and after each timed batch through `out`.
double time_ms(const std::function<int()> &run, Buffer<float> &out) {
    for (int i = 0; i < 3; i++) halformer::check_kernel(run(), "warm-up");
    out.device_sync();
    std::vector<double> ms;
    for (int r = 0; r < g_repeats; r++) {
        auto t0 = std::chrono::steady_clock::now();
        for (int i = 0; i < g_iters; i++) halformer::check_kernel(run(), "timed");
        out.device_sync();
        ms.push_back(std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count() /
                     g_iters);
    }
    std::sort(ms.begin(), ms.end());
    return ms[ms.size() / 2];
}

// rate = work / time, in G<unit>/s (work: FLOPs, or bytes moved).
void report(const char *op, const std::string &shape, double ms, double work, const char *unit, double err) {
    std::printf("{\"op\": \"%s\", \"shape\": \"%s\", \"ms\": %.5f, \"rate\": %.1f, \"unit\": \"%s\", "
                "\"rel_err_vs_cpu\": %.2e}\n",
                op, shape.c_str(), ms, work / ms / 1e6, unit, err);
    std::fflush(stdout);
}

void bench_linear(int M, int K, int N) {
    Buffer<float> x = random_buffer({K, M}, 1), w = random_buffer({K, N}, 2, 0.05f), b = random_buffer({N}, 3);
    Buffer<float> y(N, M), ref(N, M);
    halformer::check_kernel(hf_linear(x, w, b, ref), "hf_linear (CPU)");
    to_device(x);
    to_device(w);
    to_device(b);
    auto fn = PICK(hf_linear);
    auto run = [&] { return fn(x, w, b, y); };
    double ms = time_ms(run, y);
    y.copy_to_host();
    report(op_name("linear").c_str(), std::to_string(M) + "x" + std::to_string(K) + "->" + std::to_string(N), ms, 2.0 * M * K * N,
           "GFLOP/s", rel_err(y, ref));
}

void bench_attention(int B, int H, int T, int dk, bool causal) {
    Buffer<float> q = random_buffer({dk, T, H, B}, 4), k = random_buffer({dk, T, H, B}, 5), v = random_buffer({dk, T, H, B}, 6);
    Buffer<int32_t> len(B);
    len.fill(T);
    Buffer<float> o(dk, T, H, B), ref(dk, T, H, B);
    const float scale = 1.0f / std::sqrt((float)dk);
    auto cpu = causal ? hf_attention_causal : hf_attention;
    halformer::check_kernel(cpu(q, k, v, len, 0, scale, ref), "hf_attention (CPU)");
    to_device(q);
    to_device(k);
    to_device(v);
    len.set_host_dirty();
    len.copy_to_device(halformer::device_interface(g_dev));
    auto fn = causal ? PICK(hf_attention_causal) : PICK(hf_attention);
    auto run = [&] { return fn(q, k, v, len, 0, scale, o); };
    double ms = time_ms(run, o);
    o.copy_to_host();
    // QKᵀ and P·V: 4·B·H·T²·dk (half of it when causal).
    const double flops = 4.0 * B * H * (double)T * T * dk * (causal ? 0.5 : 1.0);
    report(op_name(causal ? "attention_causal" : "attention").c_str(),
           "B" + std::to_string(B) + " H" + std::to_string(H) + " T" + std::to_string(T) + " dk" + std::to_string(dk),
           ms, flops, "GFLOP/s", rel_err(o, ref));
}

void bench_rows(const char *op, int R, int N) {
    Buffer<float> x = random_buffer({N, R}, 7, 4.0f), y(N, R), ref(N, R);
    Buffer<float> g = random_buffer({N}, 8), b = random_buffer({N}, 9);
    const bool ln = std::strcmp(op, "layer_norm") == 0;
    if (ln) {
        halformer::check_kernel(hf_layer_norm(x, g, b, 1e-5f, ref), "hf_layer_norm (CPU)");
    } else {
        halformer::check_kernel(hf_softmax(x, ref), "hf_softmax (CPU)");
    }
    to_device(x);
    to_device(g);
    to_device(b);
    auto lnf = PICK(hf_layer_norm);
    auto smf = PICK(hf_softmax);
    auto run = [&] { return ln ? lnf(x, g, b, 1e-5f, y) : smf(x, y); };
    double ms = time_ms(run, y);
    y.copy_to_host();
    // GB/s of the input read plus the output written.
    report(op_name(op).c_str(), std::to_string(R) + "x" + std::to_string(N), ms, 8.0 * R * N, "GB/s",
           rel_err(y, ref));
}

}  // namespace

int main(int argc, char **argv) {
    bool quick = false;
    for (int i = 1; i < argc; i++) {
        std::string a = argv[i];
        if (a == "--device" && i + 1 < argc) g_dev = halformer::parse_device(argv[++i]);
        else if (a == "--iters" && i + 1 < argc) g_iters = std::atoi(argv[++i]);
        else if (a == "--repeats" && i + 1 < argc) g_repeats = std::atoi(argv[++i]);
        else if (a == "--quick") quick = true;
        else {
            std::fprintf(stderr, "usage: %s [--device cuda|opencl] [--iters N] [--repeats N] [--quick]\n", argv[0]);
            return 2;
        }
    }
    try {
        const std::string problem = halformer::device_problem(g_dev);
        if (!problem.empty()) {
            std::fprintf(stderr, "halformer_bench_gpu: %s\n", problem.c_str());
            return 77;  // no such device here (ctest: skipped)
        }
        std::fprintf(stderr, "device: %s\n", halformer::device_description(g_dev).c_str());
        // Li2018's schedules are specialised to their estimates: a shape
        // below their tiles fails with a bounds error, reported and skipped.
        auto run = [](const std::function<void()> &f) {
            try {
                f();
            } catch (const halformer::KernelError &e) {
                if (!g_li) throw;
                std::fprintf(stderr, "Li2018 build: %s\n", e.what());
            }
        };
        for (bool li : {false, true}) {
            g_li = li;
            if (quick) {  // a smoke run: small shapes
                run([] { bench_linear(64, 128, 96); });
                run([] { bench_attention(1, 2, 64, 32, true); });
                run([] { bench_rows("softmax", 16, 1000); });
                continue;
            }
            for (auto [M, K, N] : std::vector<std::tuple<int, int, int>>{
                     {1024, 512, 2048}, {1024, 2048, 512}, {4096, 512, 512}, {4096, 512, 2048},
                     {4096, 1024, 4096}, {128, 512, 37000}, {8, 512, 2048}}) {
                run([=] { bench_linear(M, K, N); });
            }
            for (int T : {512, 1024, 2048, 4096}) {
                run([=] { bench_attention(4, 8, T, 64, false); });
                run([=] { bench_attention(4, 8, T, 64, true); });
            }
            run([] { bench_rows("softmax", 4096, 37000 / 8); });
            run([] { bench_rows("layer_norm", 8192, 512); });
        }
    } catch (const std::exception &e) {
        std::fprintf(stderr, "halformer_bench_gpu: %s\n", e.what());
        return 1;
    }
    return 0;
}
