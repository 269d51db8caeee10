// The halformer command: `halformer COMMAND ...` runs one of the commands
// below, each in its own file beside this one (cli/COMMAND.cpp) and parsing
// its own options with CLI11 (halformer COMMAND --help). This file holds the
// table of commands, the usage, and the error handling they share: an Error
// from any of them is one line "halformer: error: ..." on stderr and exit
// status 1.
#include "halformer/error.h"

#include <cstdio>
#include <exception>
#include <string>

namespace halformer {

// Each takes argc/argv from the command's name on (argv[0] = "info", ...).
int cmd_info(int argc, char **argv);       // cli/info.cpp
int cmd_logits(int argc, char **argv);     // cli/logits.cpp
int cmd_generate(int argc, char **argv);   // cli/generate.cpp
int cmd_chat(int argc, char **argv);       // cli/chat.cpp
int cmd_demo(int argc, char **argv);       // cli/demo.cpp
int cmd_bench(int argc, char **argv);      // cli/bench.cpp
int cmd_tune(int argc, char **argv);       // cli/tune.cpp
int cmd_tokenizer(int argc, char **argv);  // cli/tokenizer.cpp
int cmd_translate(int argc, char **argv);  // cli/translate.cpp
int cmd_eval(int argc, char **argv);       // cli/eval.cpp
int cmd_embed(int argc, char **argv);      // cli/embed.cpp
int cmd_classify(int argc, char **argv);   // cli/classify.cpp
int cmd_fill_mask(int argc, char **argv);  // cli/fill_mask.cpp
#ifdef HALFORMER_HAS_TRAINING
int cmd_train(int argc, char **argv);      // cli/train.cpp
#endif
#ifndef HALFORMER_NO_SERVER
int cmd_serve(int argc, char **argv);      // cli/serve.cpp
#endif

namespace {

#ifndef HALFORMER_HAS_TRAINING
int cmd_train(int, char **) {
    throw Error("this build has no training (configured with -DHALFORMER_TRAINING=OFF by scripts/main.sh); "
                "./scripts/build.sh builds everything");
}
#endif
#ifdef HALFORMER_NO_SERVER
int cmd_serve(int, char **) {
    throw Error("this build has no server (the ARM build of tests/arm: cpp-httplib is not cross-built)");
}
#endif

struct Command {
    const char *name;
    int (*run)(int argc, char **argv);
    const char *usage;  // its lines in `halformer help`
};

const Command kCommands[] = {
    {"info", cmd_info, "  halformer info [DIR]\n"},
    {"logits", cmd_logits, "  halformer logits DIR --src IDS [--tgt IDS] --out FILE.npy [--force]\n"},
    {"generate", cmd_generate,
     "  halformer generate DIR --src IDS | --text TEXT [--max-new-tokens N]\n"
     "                     [--beam K] [--length-penalty A] [--n-best M]\n"
     "                     [--sample] [--temperature T] [--top-k K] [--top-p P] [--seed S]\n"
     "                     [--repetition-penalty R] [--no-repeat-ngram-size N] [--min-length N]\n"
     "                     [--stop-ids IDS] [--target-prefix IDS] [--logprobs]\n"},
    {"chat", cmd_chat,
     "  halformer chat DIR [--system TEXT] [--max-new-tokens N] [--sample ...] (a line of stdin a turn)\n"},
    {"demo", cmd_demo, "  halformer demo [--batch B] [--src-len S] [--beam K] [--max-new-tokens N] [--seed S]\n"},
    {"bench", cmd_bench,
     "  halformer bench DIR|--config base [--batch B] [--src-len S] [--beam K]\n"
     "                  [--new-tokens N] [--iters N] [--json]\n"},
    {"tune", cmd_tune,
     "  halformer tune [--target T] [--config base|DIR] [--ops OPS] [--budget 20m] [--resume]\n"
     "                 (halformer tune --help: every option)\n"},
    {"train", cmd_train,
     "  halformer train OUT --task copy|reverse|sort --steps N | --config F --train F [--valid F] --steps N\n"
     "                  [--init DIR] [--tokenizer F] [--resume] (halformer train --help: every option)\n"},
    {"tokenizer", cmd_tokenizer, "  halformer tokenizer train|encode|decode|pairs ... (halformer tokenizer --help)\n"},
    {"translate", cmd_translate,
     "  halformer translate DIR [TEXT...] [--beam K] [--batch N] ... (reads stdin lines without TEXT)\n"},
    {"embed", cmd_embed,
     "  halformer embed DIR [TEXT...] [--pooling mean|cls] [--normalize] [--out FILE.npy] (JSON lines without --out)\n"},
    {"classify", cmd_classify, "  halformer classify DIR [TEXT...] (label, probability, logits a line)\n"},
    {"fill-mask", cmd_fill_mask, "  halformer fill-mask DIR [TEXT...] [--top-k 5] (a JSON line a text: each [MASK]'s guesses)\n"},
    {"eval", cmd_eval, "  halformer eval DIR --src F --ref F [--beam K] [--out F] [--json F] | eval --hyp F --ref F\n"},
    {"serve", cmd_serve,
     "  halformer serve DIR [--host 127.0.0.1] [--port 8080] [--workers 2] [--max-batch 32] ...\n"
     "                  (HTTP/JSON: POST /v1/generate, GET /health, GET /metrics; halformer serve --help)\n"},
};

std::string usage() {
    std::string u = "usage:\n";
    for (const Command &c : kCommands) u += c.usage;
    return u +
           "common options: --threads N, --isa sse41|avx2|avx512|sapphirerapids, --device cpu|cuda|opencl,\n"
           "                --precision fp32|bf16|int8 (projections; bf16/int8 on the CPU),\n"
           "                --max-memory SIZE (activations and caches, e.g. 2G; default 3/4 of memory)\n"
           "IDS: comma-separated token ids, e.g. 5,6,7\n"
           "halformer COMMAND --help: every option of a command\n";
}

int dispatch(int argc, char **argv) {
    if (argc < 2) throw Error("no command\n" + usage());
    const std::string name = argv[1];
    if (name == "help" || name == "--help" || name == "-h") {
        std::printf("%s", usage().c_str());
        return 0;
    }
    for (const Command &c : kCommands) {
        if (name == c.name) return c.run(argc - 1, argv + 1);
    }
    throw Error("unknown command '" + name + "'\n" + usage());
}

}  // namespace
}  // namespace halformer

int main(int argc, char **argv) {
    try {
        return halformer::dispatch(argc, argv);
    } catch (const std::exception &e) {
        std::fprintf(stderr, "halformer: error: %s\n", e.what());
        return 1;
    }
}
