// halformer eval: translates a test set and scores it with BLEU and chrF
// (sacreBLEU's definitions, halformer/metrics.h).
//
//   halformer eval DIR --src test.en --ref test.de [--beam 4] [--out hyp.de] [--json scores.json]
//   halformer eval --hyp hyp.de --ref test.de        # score translations made elsewhere
//
// A line the model cannot translate is scored as an empty hypothesis and
// named on stderr, and the exit status is 1. --out and --json are never written over an existing file
// without --force.
#include "common.h"

#include "halformer/metrics.h"

#include <chrono>
#include <cstdio>
#include <fstream>
#include <sstream>

namespace halformer {

namespace {

std::vector<std::string> read_lines(const std::string &path) {
    std::ifstream in(path, std::ios::binary);
    if (!in) throw Error(path + ": cannot open");
    std::vector<std::string> lines;
    for (std::string s; std::getline(in, s);) {
        if (!s.empty() && s.back() == '\r') s.pop_back();
        lines.push_back(std::move(s));
    }
    return lines;
}

std::string json_escape(const std::string &s) {
    std::string o;
    for (char c : s) {
        if (c == '"' || c == '\\') o += '\\', o += c;
        else if ((unsigned char)c < 0x20) {
            char b[8];
            std::snprintf(b, sizeof b, "\\u%04x", c);
            o += b;
        } else o += c;
    }
    return o;
}

}  // namespace

int cmd_eval(int argc, char **argv) {
    CLI::App app{"halformer eval: BLEU and chrF of a model's translations (or of a hypothesis file)",
                 "halformer eval"};
    std::string dir, src, ref, hyp, out, json;
    GenerateOptions g;
    MachineOptions mo;
    int batch = 32;
    bool force = false;
    app.add_option("dir", dir, "model directory (omit with --hyp)");
    app.add_option("--src", src, "source sentences, one a line");
    app.add_option("--ref", ref, "reference translations, line by line with --src")->required();
    app.add_option("--hyp", hyp, "score these translations instead of translating --src");
    app.add_option("--out", out, "write the model's translations here");
    app.add_option("--json", json, "write the scores as JSON here");
    app.add_option("--batch", batch, "sentences per batch")->check(CLI::PositiveNumber);
    app.add_flag("--force", force, "replace --out and --json");
    add_decoding_options(app, g);
    add_machine_options(app, mo);
    add_precision_option(app, mo);
    try {
        app.parse(argc, argv);
    } catch (const CLI::ParseError &e) {
        return app.exit(e);
    }
    if (hyp.empty() == dir.empty()) throw Error("eval: give a model directory with --src, or --hyp (one of them)");
    if (!dir.empty() && src.empty()) throw Error("eval: --src is required with a model directory");
    check_decoding_options(g);
    // Refuse before the long part, not after it.
    if (!out.empty()) check_writable(out, force);
    if (!json.empty()) check_writable(json, force);
    const std::vector<std::string> refs = read_lines(ref);
    std::vector<std::string> hyps;
    double seconds = 0;
    int64_t out_tokens = 0, failed = 0;
    if (!hyp.empty()) {
        hyps = read_lines(hyp);
    } else {
        const std::vector<std::string> srcs = read_lines(src);
        if (srcs.size() != refs.size()) {
            throw Error(src + " has " + std::to_string(srcs.size()) + " lines but " + ref + " has " +
                        std::to_string(refs.size()));
        }
        const Device device = apply_machine_options(mo);
        Model m = Model::load(dir, device);
        apply_precision(mo, m);
        auto t0 = std::chrono::steady_clock::now();
        auto res = m.translate(srcs, g, batch);
        seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
        for (size_t i = 0; i < res.size(); i++) {
            if (!res[i].ok()) {
                failed++;
                std::fprintf(stderr, "halformer eval: %s:%zu: %s (scored as empty)\n", src.c_str(), i + 1,
                             res[i].error.c_str());
            }
            out_tokens += res[i].output_tokens;
            hyps.push_back(res[i].text);
        }
    }
    if (hyps.size() != refs.size()) {
        throw Error((hyp.empty() ? src : hyp) + " has " + std::to_string(hyps.size()) + " lines but " + ref + " has " +
                    std::to_string(refs.size()));
    }
    if (!out.empty()) {
        std::string text;
        for (auto &h : hyps) text += one_line(h) + "\n";
        write_file(out, text, force);
    }
    const BleuScore b = corpus_bleu(hyps, refs);
    const double chrf = corpus_chrf(hyps, refs);
    std::printf("BLEU = %.2f %.1f/%.1f/%.1f/%.1f (BP = %.3f ratio = %.3f hyp_len = %lld ref_len = %lld)\n", b.score,
                b.precisions[0], b.precisions[1], b.precisions[2], b.precisions[3], b.bp,
                b.ref_len ? (double)b.hyp_len / (double)b.ref_len : 0.0, (long long)b.hyp_len, (long long)b.ref_len);
    std::printf("chrF = %.2f\n", chrf);
    if (!dir.empty()) {
        std::printf("%zu sentences (%lld failed) in %.1f s: %.0f tokens/s, decoding %s\n", hyps.size(),
                    (long long)failed, seconds, seconds > 0 ? out_tokens / seconds : 0.0,
                    g.beam > 1 ? ("beam " + std::to_string(g.beam)).c_str() : g.sample ? "sampling" : "greedy");
    }
    if (!json.empty()) {
        std::ostringstream j;
        j.precision(10);
        j << "{\"bleu\": " << b.score << ", \"chrf\": " << chrf << ", \"bp\": " << b.bp << ", \"hyp_len\": " << b.hyp_len
          << ", \"ref_len\": " << b.ref_len << ", \"precisions\": [" << b.precisions[0] << ", " << b.precisions[1]
          << ", " << b.precisions[2] << ", " << b.precisions[3] << "], \"sentences\": " << hyps.size()
          << ", \"failed\": " << failed << ", \"seconds\": " << seconds << ", \"beam\": " << g.beam
          << ", \"model\": \"" << json_escape(dir) << "\", \"src\": \"" << json_escape(src) << "\", \"ref\": \""
          << json_escape(ref) << "\", \"hyp\": \"" << json_escape(hyp) << "\"}\n";
        write_file(json, j.str(), force);
    }
    return failed ? 1 : 0;  // as translate: the scores stand, some lines had no translation
}

}  // namespace halformer
