// halformer generate: token ids or text in, generated tokens or text out.
//
//   halformer generate DIR --src 5,6,7 [--max-new-tokens N] [--beam K --length-penalty A --n-best M]
//                          [--sample --temperature T --top-k K --top-p P --seed S]
//                          [--stop-ids 9,10] [--target-prefix 4,5] [--logprobs]
//   halformer generate DIR --text "a prompt"     # a model with a tokenizer
//
// --src prints one line of ids per hypothesis (beam or --logprobs: a tab and
// its score; --logprobs: another tab and each token's log-probability,
// comma-separated); --text prints the text (decoder-only: the continuation;
// encoder-decoder: the translation, after --target-prefix when given), then
// the other n-best texts, one a line.
#include "common.h"

#include <algorithm>
#include <cstdio>

namespace halformer {

namespace {

// Text in, text out: a decoder-only model continues the prompt, an
// encoder-decoder model translates it.
int generate_text(Model &m, const std::string &text, const GenerateOptions &o) {
    const bool dec = m.config().architecture == Architecture::Decoder;
    if (!dec && m.config().architecture != Architecture::EncoderDecoder) {
        throw Error("generate --text: an encoder-only model does not generate");
    }
    auto r = dec ? m.continue_text({text}, o) : m.translate({text}, o);
    if (!r[0].ok()) throw Error("generate --text: " + r[0].error);
    std::printf("%s\n", r[0].text.c_str());
    for (auto &alt : r[0].alternatives) std::printf("%s\n", alt.c_str());
    return 0;
}

// The checkpoint's generation_config.json defaults (num_beams, max_length)
// where the command line gives none: beams unless sampling; max_length
// counts the decoder's start (encoder-decoder) or the prompt (`prompt`
// tokens; -1: not known here).
void checkpoint_defaults(const CLI::App &app, const Config &c, int prompt, GenerateOptions &o) {
    if (!app.count("--beam") && !o.sample && c.default_beams > 1) {
        o.beam = c.default_beams;
        if (!app.count("--n-best")) o.n_best = 1;
    }
    const int P = c.architecture == Architecture::Decoder ? prompt : 1;
    if (!app.count("--max-new-tokens") && c.default_max_length > 0 && P >= 0) {
        o.max_new_tokens = std::max(1, std::min(c.default_max_length - P, c.max_positions - P + 1));
    }
}

int generate_ids(Model &m, const Sequence &src, GenerateOptions o) {
    auto hyps = m.generate({src}, o);
    for (auto &h : hyps[0]) {
        print_ids(h.tokens);
        if (o.beam > 1 || o.return_logprobs) std::printf("\t%.6f", h.score);
        for (size_t i = 0; i < h.log_probs.size(); i++) std::printf("%s%.6f", i ? "," : "\t", h.log_probs[i]);
        std::printf("\n");
    }
    return 0;
}

}  // namespace

int cmd_generate(int argc, char **argv) {
    CLI::App app{"halformer generate: generate from token ids (--src) or text (--text)", "halformer generate"};
    std::string dir, src, text, stop_ids, prefix;
    GenerateOptions o;
    MachineOptions mo;
    app.add_option("dir", dir, "model directory (config.json, model.safetensors) or GGUF file");
    app.add_option("--src", src, "input token ids, comma-separated (e.g. 5,6,7)");
    app.add_option("--text", text, "input text (a model with a tokenizer)");
    add_decoding_options(app, o);
    app.add_option("--stop-ids", stop_ids, "token ids that end an output as eos does, comma-separated");
    app.add_option("--target-prefix", prefix,
                   "encoder-decoder: token ids the output must begin with, comma-separated (printed: what follows)");
    app.add_flag("--logprobs", o.return_logprobs, "--src: print each hypothesis' score and per-token log-probabilities");
    add_machine_options(app, mo);
    add_precision_option(app, mo);
    if (!parse_command(app, argc, argv)) return 0;
    if (dir.empty()) throw Error("generate: a model directory is required");
    const bool has_text = app.count("--text") > 0;
    if ((app.count("--src") > 0) == has_text) throw Error("generate: give --src IDS or --text TEXT (one of them)");
    check_decoding_options(o);
    if (app.count("--stop-ids")) o.stop_ids = parse_id_list(stop_ids, "stop-ids");
    if (app.count("--target-prefix")) o.target_prefix = {parse_id_list(prefix, "target-prefix")};
    if (o.return_logprobs && has_text) throw Error("generate: --logprobs prints ids: use it with --src");
    Model m = load_model(dir, mo);
    checkpoint_defaults(app, m.config(), has_text ? -1 : (int)std::count(src.begin(), src.end(), ',') + 1, o);
    if (has_text) return generate_text(m, text, o);
    return generate_ids(m, parse_id_list(src, "src"), o);
}

}  // namespace halformer
