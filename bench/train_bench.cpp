// Training throughput of the generated kernels, for bench/train_report.py to
// put beside PyTorch's (bench/torch_train.py, same shapes, same JSON keys).
//
//   halformer_bench_train --config small|base [--threads N] [--steps S] [--json FILE]
//   halformer_bench_train --ops [--threads N] [--iters 20] [--json FILE]
//
// Training mode: a fresh encoder-decoder (Trainer::create) with the paper's
// recipe as torch_train.py runs it: dropout 0.1, label smoothing 0.1, Adam
// (0.9, 0.98, 1e-9) with warm-up 4000. Configurations:
//
//   config  d_model heads d_ff  layers  vocab  batch (sequences x src / tgt tokens)
//   small   256     4     1024  3 + 3   8000   64 x 24 / 24
//   base    512     8     2048  6 + 6   37000  16 x 32 / 32   (Config::base())
//
// The vocabularies are one (src = tgt), so the source and target embeddings
// and the output projection are one tensor, as in torch_train.py. "tgt 24"
// means what it means there: torch's decoder reads bos + 23 random tokens and
// predicts those 23 + eos, 24 counted targets per sequence. Our Example.tgt
// holds the 23 random tokens (the trainer adds bos and eos), so the decoder
// runs over the same 24 positions and the counted target tokens per step
// agree (64 x 24 = 1536 for small, 16 x 32 = 512 for base). max_positions is
// max(src, tgt) as in torch_train.py (sinusoidal: no parameters either way).
//
// Batches are random ids in [3, vocab) from a fixed seed (splitmix64), one
// new batch per step, all made before the first step. Each whole step
// (zero_grad + forward_backward + step) is timed with steady_clock; 2
// warm-up steps, then S timed ones. Reported: the median step, target and
// source tokens/s, peak RSS (getrusage ru_maxrss, as torch_train.py; also
// VmHWM), the RSS just before the first step (VmRSS), parameters, and the
// per-kernel times of model().profile() summed over the timed steps / S.
//
// --ops mode: each backward kernel alone at the small config's shapes (M =
// 64 x 24 rows, d_model 256, 4 heads of 64, 24 tokens, vocabulary 8000),
// median ms of `iters` runs after 2 warm-ups, named as torch_train.py --ops
// names its ops. A linear's backward is the dX kernel plus the dW/db kernel
// (autograd computes both); "parts" holds each alone.
#include "halformer/config.h"
#include "halformer/error.h"
#include "halformer/kernel_error.h"
#include "halformer/model.h"
#include "halformer/train.h"
#include "halformer/train_data.h"

#include "hf_attention_causal_backward.h"
#include "hf_cross_entropy.h"
#include "hf_embedding_backward.h"
#include "hf_layer_norm_backward.h"
#include "hf_layer_norm_residual_backward.h"
#include "hf_linear_backward_data.h"
#include "hf_linear_backward_weight.h"
#include "hf_linear_backward_weight_rows.h"

#include <HalideBuffer.h>
#include <HalideRuntime.h>

#include <sys/resource.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <functional>
#include <map>
#include <sstream>
#include <string>
#include <vector>

using Halide::Runtime::Buffer;
using Clock = std::chrono::steady_clock;

