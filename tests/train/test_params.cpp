// The parameter table is one: a new model from Model::random and from
// Trainer::create with the same seed is the same model, tensor for tensor.
#include "halformer/model.h"
#include "halformer/train.h"
#include "halformer/train_data.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <string>
#include <vector>

using namespace halformer;

namespace {

Config small(Architecture a, bool pre, Positional pos, int src_vocab) {
    Config c;
    c.architecture = a;
    c.d_model = 16;
    c.num_heads = 2;
    c.d_ff = 32;
    c.num_encoder_layers = a == Architecture::Decoder ? 0 : 2;
    c.num_decoder_layers = 2;
    c.src_vocab_size = src_vocab;
    c.tgt_vocab_size = 30;
    c.max_positions = 16;
    c.norm_first = pre;
    c.positional_encoding = pos;
    return c;
}

}  // namespace

TEST(ParamTable, RandomModelIsTheTrainersNewModel) {
    const Config configs[] = {
        small(Architecture::EncoderDecoder, false, Positional::Sinusoidal, 30),  // one shared vocabulary
        small(Architecture::EncoderDecoder, true, Positional::Learned, 40),
        small(Architecture::Decoder, true, Positional::SinusoidalConcat, 30),
    };
    for (const Config &c : configs) {
        SCOPED_TRACE(c.to_json());
        TrainOptions o;
        o.seed = 7;
        Trainer t = Trainer::create(c, o);
        Model random = Model::random(c, 7);
        EXPECT_EQ(random.parameter_count(), t.parameter_count());
        EXPECT_TRUE(random.tied_head());
        const std::vector<Sequence> src{{3, 4, 5, 6}, {7, 8}};
        const std::vector<Sequence> tgt{{1, 9, 10}, {1, 11, 12, 13}};
        const bool ed = c.architecture == Architecture::EncoderDecoder;
        auto a = random.logits(src, ed ? tgt : std::vector<Sequence>{});
        auto b = t.model().logits(src, ed ? tgt : std::vector<Sequence>{});
        ASSERT_EQ(a.size(), b.size());
        for (size_t i = 0; i < a.size(); i++) {
            ASSERT_EQ(a[i].shape, b[i].shape);
            EXPECT_EQ(0, std::memcmp(a[i].data.data(), b[i].data.data(), a[i].data.size() * sizeof(float)))
                << "sequence " << i << " differs";
        }
        // A different seed is a different model.
        auto other = Model::random(c, 8).logits(src, ed ? tgt : std::vector<Sequence>{});
        EXPECT_NE(0, std::memcmp(a[0].data.data(), other[0].data.data(), a[0].data.size() * sizeof(float)));
    }
}

TEST(ParamTable, PreLNModelsHaveFinalNorms) {
    const Config c = small(Architecture::EncoderDecoder, true, Positional::Sinusoidal, 30);
    TrainOptions o;
    Trainer t = Trainer::create(c, o);
    int finals = 0;
    for (auto &n : t.parameter_names()) finals += n == "encoder.norm.weight" || n == "decoder.norm.bias";
    EXPECT_EQ(finals, 2);
}

// The trainer's model answers with the current weights after every step:
// its projections are never served from a copy packed before the update
// (runtime/src/model/packed.cpp packs float32 inference weights on AVX-512 CPUs).
TEST(ParamTable, InferenceAfterStepsUsesTheNewWeights) {
    Config c = small(Architecture::EncoderDecoder, false, Positional::Sinusoidal, 30);
    c.d_model = 64;
    c.d_ff = 96;
    TrainOptions o;
    o.seed = 3;
    Trainer t = Trainer::create(c, o);
    const std::vector<Sequence> src{{3, 4, 5, 6}, {7, 8}};
    const std::vector<Sequence> tgt{{1, 9, 10}, {1, 11, 12, 13}};
    auto before = t.model().logits(src, tgt);  // packs, were the trainer's model to pack
    std::vector<Example> batch{{{3, 4, 5, 6}, {9, 10}, 0}, {{7, 8}, {11, 12, 13}, 0}};
    for (int i = 0; i < 3; i++) {
        t.zero_grad();
        StepStats s = t.forward_backward(batch);
        t.step(s.tokens);
    }
    auto after = t.model().logits(src, tgt);
    const std::string dir = ::testing::TempDir() + "/halformer_params_after_steps";
    t.save(dir, /*weights_only=*/true);
    auto fresh = Model::load(dir).logits(src, tgt);
    ASSERT_EQ(after.size(), fresh.size());
    for (size_t i = 0; i < after.size(); i++) {
        double diff = 0, norm = 0, moved = 0;
        for (size_t j = 0; j < after[i].data.size(); j++) {
            diff = std::max(diff, (double)std::fabs(after[i].data[j] - fresh[i].data[j]));
            norm = std::max(norm, (double)std::fabs(fresh[i].data[j]));
            moved = std::max(moved, (double)std::fabs(after[i].data[j] - before[i].data[j]));
        }
        EXPECT_LE(diff, 1e-5 * (1 + norm)) << "sequence " << i << ": the trainer's model answers with old weights";
        EXPECT_GT(moved, 1e-4) << "sequence " << i << ": three steps should move the logits";
    }
}
