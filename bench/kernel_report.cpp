// The main job for now: every kernel at Transformer-base shapes (d_model 512,
// 8 heads, d_ff 2048, T = 128, vocabulary 37000), hand schedule vs Adams2019
// vs Mullapudi2016, measured in one run. Prints the median time and GFLOP/s
// (or GB/s for memory-bound ops) of each, and the compiled x86 variant in use.
#include <HalideBuffer.h>

#include "bench_common.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <functional>
#include <random>
#include <string>
#include <vector>

#include "halformer/isa.h"
#include "halformer/kernel_error.h"

#include "hf_linear.h"
#include "hf_linear_adams2019.h"
#include "hf_linear_mullapudi2016.h"
#include "hf_linear_dot.h"
#include "hf_linear_dot_adams2019.h"
#include "hf_linear_dot_mullapudi2016.h"
#include "hf_attention.h"
#include "hf_attention_adams2019.h"
#include "hf_attention_mullapudi2016.h"
#include "hf_attention_causal.h"
#include "hf_attention_causal_adams2019.h"
#include "hf_attention_causal_mullapudi2016.h"
#include "hf_softmax.h"
#include "hf_softmax_adams2019.h"
#include "hf_softmax_mullapudi2016.h"
#include "hf_layer_norm_residual.h"
#include "hf_layer_norm_residual_adams2019.h"
#include "hf_layer_norm_residual_mullapudi2016.h"
#include "hf_ffn.h"
#include "hf_ffn_adams2019.h"
#include "hf_ffn_mullapudi2016.h"
#include "hf_ffn_fused.h"
#include "hf_embedding.h"
#include "hf_embedding_adams2019.h"
#include "hf_embedding_mullapudi2016.h"
#include "hf_output_head.h"
#include "hf_output_head_adams2019.h"
#include "hf_output_head_mullapudi2016.h"
#include "hf_argmax.h"
#include "hf_argmax_adams2019.h"
#include "hf_argmax_mullapudi2016.h"

using Halide::Runtime::Buffer;

namespace {

using halformer_bench::rnd;

// Median seconds per call: one warm-up call, then samples of enough calls to
// last ≥ 20 ms each, 7 samples (or fewer if a call is very slow).
double median_seconds(const std::function<int()> &call, const char *what) {
    halformer::check_kernel(call(), what);
    using clock = std::chrono::steady_clock;
    auto t0 = clock::now();
    halformer::check_kernel(call(), what);
    double once = std::chrono::duration<double>(clock::now() - t0).count();
    int reps = std::max(1, (int)(0.02 / std::max(once, 1e-9)));
    int samples = once > 0.5 ? 3 : 7;
    std::vector<double> s;
    for (int i = 0; i < samples; i++) {
        auto a = clock::now();
        for (int r = 0; r < reps; r++) call();
        s.push_back(std::chrono::duration<double>(clock::now() - a).count() / reps);
    }
    std::sort(s.begin(), s.end());
    return s[s.size() / 2];
}

struct Row {
    std::string op, shape, unit;
    double work;  // FLOPs or bytes per call
    std::vector<std::pair<std::string, std::function<int()>>> impls;
};

}  // namespace

