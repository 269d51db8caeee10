// Every kernel at Transformer shapes on Google Benchmark, with the baselines
// measured in the same binary and run: OpenBLAS sgemm, oneDNN matmul /
// softmax / layer normalization, and Halide's autoschedulers on our own
// generators. Each result reports GFLOP/s (compute-bound) or GB/s
// (memory-bound; the other counter is 0) and `peak`, its fraction of this
// machine's FMA peak or read bandwidth, both measured at start-up by the
// probes below.
//
// Names are op/shape/implementation, e.g. linear/128x512x2048/openblas.
// Run: build/bench/halformer_bench_kernels [--benchmark_filter=linear]
// (HALFORMER_ISA=avx2 forces our kernels onto a lower compiled variant.)
#include <HalideBuffer.h>

#include "bench_common.h"
#include "halformer/build_info.h"
#include <benchmark/benchmark.h>
#include <cblas.h>
#include <oneapi/dnnl/dnnl.hpp>

#include <set>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <functional>
#include <immintrin.h>
#include <memory>
#include <random>
#include <thread>
#include <vector>

#include "halformer/isa.h"
#include "halformer/kernel_error.h"
#include "model/layers/causal_chunks.h"

#include "hf_attention.h"
#include "hf_linear_bf16.h"
#include "hf_linear_bf16_dot.h"
#include "hf_linear_int8.h"
#include "hf_linear_int8_offset.h"
#include "hf_linear_int8_dot.h"
#include "hf_linear_f32.h"
#include "hf_linear_f32_dot.h"
#include "hf_pack_f32.h"
#include "hf_pack_bf16.h"
#include "hf_pack_int8.h"
#if __has_include("halformer_autoscheduled.h")
#include "halformer_autoscheduled.h"  // HALFORMER_ADAMS2019_SEARCH (the build's generated/)
#endif
#ifndef HALFORMER_ADAMS2019_SEARCH
#define HALFORMER_ADAMS2019_SEARCH "unknown"
#endif
#include "hf_attention_adams2019.h"
#include "hf_attention_causal.h"
#include "hf_attention_causal_adams2019.h"
#include "hf_attention_causal_decode.h"
#include "hf_attention_causal_mullapudi2016.h"
#include "hf_attention_decode.h"
#include "hf_attention_causal_window_softcap.h"
#include "hf_attention_causal_decode_window_softcap.h"
#include "hf_attention_mullapudi2016.h"
#include "hf_embedding.h"
#include "hf_embedding_adams2019.h"
#include "hf_embedding_mullapudi2016.h"
#include "hf_ffn.h"
#include "hf_ffn_adams2019.h"
#include "hf_ffn_mullapudi2016.h"
#include "hf_layer_norm.h"
#include "hf_layer_norm_adams2019.h"
#include "hf_layer_norm_mullapudi2016.h"
#include "hf_layer_norm_residual.h"
#include "hf_linear.h"
#include "hf_linear_adams2019.h"
#include "hf_linear_dot.h"
#include "hf_linear_mullapudi2016.h"
#include "hf_argmax.h"
#include "hf_softmax.h"
#include "hf_topk8.h"
#include "hf_softmax_adams2019.h"
#include "hf_softmax_mullapudi2016.h"

using Halide::Runtime::Buffer;
using clk = std::chrono::steady_clock;

