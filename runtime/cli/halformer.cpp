// The halformer command:
//   halformer info DIR
//   halformer logits DIR --src 5,6,7 [--tgt 1,9,4] --out FILE.npy [--force]
//   halformer generate DIR --src 5,6,7 | --text "a prompt" [--max-new-tokens N] [--beam K
//       --length-penalty A --n-best M] [--sample --temperature T --top-k K
//       --top-p P --seed S]
//   halformer demo [--batch B] [--src-len S] [--beam K] [--max-new-tokens N]
//       [--threads N] [--seed S]
// Every command takes --threads N, --isa sse41|avx2|avx512|sapphirerapids and
// --device cpu|cuda|opencl.
#include "common.h"
#include "halformer/build_info.h"
#include "halformer/isa.h"
#include "halformer/model.h"

#include <HalideRuntime.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <iostream>
#include <map>
#include <memory>
#include <numeric>
#include <sstream>
#include <thread>
#include <sys/resource.h>
#include <sys/stat.h>
#include <unistd.h>

using namespace halformer;

namespace {

int g_threads = 0;  // Halide's default: one per core
Device g_device = Device::CPU;
Precision g_precision = Precision::FP32;
int64_t g_max_memory = 0;  // 0: the model's default

// Model::load / Model::random with the common options (device, precision).
Model load_model(const std::string &dir) {
    Model m = Model::load(dir, g_device);
    m.set_precision(g_precision);
    if (g_max_memory > 0) m.set_memory_budget(g_max_memory);
    return m;
}

const char *kUsage =
    "usage:\n"
    "  halformer info [DIR]\n"
    "  halformer logits DIR --src IDS [--tgt IDS] --out FILE.npy [--force]\n"
    "  halformer generate DIR --src IDS | --text TEXT [--max-new-tokens N]\n"
    "                     [--beam K] [--length-penalty A] [--n-best M]\n"
    "                     [--sample] [--temperature T] [--top-k K] [--top-p P] [--seed S]\n"
    "  halformer demo [--batch B] [--src-len S] [--beam K] [--max-new-tokens N] [--seed S]\n"
    "  halformer bench DIR|--config base [--batch B] [--src-len S] [--beam K]\n"
    "                  [--new-tokens N] [--iters N] [--json]\n"
    "  halformer tune [--target T] [--config base|DIR] [--ops OPS] [--budget 20m] [--resume]\n"
    "                 (halformer tune --help: every option)\n"
    "  halformer train OUT --task copy|reverse|sort --steps N | --config F --train F [--valid F] --steps N\n"
    "                  [--init DIR] [--tokenizer F] [--resume] (halformer train --help: every option)\n"
    "  halformer tokenizer train|encode|decode|pairs ... (halformer tokenizer --help)\n"
    "  halformer translate DIR [TEXT...] [--beam K] [--batch N] ... (reads stdin lines without TEXT)\n"
    "  halformer eval DIR --src F --ref F [--beam K] [--out F] [--json F] | eval --hyp F --ref F\n"
    "  halformer serve DIR [--host 127.0.0.1] [--port 8080] [--workers 2] [--max-batch 32] ...\n"
    "                  (HTTP/JSON: POST /v1/generate, GET /health, GET /metrics; halformer serve --help)\n"
    "common options: --threads N, --isa sse41|avx2|avx512|sapphirerapids, --device cpu|cuda|opencl,\n"
    "                --precision fp32|bf16|int8 (projections; bf16/int8 on the CPU),\n"
    "                --max-memory SIZE (activations and caches, e.g. 2G; default 3/4 of memory)\n"
    "IDS: comma-separated token ids, e.g. 5,6,7\n";

struct Args {
    std::string command, dir;
    std::map<std::string, std::string> opts;
    bool flag(const std::string &k) const { return opts.count(k) > 0; }
    std::string str(const std::string &k, const std::string &def = "") const {
        auto it = opts.find(k);
        return it == opts.end() ? def : it->second;
    }
    long integer(const std::string &k, long def) const {
        if (!flag(k)) return def;
        const std::string &s = opts.at(k);
        char *end = nullptr;
        long v = std::strtol(s.c_str(), &end, 10);
        if (s.empty() || *end) throw Error("--" + k + " expects an integer, not '" + s + "'");
        return v;
    }
    double number(const std::string &k, double def) const {
        if (!flag(k)) return def;
        const std::string &s = opts.at(k);
        char *end = nullptr;
        double v = std::strtod(s.c_str(), &end);
        if (s.empty() || *end) throw Error("--" + k + " expects a number, not '" + s + "'");
        return v;
    }
};

Args parse_args(int argc, char **argv, const std::vector<std::string> &flags_without_value) {
    Args a;
    if (argc < 2) throw Error(std::string("no command\n") + kUsage);
    a.command = argv[1];
    for (int i = 2; i < argc; i++) {
        std::string s = argv[i];
        if (s.rfind("--", 0) == 0) {
            std::string k = s.substr(2);
            if (std::find(flags_without_value.begin(), flags_without_value.end(), k) != flags_without_value.end()) {
                a.opts[k] = "1";
            } else {
                if (i + 1 >= argc) throw Error("option " + s + " needs a value");
                a.opts[k] = argv[++i];
            }
        } else if (a.dir.empty()) {
            a.dir = s;
        } else {
            throw Error("unexpected argument '" + s + "'\n" + kUsage);
        }
    }
    return a;
}

void check_known(const Args &a, const std::vector<std::string> &known) {
    for (auto &kv : a.opts) {
        if (std::find(known.begin(), known.end(), kv.first) == known.end() && kv.first != "threads" &&
            kv.first != "isa" && kv.first != "device" && kv.first != "precision" && kv.first != "max-memory") {
            throw Error("unknown option --" + kv.first + " for '" + a.command + "'\n" + kUsage);
        }
    }
}

Sequence parse_ids(const std::string &s, const char *what) {
    Sequence out;
    std::stringstream ss(s);
    std::string tok;
    while (std::getline(ss, tok, ',')) {
        char *end = nullptr;
        long v = std::strtol(tok.c_str(), &end, 10);
        if (tok.empty() || *end || v < INT32_MIN || v > INT32_MAX) {
            throw Error(std::string("--") + what + ": '" + tok + "' is not a token id");
        }
        out.push_back((int32_t)v);
    }
    if (out.empty()) throw Error(std::string("--") + what + " is empty");
    return out;
}

// NumPy .npy v1.0, little-endian float32, C order; written to a temporary
// file and renamed, so a failed write leaves nothing half-written.
void write_npy(const std::string &path, const Tensor &t, bool force) {
    struct stat st;
    if (!force && stat(path.c_str(), &st) == 0) {
        throw Error(path + " exists; pass --force to replace it");
    }
    std::string shape = "(";
    for (size_t k = 0; k < t.shape.size(); k++) shape += (k ? ", " : "") + std::to_string(t.shape[k]);
    if (t.shape.size() == 1) shape += ",";
    shape += ")";
    std::string header = "{'descr': '<f4', 'fortran_order': False, 'shape': " + shape + ", }";
    while ((10 + header.size() + 1) % 64) header += ' ';
    header += '\n';
    const std::string tmp = path + ".tmp";
    {
        std::ofstream out(tmp, std::ios::binary | std::ios::trunc);
        if (!out) throw Error(path + ": cannot write");
        out.write("\x93NUMPY\x01\x00", 8);
        uint16_t len = (uint16_t)header.size();
        out.put(char(len & 0xFF));
        out.put(char(len >> 8));
        out.write(header.data(), header.size());
        out.write((const char *)t.data.data(), t.data.size() * sizeof(float));
        if (!out) {
            std::remove(tmp.c_str());
            throw Error(path + ": write failed");
        }
    }
    if (std::rename(tmp.c_str(), path.c_str()) != 0) {
        std::remove(tmp.c_str());
        throw Error(path + ": cannot rename the temporary file into place");
    }
}

void print_ids(const std::vector<int32_t> &ids) {
    for (size_t k = 0; k < ids.size(); k++) std::printf("%s%d", k ? " " : "", ids[k]);
}

// What runs the kernels: the x86 variant, or the GPU device.
std::string kernels_label() {
    return g_device == Device::CPU ? std::string(running_variant()) + " variant" : device_description(g_device);
}

void print_build_info() {
    std::string compiled;
#if defined(__aarch64__)
    compiled = "arm64 (arm-64-linux)";
#else
    for (Isa i : all_isas()) compiled += std::string(compiled.empty() ? "" : ", ") + isa_name(i);
#endif
    std::printf("kernel variants compiled: %s\n", compiled.c_str());
    std::printf("kernel variant this CPU runs: %s\n", running_variant());
#ifdef HALFORMER_HAS_GPU
    std::printf("GPU builds: cuda (PTX for sm_86 and sm_80), opencl\n");
#else
    std::printf("GPU builds: none (configured with HALFORMER_GPU=OFF)\n");
#endif
    for (Device d : {Device::CUDA, Device::OpenCL}) {
        std::printf("device %s: %s\n", device_name(d), device_description(d).c_str());
    }
    for (Isa i : all_isas()) {
        const TunedRecord *r = tuned_record(i);
        if (!r) {
            std::printf("schedules, %s: hand (no tuned record for this target)\n", isa_name(i));
            continue;
        }
        std::printf("schedules, %s: tuned record %s (%s, %s), %zu kernels tuned, the rest hand:\n", isa_name(i),
                    r->path.c_str(), r->machine.c_str(), r->date.c_str(), r->kernels.size());
        for (const auto &k : r->kernels) std::printf("  %-28s %s\n", k.kernel.c_str(), k.params.c_str());
    }
}

int cmd_info(const Args &a) {
    check_known(a, {});
    if (a.dir.empty()) {
        print_build_info();
        return 0;
    }
    Model m = load_model(a.dir);
    const Config &c = m.config();
    std::printf("model: %s\n", a.dir.c_str());
    std::printf("config:\n%s", c.to_json().c_str());
    std::printf("parameters: %lld (%.1f M)\n", (long long)m.parameter_count(), m.parameter_count() / 1e6);
    std::printf("precision: %s (projections; --precision fp32|bf16|int8)\n", precision_name(m.precision()));
    if (m.has_tokenizer()) {
        const Tokenizer &t = m.tokenizer();
        std::printf("tokenizer: %s, %d pieces (pad %d, bos %d, eos %d, unk %d)\n", t.path().c_str(), t.vocab_size(),
                    t.pad_id(), t.bos_id(), t.eos_id(), t.unk_id());
    } else {
        std::printf("tokenizer: none (token ids only)\n");
    }
    if (c.has_decoder()) {
        std::printf("output projection: %s\n", m.tied_head() ? "tied to tgt_embed.weight" : "generator.weight");
    } else {
        std::printf("head: %s\n", m.has_head() ? ("generator.weight, " + std::to_string(m.output_rows()) + " rows").c_str()
                                               : "none (logits are hidden states)");
    }
    print_build_info();
    return 0;
}

int cmd_logits(const Args &a) {
    check_known(a, {"src", "tgt", "out", "force"});
    if (!a.flag("src")) throw Error("logits: --src is required");
    if (!a.flag("out")) throw Error("logits: --out FILE.npy is required");
    Model m = load_model(a.dir);
    Sequence src = parse_ids(a.str("src"), "src");
    std::vector<Sequence> tgt;
    if (a.flag("tgt")) tgt.push_back(parse_ids(a.str("tgt"), "tgt"));
    if (m.config().architecture == Architecture::EncoderDecoder && tgt.empty()) {
        throw Error("logits: an encoder-decoder model needs --tgt (the decoder input)");
    }
    auto out = m.logits({src}, tgt);
    write_npy(a.str("out"), out[0], a.flag("force"));
    std::fprintf(stderr, "wrote %s: float32 [%lld, %lld]\n", a.str("out").c_str(), (long long)out[0].shape[0],
                 (long long)out[0].shape[1]);
    return 0;
}

GenerateOptions generate_options(const Args &a) {
    GenerateOptions o;
    o.max_new_tokens = (int)a.integer("max-new-tokens", -1);
    o.beam = (int)a.integer("beam", 1);
    o.length_penalty = (float)a.number("length-penalty", 0.6);
    o.n_best = (int)a.integer("n-best", 1);
    o.sample = a.flag("sample");
    o.temperature = (float)a.number("temperature", 1.0);
    o.top_k = (int)a.integer("top-k", 0);
    o.top_p = (float)a.number("top-p", 1.0);
    o.seed = (uint64_t)a.integer("seed", 0);
    return o;
}

int cmd_generate(const Args &a) {
    check_known(a, {"src", "text", "max-new-tokens", "beam", "length-penalty", "n-best", "sample", "temperature",
                    "top-k", "top-p", "seed"});
    if (a.flag("src") == a.flag("text")) throw Error("generate: give --src IDS or --text TEXT (one of them)");
    Model m = load_model(a.dir);
    GenerateOptions o = generate_options(a);
    if (a.flag("text")) {
        // Text in, text out: a decoder-only model continues the prompt, an
        // encoder-decoder model translates it.
        const bool dec = m.config().architecture == Architecture::Decoder;
        if (!dec && m.config().architecture != Architecture::EncoderDecoder) {
            throw Error("generate --text: an encoder-only model does not generate");
        }
        auto r = dec ? m.continue_text({a.str("text")}, o) : m.translate({a.str("text")}, o);
        if (!r[0].ok()) throw Error("generate --text: " + r[0].error);
        std::printf("%s\n", r[0].text.c_str());
        for (auto &alt : r[0].alternatives) std::printf("%s\n", alt.c_str());
        return 0;
    }
    if (o.max_new_tokens == -1) {
        const int P = m.config().architecture == Architecture::Decoder ? (int)parse_ids(a.str("src"), "src").size() : 1;
        o.max_new_tokens = std::max(1, std::min(64, m.config().max_positions - P + 1));
    }
    auto hyps = m.generate({parse_ids(a.str("src"), "src")}, o);
    for (auto &h : hyps[0]) {
        print_ids(h.tokens);
        if (o.beam > 1) std::printf("\t%.6f", h.score);
        std::printf("\n");
    }
    return 0;
}

// Peak resident memory of this process (VmHWM: per address space, so not
// inherited from a parent the way getrusage's ru_maxrss is after fork).
double peak_rss_mb() {
    std::ifstream in("/proc/self/status");
    for (std::string line; std::getline(in, line);) {
        if (line.rfind("VmHWM:", 0) == 0) return std::strtod(line.c_str() + 6, nullptr) / 1024.0;
    }
    struct rusage ru;
    getrusage(RUSAGE_SELF, &ru);
    return ru.ru_maxrss / 1024.0;
}

int cmd_demo(const Args &a) {
    if (g_threads == 0) {
        g_threads = (int)std::thread::hardware_concurrency();  // Halide's default
        halide_set_num_threads(g_threads);
    }
    check_known(a, {"batch", "src-len", "beam", "max-new-tokens", "seed"});
    if (!a.dir.empty()) throw Error("demo takes no model directory (it builds the paper's base model)");
    const int batch = (int)a.integer("batch", 16), src_len = (int)a.integer("src-len", 24);
    const int beam = (int)a.integer("beam", 4), max_new = (int)a.integer("max-new-tokens", 32);
    const uint64_t seed = (uint64_t)a.integer("seed", 1);
    if (batch < 1 || src_len < 1) throw Error("demo: --batch and --src-len must be >= 1");
    Config c = Config::base();
    c.eos_id = 2;
    using clock = std::chrono::steady_clock;
    auto secs = [](clock::time_point t0) { return std::chrono::duration<double>(clock::now() - t0).count(); };
    std::printf("Halformer demo: the paper's base Transformer (d_model %d, %d heads, d_ff %d, %d+%d layers,\n"
                "shared %d-token vocabulary, sinusoidal positions, tied embeddings), random weights (seed %llu)\n",
                c.d_model, c.num_heads, c.d_ff, c.num_encoder_layers, c.num_decoder_layers, c.tgt_vocab_size,
                (unsigned long long)seed);
    auto t0 = clock::now();
    Model m = Model::random(c, seed, g_device);
    m.set_precision(g_precision);
    if (g_max_memory > 0) m.set_memory_budget(g_max_memory);
    std::printf("built %.1f M parameters in %.2f s; kernels: %s, %d threads\n", m.parameter_count() / 1e6,
                secs(t0), kernels_label().c_str(), g_threads);
    // Random sources: lengths in [src_len/2, src_len], ids in [3, vocab).
    std::vector<Sequence> src(batch);
    uint64_t s = seed * 7919 + 17;
    for (auto &q : src) {
        s = s * 6364136223846793005ull + 1442695040888963407ull;
        int len = std::max(1, src_len / 2 + (int)((s >> 33) % (uint64_t)(src_len - src_len / 2 + 1)));
        for (int t = 0; t < len; t++) {
            s = s * 6364136223846793005ull + 1442695040888963407ull;
            q.push_back(3 + (int32_t)((s >> 33) % (uint64_t)(c.src_vocab_size - 3)));
        }
    }
    GenerateOptions o;
    o.beam = beam;
    o.max_new_tokens = max_new;
    // Warm-up (first calls pick kernel variants and spin up threads).
    m.generate({src[0]}, GenerateOptions{2, beam});
    m.reset_profile();
    t0 = clock::now();
    auto hyps = m.generate(src, o);
    const double elapsed = secs(t0);
    long tokens = 0;
    for (auto &h : hyps) tokens += (long)h[0].tokens.size();
    std::printf("translated %d sentences (source length %d..%d) with beam %d, up to %d new tokens\n", batch,
                src_len / 2, src_len, beam, max_new);
    for (int b = 0; b < std::min(batch, 3); b++) {
        std::printf("  #%d: ", b);
        print_ids(std::vector<int32_t>(hyps[b][0].tokens.begin(),
                                       hyps[b][0].tokens.begin() + std::min<size_t>(12, hyps[b][0].tokens.size())));
        std::printf("%s  (score %.3f)\n", hyps[b][0].tokens.size() > 12 ? " ..." : "", hyps[b][0].score);
    }
    std::printf("\n%ld tokens in %.3f s: %.1f tokens/s (best hypothesis of each sentence)\n", tokens, elapsed,
                tokens / elapsed);
    std::printf("peak memory: %.0f MB\n", peak_rss_mb());
    if (m.device() != Device::CPU) {
        const DeviceMemory dm = m.device_memory();
        std::printf("device memory (%s): weights %.0f MB, activations and caches %.0f MB\n",
                    device_description(m.device()).c_str(), dm.weights / 1e6, dm.activations / 1e6);
    }
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
    return 0;
}


double median(std::vector<double> v) {
    if (v.empty()) return 0;
    std::sort(v.begin(), v.end());
    const size_t n = v.size();
    return n % 2 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
}

// End-to-end timings of one model and workload (the same workload as
// bench/torch_baseline.py runs in PyTorch): medians over --iters runs.
//   encoder_ms          encoder forward over the batch (decoder-only: the
//                       prompt's forward pass)
//   decoder_step_ms     one incremental decoder step for the whole batch
//                       (greedy: batch rows; median over every step)
//   greedy_tokens_per_s batch × new tokens / greedy generate time (encoder
//                       included), never stopping at eos
//   beam_tokens_per_s   the same with beam search (best hypothesis)
int cmd_bench(const Args &a) {
    check_known(a, {"config", "batch", "src-len", "tgt-len", "beam", "new-tokens", "iters", "json", "seed"});
    using clock = std::chrono::steady_clock;
    auto secs = [](clock::time_point t0) { return std::chrono::duration<double>(clock::now() - t0).count(); };
    std::string source;
    std::unique_ptr<Model> m;
    if (a.flag("config")) {
        if (!a.dir.empty()) throw Error("bench: give a model directory or --config base, not both");
        if (a.str("config") != "base") throw Error("bench: --config knows only 'base' (the paper's base model)");
        m = std::make_unique<Model>(Model::random(Config::base(), 1, g_device));
        m->set_precision(g_precision);
        if (g_max_memory > 0) m->set_memory_budget(g_max_memory);
        source = "config base (random weights)";
    } else {
        if (a.dir.empty()) throw Error("bench: a model directory or --config base is required");
        m = std::make_unique<Model>(load_model(a.dir));
        source = a.dir;
    }
    const Config &c = m->config();
    if (c.architecture == Architecture::Encoder) throw Error("bench: an encoder-only model does not generate");
    const int B = (int)a.integer("batch", 1), S = (int)a.integer("src-len", 32);
    const int K = (int)a.integer("beam", 4), N = (int)a.integer("new-tokens", 32);
    const int iters = (int)a.integer("iters", 5);
    if (B < 1 || S < 1 || N < 1 || iters < 1) throw Error("bench: --batch, --src-len, --new-tokens and --iters must be >= 1");
    const bool ed = c.architecture == Architecture::EncoderDecoder;
    const int vocab = ed ? c.src_vocab_size : c.tgt_vocab_size;
    std::vector<Sequence> src(B);
    uint64_t st = (uint64_t)a.integer("seed", 1) * 0x9E3779B97F4A7C15ull;
    for (auto &q : src) {
        for (int t = 0; t < S; t++) {
            st = st * 6364136223846793005ull + 1442695040888963407ull;
            q.push_back(3 % vocab + (int32_t)((st >> 33) % (uint64_t)std::max(1, vocab - 3)));
        }
    }
    GenerateOptions greedy;
    greedy.max_new_tokens = N;
    greedy.stop_at_eos = false;
    GenerateOptions beam = greedy;
    beam.beam = K;
    // Warm-up: first calls choose kernel variants, start threads, grow buffers.
    m->generate(src, beam);
    std::vector<double> enc, steps, g_tps, b_tps;
    for (int it = 0; it < iters; it++) {
        if (!a.flag("json")) std::fprintf(stderr, "\rbench: iteration %d/%d", it + 1, iters);
        auto t0 = clock::now();
        if (ed) {
            m->encode(src);
        } else {
            m->logits(src);
        }
        enc.push_back(secs(t0) * 1e3);
        t0 = clock::now();
        auto h = m->generate(src, greedy);
        double t = secs(t0);
        long tokens = 0;
        for (auto &x : h) tokens += (long)x[0].tokens.size();
        g_tps.push_back(tokens / t);
        const auto &ss = m->step_seconds();
        for (size_t k = 1; k < ss.size(); k++) steps.push_back(ss[k] * 1e3);
        t0 = clock::now();
        h = m->generate(src, beam);
        t = secs(t0);
        tokens = 0;
        for (auto &x : h) tokens += (long)x[0].tokens.size();
        b_tps.push_back(tokens / t);
    }
    if (!a.flag("json")) std::fprintf(stderr, "\r%40s\r", "");
    const double rss = peak_rss_mb();
    if (a.flag("json")) {
        std::printf("{\"model\": \"%s\", \"architecture\": \"%s\", \"parameters\": %lld, \"batch\": %d, "
                    "\"src_len\": %d, \"beam\": %d, \"new_tokens\": %d, \"threads\": %d, \"iters\": %d, "
                    "\"variant\": \"%s\", \"precision\": \"%s\", \"device\": \"%s\", \"encoder_ms\": %.4f, \"decoder_step_ms\": %.4f, "
                    "\"greedy_tokens_per_s\": %.2f, \"beam_tokens_per_s\": %.2f, \"peak_rss_mb\": %.1f}\n",
                    source.c_str(), architecture_name(c.architecture), (long long)m->parameter_count(), B, S, K, N,
                    g_threads ? g_threads : (int)std::thread::hardware_concurrency(), iters,
                    g_device == Device::CPU ? running_variant() : device_name(g_device),
                    precision_name(m->precision()), device_description(g_device).c_str(), median(enc), median(steps), median(g_tps), median(b_tps),
                    rss);
    } else {
        std::printf("model: %s (%s, %.1f M parameters), kernels: %s, precision %s\n", source.c_str(),
                    architecture_name(c.architecture), m->parameter_count() / 1e6, kernels_label().c_str(),
                    precision_name(m->precision()));
        std::printf("workload: batch %d, source length %d, %d new tokens, beam %d; medians of %d runs\n", B, S, N,
                    K, iters);
        std::printf("  encoder_ms            %10.3f\n", median(enc));
        std::printf("  decoder_step_ms       %10.3f\n", median(steps));
        std::printf("  greedy_tokens_per_s   %10.1f\n", median(g_tps));
        std::printf("  beam_tokens_per_s     %10.1f\n", median(b_tps));
        std::printf("  peak_rss_mb           %10.1f\n", rss);
    }
    return 0;
}

}  // namespace