int main() {
    const int D = 512, H = 8, F = 2048, T = 128, V = 37000, dk = D / H;
    std::printf("Halformer kernels at Transformer-base shapes (d_model %d, %d heads, d_ff %d, T %d)\n",
                D, H, F, T);
    std::printf("x86 variant: %s; times are medians; hand = schedules/, "
                "adams/mullapudi = Halide's autoschedulers\n\n",
                halformer::isa_name(halformer::selected_isa()));

    Buffer<float> x = rnd({D, T}, 1), res = rnd({D, T}, 2), w = rnd({D, F}, 3, 0.05f);
    Buffer<float> b = rnd({F}, 4), y(F, T), x1 = rnd({D, 1}, 5), y1(F, 1);
    Buffer<float> q = rnd({dk, T, H, 1}, 6), k = rnd({dk, T, H, 1}, 7), v = rnd({dk, T, H, 1}, 8);
    Buffer<float> o(dk, T, H, 1);
    Buffer<int32_t> len(1);
    len(0) = T;
    const float scale = 1.0f / std::sqrt((float)dk);
    Buffer<float> scores = rnd({T, H * T}, 9, 5.0f), probs(T, H * T);
    Buffer<float> g = rnd({D}, 10), be = rnd({D}, 11), ln(D, T);
    Buffer<float> w1 = rnd({D, F}, 12, 0.05f), b1 = rnd({F}, 13), w2 = rnd({F, D}, 14, 0.05f);
    Buffer<float> b2 = rnd({D}, 15), fo(D, T);
    Buffer<float> table = rnd({D, V}, 16), emb(D, T, 1);
    Buffer<int32_t> tok(T, 1), start(1);
    start(0) = 0;
    for (int t = 0; t < T; t++) tok(t, 0) = (t * 7919) % V;
    Buffer<float> wv = rnd({D, V}, 17, 0.05f), bv = rnd({V}, 18), logp(V, T);
    Buffer<float> am_v(1, T);
    Buffer<int32_t> am_i(1, T);
    const double es = std::sqrt((float)D);

    std::vector<Row> rows = {
        {"linear", "128x512 -> 2048", "GFLOP/s", 2.0 * T * D * F,
         {{"hand", [&] { return hf_linear(x, w, b, y); }},
          {"adams", [&] { return hf_linear_adams2019(x, w, b, y); }},
          {"mullapudi", [&] { return hf_linear_mullapudi2016(x, w, b, y); }}}},
        {"linear (decode)", "1x512 -> 2048", "GB/s", 4.0 * D * F,
         {{"hand", [&] { return hf_linear_dot(x1, w, b, y1); }},
          {"hand panel", [&] { return hf_linear(x1, w, b, y1); }},
          {"adams", [&] { return hf_linear_dot_adams2019(x1, w, b, y1); }},
          {"mullapudi", [&] { return hf_linear_dot_mullapudi2016(x1, w, b, y1); }}}},
        {"attention", "1x8x128x64", "GFLOP/s", 4.0 * H * T * T * dk,
         {{"hand", [&] { return hf_attention(q, k, v, len, 0, scale, o); }},
          {"adams", [&] { return hf_attention_adams2019(q, k, v, len, 0, scale, o); }},
          {"mullapudi", [&] { return hf_attention_mullapudi2016(q, k, v, len, 0, scale, o); }}}},
        {"attention causal", "1x8x128x64", "GFLOP/s", 4.0 * H * T * T * dk,
         {{"hand", [&] { return hf_attention_causal(q, k, v, len, 0, scale, 0, o); }},
          {"adams", [&] { return hf_attention_causal_adams2019(q, k, v, len, 0, scale, 0, o); }},
          {"mullapudi", [&] { return hf_attention_causal_mullapudi2016(q, k, v, len, 0, scale, 0, o); }}}},
        {"softmax", "1024 rows x 128", "GB/s", 8.0 * T * H * T,
         {{"hand", [&] { return hf_softmax(scores, probs); }},
          {"adams", [&] { return hf_softmax_adams2019(scores, probs); }},
          {"mullapudi", [&] { return hf_softmax_mullapudi2016(scores, probs); }}}},
        {"layer_norm+residual", "128x512", "GB/s", 12.0 * T * D,
         {{"hand", [&] { return hf_layer_norm_residual(x, g, be, 1e-5f, res, ln); }},
          {"adams", [&] { return hf_layer_norm_residual_adams2019(x, g, be, 1e-5f, res, ln); }},
          {"mullapudi", [&] { return hf_layer_norm_residual_mullapudi2016(x, g, be, 1e-5f, res, ln); }}}},
        {"ffn", "128x512 -> 2048 -> 512", "GFLOP/s", 4.0 * T * D * F,
         {{"hand", [&] { return hf_ffn(x, w1, b1, w2, b2, fo); }},
          {"hand fused", [&] { return hf_ffn_fused(x, w1, b1, w2, b2, fo); }},
          {"adams", [&] { return hf_ffn_adams2019(x, w1, b1, w2, b2, fo); }},
          {"mullapudi", [&] { return hf_ffn_mullapudi2016(x, w1, b1, w2, b2, fo); }}}},
        {"embedding+PE", "128 tokens x 512", "GB/s", 8.0 * T * D,
         {{"hand", [&] { return hf_embedding(tok, table, start, es, emb); }},
          {"adams", [&] { return hf_embedding_adams2019(tok, table, start, es, emb); }},
          {"mullapudi", [&] { return hf_embedding_mullapudi2016(tok, table, start, es, emb); }}}},
        {"output head", "128x512 -> 37000", "GFLOP/s", 2.0 * T * D * V,
         {{"hand", [&] { return hf_output_head(x, wv, bv, logp); }},
          {"adams", [&] { return hf_output_head_adams2019(x, wv, bv, logp); }},
          {"mullapudi", [&] { return hf_output_head_mullapudi2016(x, wv, bv, logp); }}}},
        {"argmax", "128 x 37000", "GB/s", 4.0 * T * V,
         {{"hand", [&] { return hf_argmax(logp, am_v, am_i); }},
          {"adams", [&] { return hf_argmax_adams2019(logp, am_v, am_i); }},
          {"mullapudi", [&] { return hf_argmax_mullapudi2016(logp, am_v, am_i); }}}},
    };

    std::printf("%-20s %-24s %-11s %10s %10s %12s %12s\n", "op", "shape", "schedule", "ms",
                "rate", "unit", "vs hand");
    std::printf("%s\n", std::string(104, '-').c_str());
    for (auto &r : rows) {
        double hand = 0;
        for (auto &[name, fn] : r.impls) {
            std::fflush(stdout);
            double s;
            try {
                s = median_seconds(fn, (r.op + " " + name).c_str());
            } catch (const halformer::KernelError &e) {
                // Autoscheduled builds are specialised to their estimates.
                std::printf("%-20s %-24s %-11s %10s   (cannot run this shape: %.60s)\n", r.op.c_str(),
                            r.shape.c_str(), name.c_str(), "n/a", e.what());
                continue;
            }
            if (name == "hand") hand = s;
            std::printf("%-20s %-24s %-11s %10.3f %10.1f %12s %11.2fx\n", r.op.c_str(), r.shape.c_str(),
                        name.c_str(), s * 1e3, r.work / s / 1e9, r.unit.c_str(), hand / s);
        }
    }
    std::printf("\n'vs hand' > 1 means faster than the hand schedule.\n");
    return 0;
}
