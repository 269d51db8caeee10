// halformer fill-mask: a masked-LM's guesses at each [MASK] of a text
// (BertForMaskedLM; transformers' fill-mask pipeline).
//
//   halformer fill-mask DIR "the capital of france is [MASK]." --top-k 5
//   halformer fill-mask DIR < texts.txt
//
// One JSON line a text: {"masks": [{"position": P, "tokens": [...],
// "ids": [...], "probabilities": [...]}, ...]}, best first, one entry per
// [MASK]. A text that cannot run (no [MASK], too long) gets {"error": ...}
// and a message naming its number on stderr; the others run, and the exit
// status is 1.
#include "common.h"

#include "halformer/json.h"

#include <cstdio>

namespace halformer {

int cmd_fill_mask(int argc, char **argv) {
    CLI::App app{"halformer fill-mask: a masked-LM's guesses at each [MASK] of a text", "halformer fill-mask"};
    std::string dir;
    std::vector<std::string> texts;
    int top_k = 5;
    MachineOptions mo;
    app.add_option("dir", dir, "model directory (BertForMaskedLM as transformers saves it)")->required();
    app.add_option("text", texts, "texts with [MASK] (default: read lines from stdin)");
    app.add_option("--top-k", top_k, "guesses per mask, 1 to 8 (default 5)")->check(CLI::Range(1, 8));
    add_machine_options(app, mo);
    add_precision_option(app, mo);
    if (!parse_command(app, argc, argv)) return 0;
    Model m = load_model(dir, mo);
    if (m.config().encoder_head != EncoderHead::MaskedLM) {
        throw Error(dir + ": fill-mask needs a masked-LM head (architectures: BertForMaskedLM)");
    }
    m.tokenizer();
    texts = texts_or_stdin(std::move(texts));
    int failed = 0;
    auto res = m.fill_mask(texts, top_k);
    for (size_t i = 0; i < res.size(); i++) {
        if (!res[i].ok()) {
            failed++;
            std::fprintf(stderr, "halformer fill-mask: line %zu: %s\n", i + 1, res[i].error.c_str());
            std::printf("{\"error\": %s}\n", json::quote(res[i].error).c_str());
            continue;
        }
        std::string line = "{\"masks\": [";
        for (size_t k = 0; k < res[i].masks.size(); k++) {
            const MaskGuesses &g = res[i].masks[k];
            std::string toks, ids, probs;
            for (size_t j = 0; j < g.ids.size(); j++) {
                const char *sep = j ? ", " : "";
                toks += sep + json::quote(g.tokens[j]);
                ids += sep + std::to_string(g.ids[j]);
                char p[32];
                std::snprintf(p, sizeof p, "%.6g", g.probabilities[j]);
                probs += sep + std::string(p);
            }
            line += std::string(k ? ", " : "") + "{\"position\": " + std::to_string(g.position) + ", \"tokens\": [" +
                    toks + "], \"ids\": [" + ids + "], \"probabilities\": [" + probs + "]}";
        }
        std::printf("%s]}\n", line.c_str());
    }
    return failed ? 1 : 0;
}

}  // namespace halformer