// `halformer tune ...` runs halformer-tune, built next to this program: the
// tuner links libHalide to compile candidate schedules, which the runtime
// (and every application linking it) must not need.
int run_tuner(int argc, char **argv) {
    char self[4096];
    ssize_t n = readlink("/proc/self/exe", self, sizeof(self) - 1);
    if (n <= 0) throw Error("tune: cannot find this program's path");
    std::string dir(self, (size_t)n);
    dir = dir.substr(0, dir.rfind('/'));
    std::string tuner = dir + "/halformer-tune";
    if (access(tuner.c_str(), X_OK) != 0)
        throw Error("tune: " + tuner + " is missing (it is built with the project: ./scripts/build.sh)");
    std::vector<char *> args{const_cast<char *>(tuner.c_str())};
    for (int i = 2; i < argc; i++) args.push_back(argv[i]);
    args.push_back(nullptr);
    execv(tuner.c_str(), args.data());
    throw Error("tune: cannot run " + tuner + ": " + std::strerror(errno));
}

namespace halformer {
int cmd_train(int argc, char **argv);      // cli/train.cpp
int cmd_tokenizer(int argc, char **argv);  // cli/tokenizer.cpp
int cmd_translate(int argc, char **argv);  // cli/translate.cpp
int cmd_eval(int argc, char **argv);       // cli/eval.cpp
int cmd_serve(int argc, char **argv);      // cli/serve.cpp
}

