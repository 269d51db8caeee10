// halformer demo: the paper's base Transformer with random weights translates
// a batch of random sentences; prints the speed, the memory and the time per
// kernel. Needs no model files.
//
//   halformer demo [--batch B] [--src-len S] [--beam K] [--max-new-tokens N] [--threads N] [--seed S]
#include "common.h"

#include <HalideRuntime.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <thread>

namespace halformer {

namespace {

using Clock = std::chrono::steady_clock;

double seconds_since(Clock::time_point t0) { return std::chrono::duration<double>(Clock::now() - t0).count(); }

// Random sources: lengths in [src_len/2, src_len], ids in [3, vocab).
std::vector<Sequence> random_sources(int batch, int src_len, int vocab, uint64_t seed) {
    std::vector<Sequence> src(batch);
    uint64_t s = seed * 7919 + 17;
    for (auto &q : src) {
        s = s * 6364136223846793005ull + 1442695040888963407ull;
        int len = std::max(1, src_len / 2 + (int)((s >> 33) % (uint64_t)(src_len - src_len / 2 + 1)));
        for (int t = 0; t < len; t++) {
            s = s * 6364136223846793005ull + 1442695040888963407ull;
            q.push_back(3 + (int32_t)((s >> 33) % (uint64_t)(vocab - 3)));
        }
    }
    return src;
}

// The first sentences' best hypotheses (12 tokens at most), then the speed.
void print_results(const std::vector<std::vector<Hypothesis>> &hyps, double elapsed) {
    long tokens = 0;
    for (auto &h : hyps) tokens += (long)h[0].tokens.size();
    for (int b = 0; b < std::min((int)hyps.size(), 3); b++) {
        const Sequence &t = hyps[b][0].tokens;
        std::printf("  #%d: ", b);
        print_ids(Sequence(t.begin(), t.begin() + std::min<size_t>(12, t.size())));
        std::printf("%s  (score %.3f)\n", t.size() > 12 ? " ..." : "", hyps[b][0].score);
    }
    std::printf("\n%ld tokens in %.3f s: %.1f tokens/s (best hypothesis of each sentence)\n", tokens, elapsed,
                tokens / elapsed);
}

void print_memory(const Model &m) {
    std::printf("peak memory: %.0f MB\n", peak_rss_mb());
    if (m.device() != Device::CPU) {
        const DeviceMemory dm = m.device_memory();
        std::printf("device memory (%s): weights %.0f MB, activations and caches %.0f MB\n",
                    device_description(m.device()).c_str(), dm.weights / 1e6, dm.activations / 1e6);
    }
}

// The profile's kernels, the most time first, with their share of the run.
void print_kernel_times(Model &m, double elapsed) {
    std::printf("\ntime per kernel:\n");
    std::vector<std::pair<std::string, KernelTime>> rows(m.profile().begin(), m.profile().end());
    std::sort(rows.begin(), rows.end(), [](auto &p, auto &q) { return p.second.seconds > q.second.seconds; });
    double total = 0;
    for (auto &r : rows) total += r.second.seconds;
    std::printf("  %-18s %10s %8s %7s\n", "kernel", "ms", "calls", "share");
    for (auto &r : rows) {
        std::printf("  %-18s %10.1f %8lld %6.1f%%\n", r.first.c_str(), r.second.seconds * 1e3,
                    (long long)r.second.calls, 100 * r.second.seconds / total);
    }
    std::printf("  %-18s %10.1f %8s %6.1f%%  (of %.1f ms wall; the rest is the runtime: validation, beam bookkeeping)\n",
                "all kernels", total * 1e3, "", 100 * total / elapsed, elapsed * 1e3);
}

}  // namespace

int cmd_demo(int argc, char **argv) {
    CLI::App app{"halformer demo: the paper's base model (random weights, no model directory) translates "
                 "random sentences",
                 "halformer demo"};
    int batch = 16, src_len = 24, beam = 4, max_new = 32;
    uint64_t seed = 1;
    MachineOptions mo;
    app.add_option("--batch", batch, "sentences");
    app.add_option("--src-len", src_len, "longest source (the shortest is half)");
    app.add_option("--beam", beam, "beam size");
    app.add_option("--max-new-tokens", max_new, "tokens generated at most per sentence");
    app.add_option("--seed", seed, "weights and sentences");
    add_machine_options(app, mo);
    add_precision_option(app, mo);
    if (!parse_command(app, argc, argv)) return 0;
    if (mo.threads == 0) mo.threads = (int)std::thread::hardware_concurrency();  // Halide's default
    const Device device = apply_machine_options(mo);
    if (batch < 1 || src_len < 1) throw Error("demo: --batch and --src-len must be >= 1");
    Config c = Config::base();
    c.eos_id = 2;
    std::printf("Halformer demo: the paper's base Transformer (d_model %d, %d heads, d_ff %d, %d+%d layers,\n"
                "shared %d-token vocabulary, sinusoidal positions, tied embeddings), random weights (seed %llu)\n",
                c.d_model, c.num_heads, c.d_ff, c.num_encoder_layers, c.num_decoder_layers, c.tgt_vocab_size,
                (unsigned long long)seed);
    auto t0 = Clock::now();
    Model m = Model::random(c, seed, device);
    apply_precision(mo, m);
    std::printf("built %.1f M parameters in %.2f s; kernels: %s, %d threads\n", m.parameter_count() / 1e6,
                seconds_since(t0), kernels_label(device).c_str(), mo.threads);
    const std::vector<Sequence> src = random_sources(batch, src_len, c.src_vocab_size, seed);
    GenerateOptions o;
    o.beam = beam;
    // Warm-up (first calls pick kernel variants and spin up threads).
    o.max_new_tokens = 2;
    m.generate({src[0]}, o);
    o.max_new_tokens = max_new;
    m.reset_profile();
    t0 = Clock::now();
    auto hyps = m.generate(src, o);
    const double elapsed = seconds_since(t0);
    std::printf("translated %d sentences (source length %d..%d) with beam %d, up to %d new tokens\n", batch,
                src_len / 2, src_len, beam, max_new);
    print_results(hyps, elapsed);
    print_memory(m);
    print_kernel_times(m, elapsed);
    return 0;
}

}  // namespace halformer