namespace {

int threads() { return (int)std::max(1u, std::thread::hardware_concurrency()); }

// ---- probes ---------------------------------------------------------------

__attribute__((target("avx512f"))) double fma_loop_avx512(long n) {
    __m512 a[12], m = _mm512_set1_ps(0.999999f), c = _mm512_set1_ps(1e-7f);
    for (int k = 0; k < 12; k++) a[k] = _mm512_set1_ps((float)k);
    for (long i = 0; i < n; i++) {
        for (int k = 0; k < 12; k++) a[k] = _mm512_fmadd_ps(a[k], m, c);
    }
    __m512 s = a[0];
    for (int k = 1; k < 12; k++) s = _mm512_add_ps(s, a[k]);
    return _mm512_reduce_add_ps(s) + 2.0 * 16 * 12 * n;  // FLOPs, and keeps s alive
}
__attribute__((target("avx2,fma"))) double fma_loop_avx2(long n) {
    __m256 a[12], m = _mm256_set1_ps(0.999999f), c = _mm256_set1_ps(1e-7f);
    for (int k = 0; k < 12; k++) a[k] = _mm256_set1_ps((float)k);
    for (long i = 0; i < n; i++) {
        for (int k = 0; k < 12; k++) a[k] = _mm256_fmadd_ps(a[k], m, c);
    }
    float out[8];
    __m256 s = a[0];
    for (int k = 1; k < 12; k++) s = _mm256_add_ps(s, a[k]);
    _mm256_storeu_ps(out, s);
    return out[0] * 0 + 2.0 * 8 * 12 * n;
}

// Peak fp32 FMA rate of all cores (FLOP/s): every thread runs independent
// FMA chains at the widest width the CPU has.
// Best of 5 (a shared machine's other load only ever lowers it).
double probe_fma() {
    const bool avx512 = __builtin_cpu_supports("avx512f");
    const long n = 10'000'000;
    double best = 0;
    for (int rep = 0; rep < 5; rep++) {
        std::vector<double> flops(threads());
        auto t0 = clk::now();
        std::vector<std::thread> ts;
        for (int t = 0; t < threads(); t++) {
            ts.emplace_back([&, t] { flops[t] = avx512 ? fma_loop_avx512(n) : fma_loop_avx2(n); });
        }
        for (auto &t : ts) t.join();
        double s = std::chrono::duration<double>(clk::now() - t0).count();
        double total = 0;
        for (double f : flops) total += std::floor(f / 1e6) * 1e6;
        best = std::max(best, total / s);
    }
    return best;
}

// Read bandwidth of all cores over 512 MiB (bytes/s), best of 3.
double probe_bandwidth() {
    const size_t n = (size_t)128 << 20;
    std::vector<float> a(n, 1.0f);
    double best = 0;
    for (int rep = 0; rep < 3; rep++) {
        std::atomic<double> sink{0};
        auto t0 = clk::now();
        std::vector<std::thread> ts;
        for (int t = 0; t < threads(); t++) {
            ts.emplace_back([&, t] {
                const size_t lo = n * t / threads(), hi = n * (t + 1) / threads();
                float s[16] = {0};
                for (size_t i = lo; i + 16 <= hi; i += 16) {
                    for (int k = 0; k < 16; k++) s[k] += a[i + k];
                }
                double tot = 0;
                for (float v : s) tot += v;
                sink = sink + tot;
            });
        }
        for (auto &t : ts) t.join();
        best = std::max(best, n * 4.0 / std::chrono::duration<double>(clk::now() - t0).count());
    }
    return best;
}

double g_peak_flops = 1, g_peak_bytes = 1;

// ---- registration ---------------------------------------------------------

using halformer_bench::rnd;

// work: FLOPs (compute = true) or bytes moved per call.
void add(const std::string &name, double work, bool compute, std::function<int()> call) {
    benchmark::RegisterBenchmark(name.c_str(), [=](benchmark::State &st) {
        int rc = call();
        if (rc != 0) {
            st.SkipWithError(("returned " + std::to_string(rc) + ": " + halformer::last_kernel_error()).c_str());
            return;
        }
        double total = 0;
        for (auto _ : st) {
            auto t0 = clk::now();
            call();
            double s = std::chrono::duration<double>(clk::now() - t0).count();
            st.SetIterationTime(s);
            total += s;
        }
        const double rate = work * st.iterations() / total;
        // Both counters on every run, the one that does not apply 0: a
        // CSV report (one header for all rows) aborted when a filter mixed
        // compute-bound and memory-bound benchmarks.
        st.counters["GFLOP/s"] = compute ? rate / 1e9 : 0.0;
        st.counters["GB/s"] = compute ? 0.0 : rate / 1e9;
        st.counters["peak"] = rate / (compute ? g_peak_flops : g_peak_bytes);
    })
        ->UseManualTime()
        ->Unit(benchmark::kMillisecond)
        ->MinTime(0.05)
        ->Repetitions(5)
        ->ReportAggregatesOnly(true);
}

template <typename T>
std::shared_ptr<T> keep(T &&v) {
    return std::make_shared<T>(std::move(v));
}

dnnl::engine &engine() {
    static dnnl::engine e(dnnl::engine::kind::cpu, 0);
    return e;
}
dnnl::stream &stream() {
    static dnnl::stream s(engine());
    return s;
}

// oneDNN matmul Y[M, N] (f32) = A[M, K]·W + bias with W given as [N, K]
// (nn.Linear) and reordered once into oneDNN's preferred layout: its best
// case, prepacked weights. The buffers must outlive the benchmark.
void add_onednn_matmul(const std::string &name, double work, bool compute, int M, int K, int N,
                       dnnl::memory::data_type adt, dnnl::memory::data_type wdt, void *a, void *w, float *bias,
                       float *y) {
    using dt = dnnl::memory::data_type;
    using tag = dnnl::memory::format_tag;
    dnnl::memory::desc a_md({M, K}, adt, tag::ab), c_md({M, N}, dt::f32, tag::ab), bias_md({1, N}, dt::f32, tag::ab),
        w_any({K, N}, wdt, tag::any), w_md({K, N}, wdt, tag::ba);
    dnnl::matmul::primitive_desc pd;
    try {
        pd = dnnl::matmul::primitive_desc(dnnl::matmul::desc(a_md, w_any, bias_md, c_md), engine());
    } catch (const dnnl::error &) {
        // (oneDNN has no such matmul on this CPU: bf16 without AVX-512.)
        static std::set<int> said;
        if (said.insert((int)adt).second) {
            std::fprintf(stderr, "oneDNN has no %s matmul on this CPU: its baseline is left out\n",
                         adt == dt::bf16 ? "bf16" : adt == dt::u8 ? "u8 x s8" : "f32");
        }
        return;
    }
    auto wmem = keep(dnnl::memory(pd.weights_desc(), engine()));
    dnnl::memory wsrc(w_md, engine(), w);
    dnnl::reorder(wsrc, *wmem).execute(stream(), wsrc, *wmem);
    stream().wait();
    auto prim = keep(dnnl::matmul(pd));
    auto args = keep(std::unordered_map<int, dnnl::memory>{{DNNL_ARG_SRC, dnnl::memory(a_md, engine(), a)},
                                                           {DNNL_ARG_WEIGHTS, *wmem},
                                                           {DNNL_ARG_BIAS, dnnl::memory(bias_md, engine(), bias)},
                                                           {DNNL_ARG_DST, dnnl::memory(c_md, engine(), y)}});
    add(name, work, compute, [=] {
        prim->execute(stream(), *args);
        stream().wait();
        return 0;
    });
}

void linear(int M, int K, int N) {
    using dt = dnnl::memory::data_type;
    auto x = keep(rnd({K, M}, 1)), w = keep(rnd({K, N}, 2, 0.05f)), b = keep(rnd({N}, 3));
    auto y = keep(Buffer<float>(N, M));
    const std::string s = "linear/" + std::to_string(M) + "x" + std::to_string(K) + "x" + std::to_string(N) + "/";
    const bool compute = M >= 128;
    const double work = compute ? 2.0 * M * K * N : 4.0 * ((double)K * N + (double)M * K + (double)M * N);
    add(s + "hand", work, compute, [=] { return hf_linear(*x, *w, *b, *y); });
    if (M <= 32) add(s + "hand_dot", work, compute, [=] { return hf_linear_dot(*x, *w, *b, *y); });
    // W packed once into 48-column panels (what float32 inference runs on
    // AVX-512, runtime/src/model/packed.cpp: the one-row kernel at M = 1).
    const int Np = (N + 47) / 48 * 48;
    auto wp = keep(Buffer<float>(1, 48, K, Np / 48));
    if (int rc = hf_pack_f32(*w, *wp)) halformer::check_kernel(rc, "pack");
    add(s + "packed", work, compute, [=] { return hf_linear_f32(*x, *wp, *b, *y); });
    if (M <= 32) add(s + "packed_dot", work, compute, [=] { return hf_linear_f32_dot(*x, *wp, *b, *y); });
    add(s + "adams2019", work, compute, [=] { return hf_linear_adams2019(*x, *w, *b, *y); });
    add(s + "mullapudi2016", work, compute, [=] { return hf_linear_mullapudi2016(*x, *w, *b, *y); });
    // OpenBLAS: Y = X·Wᵀ (no bias: a lower bound on its time for our op).
    add(s + "openblas", work, compute, [=] {
        cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, M, N, K, 1.0f, x->data(), K, w->data(), K, 0.0f,
                    y->data(), N);
        return 0;
    });
    // oneDNN matmul with bias; weights reordered once into its preferred
    // layout (its best case: prepacked weights).
    add_onednn_matmul(s + "onednn", work, compute, M, K, N, dt::f32, dt::f32, x->data(), w->data(), b->data(),
                      y->data());
}

