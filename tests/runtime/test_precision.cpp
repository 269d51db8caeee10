// Precision::BF16 and INT8 through whole models, against the same models in
// float32: the PyTorch-made fixtures (every architecture, norm placement and
// activation) and the demo translator (real trained weights).
#include "halformer/model.h"

#include <gtest/gtest.h>

#include <cmath>
#include <algorithm>
#include <cstdlib>
#include <string>

using namespace halformer;

namespace {

std::string fixture(const std::string &name) { return std::string(HALFORMER_FIXTURES) + "/" + name; }

struct Diff {
    double rel = 0;       // ‖a − b‖₂ / ‖b‖₂ over every logit
    double argmax = 0;    // fraction of positions whose largest logit agrees
};

Diff compare(const std::vector<Tensor> &a, const std::vector<Tensor> &b) {
    double num = 0, den = 0;
    int rows = 0, same = 0;
    for (size_t s = 0; s < a.size(); s++) {
        EXPECT_EQ(a[s].shape, b[s].shape);
        const int64_t W = b[s].shape[1];
        for (int64_t r = 0; r < b[s].shape[0]; r++) {
            int ia = 0, ib = 0;
            for (int64_t c = 0; c < W; c++) {
                const double x = a[s].data[r * W + c], y = b[s].data[r * W + c];
                num += (x - y) * (x - y);
                den += y * y;
                if (a[s].data[r * W + c] > a[s].data[r * W + ia]) ia = (int)c;
                if (b[s].data[r * W + c] > b[s].data[r * W + ib]) ib = (int)c;
            }
            rows++;
            same += ia == ib;
        }
    }
    return {std::sqrt(num / den), rows ? (double)same / rows : 1.0};
}

#define SKIP_ON_DEVICE() \
    if (std::getenv("HALFORMER_DEVICE")) GTEST_SKIP() << "bf16/int8 run on the CPU only"

}  // namespace

TEST(Precision, ParsesNamesAndRefusesOthers) {
    EXPECT_EQ(parse_precision("fp32"), Precision::FP32);
    EXPECT_EQ(parse_precision("bf16"), Precision::BF16);
    EXPECT_EQ(parse_precision("int8"), Precision::INT8);
    try {
        parse_precision("fp8");
        FAIL() << "no error";
    } catch (const Error &e) {
        EXPECT_NE(std::string(e.what()).find("fp8"), std::string::npos) << e.what();
    }
}

// Every fixture architecture: logits within the format's reach of float32,
// and switching back to FP32 gives float32's logits exactly.
TEST(Precision, FixtureLogitsCloseToFloat32) {
    SKIP_ON_DEVICE();
    struct Case { const char *dir; bool ed, dec; };
    for (Case c : {Case{"ed_post_relu", true, false}, Case{"ed_pre_gelu", true, false}, Case{"dec_pre_gelu", false, true}, Case{"dec_post_relu", false, true}, Case{"ed_learned_tanh", true, false},
                   Case{"enc_head", false, false}}) {
        Model m = Model::load(fixture(c.dir));
        const int V = std::min(m.config().has_encoder() ? m.config().src_vocab_size : 1000000,
                               m.config().has_decoder() ? m.config().tgt_vocab_size : 1000000);
        std::vector<Sequence> src = {{1, 5 % V, 9 % V, 3 % V, 7 % V}, {2 % V, 4 % V}};
        std::vector<Sequence> tgt;
        if (c.ed) tgt = {{1, 6 % V, 8 % V}, {1, 3 % V, 2 % V, 5 % V}};
        auto f32 = m.logits(src, tgt);
        for (Precision p : {Precision::BF16, Precision::INT8}) {
            m.set_precision(p);
            EXPECT_EQ(m.precision(), p);
            Diff d = compare(m.logits(src, tgt), f32);
            // bf16: 8 significant bits per operand; int8: 7 bits per row and column.
            EXPECT_LE(d.rel, p == Precision::BF16 ? 0.02 : 0.05) << c.dir << " " << precision_name(p);
            EXPECT_GT(d.rel, 0.0) << c.dir << " " << precision_name(p) << ": identical to fp32 (not reduced?)";
        }
        m.set_precision(Precision::FP32);
        Diff back = compare(m.logits(src, tgt), f32);
        EXPECT_EQ(back.rel, 0.0) << c.dir;
    }
}

// The demo translator (trained weights): logits and greedy translations.
TEST(Precision, TranslatorAgreesWithFloat32) {
    SKIP_ON_DEVICE();
    Model m = Model::load(std::string(HALFORMER_FIXTURES) + "/../../models/en-de");
    const std::vector<std::string> lines = {"The file could not be opened.", "Save the current document before closing?",
                                            "No network connection is available.", "Delete all selected items"};
    std::vector<Sequence> src, tgt;
    for (auto &l : lines) {
        Sequence s = m.tokenizer().encode(l);
        s.push_back(m.config().eos_id);
        src.push_back(s);
        tgt.push_back({m.config().bos_id, 5, 6, 7});
    }
    auto f32 = m.logits(src, tgt);
    auto f32_text = m.translate(lines);
    for (Precision p : {Precision::BF16, Precision::INT8}) {
        m.set_precision(p);
        Diff d = compare(m.logits(src, tgt), f32);
        EXPECT_LE(d.rel, p == Precision::BF16 ? 0.02 : 0.06) << precision_name(p);
        EXPECT_GE(d.argmax, 0.9) << precision_name(p);
        auto text = m.translate(lines);
        int same = 0;
        for (size_t i = 0; i < lines.size(); i++) {
            ASSERT_TRUE(text[i].ok()) << text[i].error;
            same += text[i].text == f32_text[i].text;
        }
        EXPECT_GE(same, 3) << precision_name(p) << ": translations differ from fp32";
    }
}
