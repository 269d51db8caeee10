// halformer translate: text in, text out, with a model that has a tokenizer.
//
//   halformer translate DIR "Open the file"                 # one or more texts as arguments
//   halformer translate DIR < input.en > output.de          # one translation a line
//   halformer translate DIR --beam 4 --batch 64 < input.en
//
// Lines are read in chunks, sorted by length inside a chunk and translated
// --batch at a time; the output keeps the input's order, one line per input
// line. A line that cannot be translated (empty, not UTF-8, longer than the
// model allows) gives an empty output line and a message naming its number on
// stderr; the other lines still come out, and the exit status is 1.
#include "common.h"

#include <chrono>
#include <cstdio>
#include <iostream>

namespace halformer {

int cmd_translate(int argc, char **argv) {
    CLI::App app{"halformer translate: translate text with an encoder-decoder model that has a tokenizer",
                 "halformer translate"};
    std::string dir;
    std::vector<std::string> texts;
    GenerateOptions g;
    MachineOptions mo;
    int batch = 32, chunk = 2048;
    bool quiet = false;
    app.add_option("dir", dir, "model directory (config.json naming a tokenizer, model.safetensors)")->required();
    app.add_option("text", texts, "texts to translate (default: read lines from stdin)");
    app.add_option("--batch", batch, "sentences per batch")->check(at_least(1));
    app.add_option("--chunk", chunk, "stdin lines sorted by length together")->check(at_least(1));
    app.add_flag("--quiet", quiet, "no summary on stderr");
    add_decoding_options(app, g);
    app.get_option("--max-new-tokens")
        ->description("tokens generated at most (default: 2 x the source + 10, up to 256)");
    add_machine_options(app, mo);
    add_precision_option(app, mo);
    if (!parse_command(app, argc, argv)) return 0;
    check_decoding_options(g);
    Model m = load_model(dir, mo);
    if (m.config().architecture != Architecture::EncoderDecoder) {
        throw Error(dir + ": translate needs an encoder-decoder model (use generate --text for a decoder-only one)");
    }
    m.tokenizer();  // a clear error now when there is none

    int64_t line = 0, failed = 0, out_tokens = 0, in_tokens = 0;
    double seconds = 0;
    auto run = [&](const std::vector<std::string> &lines) {
        auto t0 = std::chrono::steady_clock::now();
        auto res = m.translate(lines, g, batch);
        seconds += std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
        for (auto &r : res) {
            line++;
            if (!r.ok()) {
                failed++;
                std::fprintf(stderr, "halformer translate: line %lld: %s\n", (long long)line, r.error.c_str());
                std::printf("\n");
                continue;
            }
            in_tokens += r.input_tokens;
            out_tokens += r.output_tokens;
            std::printf("%s", one_line(r.text).c_str());
            for (auto &alt : r.alternatives) std::printf("\t%s", one_line(alt).c_str());
            std::printf("\n");
        }
        std::fflush(stdout);
    };
    if (!texts.empty()) {
        run(texts);
    } else {
        std::vector<std::string> lines;
        for (std::string s; std::getline(std::cin, s);) {
            if (!s.empty() && s.back() == '\r') s.pop_back();
            lines.push_back(std::move(s));
            if ((int)lines.size() == chunk) {
                run(lines);
                lines.clear();
            }
        }
        if (!lines.empty()) run(lines);
    }
    if (!quiet) {
        std::fprintf(stderr, "halformer translate: %lld lines (%lld failed), %lld -> %lld tokens in %.2f s: %.0f tokens/s\n",
                     (long long)line, (long long)failed, (long long)in_tokens, (long long)out_tokens, seconds,
                     seconds > 0 ? out_tokens / seconds : 0.0);
    }
    return failed ? 1 : 0;
}

}  // namespace halformer
