// Decoder-only prompts of mixed lengths: one batch against one at a time.
//
//   halformer_bench_decoder_batch [--prompts 16] [--new 48] [--rounds 3]
//                                 [--min-len 8] [--max-len 128] [--small] [--profile]
//
// A GPT-2-small-shaped model (12 layers, d_model 768, 12 heads, d_ff 3072,
// vocabulary 50257, learned positions, pre-LN, GELU-tanh) with random
// weights; `prompts` prompts of lengths spread over [min-len, max-len]; each
// takes `new` tokens greedily (eos off). Each round runs the whole set as one
// generate() call (one batch: each row at its own positions) and then
// prompt by prompt, interleaved; every batched answer is checked against the
// same prompt alone (after one untimed warm-up call). Prints one JSON
// object per round and a summary (medians) for bench/decoder_batch.py.
// --small: a 2-layer d_model 128 model (a quick check of the binary).
#include "halformer/model.h"

#include <CLI/CLI.hpp>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <random>
#include <vector>

using namespace halformer;

namespace {

double seconds_since(std::chrono::steady_clock::time_point t0) {
    return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
}

double median(std::vector<double> v) {
    std::sort(v.begin(), v.end());
    return v.size() % 2 ? v[v.size() / 2] : 0.5 * (v[v.size() / 2 - 1] + v[v.size() / 2]);
}

}  // namespace

int main(int argc, char **argv) {
    CLI::App app{"decoder-only prompts of mixed lengths: one batch against one at a time"};
    int prompts = 16, new_tokens = 48, rounds = 3, min_len = 8, max_len = 128;
    bool small = false, profile = false;
    app.add_option("--prompts", prompts)->check(CLI::Range(1, 256));
    app.add_option("--new", new_tokens)->check(CLI::Range(1, 512));
    app.add_option("--rounds", rounds)->check(CLI::Range(1, 100));
    app.add_option("--min-len", min_len)->check(CLI::Range(1, 512));
    app.add_option("--max-len", max_len)->check(CLI::Range(1, 512));
    app.add_flag("--small", small);
    app.add_flag("--profile", profile, "per-kernel times of each round's batched call, on stderr");
    CLI11_PARSE(app, argc, argv);
    if (max_len < min_len) {
        std::fprintf(stderr, "--max-len %d is below --min-len %d\n", max_len, min_len);
        return 2;
    }
    try {
        Config c;
        c.architecture = Architecture::Decoder;
        c.d_model = small ? 128 : 768;
        c.num_heads = small ? 4 : 12;
        c.d_ff = 4 * c.d_model;
        c.num_encoder_layers = 0;
        c.num_decoder_layers = small ? 2 : 12;
        c.src_vocab_size = 0;
        c.tgt_vocab_size = small ? 1000 : 50257;
        c.max_positions = 1024;
        c.positional_encoding = Positional::Learned;
        c.norm_first = true;
        c.activation = Act::GELUTanh;
        c.eos_id = 2;
        Model m = Model::random(c, 7);
        std::mt19937 rng(11);
        std::vector<Sequence> src((size_t)prompts);
        int64_t prompt_tokens = 0;
        for (int b = 0; b < prompts; b++) {
            // Lengths spread evenly over the range, in a shuffled order.
            const int len = prompts == 1 ? max_len : min_len + (max_len - min_len) * b / (prompts - 1);
            src[(size_t)b].resize((size_t)len);
            for (auto &t : src[(size_t)b]) t = 3 + (int32_t)(rng() % (uint32_t)(c.tgt_vocab_size - 3));
            prompt_tokens += len;
        }
        std::shuffle(src.begin(), src.end(), rng);
        GenerateOptions o;
        o.stop_at_eos = false;
        o.max_new_tokens = new_tokens;
        const double generated = (double)prompts * new_tokens;
        std::vector<double> batched_s, single_s, ratio;
        int mismatches = 0;
        std::fprintf(stderr, "[decoder-batch] %d prompts of %d..%d tokens (%lld in all), %d new tokens each, %d rounds\n",
                     prompts, min_len, max_len, (long long)prompt_tokens, new_tokens, rounds);
        {
            // Warm-up (not timed): the first call packs the weights and sizes the scratch.
            GenerateOptions w = o;
            w.max_new_tokens = 2;
            m.generate(src, w);
        }
        for (int r = 0; r < rounds; r++) {
            m.reset_profile();
            auto t0 = std::chrono::steady_clock::now();
            const auto batch = m.generate(src, o);
            const double tb = seconds_since(t0);
            if (profile) {
                for (auto &[name, k] : m.profile()) {
                    std::fprintf(stderr, "[decoder-batch]   %-24s %8.3f s %8lld calls\n", name.c_str(), k.seconds,
                                 (long long)k.calls);
                }
            }
            std::vector<std::vector<Hypothesis>> alone;
            t0 = std::chrono::steady_clock::now();
            for (auto &p : src) alone.push_back(m.generate({p}, o)[0]);
            const double ts = seconds_since(t0);
            for (int b = 0; b < prompts; b++) {
                if (batch[(size_t)b][0].tokens != alone[(size_t)b][0].tokens) mismatches++;
            }
            batched_s.push_back(tb);
            single_s.push_back(ts);
            ratio.push_back(ts / tb);
            std::printf("{\"round\": %d, \"batched_s\": %.4f, \"single_s\": %.4f, \"batched_tokens_per_s\": %.2f, "
                        "\"single_tokens_per_s\": %.2f, \"ratio\": %.3f}\n",
                        r + 1, tb, ts, generated / tb, generated / ts, ts / tb);
            std::fprintf(stderr, "[decoder-batch] round %d/%d: batched %.2f s (%.1f tokens/s), one at a time %.2f s (%.1f tokens/s): %.2fx\n",
                         r + 1, rounds, tb, generated / tb, ts, generated / ts, ts / tb);
            std::fflush(stdout);
        }
        std::printf("{\"summary\": true, \"prompts\": %d, \"min_len\": %d, \"max_len\": %d, \"prompt_tokens\": %lld, "
                    "\"new_tokens\": %d, \"rounds\": %d, \"batched_tokens_per_s\": %.2f, \"single_tokens_per_s\": %.2f, "
                    "\"ratio\": %.3f, \"ratio_min\": %.3f, \"ratio_max\": %.3f, \"mismatches\": %d, \"model\": \"%s\"}\n",
                    prompts, min_len, max_len, (long long)prompt_tokens, new_tokens, rounds, generated / median(batched_s),
                    generated / median(single_s), median(ratio), *std::min_element(ratio.begin(), ratio.end()),
                    *std::max_element(ratio.begin(), ratio.end()), mismatches,
                    small ? "2 layers, d_model 128" : "GPT-2-small shapes (124 M parameters), random weights, fp32");
        if (mismatches) {
            std::fprintf(stderr, "[decoder-batch] %d batched answers differ from the prompt alone\n", mismatches);
            return 1;
        }
    } catch (const std::exception &e) {
        std::fprintf(stderr, "error: %s\n", e.what());
        return 1;
    }
    return 0;
}