// Reduced-precision linear, Y = X·Wᵀ + b with X float32: ours packs W once
// (bf16, or int8 with a scale per 32 k of each column, Q8_0's blocks) and converts or quantizes X inside
// the call; oneDNN gets its best case, X already in bf16 / u8 and W
// reordered once into its own layout (its int8 output is the raw int32 sum
// converted to float, without our per-block rescaling).
void linear_lowp(int M, int K, int N, bool int8) {
    using dt = dnnl::memory::data_type;
    auto x = keep(rnd({K, M}, 1)), w = keep(rnd({K, N}, 2, 0.05f)), b = keep(rnd({N}, 3));
    auto y = keep(Buffer<float>(N, M));
    const std::string s = std::string(int8 ? "linear_int8/" : "linear_bf16/") + std::to_string(M) + "x" +
                          std::to_string(K) + "x" + std::to_string(N) + "/";
    const bool compute = M >= 128;
    const double wbytes = int8 ? 1.0 : 2.0;
    const double work = compute ? 2.0 * M * K * N : wbytes * K * N + 4.0 * ((double)M * K + (double)M * N);
    const int Np = (N + 47) / 48 * 48, kf = int8 ? 4 : 2, groups = int8 ? (K + 31) / 32 * 8 : (K + kf - 1) / kf;
    auto wp = keep(Buffer<void>(int8 ? halide_type_t(halide_type_int, 8) : halide_type_t(halide_type_bfloat, 16),
                                {kf, 48, groups, Np / 48}));
    auto scale = keep(Buffer<float>(48, groups * kf / 32, Np / 48));
    auto colsum = keep(Buffer<int16_t>(48, groups * kf / 32, Np / 48));
    int rc = int8 ? hf_pack_int8(*w, *wp, *scale, *colsum) : hf_pack_bf16(*w, *wp);
    if (rc) halformer::check_kernel(rc, "pack");
    if (int8) {
        add(s + "hand", work, compute, [=] { return hf_linear_int8(*x, *wp, *scale, *colsum, *b, *y); });
        // The same sums in the offset form (VNNI's): what a CPU without VNNI
        // ran before the sign form.
        add(s + "offset", work, compute, [=] { return hf_linear_int8_offset(*x, *wp, *scale, *colsum, *b, *y); });
        if (M <= 32) {
            add(s + "hand_dot", work, compute, [=] { return hf_linear_int8_dot(*x, *wp, *scale, *colsum, *b, *y); });
        }
    } else {
        add(s + "hand", work, compute, [=] { return hf_linear_bf16(*x, *wp, *b, *y); });
        if (M <= 32) add(s + "hand_dot", work, compute, [=] { return hf_linear_bf16_dot(*x, *wp, *b, *y); });
    }
    // Inputs in oneDNN's types, filled with small constants (its speed does
    // not depend on the values).
    const size_t esize = int8 ? 1 : 2;
    auto a = keep(std::vector<uint8_t>((size_t)M * K * esize, int8 ? 3 : 0x3f));
    auto wv = keep(std::vector<uint8_t>((size_t)K * N * esize, int8 ? 2 : 0x3c));
    add_onednn_matmul(s + "onednn", work, compute, M, K, N, int8 ? dt::u8 : dt::bf16, int8 ? dt::s8 : dt::bf16,
                      a->data(), wv->data(), b->data(), y->data());
}

