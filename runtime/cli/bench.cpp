// halformer bench: end-to-end timings of one model and workload (the same
// workload as bench/torch_baseline.py runs in PyTorch): medians over --iters
// runs.
//
//   halformer bench DIR|--config base [--batch B] [--src-len S] [--beam K] [--new-tokens N] [--iters N] [--sample] [--json]
//
//   encoder_ms          encoder forward over the batch (decoder-only: the
//                       prompt's forward pass)
//   decoder_step_ms     one incremental decoder step for the whole batch
//                       (greedy: batch rows; median over every step)
//   greedy_tokens_per_s batch × new tokens / greedy generate time (encoder
//                       included), never stopping at eos
//   beam_tokens_per_s   the same with beam search (best hypothesis)
//
// --sample: the beam-1 run (greedy_tokens_per_s, decoder_step_ms) draws
// each token (temperature 1, top-k 50, top-p 0.9, from --seed) instead of
// taking the argmax.
#include "common.h"

#include "halformer/build_info.h"
#include "halformer/isa.h"
#include "halformer/json.h"

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <thread>

namespace halformer {

namespace {

using Clock = std::chrono::steady_clock;

double ms_since(Clock::time_point t0) { return std::chrono::duration<double, std::milli>(Clock::now() - t0).count(); }

struct BenchOptions {
    std::string dir, config;
    int batch = 1, src_len = 32, tgt_len = 0, beam = 4, new_tokens = 32, iters = 5;
    uint64_t seed = 1;
    bool json = false, sample = false;
    MachineOptions machine;
};

// Per-iteration measurements; the report prints their medians.
struct Timings {
    std::vector<double> encoder_ms, step_ms, greedy_tps, beam_tps;
};

double median(std::vector<double> v) {
    if (v.empty()) return 0;
    std::sort(v.begin(), v.end());
    const size_t n = v.size();
    return n % 2 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
}

// The model to time, and how the report names it.
Model bench_model(const BenchOptions &b, std::string &source) {
    if (!b.config.empty()) {
        if (!b.dir.empty()) throw Error("bench: give a model directory or --config base, not both");
        if (b.config != "base") throw Error("bench: --config knows only 'base' (the paper's base model)");
        Model m = Model::random(Config::base(), 1, apply_machine_options(b.machine));
        apply_precision(b.machine, m);
        source = "config base (random weights)";
        return m;
    }
    if (b.dir.empty()) throw Error("bench: a model directory or --config base is required");
    source = b.dir;
    return load_model(b.dir, b.machine);
}

// batch sources of src_len random ids in [3, vocab).
std::vector<Sequence> bench_sources(const BenchOptions &b, int vocab) {
    std::vector<Sequence> src(b.batch);
    uint64_t st = b.seed * 0x9E3779B97F4A7C15ull;
    for (auto &q : src) {
        for (int t = 0; t < b.src_len; t++) {
            st = st * 6364136223846793005ull + 1442695040888963407ull;
            q.push_back(3 % vocab + (int32_t)((st >> 33) % (uint64_t)std::max(1, vocab - 3)));
        }
    }
    return src;
}

// Best hypotheses' tokens per second of one generate call.
double tokens_per_s(Model &m, const std::vector<Sequence> &src, const GenerateOptions &o) {
    const auto t0 = Clock::now();
    auto h = m.generate(src, o);
    const double ms = ms_since(t0);
    long tokens = 0;
    for (auto &x : h) tokens += (long)x[0].tokens.size();
    return tokens / (ms / 1e3);
}

Timings measure(Model &m, const std::vector<Sequence> &src, const BenchOptions &b) {
    GenerateOptions greedy;
    greedy.max_new_tokens = b.new_tokens;
    greedy.stop_at_eos = false;
    GenerateOptions beam = greedy;
    beam.beam = b.beam;
    if (b.sample) {
        greedy.sample = true;
        greedy.top_k = 50;
        greedy.top_p = 0.9f;
        greedy.seed = b.seed;
    }
    // Warm-up: first calls choose kernel variants, start threads, grow buffers.
    m.generate(src, beam);
    Timings t;
    for (int it = 0; it < b.iters; it++) {
        if (!b.json) std::fprintf(stderr, "\rbench: iteration %d/%d", it + 1, b.iters);
        const auto t0 = Clock::now();
        if (m.config().architecture == Architecture::EncoderDecoder) {
            m.encode(src);
        } else {
            m.logits(src);
        }
        t.encoder_ms.push_back(ms_since(t0));
        t.greedy_tps.push_back(tokens_per_s(m, src, greedy));
        const auto &ss = m.step_seconds();
        for (size_t k = 1; k < ss.size(); k++) t.step_ms.push_back(ss[k] * 1e3);
        t.beam_tps.push_back(tokens_per_s(m, src, beam));
    }
    if (!b.json) std::fprintf(stderr, "\r%40s\r", "");
    return t;
}

void print_report(const Model &m, const std::string &source, const BenchOptions &b, const Timings &t) {
    const Config &c = m.config();
    const Device device = m.device();
    const double rss = peak_rss_mb();
    if (b.json) {
        std::printf("{\"model\": \"%s\", \"architecture\": \"%s\", \"parameters\": %lld, \"batch\": %d, "
                    "\"src_len\": %d, \"beam\": %d, \"sample\": %s, \"new_tokens\": %d, \"threads\": %d, \"iters\": %d, "
                    "\"variant\": \"%s\", \"precision\": \"%s\", \"device\": \"%s\", \"encoder_ms\": %.4f, "
                    "\"decoder_step_ms\": %.4f, \"greedy_tokens_per_s\": %.2f, \"beam_tokens_per_s\": %.2f, "
                    "\"peak_rss_mb\": %.1f, \"packed_weight_mb\": %.1f, \"schedules\": %s}\n",
                    source.c_str(), architecture_name(c.architecture), (long long)m.parameter_count(), b.batch,
                    b.src_len, b.beam, b.sample ? "true" : "false", b.new_tokens,
                    b.machine.threads ? b.machine.threads : (int)std::thread::hardware_concurrency(), b.iters,
                    device == Device::CPU ? running_variant() : device_name(device), precision_name(m.precision()),
                    device_description(device).c_str(), median(t.encoder_ms), median(t.step_ms),
                    median(t.greedy_tps), median(t.beam_tps), rss, m.packed_weight_bytes() / 1e6,
                    json::quote(device == Device::CPU ? record_note(tuned_record(selected_isa())) : "").c_str());
        return;
    }
    std::printf("model: %s (%s, %.1f M parameters), kernels: %s, precision %s\n", source.c_str(),
                architecture_name(c.architecture), m.parameter_count() / 1e6, kernels_label(device).c_str(),
                precision_name(m.precision()));
    if (device == Device::CPU) {
        std::printf("schedules: %s\n", record_note(tuned_record(selected_isa())).c_str());
    }
    std::printf("workload: batch %d, source length %d, %d new tokens, beam %d%s; medians of %d runs\n", b.batch,
                b.src_len, b.new_tokens, b.beam, b.sample ? ", the beam-1 run sampled" : "", b.iters);
    std::printf("  encoder_ms            %10.3f\n", median(t.encoder_ms));
    std::printf("  decoder_step_ms       %10.3f\n", median(t.step_ms));
    std::printf("  greedy_tokens_per_s   %10.1f\n", median(t.greedy_tps));
    std::printf("  beam_tokens_per_s     %10.1f\n", median(t.beam_tps));
    std::printf("  peak_rss_mb           %10.1f\n", rss);
    std::printf("  packed_weight_mb      %10.1f\n", m.packed_weight_bytes() / 1e6);
}

}  // namespace

int cmd_bench(int argc, char **argv) {
    CLI::App app{"halformer bench: end-to-end timings (medians of --iters runs)", "halformer bench"};
    BenchOptions b;
    app.add_option("dir", b.dir, "model directory (or --config base)");
    app.add_option("--config", b.config, "base: the paper's base model with random weights");
    app.add_option("--batch", b.batch, "sentences");
    app.add_option("--src-len", b.src_len, "source length (tokens)");
    app.add_option("--tgt-len", b.tgt_len)->group("");  // accepted, unused: --new-tokens sets the length
    app.add_option("--beam", b.beam, "beam size of the beam search timing");
    app.add_option("--new-tokens", b.new_tokens, "tokens generated (never stopping at eos)");
    app.add_option("--iters", b.iters, "runs (the report: their medians)");
    app.add_flag("--sample", b.sample, "the beam-1 run samples (temperature 1, top-k 50, top-p 0.9) instead of greedy");
    app.add_flag("--json", b.json, "one JSON object instead of the table");
    app.add_option("--seed", b.seed, "the random sources");
    add_machine_options(app, b.machine);
    add_precision_option(app, b.machine);
    if (!parse_command(app, argc, argv)) return 0;
    std::string source;
    Model m = bench_model(b, source);
    const Config &c = m.config();
    if (c.architecture == Architecture::Encoder) throw Error("bench: an encoder-only model does not generate");
    if (b.batch < 1 || b.src_len < 1 || b.new_tokens < 1 || b.iters < 1) {
        throw Error("bench: --batch, --src-len, --new-tokens and --iters must be >= 1");
    }
    const int vocab = c.architecture == Architecture::EncoderDecoder ? c.src_vocab_size : c.tgt_vocab_size;
    const std::vector<Sequence> src = bench_sources(b, vocab);
    const Timings t = measure(m, src, b);
    print_report(m, source, b, t);
    return 0;
}

}  // namespace halformer
