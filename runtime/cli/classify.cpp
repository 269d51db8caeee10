// halformer classify: a sequence classifier's label for each text (BERT's
// BertForSequenceClassification; labels from config.json's id2label).
//
//   halformer classify DIR "the film was good" "it was dull"
//   halformer classify DIR < texts.txt
//
// One line a text: label, its probability, and every label's logit, tab-
// separated. A text that cannot run gets an empty line and a message naming
// its number on stderr; the others are classified, and the exit status is 1.
#include "common.h"

#include <cstdio>

namespace halformer {

int cmd_classify(int argc, char **argv) {
    CLI::App app{"halformer classify: a sequence classifier's label for each text", "halformer classify"};
    std::string dir;
    std::vector<std::string> texts;
    MachineOptions mo;
    app.add_option("dir", dir, "model directory (BertForSequenceClassification as transformers saves it)")->required();
    app.add_option("text", texts, "texts (default: read lines from stdin)");
    add_machine_options(app, mo);
    add_precision_option(app, mo);
    if (!parse_command(app, argc, argv)) return 0;
    Model m = load_model(dir, mo);
    if (m.config().encoder_head != EncoderHead::Classifier) {
        throw Error(dir + ": classify needs a sequence classifier (architectures: BertForSequenceClassification)");
    }
    m.tokenizer();
    texts = texts_or_stdin(std::move(texts));
    int failed = 0;
    auto res = m.classify(texts);
    for (size_t i = 0; i < res.size(); i++) {
        if (!res[i].ok()) {
            failed++;
            std::fprintf(stderr, "halformer classify: line %zu: %s\n", i + 1, res[i].error.c_str());
            std::printf("\n");
            continue;
        }
        std::printf("%s\t%.6f", one_line(res[i].name).c_str(), res[i].probability);
        for (float l : res[i].logits) std::printf("\t%.6g", l);
        std::printf("\n");
    }
    return failed ? 1 : 0;
}

}  // namespace halformer