void attention(int T, bool causal) {
    const int H = 8, dk = 64;
    auto q = keep(rnd({dk, T, H, 1}, 4)), k = keep(rnd({dk, T, H, 1}, 5)), v = keep(rnd({dk, T, H, 1}, 6));
    auto o = keep(Buffer<float>(dk, T, H, 1));
    auto len = keep(Buffer<int32_t>(1));
    (*len)(0) = T;
    const float sc = 0.125f;
    const double work = (causal ? 2.0 : 4.0) * H * (double)T * T * dk;
    const std::string s = std::string(causal ? "attention_causal/" : "attention/") + "8x" + std::to_string(T) + "x64/";
    // (The causal kernels' window input at 0: every key.)
    auto hand = [=](Buffer<float> &qq, Buffer<float> &kk, Buffer<float> &vv, int offset, Buffer<float> &oo) {
        return causal ? hf_attention_causal(qq, kk, vv, *len, offset, sc, 0, oo) : hf_attention(qq, kk, vv, *len, offset, sc, oo);
    };
    add(s + "hand", work, true, [=] { return hand(*q, *k, *v, 0, *o); });
    add(s + "adams2019", work, true, [=] {
        return causal ? hf_attention_causal_adams2019(*q, *k, *v, *len, 0, sc, 0, *o)
                      : hf_attention_adams2019(*q, *k, *v, *len, 0, sc, *o);
    });
    add(s + "mullapudi2016", work, true, [=] {
        return causal ? hf_attention_causal_mullapudi2016(*q, *k, *v, *len, 0, sc, 0, *o)
                      : hf_attention_mullapudi2016(*q, *k, *v, *len, 0, sc, *o);
    });
    if (!causal) return;
    // Gemma 2's soft-cap (a compiled variant: it costs, docs/benchmarks.md)
    // against "hand", window 0 in both (every key).
    add(s + "window0_softcap", work, true,
        [=] { return hf_attention_causal_window_softcap(*q, *k, *v, *len, 0, sc, 0, 50.0f, *o); });
    // As the runtime runs a causal prefill: a call per chunk of queries over
    // the keys the chunk sees (runtime/src/model/layers/causal_chunks.h).
    add(s + "hand_chunked", work, true, [=] {
        auto view = [&](Buffer<float> &b, int begin, int extent) {
            halide_dimension_t d[4] = {b.raw_buffer()->dim[0], b.raw_buffer()->dim[1], b.raw_buffer()->dim[2],
                                       b.raw_buffer()->dim[3]};
            d[1].extent = extent;
            return Buffer<float>(b.data() + (size_t)begin * d[1].stride, 4, d);
        };
        for (const auto &c : halformer::layers::causal_query_chunks(T)) {
            auto qc = view(*q, c.begin, c.end - c.begin), oc = view(*o, c.begin, c.end - c.begin);
            auto kc = view(*k, 0, c.end), vc = view(*v, 0, c.end);
            if (int rc = hand(qc, kc, vc, c.begin, oc)) return rc;
        }
        return 0;
    });
}

