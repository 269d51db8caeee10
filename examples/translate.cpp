// Loads a model, runs one forward pass on a batch, and generates with beam
// search: the runtime's API in a few lines.
#include <halformer/model.h>

#include <cstdio>
#include <sstream>
#include <string>

int main(int argc, char **argv) {
    if (argc != 3) {
        std::fprintf(stderr, "usage: %s MODEL_DIR 5,6,7\n", argv[0]);
        return 2;
    }
    halformer::Sequence src;
    std::stringstream ss(argv[2]);
    for (std::string tok; std::getline(ss, tok, ',');) src.push_back(std::stoi(tok));
    try {
        halformer::Model model = halformer::Model::load(argv[1]);
        const auto &cfg = model.config();
        // Forward pass on a batch of two (padded) sequences.
        halformer::Sequence shorter(src.begin(), src.begin() + (src.size() + 1) / 2);
        std::vector<halformer::Sequence> batch = {src, shorter};
        auto logits = cfg.architecture == halformer::Architecture::EncoderDecoder
                          ? model.logits(batch, {{cfg.bos_id}, {cfg.bos_id}})
                          : model.logits(batch);
        std::printf("logits: [%lld, %lld] and [%lld, %lld]\n", (long long)logits[0].shape[0],
                    (long long)logits[0].shape[1], (long long)logits[1].shape[0], (long long)logits[1].shape[1]);
        if (cfg.architecture == halformer::Architecture::Encoder) return 0;
        halformer::GenerateOptions opt;
        opt.beam = 3;
        opt.n_best = 2;
        opt.max_new_tokens = 8;
        auto hyps = model.generate({src}, opt);  // n-best per input
        for (const auto &h : hyps[0]) {
            for (int id : h.tokens) std::printf("%d ", id);
            std::printf("\t%.4f\n", h.score);
        }
    } catch (const std::exception &e) {
        std::fprintf(stderr, "error: %s\n", e.what());
        return 1;
    }
    return 0;
}
