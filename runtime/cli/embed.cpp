// halformer embed: sentence embeddings from an encoder model with a
// tokenizer (BERT: [CLS] … [SEP] from vocab.txt).
//
//   halformer embed DIR "first text" "second text"          # JSON lines on stdout
//   halformer embed DIR --pooling cls --normalize < texts.txt
//   halformer embed DIR --out vectors.npy [--force] < texts.txt   # float32 [texts, d_model]
//
// Pooling: mean (the mean of the encoder's output over the text's tokens,
// special tokens included, as sentence-transformers' mean pooling) or cls
// (the first token's output); --normalize scales each vector to unit L2 norm.
// A text that cannot run (empty, not UTF-8, too long) is an error naming it:
// nothing is written.
#include "common.h"

#include "halformer/files.h"

#include <cstdio>

namespace halformer {

int cmd_embed(int argc, char **argv) {
    CLI::App app{"halformer embed: sentence embeddings from an encoder model with a tokenizer", "halformer embed"};
    std::string dir, pooling = "mean", out;
    std::vector<std::string> texts;
    bool normalize = false, force = false;
    int batch = 32;
    MachineOptions mo;
    app.add_option("dir", dir, "model directory (a BERT directory as transformers saves it, ...)")->required();
    app.add_option("text", texts, "texts (default: read lines from stdin)");
    app.add_option("--pooling", pooling, "mean or cls")->check(CLI::IsMember({"mean", "cls"}));
    app.add_flag("--normalize", normalize, "unit L2 norm");
    app.add_option("--out", out, "write float32 [texts, d_model] to this .npy instead of JSON lines");
    app.add_flag("--force", force, "replace --out");
    app.add_option("--batch", batch, "texts per batch")->check(at_least(1));
    add_machine_options(app, mo);
    add_precision_option(app, mo);
    if (!parse_command(app, argc, argv)) return 0;
    if (!out.empty() && !force && files::exists(out)) throw Error(out + " exists; pass --force to replace it");
    Model m = load_model(dir, mo);
    m.tokenizer();  // a clear error now when there is none
    texts = texts_or_stdin(std::move(texts));
    if (texts.empty()) throw Error("embed: no text");
    const PoolOptions o{pooling == "cls" ? Pooling::First : Pooling::Mean, normalize};
    std::vector<Tensor> vecs;
    for (size_t at = 0; at < texts.size(); at += (size_t)batch) {
        std::vector<std::string> part(texts.begin() + (ptrdiff_t)at,
                                      texts.begin() + (ptrdiff_t)std::min(texts.size(), at + (size_t)batch));
        try {
            for (auto &v : m.sentence_embeddings(part, o)) vecs.push_back(std::move(v));
        } catch (const Error &e) {
            throw Error(std::string(e.what()) + " (texts " + std::to_string(at) + " onwards)");
        }
    }
    const int64_t D = m.config().d_model;
    if (!out.empty()) {
        Tensor all{{(int64_t)vecs.size(), D}, {}};
        for (auto &v : vecs) all.data.insert(all.data.end(), v.data.begin(), v.data.end());
        write_npy(out, all, force);
        std::fprintf(stderr, "wrote %s: float32 [%zu, %lld]\n", out.c_str(), vecs.size(), (long long)D);
        return 0;
    }
    for (size_t i = 0; i < vecs.size(); i++) {
        std::printf("{\"index\": %zu, \"embedding\": [", i);
        for (int64_t d = 0; d < D; d++) std::printf("%s%.9g", d ? ", " : "", vecs[i].data[(size_t)d]);
        std::printf("]}\n");
    }
    return 0;
}

}  // namespace halformer
