// halformer logits: one input's logits as a NumPy file.
//
//   halformer logits DIR --src 5,6,7 [--tgt 1,9,4] --out FILE.npy [--force]
//
// An encoder-decoder model needs --tgt (the decoder input); the file holds
// float32 [target length, vocabulary] (decoder), [source length, vocabulary
// or labels] (decoder-only, encoder with a head) or the hidden states
// (encoder without a head). An existing file is replaced only with --force.
#include "common.h"

#include "halformer/files.h"

#include <cstdio>

namespace halformer {

int cmd_logits(int argc, char **argv) {
    CLI::App app{"halformer logits: one input's logits (float32 .npy)", "halformer logits"};
    std::string dir, src, tgt, out;
    bool force = false;
    MachineOptions mo;
    app.add_option("dir", dir, "model directory (config.json, model.safetensors) or GGUF file");
    app.add_option("--src", src, "input token ids, comma-separated (e.g. 5,6,7)");
    app.add_option("--tgt", tgt, "decoder input token ids (encoder-decoder models)");
    app.add_option("--out", out, "the .npy file to write");
    app.add_flag("--force", force, "replace --out");
    add_machine_options(app, mo);
    add_precision_option(app, mo);
    if (!parse_command(app, argc, argv)) return 0;
    if (dir.empty()) throw Error("logits: a model directory is required");
    if (!app.count("--src")) throw Error("logits: --src is required");
    if (!app.count("--out")) throw Error("logits: --out FILE.npy is required");
    // Refused before the model runs, not after.
    if (!force && files::exists(out)) throw Error(out + " exists; pass --force to replace it");
    Model m = load_model(dir, mo);
    const Sequence ids = parse_id_list(src, "src");
    std::vector<Sequence> tgts;
    if (app.count("--tgt")) tgts.push_back(parse_id_list(tgt, "tgt"));
    if (m.config().architecture == Architecture::EncoderDecoder && tgts.empty()) {
        throw Error("logits: an encoder-decoder model needs --tgt (the decoder input)");
    }
    auto logits = m.logits({ids}, tgts);
    write_npy(out, logits[0], force);
    std::fprintf(stderr, "wrote %s: float32 [%lld, %lld]\n", out.c_str(), (long long)logits[0].shape[0],
                 (long long)logits[0].shape[1]);
    return 0;
}

}  // namespace halformer