namespace {

// ---- small helpers ----

uint64_t splitmix64(uint64_t &s) {
    uint64_t z = (s += 0x9e3779b97f4a7c15ULL);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
    return z ^ (z >> 31);
}

// Uniform in [lo, hi) (hi - lo is far below 2^32: the modulo bias is nil).
int32_t rand_id(uint64_t &s, int lo, int hi) { return lo + (int32_t)(splitmix64(s) % (uint64_t)(hi - lo)); }

float rand_float(uint64_t &s, float lo, float hi) {
    return lo + (hi - lo) * (float)((splitmix64(s) >> 40) * (1.0 / 16777216.0));
}

Buffer<float> rnd(std::vector<int> dims, uint64_t seed, float lo = -1.0f, float hi = 1.0f) {
    Buffer<float> b(dims);
    b.for_each_value([&](float &x) { x = rand_float(seed, lo, hi); });
    return b;
}

Buffer<float> zeros(std::vector<int> dims) {
    Buffer<float> b(dims);
    b.fill(0.0f);
    return b;
}

double vm_status_mb(const char *key) {
    std::ifstream in("/proc/self/status");
    const size_t n = std::strlen(key);
    for (std::string line; std::getline(in, line);) {
        if (line.compare(0, n, key) == 0) return std::strtod(line.c_str() + n, nullptr) / 1024.0;
    }
    return NAN;
}

double ru_maxrss_mb() {
    struct rusage ru;
    getrusage(RUSAGE_SELF, &ru);
    return ru.ru_maxrss / 1024.0;  // KiB on Linux
}

double median(std::vector<double> v) {
    std::sort(v.begin(), v.end());
    const size_t n = v.size();
    return n == 0 ? NAN : n % 2 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
}

std::string jstr(const std::string &s) {
    std::string o = "\"";
    for (char c : s) {
        if (c == '"' || c == '\\') o += '\\';
        o += c;
    }
    return o + "\"";
}

std::string jnum(double v) {
    if (!std::isfinite(v)) return "null";
    char buf[64];
    std::snprintf(buf, sizeof buf, "%.9g", v);
    return buf;
}

void check(int rc, const char *what) {
    if (rc != 0) {
        std::fprintf(stderr, "halformer_bench_train: %s failed (%d): %s\n", what, rc,
                     halformer::last_kernel_error().c_str());
        std::exit(1);
    }
}

struct Args {
    std::string config = "small", json;
    int threads = 2, steps = 10, iters = 20;
    bool ops = false;
};

[[noreturn]] void usage(const char *msg) {
    std::fprintf(stderr,
                 "halformer_bench_train: %s\n"
                 "usage: halformer_bench_train --config small|base [--threads N] [--steps S] [--json FILE]\n"
                 "       halformer_bench_train --ops [--threads N] [--iters 20] [--json FILE]\n",
                 msg);
    std::exit(2);
}

Args parse(int argc, char **argv) {
    Args a;
    for (int i = 1; i < argc; i++) {
        std::string k = argv[i];
        auto value = [&]() -> std::string {
            if (i + 1 >= argc) usage((k + " needs a value").c_str());
            return argv[++i];
        };
        auto integer = [&](int lo) {
            std::string v = value();
            char *end = nullptr;
            long n = std::strtol(v.c_str(), &end, 10);
            if (v.empty() || *end || n < lo) usage((k + ": expected an integer >= " + std::to_string(lo)).c_str());
            return (int)n;
        };
        if (k == "--config") {
            a.config = value();
            if (a.config != "small" && a.config != "base") usage("--config is small or base");
        } else if (k == "--threads") {
            a.threads = integer(1);
        } else if (k == "--steps") {
            a.steps = integer(1);
        } else if (k == "--iters") {
            a.iters = integer(1);
        } else if (k == "--json") {
            a.json = value();
        } else if (k == "--ops") {
            a.ops = true;
        } else if (k == "-h" || k == "--help") {
            usage("help");
        } else {
            usage(("unknown argument " + k).c_str());
        }
    }
    return a;
}

void write_file(const std::string &path, const std::string &text) {
    if (path.empty()) return;
    std::ofstream f(path);
    f << text;
    if (!f) {
        std::fprintf(stderr, "halformer_bench_train: cannot write %s\n", path.c_str());
        std::exit(1);
    }
}

// ---- training throughput ----

struct Shape {
    int batch, src_len, tgt_len;  // tgt_len: decoder positions (= counted targets per sequence)
};

int train(const Args &a) {
    halformer::Config c = halformer::Config::base();
    Shape sh{16, 32, 32};
    if (a.config == "small") {
        c.d_model = 256;
        c.num_heads = 4;
        c.d_ff = 1024;
        c.num_encoder_layers = c.num_decoder_layers = 3;
        c.src_vocab_size = c.tgt_vocab_size = 8000;
        sh = {64, 24, 24};
    }
    c.max_positions = std::max(sh.src_len, sh.tgt_len);
    c.validate();
    halformer::TrainOptions opt;
    opt.dropout = 0.1f;
    opt.label_smoothing = 0.1f;
    opt.warmup_steps = 4000;
    opt.beta1 = 0.9f;
    opt.beta2 = 0.98f;
    opt.adam_eps = 1e-9f;
    opt.seed = 1;
    halformer::Trainer t = halformer::Trainer::create(c, opt);
    const int64_t params = t.parameter_count();

    // All batches first (random full-length sequences, ids in [3, vocab)).
    uint64_t seed = 42;
    const int nb = 2 + a.steps;
    std::vector<std::vector<halformer::Example>> batches(nb);
    for (auto &b : batches) {
        b.resize(sh.batch);
        for (auto &e : b) {
            e.src.resize(sh.src_len);
            e.tgt.resize(sh.tgt_len - 1);  // + bos in, + eos out: tgt_len positions
            for (auto &x : e.src) x = rand_id(seed, 3, c.src_vocab_size);
            for (auto &x : e.tgt) x = rand_id(seed, 3, c.tgt_vocab_size);
        }
    }
    const int64_t src_tokens = (int64_t)sh.batch * sh.src_len;

    const double start_rss = vm_status_mb("VmRSS:");
    std::vector<double> times;
    int64_t tgt_tokens = 0;
    double last_loss = 0;
    for (int i = 0; i < nb; i++) {
        if (i == 2) t.model().reset_profile();
        auto t0 = Clock::now();
        t.zero_grad();
        halformer::StepStats s = t.forward_backward(batches[i]);
        t.step(s.tokens);
        const double dt = std::chrono::duration<double>(Clock::now() - t0).count();
        tgt_tokens = s.tokens;
        last_loss = s.loss / (double)s.tokens;
        if (i >= 2) {
            times.push_back(dt);
            std::fprintf(stderr, "\rhalformer_bench_train: step %d/%d (%.3f s, loss %.3f)", i - 1, a.steps, dt,
                         last_loss);
        }
    }
    std::fprintf(stderr, "\n");
    const double peak = ru_maxrss_mb(), hwm = vm_status_mb("VmHWM:");
    const double med = median(times);
    const double tgt_tps = (double)tgt_tokens / med, src_tps = (double)src_tokens / med;

    std::map<std::string, std::pair<double, double>> kernels;  // name -> (ms per step, calls per step)
    double kernel_ms = 0;
    for (auto &[name, kt] : t.model().profile()) {
        kernels[name] = {kt.seconds * 1e3 / a.steps, (double)kt.calls / a.steps};
        kernel_ms += kt.seconds * 1e3 / a.steps;
    }

    std::printf("halformer_bench_train %s: %d threads, median of %d steps %.3f s/step, %.0f tgt tok/s, "
                "%.0f src tok/s, peak RSS %.0f MB (start %.0f MB, +%.0f MB), %.2fM params, "
                "kernels %.0f of %.0f ms/step\n",
                a.config.c_str(), a.threads, a.steps, med, tgt_tps, src_tps, peak, start_rss, peak - start_rss,
                params / 1e6, kernel_ms, med * 1e3);
    std::fflush(stdout);

    std::ostringstream j;
    j << "{\n \"config\": " << jstr(a.config) << ",\n \"threads\": " << a.threads << ",\n \"steps\": " << a.steps
      << ",\n \"median_step_s\": " << jnum(med) << ",\n \"tgt_tokens_per_s\": " << jnum(tgt_tps)
      << ",\n \"src_tokens_per_s\": " << jnum(src_tps) << ",\n \"peak_rss_mb\": " << jnum(peak)
      << ",\n \"start_rss_mb\": " << jnum(start_rss) << ",\n \"peak_hwm_mb\": " << jnum(hwm)
      << ",\n \"params\": " << params << ",\n \"tgt_tokens_per_step\": " << tgt_tokens
      << ",\n \"src_tokens_per_step\": " << src_tokens << ",\n \"batch\": " << sh.batch
      << ",\n \"src_len\": " << sh.src_len << ",\n \"tgt_len\": " << sh.tgt_len
      << ",\n \"example_tgt_len\": " << sh.tgt_len - 1 << ",\n \"last_loss\": " << jnum(last_loss)
      << ",\n \"kernel_ms_per_step\": " << jnum(kernel_ms) << ",\n \"step_s\": [";
    for (size_t i = 0; i < times.size(); i++) j << (i ? ", " : "") << jnum(times[i]);
    j << "],\n \"kernels\": {";
    bool first = true;
    for (auto &[name, v] : kernels) {
        j << (first ? "\n  " : ",\n  ") << jstr(name) << ": " << jnum(v.first);
        first = false;
    }
    j << "\n },\n \"kernel_calls\": {";
    first = true;
    for (auto &[name, v] : kernels) {
        j << (first ? "\n  " : ",\n  ") << jstr(name) << ": " << jnum(v.second);
        first = false;
    }
    j << "\n }\n}\n";
    write_file(a.json, j.str());
    return 0;
}

// ---- single backward ops ----

struct OpResult {
    std::string name, counterpart;  // counterpart: torch_train.py --ops name ("" if none)
    double ms = 0;
    std::vector<std::pair<std::string, double>> parts;  // each call's median ms
};

// Runs prepare() (untimed) and then every part, timing each; `iters` timed
// iterations after 2 warm-ups. The op's time is the median of the per-
// iteration sums.
OpResult time_op(const std::string &name, const std::string &counterpart, int iters,
                 const std::vector<std::pair<std::string, std::function<int()>>> &parts,
                 const std::function<void()> &prepare = nullptr) {
    OpResult r{name, counterpart};
    std::vector<double> total;
    std::vector<std::vector<double>> each(parts.size());
    for (int it = 0; it < 2 + iters; it++) {
        if (prepare) prepare();
        double sum = 0;
        for (size_t p = 0; p < parts.size(); p++) {
            auto t0 = Clock::now();
            check(parts[p].second(), (name + " " + parts[p].first).c_str());
            const double ms = std::chrono::duration<double, std::milli>(Clock::now() - t0).count();
            sum += ms;
            if (it >= 2) each[p].push_back(ms);
        }
        if (it >= 2) total.push_back(sum);
    }
    r.ms = median(total);
    for (size_t p = 0; p < parts.size(); p++) r.parts.push_back({parts[p].first, median(each[p])});
    std::printf("%-36s backward %8.3f ms  (", name.c_str(), r.ms);
    for (size_t p = 0; p < r.parts.size(); p++)
        std::printf("%s%s %.3f", p ? ", " : "", r.parts[p].first.c_str(), r.parts[p].second);
    std::printf(")\n");
    std::fflush(stdout);
    return r;
}

// A strided view of `data` (Halide order: innermost first) as a buffer.
Buffer<float> view(float *data, std::vector<halide_dimension_t> dims) {
    return Buffer<float>(data, (int)dims.size(), dims.data());
}

int ops(const Args &a) {
    const int B = 64, T = 24, D = 256, H = 4, FF = 1024, V = 8000, M = B * T, dk = D / H;
    const float eps = 1e-5f, scale = 1.0f / std::sqrt((float)dk);
    std::vector<OpResult> res;

    // Linear backward: dX = dY·W (hf_linear_backward_data) and dW += dYᵀX,
    // db += ΣdY (hf_linear_backward_weight; for the wide vocabulary
    // projection hf_linear_backward_weight_rows), as the trainer calls them.
    auto linear = [&](int K, int N, const std::string &name, uint64_t seed) {
        Buffer<float> dy = rnd({N, M}, seed), w = rnd({K, N}, seed + 1, -0.1f, 0.1f), x = rnd({K, M}, seed + 2);
        Buffer<float> dx(K, M), dw = zeros({K, N}), db = zeros({N});
        auto weight = N >= 2 * K ? hf_linear_backward_weight_rows : hf_linear_backward_weight;
        res.push_back(time_op(name, name, a.iters,
                              {{"dX", [&] { return hf_linear_backward_data(dy, w, dx); }},
                               {"dW+db", [&] { return weight(dy, x, dw, db, dw, db); }}}));
    };
    linear(D, FF, "linear_" + std::to_string(D) + "x" + std::to_string(FF), 10);
    linear(FF, D, "linear_" + std::to_string(FF) + "x" + std::to_string(D), 20);
    linear(D, V, "linear_" + std::to_string(D) + "x" + std::to_string(V) + "_head", 30);

    // LayerNorm: the post-LN sub-layer's LN(x + residual) (what training
    // runs), and the plain one (final norms; nearest to nn.LayerNorm alone).
    {
        Buffer<float> x = rnd({D, M}, 40, -2, 2), r = rnd({D, M}, 41, -2, 2), g = rnd({D}, 42, 0.5f, 1.5f);
        Buffer<float> dy = rnd({D, M}, 43), dx(D, M), dg = zeros({D}), dbeta = zeros({D});
        const std::string name = "layer_norm_" + std::to_string(D);
        res.push_back(time_op(name, name, a.iters,
                              {{"residual", [&] {
                                    return hf_layer_norm_residual_backward(x, g, eps, dy, dg, dbeta, r, dx, dg, dbeta);
                                }}}));
        res.push_back(time_op(name + "_plain", name, a.iters,
                              {{"plain", [&] { return hf_layer_norm_backward(x, g, eps, dy, dg, dbeta, dx, dg, dbeta); }}}));
    }

    // Causal self-attention backward on dense [B, H, T, dk] tensors.
    {
        Buffer<float> q = rnd({dk, T, H, B}, 50), k = rnd({dk, T, H, B}, 51), v = rnd({dk, T, H, B}, 52);
        Buffer<float> o = rnd({dk, T, H, B}, 53), dout = rnd({dk, T, H, B}, 54);
        Buffer<int32_t> lens(B);
        lens.fill(T);
        Buffer<float> dq(dk, T, H, B), dkv(dk, 2, T, H, B);
        const std::string name = "attention_math_" + std::to_string(B) + "x" + std::to_string(H) + "x" +
                                 std::to_string(T) + "x" + std::to_string(dk);
        res.push_back(time_op(name, name, a.iters,
                              {{"attention", [&] {
                                    return hf_attention_causal_backward(q, k, v, o, dout, lens, 0, scale, dq, dkv);
                                }}}));
    }

    // nn.MultiheadAttention's backward, composed as the trainer runs it:
    // out_proj dX and dW/db, causal attention over strided views of the
    // fused [M, 3D] projection (time-major rows m = t·B + b), in_proj dW/db
    // and dX.
    {
        Buffer<float> x = rnd({D, M}, 60), qkv = rnd({3 * D, M}, 61), att = rnd({D, M}, 62), dy = rnd({D, M}, 63);
        Buffer<float> w_in = rnd({D, 3 * D}, 64, -0.1f, 0.1f), w_out = rnd({D, D}, 65, -0.1f, 0.1f);
        Buffer<float> da(D, M), dqkv(3 * D, M), dx(D, M);
        Buffer<float> dw_in = zeros({D, 3 * D}), db_in = zeros({3 * D}), dw_out = zeros({D, D}), db_out = zeros({D});
        Buffer<int32_t> lens(B);
        lens.fill(T);
        auto heads = [&](float *p, int stride) {
            return view(p, {{0, dk, 1}, {0, T, B * stride}, {0, H, dk}, {0, B, stride}});
        };
        Buffer<float> vq = heads(qkv.data(), 3 * D), vk = heads(qkv.data() + D, 3 * D);
        Buffer<float> vv = heads(qkv.data() + 2 * D, 3 * D), vo = heads(att.data(), D), vdo = heads(da.data(), D);
        Buffer<float> vdq = heads(dqkv.data(), 3 * D);
        Buffer<float> vdkv = view(dqkv.data() + D, {{0, dk, 1}, {0, 2, D}, {0, T, B * 3 * D}, {0, H, dk}, {0, B, 3 * D}});
        const std::string name = "nn_mha_self_" + std::to_string(B) + "x" + std::to_string(T) + "x" + std::to_string(D);
        res.push_back(time_op(
            name, name, a.iters,
            {{"out_proj dX", [&] { return hf_linear_backward_data(dy, w_out, da); }},
             {"out_proj dW+db", [&] { return hf_linear_backward_weight(dy, att, dw_out, db_out, dw_out, db_out); }},
             {"attention", [&] { return hf_attention_causal_backward(vq, vk, vv, vo, vdo, lens, 0, scale, vdq, vdkv); }},
             {"in_proj dW+db", [&] { return hf_linear_backward_weight(dqkv, x, dw_in, db_in, dw_in, db_in); }},
             {"in_proj dX", [&] { return hf_linear_backward_data(dqkv, w_in, dx); }}}));
    }

    // Label-smoothed cross-entropy: loss and dlogits in one pass, in place
    // over the logits (as the trainer runs it); the logits are restored
    // before each run, untimed.
    {
        Buffer<float> saved = rnd({V, M}, 70, -3, 3), logits(V, M);
        Buffer<int32_t> targets(M);
        uint64_t s = 71;
        targets.for_each_value([&](int32_t &t) { t = rand_id(s, 3, V); });
        Buffer<float> loss = Buffer<float>::make_scalar();
        Buffer<int32_t> count = Buffer<int32_t>::make_scalar();
        const std::string name = "log_softmax_smoothed_ce_" + std::to_string(M) + "x" + std::to_string(V);
        res.push_back(time_op(name, name, a.iters,
                              {{"loss+dlogits", [&] {
                                    return hf_cross_entropy(logits, targets, 0.1f, 0, 1.0f / M, logits, loss, count);
                                }}},
                              [&] { logits.copy_from(saved); }));
    }

    // Embedding backward: the batch's distinct ids and each token's slot
    // (host, as the trainer does), then the scatter-add kernel.
    {
        std::vector<int32_t> tok((size_t)T * B);
        uint64_t s = 80;
        for (auto &t : tok) t = rand_id(s, 3, V);
        Buffer<float> dout = rnd({D, T, B}, 81), dtab = zeros({D, V});
        Buffer<int32_t> slots(T, B), rows;
        const float escale = std::sqrt((float)D);
        const std::string name = "embedding_" + std::to_string(V) + "x" + std::to_string(D);
        res.push_back(time_op(name, name, a.iters,
                              {{"slots (host)", [&] {
                                    std::vector<int32_t> ids(tok);
                                    std::sort(ids.begin(), ids.end());
                                    ids.erase(std::unique(ids.begin(), ids.end()), ids.end());
                                    rows = Buffer<int32_t>((int)ids.size());
                                    std::memcpy(rows.data(), ids.data(), ids.size() * sizeof(int32_t));
                                    for (int b = 0; b < B; b++)
                                        for (int t = 0; t < T; t++)
                                            slots(t, b) = (int32_t)(std::lower_bound(ids.begin(), ids.end(),
                                                                                     tok[(size_t)b * T + t]) -
                                                                    ids.begin());
                                    return 0;
                                }},
                               {"scatter-add", [&] { return hf_embedding_backward(slots, rows, dout, escale, 0, dtab); }}}));
    }

    std::ostringstream j;
    j << "{\n \"config\": \"small\",\n \"threads\": " << a.threads << ",\n \"iters\": " << a.iters
      << ",\n \"rows\": " << M << ",\n \"ops\": {";
    for (size_t i = 0; i < res.size(); i++) j << (i ? ",\n  " : "\n  ") << jstr(res[i].name) << ": " << jnum(res[i].ms);
    j << "\n },\n \"counterpart\": {";
    for (size_t i = 0; i < res.size(); i++)
        j << (i ? ",\n  " : "\n  ") << jstr(res[i].name) << ": " << jstr(res[i].counterpart);
    j << "\n },\n \"parts\": {";
    for (size_t i = 0; i < res.size(); i++) {
        j << (i ? ",\n  " : "\n  ") << jstr(res[i].name) << ": {";
        for (size_t p = 0; p < res[i].parts.size(); p++)
            j << (p ? ", " : "") << jstr(res[i].parts[p].first) << ": " << jnum(res[i].parts[p].second);
        j << "}";
    }
    j << "\n }\n}\n";
    write_file(a.json, j.str());
    return 0;
}

}  // namespace

int main(int argc, char **argv) {
    const Args a = parse(argc, argv);
    halide_set_num_threads(a.threads);
    try {
        return a.ops ? ops(a) : train(a);
    } catch (const std::exception &e) {
        std::fprintf(stderr, "halformer_bench_train: %s\n", e.what());
        return 1;
    }
}