// Whole multi-head self-attention as nn.MultiheadAttention computes it: the
// fused QKV projection, attention over strided views of it, the output
// projection (batch 1, d_model 512, 8 heads). FLOPs: projections + attention.
void mha(int T) {
    const int D = 512, H = 8, dk = 64;
    auto x = keep(rnd({D, T}, 21)), wqkv = keep(rnd({D, 3 * D}, 22, 0.05f)), bqkv = keep(rnd({3 * D}, 23));
    auto wo = keep(rnd({D, D}, 24, 0.05f)), bo = keep(rnd({D}, 25));
    auto qkv = keep(Buffer<float>(3 * D, T)), a = keep(Buffer<float>(D, T)), y = keep(Buffer<float>(D, T));
    auto len = keep(Buffer<int32_t>(1));
    (*len)(0) = T;
    auto view = [&](float *p, int stride) {
        halide_dimension_t d[4] = {{0, dk, 1}, {0, T, stride}, {0, H, dk}, {0, 1, stride * T}};
        return keep(Buffer<float>(p, 4, d));
    };
    auto q = view(qkv->data(), 3 * D), k = view(qkv->data() + D, 3 * D), v = view(qkv->data() + 2 * D, 3 * D);
    auto o = view(a->data(), D);
    const double work = 2.0 * T * D * 4 * D + 4.0 * H * (double)T * T * dk;
    add("mha/1x" + std::to_string(T) + "x512/hand", work, true, [=] {
        int rc = hf_linear(*x, *wqkv, *bqkv, *qkv);
        rc = rc ? rc : hf_attention(*q, *k, *v, *len, 0, 0.125f, *o);
        return rc ? rc : hf_linear(*a, *wo, *bo, *y);
    });
}

