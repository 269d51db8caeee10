// The GPU builds of the kernels, timed on the device beside nothing else
// (bench/gpu/run_gpu.sh runs PyTorch at the same shapes in the same session).
//
// Two phases, so that a run fits a short GPU window:
//   check   every timed kernel at small shapes (tails, one row, odd widths)
//           against its CPU build, whole outputs compared;
//   time    the large shapes, each checked on a sample of its outputs
//           against a double-precision loop on the host (64 linear outputs,
//           4 attention rows, 8 rows of the row ops, every argmax row),
//           never against a whole CPU run (which took minutes at these
//           shapes).
// Each timing is the median over `repeats` batches of `iters` back-to-back
// launches closed by a device sync; data stays on the device.
//
//   halformer_bench_gpu [--device cuda|opencl] [--iters N] [--repeats N]
//                       [--quick] [--no-li2018]
//
// Prints one JSON object per line: {"op", "shape", "ms", "rate", "unit",
// "rel_err"} (rel_err: the check's relative RMS error; for the decode
// shapes also "weight_gbs", the weights' bytes over the time), a "copy" line
// with the device-to-device copy bandwidth (the memory's practical peak),
// and {"op": "check", "failed": N}. Exit code 77 when the device is
// missing, 1 when a check fails (after the timings).
#include "halformer/device.h"
#include "halformer/kernel_error.h"

#include "hf_argmax.h"
#include "hf_attention.h"
#include "hf_attention_causal.h"
#include "hf_layer_norm.h"
#include "hf_linear.h"
#include "hf_linear_dot.h"
#include "hf_log_softmax.h"
#include "hf_softmax.h"

#include <HalideBuffer.h>
#include <HalideRuntime.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <functional>
#include <random>
#include <string>
#include <vector>

// The hand GPU schedules and, where built, Li2018's (for comparison).
#define DECLARE_GPU(base) extern "C" decltype(base) base##_cuda, base##_opencl;
#define DECLARE_LI(base) extern "C" decltype(base) base##_li2018_cuda, base##_li2018_opencl;
DECLARE_GPU(hf_linear)
DECLARE_GPU(hf_linear_dot)
DECLARE_GPU(hf_attention)
DECLARE_GPU(hf_attention_causal)
DECLARE_GPU(hf_layer_norm)
DECLARE_GPU(hf_softmax)
DECLARE_GPU(hf_log_softmax)
DECLARE_GPU(hf_argmax)
DECLARE_LI(hf_linear)
DECLARE_LI(hf_attention)
DECLARE_LI(hf_attention_causal)
DECLARE_LI(hf_layer_norm)
DECLARE_LI(hf_softmax)

using Halide::Runtime::Buffer;
using halformer::Device;

