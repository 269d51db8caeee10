// halformer eval: translates a test set and scores it with BLEU and chrF
// (sacreBLEU's definitions, halformer/translation_quality.h).
//
//   halformer eval DIR --src test.en --ref test.de [--beam 4] [--out hyp.de] [--json scores.json]
//   halformer eval --hyp hyp.de --ref test.de        # score translations made elsewhere
//
// A line the model cannot translate is scored as an empty hypothesis and
// named on stderr, and the exit status is 1. --out and --json are never written over an existing file
// without --force.
#include "common.h"

#include "halformer/files.h"
#include "halformer/translation_quality.h"

#include <chrono>
#include <cstdio>
#include <fstream>
#include <sstream>

namespace halformer {

namespace {

struct EvalArgs {
    std::string dir, src, ref, hyp, out, json;
    GenerateOptions g;
    MachineOptions machine;
    int batch = 32;
    bool force = false;
};

// The hypotheses, and how the model made them (with --hyp: read, no model).
struct Hypotheses {
    std::vector<std::string> lines;
    double seconds = 0;
    int64_t out_tokens = 0, failed = 0;
};

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

std::string line_counts(const std::string &a, size_t na, const std::string &b, size_t nb) {
    return a + " has " + std::to_string(na) + " lines but " + b + " has " + std::to_string(nb);
}

// --src translated by the model; a line that fails is an empty hypothesis.
Hypotheses translate_src(const EvalArgs &a, size_t ref_lines) {
    const std::vector<std::string> srcs = read_lines(a.src);
    if (srcs.size() != ref_lines) throw Error(line_counts(a.src, srcs.size(), a.ref, ref_lines));
    Model m = load_model(a.dir, a.machine);
    Hypotheses h;
    auto t0 = std::chrono::steady_clock::now();
    auto res = m.translate(srcs, a.g, a.batch);
    h.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    for (size_t i = 0; i < res.size(); i++) {
        if (!res[i].ok()) {
            h.failed++;
            std::fprintf(stderr, "halformer eval: %s:%zu: %s (scored as empty)\n", a.src.c_str(), i + 1,
                         res[i].error.c_str());
        }
        h.out_tokens += res[i].output_tokens;
        h.lines.push_back(res[i].text);
    }
    return h;
}

void print_scores(const EvalArgs &a, const BleuScore &b, double chrf, const Hypotheses &h) {
    std::printf("BLEU = %.2f %.1f/%.1f/%.1f/%.1f (BP = %.3f ratio = %.3f hyp_len = %lld ref_len = %lld)\n", b.score,
                b.precisions[0], b.precisions[1], b.precisions[2], b.precisions[3], b.bp,
                b.ref_len ? (double)b.hyp_len / (double)b.ref_len : 0.0, (long long)b.hyp_len, (long long)b.ref_len);
    std::printf("chrF = %.2f\n", chrf);
    if (!a.dir.empty()) {
        std::printf("%zu sentences (%lld failed) in %.1f s: %.0f tokens/s, decoding %s\n", h.lines.size(),
                    (long long)h.failed, h.seconds, h.seconds > 0 ? h.out_tokens / h.seconds : 0.0,
                    a.g.beam > 1 ? ("beam " + std::to_string(a.g.beam)).c_str() : a.g.sample ? "sampling" : "greedy");
    }
}

std::string scores_json(const EvalArgs &a, const BleuScore &b, double chrf, const Hypotheses &h) {
    std::ostringstream j;
    j.precision(10);
    j << "{\"bleu\": " << b.score << ", \"chrf\": " << chrf << ", \"bp\": " << b.bp << ", \"hyp_len\": " << b.hyp_len
      << ", \"ref_len\": " << b.ref_len << ", \"precisions\": [" << b.precisions[0] << ", " << b.precisions[1] << ", "
      << b.precisions[2] << ", " << b.precisions[3] << "], \"sentences\": " << h.lines.size()
      << ", \"failed\": " << h.failed << ", \"seconds\": " << h.seconds << ", \"beam\": " << a.g.beam
      << ", \"model\": \"" << json_escape(a.dir) << "\", \"src\": \"" << json_escape(a.src) << "\", \"ref\": \""
      << json_escape(a.ref) << "\", \"hyp\": \"" << json_escape(a.hyp) << "\"}\n";
    return j.str();
}

void add_eval_options(CLI::App &app, EvalArgs &a) {
    app.add_option("dir", a.dir, "model directory (omit with --hyp)");
    app.add_option("--src", a.src, "source sentences, one a line");
    app.add_option("--ref", a.ref, "reference translations, line by line with --src")->required();
    app.add_option("--hyp", a.hyp, "score these translations instead of translating --src");
    app.add_option("--out", a.out, "write the model's translations here");
    app.add_option("--json", a.json, "write the scores as JSON here");
    app.add_option("--batch", a.batch, "sentences per batch")->check(at_least(1));
    app.add_flag("--force", a.force, "replace --out and --json");
    add_decoding_options(app, a.g);
    app.get_option("--max-new-tokens")
        ->description("tokens generated at most (default: 2 x the source + 10, up to 256)");
    add_machine_options(app, a.machine);
    add_precision_option(app, a.machine);
}

}  // namespace

int cmd_eval(int argc, char **argv) {
    CLI::App app{"halformer eval: BLEU and chrF of a model's translations (or of a hypothesis file)",
                 "halformer eval"};
    EvalArgs a;
    add_eval_options(app, a);
    if (!parse_command(app, argc, argv)) return 0;
    if (a.hyp.empty() == a.dir.empty()) throw Error("eval: give a model directory with --src, or --hyp (one of them)");
    if (!a.dir.empty() && a.src.empty()) throw Error("eval: --src is required with a model directory");
    check_decoding_options(a.g);
    // Refuse before the long part, not after it.
    for (const std::string &path : {a.out, a.json}) {
        if (!path.empty() && !a.force && files::exists(path)) {
            throw Error(path + " exists: not replacing it (--force replaces it)");
        }
    }
    const std::vector<std::string> refs = read_lines(a.ref);
    Hypotheses h;
    if (!a.hyp.empty()) {
        h.lines = read_lines(a.hyp);
    } else {
        h = translate_src(a, refs.size());
    }
    if (h.lines.size() != refs.size()) {
        throw Error(line_counts(a.hyp.empty() ? a.src : a.hyp, h.lines.size(), a.ref, refs.size()));
    }
    if (!a.out.empty()) {
        std::string text;
        for (auto &line : h.lines) text += one_line(line) + "\n";
        files::write_text(a.out, text, a.force);
    }
    const BleuScore b = corpus_bleu(h.lines, refs);
    const double chrf = corpus_chrf(h.lines, refs);
    print_scores(a, b, chrf, h);
    if (!a.json.empty()) files::write_text(a.json, scores_json(a, b, chrf, h), a.force);
    return h.failed ? 1 : 0;  // as translate: the scores stand, some lines had no translation
}

}  // namespace halformer