// One new query per sequence against a cache of L keys (batch 8, 8 heads).
void attention_decode(int L) {
    const int H = 8, dk = 64, B = 8;
    auto q = keep(rnd({dk, 1, H, B}, 7)), k = keep(rnd({dk, L, H, B}, 8)), v = keep(rnd({dk, L, H, B}, 9));
    auto o = keep(Buffer<float>(dk, 1, H, B));
    auto len = keep(Buffer<int32_t>(B));
    len->fill(L);
    const double work = 2.0 * 4 * (double)L * H * B * dk;  // K and V bytes
    const std::string s = "attention_decode/8x8x1x" + std::to_string(L) + "/";
    add(s + "hand", work, false, [=] { return hf_attention_causal_decode(*q, *k, *v, *len, L - 1, 0.125f, 0, *o); });
    add(s + "hand_prefill_schedule", work, false,
        [=] { return hf_attention_causal(*q, *k, *v, *len, L - 1, 0.125f, 0, *o); });
    add(s + "window0_softcap", work, false,
        [=] { return hf_attention_causal_decode_window_softcap(*q, *k, *v, *len, L - 1, 0.125f, 0, 50.0f, *o); });
}

void softmax(int R, int N) {
    using dt = dnnl::memory::data_type;
    auto x = keep(rnd({N, R}, 10, 5.0f)), y = keep(Buffer<float>(N, R));
    const double work = 8.0 * R * N;
    const std::string s = "softmax/" + std::to_string(R) + "x" + std::to_string(N) + "/";
    add(s + "hand", work, false, [=] { return hf_softmax(*x, *y); });
    add(s + "adams2019", work, false, [=] { return hf_softmax_adams2019(*x, *y); });
    add(s + "mullapudi2016", work, false, [=] { return hf_softmax_mullapudi2016(*x, *y); });
    dnnl::memory::desc md({R, N}, dt::f32, dnnl::memory::format_tag::ab);
    dnnl::softmax_forward::primitive_desc pd(
        dnnl::softmax_forward::desc(dnnl::prop_kind::forward_inference, md, 1), engine());
    auto prim = keep(dnnl::softmax_forward(pd));
    auto args = keep(std::unordered_map<int, dnnl::memory>{{DNNL_ARG_SRC, dnnl::memory(md, engine(), x->data())},
                                                           {DNNL_ARG_DST, dnnl::memory(md, engine(), y->data())}});
    add(s + "onednn", work, false, [=] {
        prim->execute(stream(), *args);
        stream().wait();
        return 0;
    });
}