namespace {

Device g_dev = Device::CUDA;
int g_iters = 20, g_repeats = 7;
bool g_li = false;  // time Li2018's schedule instead of the hand one
int g_failed = 0;

template <typename F>
F pick(F cuda, F opencl) {
    return g_dev == Device::CUDA ? cuda : opencl;
}
template <typename F>
F pick_li(F cuda, F opencl, F li_cuda, F li_opencl) {
    if (g_li) return g_dev == Device::CUDA ? li_cuda : li_opencl;
    return pick(cuda, opencl);
}
#define GPU(base) pick(base##_cuda, base##_opencl)
#define GPU_LI(base) pick_li(base##_cuda, base##_opencl, base##_li2018_cuda, base##_li2018_opencl)

std::string op_name(const std::string &op) { return g_li ? op + "_li2018" : op; }

Buffer<float> random_buffer(std::vector<int> dims, uint32_t seed, float scale = 1.0f) {
    Buffer<float> b(dims);
    std::mt19937 rng(seed);
    std::uniform_real_distribution<float> u(-scale, scale);
    b.for_each_value([&](float &x) { x = u(rng); });
    return b;
}

template <typename T>
void to_device(Buffer<T> &b) {
    b.set_host_dirty();
    if (b.copy_to_device(halformer::device_interface(g_dev))) throw std::runtime_error("copy to device failed");
}

// Relative RMS error of `got` against `want` (pairs of values).
struct ErrSum {
    double num = 0, den = 0;
    void add(double got, double want) {
        num += (got - want) * (got - want);
        den += want * want;
    }
    double rel() const { return std::sqrt(num / std::max(den, 1e-30)); }
};

double rel_err(Buffer<float> &a, Buffer<float> &ref) {
    ErrSum e;
    const float *p = a.data(), *q = ref.data();
    for (size_t i = 0; i < a.number_of_elements(); i++) e.add(p[i], q[i]);
    return e.rel();
}

// A check's verdict: printed, and counted when over the bound.
void verdict(const std::string &what, double err, double bound = 1e-4) {
    const bool ok = err <= bound && std::isfinite(err);
    if (!ok) g_failed++;
    std::printf("{\"op\": \"check\", \"what\": \"%s\", \"rel_err\": %.2e, \"ok\": %s}\n", what.c_str(), err,
                ok ? "true" : "false");
    std::fflush(stdout);
}

// Median ms per call of `run`, the device synchronised after each timed
// batch through `out`.
template <typename T>
double time_ms(const std::function<int()> &run, Buffer<T> &out) {
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
void report(const std::string &op, const std::string &shape, double ms, double work, const char *unit, double err,
            double weight_bytes = 0) {
    std::printf("{\"op\": \"%s\", \"shape\": \"%s\", \"ms\": %.5f, \"rate\": %.1f, \"unit\": \"%s\", "
                "\"rel_err\": %.2e",
                op.c_str(), shape.c_str(), ms, work / ms / 1e6, unit, err);
    if (weight_bytes > 0) std::printf(", \"weight_gbs\": %.1f", weight_bytes / ms / 1e6);
    std::printf("}\n");
    std::fflush(stdout);
}

// ---- linear: y = x·wᵀ + b ----

double linear_ref(const Buffer<float> &x, const Buffer<float> &w, const Buffer<float> &b, int n, int m) {
    double s = b(n);
    for (int k = 0; k < x.dim(0).extent(); k++) s += (double)x(k, m) * w(k, n);
    return s;
}

void linear(int M, int K, int N, bool dot, bool time) {
    Buffer<float> x = random_buffer({K, M}, 1), w = random_buffer({K, N}, 2, 0.05f), b = random_buffer({N}, 3);
    Buffer<float> y(N, M);
    auto fn = dot ? GPU(hf_linear_dot) : GPU_LI(hf_linear);
    const std::string op = op_name(dot ? "linear_dot" : "linear");
    const std::string shape = std::to_string(M) + "x" + std::to_string(K) + "->" + std::to_string(N);
    if (!time) {
        Buffer<float> ref(N, M);
        halformer::check_kernel((dot ? hf_linear_dot : hf_linear)(x, w, b, ref), "linear (CPU)");
        to_device(x);
        to_device(w);
        to_device(b);
        halformer::check_kernel(fn(x, w, b, y), op.c_str());
        y.copy_to_host();
        verdict(op + " " + shape, rel_err(y, ref));
        return;
    }
    to_device(x);
    to_device(w);
    to_device(b);
    const double ms = time_ms([&] { return fn(x, w, b, y); }, y);
    y.copy_to_host();
    ErrSum e;
    std::mt19937 rng(9);
    for (int s = 0; s < 64; s++) {
        const int n = (int)(rng() % N), m = (int)(rng() % M);
        e.add(y(n, m), linear_ref(x, w, b, n, m));
    }
    verdict(op + " " + shape + " (64 sampled outputs)", e.rel());
    report(op, shape, ms, 2.0 * M * K * N, "GFLOP/s", e.rel(), M <= 32 ? 4.0 * K * N : 0);
}

// ---- attention ----

// One query row of softmax(q·kᵀ·scale)·v in double.
std::vector<double> attention_row(const Buffer<float> &q, const Buffer<float> &k, const Buffer<float> &v, int i,
                                  int h, int bb, float scale, bool causal) {
    const int dk = q.dim(0).extent(), T = k.dim(1).extent();
    const int last = causal ? std::min(i, T - 1) : T - 1;
    std::vector<double> s(last + 1);
    double mx = -1e300;
    for (int j = 0; j <= last; j++) {
        double d = 0;
        for (int c = 0; c < dk; c++) d += (double)q(c, i, h, bb) * k(c, j, h, bb);
        s[j] = d * scale;
        mx = std::max(mx, s[j]);
    }
    double sum = 0;
    for (double &x : s) sum += (x = std::exp(x - mx));
    std::vector<double> o(dk, 0.0);
    for (int j = 0; j <= last; j++)
        for (int c = 0; c < dk; c++) o[c] += s[j] / sum * v(c, j, h, bb);
    return o;
}

void attention(int B, int H, int T, int dk, bool causal, bool time) {
    Buffer<float> q = random_buffer({dk, T, H, B}, 4), k = random_buffer({dk, T, H, B}, 5),
                  v = random_buffer({dk, T, H, B}, 6);
    Buffer<int32_t> len(B);
    len.fill(T);
    Buffer<float> o(dk, T, H, B);
    const float scale = 1.0f / std::sqrt((float)dk);
    // (The causal kernels' window input at 0: every key.)
    auto causal_fn = GPU_LI(hf_attention_causal);
    auto plain_fn = GPU_LI(hf_attention);
    auto fn = [&](Buffer<float> &q, Buffer<float> &k, Buffer<float> &v, Buffer<int32_t> &len, int offset, float scale,
                  Buffer<float> &o) {
        return causal ? causal_fn(q, k, v, len, offset, scale, 0, o) : plain_fn(q, k, v, len, offset, scale, o);
    };
    const std::string op = op_name(causal ? "attention_causal" : "attention");
    const std::string shape =
        "B" + std::to_string(B) + " H" + std::to_string(H) + " T" + std::to_string(T) + " dk" + std::to_string(dk);
    if (!time) {
        Buffer<float> ref(dk, T, H, B);
        halformer::check_kernel(causal ? hf_attention_causal(q, k, v, len, 0, scale, 0, ref)
                                       : hf_attention(q, k, v, len, 0, scale, ref),
                                "attention (CPU)");
        to_device(q);
        to_device(k);
        to_device(v);
        to_device(len);
        halformer::check_kernel(fn(q, k, v, len, 0, scale, o), op.c_str());
        o.copy_to_host();
        verdict(op + " " + shape, rel_err(o, ref));
        return;
    }
    to_device(q);
    to_device(k);
    to_device(v);
    to_device(len);
    const double ms = time_ms([&] { return fn(q, k, v, len, 0, scale, o); }, o);
    o.copy_to_host();
    ErrSum e;
    for (int s = 0; s < 4; s++) {
        const int i = (s * 977 + 13) % T, h = s % H, bb = s % B;
        const auto want = attention_row(q, k, v, i, h, bb, scale, causal);
        for (int c = 0; c < dk; c++) e.add(o(c, i, h, bb), want[c]);
    }
    verdict(op + " " + shape + " (4 sampled rows)", e.rel());
    // QKᵀ and P·V: 4·B·H·T²·dk (half of it when causal).
    report(op, shape, ms, 4.0 * B * H * (double)T * T * dk * (causal ? 0.5 : 1.0), "GFLOP/s", e.rel());
}

// ---- row ops: softmax, log_softmax, layer_norm ----

// One row's reference in double.
std::vector<double> row_ref(const std::string &op, const Buffer<float> &x, const Buffer<float> &g,
                            const Buffer<float> &b, int r) {
    const int N = x.dim(0).extent();
    std::vector<double> out(N);
    if (op == "layer_norm") {
        double mean = 0, var = 0;
        for (int n = 0; n < N; n++) mean += x(n, r);
        mean /= N;
        for (int n = 0; n < N; n++) var += (x(n, r) - mean) * (x(n, r) - mean);
        var /= N;
        for (int n = 0; n < N; n++) out[n] = (x(n, r) - mean) / std::sqrt(var + 1e-5) * g(n) + b(n);
        return out;
    }
    double mx = -1e300, sum = 0;
    for (int n = 0; n < N; n++) mx = std::max(mx, (double)x(n, r));
    for (int n = 0; n < N; n++) sum += std::exp(x(n, r) - mx);
    for (int n = 0; n < N; n++)
        out[n] = op == "softmax" ? std::exp(x(n, r) - mx) / sum : x(n, r) - mx - std::log(sum);
    return out;
}

void rows(const std::string &name, int R, int N, bool time) {
    Buffer<float> x = random_buffer({N, R}, 7, 4.0f), y(N, R);
    Buffer<float> g = random_buffer({N}, 8), b = random_buffer({N}, 9);
    const bool ln = name == "layer_norm", lsm = name == "log_softmax";
    auto run_on = [&](bool gpu, Buffer<float> &out) {
        if (ln) return (gpu ? GPU_LI(hf_layer_norm) : hf_layer_norm)(x, g, b, 1e-5f, out);
        if (lsm) return (gpu ? GPU(hf_log_softmax) : hf_log_softmax)(x, out);
        return (gpu ? GPU_LI(hf_softmax) : hf_softmax)(x, out);
    };
    const std::string op = op_name(name), shape = std::to_string(R) + "x" + std::to_string(N);
    if (!time) {
        Buffer<float> ref(N, R);
        halformer::check_kernel(run_on(false, ref), (name + " (CPU)").c_str());
        to_device(x);
        to_device(g);
        to_device(b);
        halformer::check_kernel(run_on(true, y), op.c_str());
        y.copy_to_host();
        verdict(op + " " + shape, rel_err(y, ref));
        return;
    }
    to_device(x);
    to_device(g);
    to_device(b);
    const double ms = time_ms([&] { return run_on(true, y); }, y);
    y.copy_to_host();
    ErrSum e;
    for (int s = 0; s < 8; s++) {
        const int r = (s * 1031 + 5) % R;
        const auto want = row_ref(name, x, g, b, r);
        for (int n = 0; n < N; n++) e.add(y(n, r), want[n]);
    }
    verdict(op + " " + shape + " (8 sampled rows)", e.rel());
    // GB/s of the input read plus the output written.
    report(op, shape, ms, 8.0 * R * N, "GB/s", e.rel());
}

// ---- argmax over a vocabulary (decoding's greedy choice) ----

void argmax(int R, int V, bool time) {
    if (g_li) return;  // no Li2018 build
    Buffer<float> s = random_buffer({V, R}, 10, 8.0f);
    for (int r = 0; r < R; r++) s((r * 7919) % V, r) = 9.0f;  // one clear maximum a row, then a tie below it
    if (R > 1) s(V - 1, 1) = 9.0f;
    Buffer<float> vals(1, R);
    Buffer<int32_t> ids(1, R);
    auto check = [&](const std::string &what) {
        ErrSum e;
        for (int r = 0; r < R; r++) {
            int best = 0;
            for (int n = 1; n < V; n++)
                if (s(n, r) > s(best, r)) best = n;
            e.add(ids(0, r), best);
        }
        verdict(what, e.rel(), 0.0);
        return e.rel();
    };
    const std::string shape = std::to_string(R) + "x" + std::to_string(V);
    auto fn = GPU(hf_argmax);
    if (!time) {
        to_device(s);
        halformer::check_kernel(fn(s, vals, ids), "argmax");
        ids.copy_to_host();
        check("argmax " + shape);
        return;
    }
    to_device(s);
    const double ms = time_ms([&] { return fn(s, vals, ids); }, ids);
    ids.copy_to_host();
    report("argmax", shape, ms, 4.0 * R * V, "GB/s", check("argmax " + shape + " (every row)"));
}

// The device's memory bandwidth in practice: one device-to-device copy of
// 256 MiB (read and written: 512 MiB moved).
void copy_bandwidth() {
    const int n = 64 << 20;
    Buffer<float> a(n), b(n);
    a.fill(1.0f);
    to_device(a);
    if (b.device_malloc(halformer::device_interface(g_dev))) throw std::runtime_error("device_malloc failed");
    auto iface = halformer::device_interface(g_dev);
    const double ms = time_ms([&] { return halide_buffer_copy(nullptr, a.raw_buffer(), iface, b.raw_buffer()); }, b);
    std::printf("{\"op\": \"copy\", \"shape\": \"256MiB\", \"ms\": %.5f, \"rate\": %.1f, \"unit\": \"GB/s\"}\n", ms,
                2.0 * 4 * n / ms / 1e6);
    std::fflush(stdout);
}

}  // namespace

int main(int argc, char **argv) {
    bool quick = false, with_li = true;
    for (int i = 1; i < argc; i++) {
        std::string a = argv[i];
        if (a == "--device" && i + 1 < argc) g_dev = halformer::parse_device(argv[++i]);
        else if (a == "--iters" && i + 1 < argc) g_iters = std::atoi(argv[++i]);
        else if (a == "--repeats" && i + 1 < argc) g_repeats = std::atoi(argv[++i]);
        else if (a == "--quick") quick = true;
        else if (a == "--no-li2018") with_li = false;
        else {
            std::fprintf(stderr,
                         "usage: %s [--device cuda|opencl] [--iters N] [--repeats N] [--quick] [--no-li2018]\n",
                         argv[0]);
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
        // Phase 1: small shapes, whole outputs against the CPU builds.
        for (auto [M, K, N] : std::vector<std::tuple<int, int, int>>{{37, 100, 70}, {1, 64, 33}, {16, 96, 130}}) {
            run([=] { linear(M, K, N, false, false); });
        }
        for (auto [M, K, N] : std::vector<std::tuple<int, int, int>>{{1, 100, 70}, {4, 64, 33}, {7, 96, 130}}) {
            run([=] { linear(M, K, N, true, false); });
        }
        run([] { attention(1, 2, 70, 32, false, false); });
        run([] { attention(2, 2, 65, 64, true, false); });
        for (const char *op : {"softmax", "log_softmax", "layer_norm"}) run([=] { rows(op, 5, 1000, false); });
        run([] { argmax(3, 1001, false); });
        if (quick) {
            std::printf("{\"op\": \"check\", \"failed\": %d}\n", g_failed);
            return g_failed ? 1 : 0;
        }
        // Phase 2: the timings.
        copy_bandwidth();
        for (bool li : {false, true}) {
            if (li && !with_li) break;
            g_li = li;
            for (auto [M, K, N] : std::vector<std::tuple<int, int, int>>{
                     {1024, 512, 2048}, {1024, 2048, 512}, {4096, 512, 2048}, {4096, 1024, 4096},
                     {128, 512, 37000}, {8, 512, 2048}, {8, 4096, 4096}, {32, 4096, 4096}}) {
                run([=] { linear(M, K, N, false, true); });
            }
            if (!li) {
                for (auto [M, K, N] : std::vector<std::tuple<int, int, int>>{
                         {1, 512, 2048}, {4, 512, 2048}, {1, 4096, 4096}, {4, 4096, 4096}}) {
                    run([=] { linear(M, K, N, true, true); });
                }
            }
            for (int T : {512, 1024, 2048, 4096}) {
                run([=] { attention(4, 8, T, 64, false, true); });
                run([=] { attention(4, 8, T, 64, true, true); });
            }
            run([] { rows("softmax", 4096, 37000 / 8, true); });
            run([] { rows("log_softmax", 128, 37000, true); });
            run([] { rows("layer_norm", 8192, 512, true); });
            run([] { argmax(8, 37000, true); });
        }
    } catch (const std::exception &e) {
        std::fprintf(stderr, "halformer_bench_gpu: %s\n", e.what());
        return 1;
    }
    std::printf("{\"op\": \"check\", \"failed\": %d}\n", g_failed);
    return g_failed ? 1 : 0;
}