int main(int argc, char **argv) {
    try {
        if (argc >= 2 && std::string(argv[1]) == "tune") return run_tuner(argc, argv);
#ifdef HALFORMER_HAS_TRAINING
        if (argc >= 2 && std::string(argv[1]) == "train") return halformer::cmd_train(argc - 1, argv + 1);
#else
        if (argc >= 2 && std::string(argv[1]) == "train") {
            throw Error("this build has no training (configured with -DHALFORMER_TRAINING=OFF by scripts/main.sh); "
                        "./scripts/build.sh builds everything");
        }
#endif
        if (argc >= 2 && std::string(argv[1]) == "tokenizer") return halformer::cmd_tokenizer(argc - 1, argv + 1);
        if (argc >= 2 && std::string(argv[1]) == "translate") return halformer::cmd_translate(argc - 1, argv + 1);
        if (argc >= 2 && std::string(argv[1]) == "eval") return halformer::cmd_eval(argc - 1, argv + 1);
#ifndef HALFORMER_NO_SERVER
        if (argc >= 2 && std::string(argv[1]) == "serve") return halformer::cmd_serve(argc - 1, argv + 1);
#else
        if (argc >= 2 && std::string(argv[1]) == "serve") {
            throw Error("this build has no server (the ARM build of tests/arm: cpp-httplib is not cross-built)");
        }
#endif
        Args a = parse_args(argc, argv, {"sample", "force", "json"});
        if (a.flag("isa")) set_isa_limit(parse_isa(a.str("isa")));
        if (a.flag("device")) {
            g_device = parse_device(a.str("device"));
            require_device(g_device);
        }
        if (a.flag("precision")) g_precision = parse_precision(a.str("precision"));
        if (a.flag("max-memory")) g_max_memory = parse_size(a.str("max-memory"), "--max-memory");
        if (a.flag("threads")) {
            long n = a.integer("threads", 0);
            if (n < 1) throw Error("--threads must be >= 1");
            halide_set_num_threads((int)n);
            g_threads = (int)n;
        }
        if (a.command == "logits" || a.command == "generate") {
            if (a.dir.empty()) throw Error(a.command + ": a model directory is required\n" + kUsage);
        }
        if (a.command == "info") return cmd_info(a);
        if (a.command == "logits") return cmd_logits(a);
        if (a.command == "generate") return cmd_generate(a);
        if (a.command == "demo") return cmd_demo(a);
        if (a.command == "bench") return cmd_bench(a);
        if (a.command == "help" || a.command == "--help" || a.command == "-h") {
            std::printf("%s", kUsage);
            return 0;
        }
        throw Error("unknown command '" + a.command + "'\n" + kUsage);
    } catch (const std::exception &e) {
        std::fprintf(stderr, "halformer: error: %s\n", e.what());
        return 1;
    }
}