void layer_norm(int R, int D) {
    using dt = dnnl::memory::data_type;
    auto x = keep(rnd({D, R}, 11)), r = keep(rnd({D, R}, 12)), g = keep(rnd({D}, 13)), b = keep(rnd({D}, 14));
    auto y = keep(Buffer<float>(D, R));
    const std::string s = "layer_norm/" + std::to_string(R) + "x" + std::to_string(D) + "/";
    add(s + "hand", 8.0 * R * D, false, [=] { return hf_layer_norm(*x, *g, *b, 1e-5f, *y); });
    add(s + "adams2019", 8.0 * R * D, false, [=] { return hf_layer_norm_adams2019(*x, *g, *b, 1e-5f, *y); });
    add(s + "mullapudi2016", 8.0 * R * D, false, [=] { return hf_layer_norm_mullapudi2016(*x, *g, *b, 1e-5f, *y); });
    add("layer_norm_residual/" + std::to_string(R) + "x" + std::to_string(D) + "/hand", 12.0 * R * D, false,
        [=] { return hf_layer_norm_residual(*x, *g, *b, 1e-5f, *r, *y); });
    dnnl::memory::desc md({R, D}, dt::f32, dnnl::memory::format_tag::ab), ss({D}, dt::f32, dnnl::memory::format_tag::a);
    dnnl::layer_normalization_forward::primitive_desc pd(
        dnnl::layer_normalization_forward::desc(dnnl::prop_kind::forward_inference, md, 1e-5f,
                                                dnnl::normalization_flags::use_scale |
                                                    dnnl::normalization_flags::use_shift),
        engine());
    auto prim = keep(dnnl::layer_normalization_forward(pd));
    auto args = keep(std::unordered_map<int, dnnl::memory>{{DNNL_ARG_SRC, dnnl::memory(md, engine(), x->data())},
                                                           {DNNL_ARG_DST, dnnl::memory(md, engine(), y->data())},
                                                           {DNNL_ARG_SCALE, dnnl::memory(ss, engine(), g->data())},
                                                           {DNNL_ARG_SHIFT, dnnl::memory(ss, engine(), b->data())}});
    add(s + "onednn", 8.0 * R * D, false, [=] {
        prim->execute(stream(), *args);
        stream().wait();
        return 0;
    });
}

void ffn(int M) {
    const int D = 512, F = 2048;
    auto x = keep(rnd({D, M}, 15)), w1 = keep(rnd({D, F}, 16, 0.05f)), b1 = keep(rnd({F}, 17));
    auto w2 = keep(rnd({F, D}, 18, 0.05f)), b2 = keep(rnd({D}, 19));
    auto h = keep(Buffer<float>(F, M)), y = keep(Buffer<float>(D, M));
    const double work = 4.0 * M * D * F;
    const std::string s = "ffn/" + std::to_string(M) + "x512x2048/";
    add(s + "hand", work, true, [=] { return hf_ffn(*x, *w1, *b1, *w2, *b2, *y); });
    add(s + "adams2019", work, true, [=] { return hf_ffn_adams2019(*x, *w1, *b1, *w2, *b2, *y); });
    add(s + "mullapudi2016", work, true, [=] { return hf_ffn_mullapudi2016(*x, *w1, *b1, *w2, *b2, *y); });
    add(s + "openblas", work, true, [=] {  // two sgemms, no bias or activation
        cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, M, F, D, 1.0f, x->data(), D, w1->data(), D, 0.0f,
                    h->data(), F);
        cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, M, D, F, 1.0f, h->data(), F, w2->data(), F, 0.0f,
                    y->data(), D);
        return 0;
    });
}

void embedding(int T) {
    const int D = 512, V = 37000;
    auto table = keep(rnd({D, V}, 20)), out = keep(Buffer<float>(D, T, 1));
    auto tok = keep(Buffer<int32_t>(T, 1)), start = keep(Buffer<int32_t>(1));
    for (int t = 0; t < T; t++) (*tok)(t, 0) = (t * 7919) % V;
    (*start)(0) = 0;
    const std::string s = "embedding/" + std::to_string(T) + "x512/";
    const float sc = std::sqrt(512.0f);
    add(s + "hand", 8.0 * T * D, false, [=] { return hf_embedding(*tok, *table, *start, sc, *out); });
    add(s + "adams2019", 8.0 * T * D, false, [=] { return hf_embedding_adams2019(*tok, *table, *start, sc, *out); });
    add(s + "mullapudi2016", 8.0 * T * D, false,
        [=] { return hf_embedding_mullapudi2016(*tok, *table, *start, sc, *out); });
}

// Beam search's candidate selection: top-8 (and argmax) over the vocabulary.
void topk(int M) {
    const int V = 37000;
    auto x = keep(rnd({V, M}, 26, 5.0f)), vals = keep(Buffer<float>(8, M)), v1 = keep(Buffer<float>(1, M));
    auto ids = keep(Buffer<int32_t>(8, M)), i1 = keep(Buffer<int32_t>(1, M));
    const std::string s = "/" + std::to_string(M) + "x37000/hand";
    add("topk8" + s, 4.0 * M * V, false, [=] { return hf_topk8(*x, *vals, *ids); });
    add("argmax" + s, 4.0 * M * V, false, [=] { return hf_argmax(*x, *v1, *i1); });
}

}  // namespace

int main(int argc, char **argv) {
    benchmark::Initialize(&argc, argv);
    openblas_set_num_threads(threads());
    g_peak_flops = probe_fma();
    g_peak_bytes = probe_bandwidth();
    std::printf("machine: %d threads; probes: FMA peak %.1f GFLOP/s, read bandwidth %.1f GB/s; "
                "our kernels run the %s variant\n",
                threads(), g_peak_flops / 1e9, g_peak_bytes / 1e9, halformer::isa_name(halformer::selected_isa()));
    benchmark::AddCustomContext("fma_peak_gflops", std::to_string(g_peak_flops / 1e9));
    benchmark::AddCustomContext("read_bandwidth_gbs", std::to_string(g_peak_bytes / 1e9));
    benchmark::AddCustomContext("halformer_variant", halformer::isa_name(halformer::selected_isa()));
    // Which float32 projections the runtime packs on this CPU (peak_report.py
    // names the kernel the runtime calls from it).
    const halformer::Fp32Packing packing = halformer::fp32_packing();
    benchmark::AddCustomContext("halformer_fp32_packing", packing == halformer::Fp32Packing::All     ? "all"
                                                          : packing == halformer::Fp32Packing::Steps ? "steps"
                                                                                                     : "none");
    const std::string record = halformer::record_note(halformer::tuned_record(halformer::selected_isa()));
    std::printf("schedules: %s\n", record.c_str());
    benchmark::AddCustomContext("halformer_schedules", record);
    benchmark::AddCustomContext("cpu", halformer::this_cpu().describe());
    // greedy: the build's Adams2019 kernels came from a one-pass search
    // (scripts/test.sh's build), not the schedules to compare speeds with.
    std::printf("adams2019 search: %s%s\n", HALFORMER_ADAMS2019_SEARCH,
                std::string(HALFORMER_ADAMS2019_SEARCH) == "greedy"
                    ? " (configure with -DHALFORMER_ADAMS2019_SEARCH=beam to compare against Adams2019's own search)"
                    : "");
    benchmark::AddCustomContext("adams2019_search", HALFORMER_ADAMS2019_SEARCH);
    for (int M : {1, 4, 32, 128, 1024}) {
        for (auto kn : std::vector<std::pair<int, int>>{{512, 512}, {512, 2048}, {2048, 512}, {512, 37000}}) {
            linear(M, kn.first, kn.second);
            if (kn.second != 37000) {
                linear_lowp(M, kn.first, kn.second, false);
                linear_lowp(M, kn.first, kn.second, true);
            }
        }
    }
    for (int T : {128, 512, 2048}) {
        attention(T, false);
        attention(T, true);
    }
    for (int T : {128, 512, 2048}) mha(T);
    for (int L : {128, 512, 2048}) attention_decode(L);
    softmax(1024, 128);
    softmax(128, 37000);
    layer_norm(128, 512);
    layer_norm(1024, 512);
    ffn(128);
    ffn(1024);
    embedding(128);
    topk(4);
    topk(128);
    benchmark::RunSpecifiedBenchmarks();
    benchmark::Shutdown();
    return 0;
}
