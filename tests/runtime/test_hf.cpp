// Hugging Face model directories as transformers saves them
// (tests/make_hf_fixtures.py): what the config and the files say is read
// with transformers' names and defaults, and every bad directory gets an
// Error naming the problem. (Their logits and decodes against the
// references: test_models.cpp's Golden suites, which list the hf/ fixtures.)
#include "halformer/json.h"
#include "halformer/model.h"
#include "halformer/safetensors.h"

#include "test_files.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <numeric>
#include <sstream>

using namespace halformer;
namespace fs = std::filesystem;

namespace {

std::string fixture(const std::string &name) { return test_files::hf_fixture(name); }

using test_files::read;
using test_files::write;
std::string replaced(std::string s, const std::string &from, const std::string &to) {
    const size_t k = s.find(from);
    if (k == std::string::npos) ADD_FAILURE() << "no '" << from << "' to replace";
    else s.replace(k, from.size(), to);
    return s;
}

}  // namespace

TEST(HfConfig, Gpt2FieldsAndDefaults) {
    Model m = Model::load(fixture("gpt2_lm"));
    const Config &c = m.config();
    EXPECT_EQ(c.family, "gpt2");
    EXPECT_EQ(c.architecture, Architecture::Decoder);
    EXPECT_EQ(c.d_model, 40);
    EXPECT_EQ(c.num_heads, 4);
    EXPECT_EQ(c.d_ff, 160) << "n_inner null: 4 * n_embd";
    EXPECT_EQ(c.num_decoder_layers, 2);
    EXPECT_EQ(c.tgt_vocab_size, 61);
    EXPECT_EQ(c.positional_encoding, Positional::Learned);
    EXPECT_TRUE(c.norm_first);
    EXPECT_EQ(c.activation, Act::GELUTanh) << "gelu_new";
    EXPECT_EQ(c.eos_id, 60);
    EXPECT_TRUE(m.tied_head()) << "lm_head.weight is absent: tied to wte";
    // The other file: no "transformer." prefix, F16, two shards, erf gelu.
    Model s = Model::load(fixture("gpt2_noprefix_f16_sharded"));
    EXPECT_EQ(s.config().activation, Act::GELU);
    EXPECT_EQ(s.config().d_ff, 72);
    EXPECT_EQ(s.config().tgt_vocab_size, 75);
}

TEST(HfConfig, MarianFieldsAndPositionTables) {
    Model m = Model::load(fixture("marian_positions"));
    const Config &c = m.config();
    EXPECT_EQ(c.family, "marian");
    EXPECT_EQ(c.architecture, Architecture::EncoderDecoder);
    EXPECT_FALSE(c.norm_first);
    EXPECT_EQ(c.bos_id, 48) << "decoder_start_token_id";
    EXPECT_EQ(c.eos_id, 0);
    EXPECT_EQ(c.pad_id, 48);
    EXPECT_EQ(c.positional_encoding, Positional::Learned) << "the file holds the position tables";
    // The current save: no tables in the file, computed ([sin | cos] halves).
    const Config now = Config::from_file(fixture("marian") + "/config.json");
    EXPECT_EQ(now.positional_encoding, Positional::SinusoidalConcat);
    EXPECT_EQ(now.activation, Act::SiLU) << "swish";
    EXPECT_TRUE(now.scale_embeddings);
}

// A scratch copy of a fixture directory, to break.
class BadHf : public test_files::FixtureCopy {
protected:
    void edit_config(const std::string &from, const std::string &to) {
        write(dir + "/config.json", replaced(read(dir + "/config.json"), from, to));
    }
    template <typename F>
    void rewrite(F edit) {
        test_files::rewrite_safetensors(dir + "/model.safetensors", edit);
    }
};

TEST_F(BadHf, UnknownModelTypeIsNamed) {
    use("gpt2_lm");
    edit_config("\"model_type\": \"gpt2\"", "\"model_type\": \"falcon\"");
    expect_error({"config.json", "model_type \"falcon\" is not supported", "gpt2", "marian", "llama", "mistral", "qwen2"});
}

TEST_F(BadHf, UnsupportedFeaturesAreNamed) {
    use("gpt2_lm");
    edit_config("\"model_type\": \"gpt2\"", "\"model_type\": \"gpt2\", \"add_cross_attention\": true");
    expect_error({"add_cross_attention", "not supported"});
    use("gpt2_lm");
    edit_config("\"model_type\": \"gpt2\"", "\"model_type\": \"gpt2\", \"rope_scaling\": {\"type\": \"linear\"}");
    expect_error({"rope_scaling", "not supported"});
    use("gpt2_lm");
    edit_config("\"activation_function\": \"gelu_new\"", "\"activation_function\": \"quick_gelu\"");
    expect_error({"activation_function", "quick_gelu", "not supported"});
    use("marian");
    // (A decoder of its own heads is read: marian_widths. Heads that do not divide d_model are named.)
    edit_config("\"decoder_attention_heads\": 4", "\"decoder_attention_heads\": 6");
    expect_error({"d_model = 40", "decoder_attention_heads = 6"});
    use("gpt2_lm");
    edit_config("\"n_head\": 4", "\"n_head\": 3");
    expect_error({"d_model = 40", "num_heads = 3"});
    // n_inner null with an n_embd whose 4 × does not fit an int (found by
    // fuzz_config: a signed overflow before): an error naming the size.
    use("gpt2_lm");
    edit_config("\"n_embd\": 40", "\"n_embd\": 1338915093");
    expect_error({"d_model"});
}

TEST_F(BadHf, PytorchBinOnlySaysHowToSaveSafetensors) {
    use("gpt2_lm");
    fs::remove(dir + "/model.safetensors");
    write(dir + "/pytorch_model.bin", "not really");
    expect_error({"pytorch_model.bin", "safetensors", "save_pretrained"});
    fs::remove(dir + "/pytorch_model.bin");
    expect_error({"no model.safetensors"});
}

TEST_F(BadHf, MissingAndMisshapenTensorsAreNamedAsTheFileNamesThem) {
    use("gpt2_lm");
    rewrite([](std::vector<TensorRef> &t) {
        t.erase(std::remove_if(t.begin(), t.end(), [](const TensorRef &r) { return r.name == "transformer.h.1.mlp.c_fc.weight"; }),
                t.end());
    });
    expect_error({"missing tensor 'transformer.h.1.mlp.c_fc.weight'", "[160, 40]"});
    use("gpt2_lm");
    rewrite([](std::vector<TensorRef> &t) {
        for (auto &r : t)
            if (r.name == "transformer.h.0.attn.c_attn.weight") r.shape = {120, 40};  // [out, in]: not Conv1D's
    });
    expect_error({"'transformer.h.0.attn.c_attn.weight' (transposed)", "[40, 120]", "expected [120, 40]"});
    use("marian");
    rewrite([](std::vector<TensorRef> &t) {
        t.erase(std::remove_if(t.begin(), t.end(),
                               [](const TensorRef &r) { return r.name == "model.decoder.layers.0.encoder_attn.k_proj.bias"; }),
                t.end());
    });
    expect_error({"missing tensor", "'model.decoder.layers.0.encoder_attn.k_proj.bias'"});
}

TEST_F(BadHf, TensorsNoLayerReadsAreNamed) {
    use("gpt2_lm");
    edit_config("\"n_layer\": 2", "\"n_layer\": 1");
    expect_error({"does not use", "transformer.h.1."});
    // Buffers transformers keeps (attn.bias, attn.masked_bias) are not.
    use("gpt2_lm");
    EXPECT_NO_THROW(Model::load(dir));
}

TEST_F(BadHf, ShardsAreCheckedAgainstTheirIndex) {
    use("gpt2_noprefix_f16_sharded");
    fs::remove(dir + "/model-00002-of-00002.safetensors");
    expect_error({"model-00002-of-00002.safetensors", "cannot open"});
    use("gpt2_noprefix_f16_sharded");
    write(dir + "/model.safetensors.index.json",
          replaced(read(dir + "/model.safetensors.index.json"), "\"weight_map\"", "\"weights\""));
    expect_error({"model.safetensors.index.json", "weight_map"});
    use("gpt2_noprefix_f16_sharded");
    write(dir + "/model.safetensors.index.json",
          replaced(read(dir + "/model.safetensors.index.json"), "\"model-0000", "\"../model-0000"));
    expect_error({"model.safetensors.index.json", "no shard file name"});
}

// Text through the checkpoints' own tokenizers: GPT-2's byte-level BPE
// continues a prompt; Marian's source.spm + vocab.json (+ eos) in,
// vocab.json + target.spm out.
TEST(HfText, Gpt2ContinuesAPrompt) {
    Model m = Model::load(fixture("gpt2_lm"));
    ASSERT_TRUE(m.has_tokenizer());
    const Tokenizer &tok = m.tokenizer();
    EXPECT_EQ(tok.eos_id(), 60);
    const std::string prompt = "the cat sat on";
    const Sequence ids = tok.encode_input(prompt);
    EXPECT_EQ(ids, tok.encode(prompt)) << "GPT-2 adds nothing around a prompt";
    EXPECT_EQ(tok.decode(ids), prompt);
    GenerateOptions o;
    o.max_new_tokens = 6;
    auto hyps = m.generate({ids}, o);
    auto text = m.continue_text({prompt}, o);
    ASSERT_TRUE(text[0].ok()) << text[0].error;
    EXPECT_EQ(text[0].text, m.text_of(hyps[0][0].tokens, &ids));
    EXPECT_EQ(text[0].output_tokens, (int)hyps[0][0].tokens.size());
}

TEST(HfText, MarianTranslatesThroughItsVocabulary) {
    for (const char *name : {"marian", "marian_positions"}) {
        Model m = Model::load(fixture(name));
        ASSERT_TRUE(m.has_tokenizer()) << name;
        const Tokenizer &tok = m.tokenizer();
        const Sequence ids = tok.encode_input("the red house");
        ASSERT_FALSE(ids.empty());
        EXPECT_EQ(ids.back(), m.config().eos_id) << name << ": eos after the source";
        EXPECT_EQ(Sequence(ids.begin(), ids.end() - 1), tok.encode("the red house"));
        for (int32_t id : ids) EXPECT_LT(id, m.config().src_vocab_size);
        GenerateOptions o;
        o.beam = 2;
        auto hyps = m.generate({ids}, o);
        auto out = m.translate({"the red house", ""}, o);
        ASSERT_TRUE(out[0].ok()) << out[0].error;
        EXPECT_EQ(out[0].text, m.text_of(hyps[0][0].tokens)) << name;
        EXPECT_FALSE(out[1].ok()) << "an empty line gets its own error";
    }
}

namespace {

json::Value golden(const std::string &name) { return test_files::hf_golden(name); }
std::vector<Sequence> batch(const json::Value &v) {
    std::vector<Sequence> out;
    for (auto &s : v.array) {
        out.emplace_back();
        for (auto &x : s.array) out.back().push_back((int32_t)x.number);
    }
    return out;
}
double rel_error(const std::vector<float> &out, const json::Value &ref) {
    EXPECT_EQ(out.size(), ref.array.size());
    double num = 0, den = 0;
    for (size_t k = 0; k < out.size() && k < ref.array.size(); k++) {
        const double d = out[k] - ref.array[k].number;
        num += d * d;
        den += ref.array[k].number * ref.array[k].number;
    }
    return std::sqrt(num / den);
}

}  // namespace

// BERT: hidden states, [CLS] and mean pooling (plain and of unit norm), the
// pooler's classifier, against transformers-made references (padded batches).
TEST(HfBert, HiddenStatesAndPooling) {
    for (const char *name : {"bert_base", "bert_mlm", "bert_cls"}) {
        Model m = Model::load(fixture(name));
        EXPECT_EQ(m.config().family, "bert");
        json::Value g = golden(name);
        int cases = 0;
        for (auto &c : g.find("hidden")->array) {
            const std::vector<Sequence> src = batch(*c.find("src"));
            auto hidden = m.encode(src);
            auto cls = m.pool(src, {Pooling::First, false});
            auto mean = m.pool(src, {Pooling::Mean, false});
            auto mean_l2 = m.pool(src, {Pooling::Mean, true});
            for (size_t b = 0; b < src.size(); b++) {
                const std::string at = std::string(name) + " case " + std::to_string(cases) + " seq " + std::to_string(b);
                EXPECT_LE(rel_error(hidden[b].data, c.find("last_hidden_state")->array[b]), 1e-4) << at;
                EXPECT_LE(rel_error(cls[b].data, c.find("cls")->array[b]), 1e-4) << at;
                EXPECT_LE(rel_error(mean[b].data, c.find("mean")->array[b]), 1e-4) << at;
                EXPECT_LE(rel_error(mean_l2[b].data, c.find("mean_l2")->array[b]), 1e-4) << at;
                double norm = 0;
                for (float x : mean_l2[b].data) norm += (double)x * x;
                EXPECT_NEAR(std::sqrt(norm), 1.0, 1e-5) << at;
            }
            cases++;
        }
        EXPECT_GE(cases, 3) << name;
    }
}

TEST(HfBert, SequenceClassifier) {
    Model m = Model::load(fixture("bert_cls"));
    EXPECT_EQ(m.config().labels, (std::vector<std::string>{"negative", "neutral", "positive"}));
    json::Value g = golden("bert_cls");
    for (auto &c : g.find("class_logits")->array) {
        const std::vector<Sequence> src = batch(*c.find("src"));
        auto logits = m.logits(src);
        auto probs = m.class_probabilities(src);
        ASSERT_EQ(logits.size(), src.size());
        for (size_t b = 0; b < src.size(); b++) {
            EXPECT_EQ(logits[b].shape, (std::vector<int64_t>{1, 3}));
            EXPECT_LE(rel_error(logits[b].data, c.find("logits")->array[b]), 1e-4);
            double sum = 0, mx = -1;
            int best = 0;
            for (int k = 0; k < 3; k++) {
                sum += probs[b].data[k];
                if (probs[b].data[k] > mx) mx = probs[b].data[k], best = k;
            }
            EXPECT_NEAR(sum, 1.0, 1e-5);
            EXPECT_EQ(m.config().labels[best], c.find("labels")->array[b].string);
        }
    }
    // Text in: [CLS] … [SEP] from vocab.txt, labels by name; an empty text
    // gets its own error and the others are classified.
    auto out = m.classify({"the film was good", ""});
    ASSERT_TRUE(out[0].ok()) << out[0].error;
    EXPECT_FALSE(out[1].ok());
    const Sequence ids = m.tokenizer().encode_input("the film was good");
    EXPECT_EQ(ids.front(), 3) << "[CLS]";
    EXPECT_EQ(ids.back(), 4) << "[SEP]";
    auto direct = m.logits({ids});
    EXPECT_EQ(out[0].logits, direct[0].data);
    EXPECT_EQ(out[0].name, m.config().labels[(size_t)out[0].label]);
}

TEST_F(BadHf, BertHeadsAreReadByTheirArchitecture) {
    use("bert_mlm");
    edit_config("\"BertForMaskedLM\"", "\"BertForNextSentencePrediction\"");
    expect_error({"architectures", "BertForNextSentencePrediction", "not supported"});
    use("bert_cls");
    edit_config("\"position_embedding_type\": \"absolute\"", "\"position_embedding_type\": \"relative_key\"");
    expect_error({"position_embedding_type", "relative_key", "not supported"});
    use("bert_cls");
    rewrite([](std::vector<TensorRef> &t) {
        t.erase(std::remove_if(t.begin(), t.end(), [](const TensorRef &r) { return r.name == "bert.pooler.dense.weight"; }),
                t.end());
    });
    expect_error({"missing tensor 'bert.pooler.dense.weight'"});
}

// Marian: a leading language code is one piece (MarianTokenizer's
// remove_language_code), and generation never picks pad or a single-token
// bad_words_ids entry while logits() stays as the model computes it.
TEST(HfText, MarianLanguageCodeIsOnePiece) {
    Model m = Model::load(fixture("marian"));
    const Tokenizer &tok = m.tokenizer();
    auto p = tok.pieces(">>fra<< the red house");
    ASSERT_FALSE(p.empty());
    EXPECT_EQ(p[0], ">>fra<<");
    auto rest = tok.pieces(" the red house");
    EXPECT_EQ(std::vector<std::string>(p.begin() + 1, p.end()), rest);
    EXPECT_EQ(tok.encode(">>fra<< the red house")[0], tok.unk_id()) << "a code the vocabulary lacks is <unk>";
}

TEST_F(BadHf, MarianBannedIdsAreNeverGenerated) {
    use("marian");
    json::Value g = golden("marian");
    // The golden greedy decodes emit id 3 again and again; ban it.
    Sequence src;
    for (auto &x : g.find("greedy")->array[1].find("src")->array) src.push_back((int32_t)x.number);
    Model before = Model::load(dir);
    GenerateOptions o;
    o.max_new_tokens = 10;
    const auto plain = before.generate({src}, o)[0][0].tokens;
    ASSERT_NE(std::find(plain.begin(), plain.end(), 3), plain.end());
    edit_config("\"model_type\": \"marian\"", "\"model_type\": \"marian\", \"bad_words_ids\": [[3], [60]]");
    Model banned = Model::load(dir);
    EXPECT_EQ(banned.config().banned_ids, (std::vector<int>{60, 3}));
    for (int beam : {1, 3}) {
        o.beam = beam;
        const auto hyps = banned.generate({src}, o);
        for (const auto &h : hyps[0]) {
            EXPECT_EQ(std::find(h.tokens.begin(), h.tokens.end(), 3), h.tokens.end()) << "beam " << beam;
            EXPECT_EQ(std::find(h.tokens.begin(), h.tokens.end(), 60), h.tokens.end()) << "beam " << beam;
        }
    }
    Sequence tgt{60, 3, 3};
    EXPECT_EQ(banned.logits({src}, {tgt})[0].data, before.logits({src}, {tgt})[0].data) << "logits() unchanged";
    edit_config("\"bad_words_ids\": [[3], [60]]", "\"bad_words_ids\": [[3, 4]]");
    expect_error({"bad_words_ids", "single-token"});
}

// T5: what the minimal v1.0 config and the full v1.1 one say (transformers'
// defaults: feed_forward_proj "relu", relative_attention_max_distance 128,
// num_decoder_layers = num_layers, tie_word_embeddings true).
TEST(HfT5, ConfigFieldsAndDefaults) {
    Model m = Model::load(fixture("t5_v1_0"));
    const Config &c = m.config();
    EXPECT_EQ(c.family, "t5");
    EXPECT_EQ(c.architecture, Architecture::EncoderDecoder);
    EXPECT_EQ(c.d_model, 40);
    EXPECT_EQ(c.head_dim(), 12) << "d_kv";
    EXPECT_EQ(c.attention_width(), 48) << "4 heads x 12 != d_model";
    EXPECT_EQ(c.num_decoder_layers, 2) << "default: num_layers";
    EXPECT_EQ(c.positional_encoding, Positional::Relative);
    EXPECT_EQ(c.relative_buckets, 16);
    EXPECT_EQ(c.relative_max_distance, 128) << "default";
    EXPECT_TRUE(c.rms_norm);
    EXPECT_FALSE(c.gated_ffn);
    EXPECT_EQ(c.activation, Act::ReLU) << "feed_forward_proj default relu";
    EXPECT_FALSE(c.biases);
    EXPECT_EQ(c.attention_scale, 1.0f);
    EXPECT_EQ(c.bos_id, 0) << "decoder_start_token_id";
    EXPECT_EQ(c.eos_id, 1);
    EXPECT_TRUE(m.tied_head()) << "v1.0: the head is shared.weight";
    Model v11 = Model::load(fixture("t5_v1_1"));
    EXPECT_TRUE(v11.config().gated_ffn);
    EXPECT_EQ(v11.config().activation, Act::GELUTanh) << "gated-gelu is gelu_new";
    EXPECT_EQ(v11.config().relative_max_distance, 24);
    EXPECT_EQ(v11.config().num_decoder_layers, 3);
    EXPECT_FALSE(v11.tied_head()) << "tie_word_embeddings false: lm_head.weight";
}

TEST_F(BadHf, T5UnsupportedFeaturesAreNamed) {
    use("t5_v1_1");
    edit_config("\"feed_forward_proj\": \"gated-gelu\"", "\"feed_forward_proj\": \"gated-relu\"");
    expect_error({"feed_forward_proj", "gated-relu", "not supported"});
    use("t5_v1_1");
    edit_config("\"feed_forward_proj\": \"gated-gelu\"", "\"feed_forward_proj\": \"fancy-gelu\"");
    expect_error({"feed_forward_proj", "fancy-gelu", "gated-{act}"});
    use("t5_v1_1");
    edit_config("\"relative_attention_max_distance\": 24", "\"relative_attention_max_distance\": 8");
    expect_error({"relative_attention_max_distance", "8", "out of range"});
    use("t5_v1_0");
    edit_config("T5ForConditionalGeneration", "T5EncoderModel");
    expect_error({"T5EncoderModel", "not supported"});
    // A tensor T5 reads is missing: named as the file names it.
    use("t5_v1_1");
    rewrite([](std::vector<TensorRef> &refs) {
        refs.erase(std::remove_if(refs.begin(), refs.end(),
                                  [](const TensorRef &r) { return r.name == "decoder.block.2.layer.2.DenseReluDense.wi_1.weight"; }),
                   refs.end());
    });
    expect_error({"missing tensor", "decoder.block.2.layer.2.DenseReluDense.wi_1.weight"});
}

// T5's spiece.model: eos after each input; the sentinels <extra_id_i> count
// down from the top of the tokenizer's vocabulary; text in, text out.
TEST(HfT5, TokenizerAndTextToText) {
    Model m = Model::load(fixture("t5_v1_0"));
    ASSERT_TRUE(m.has_tokenizer());
    const Tokenizer &tok = m.tokenizer();
    const Sequence ids = tok.encode_input("the red house");
    ASSERT_GE(ids.size(), 2u);
    EXPECT_EQ(ids.back(), 1) << "eos after the input";
    EXPECT_EQ(Sequence(ids.begin(), ids.end() - 1), tok.encode("the red house"));
    EXPECT_EQ(tok.decode(ids), "the red house");
    // 64 pieces + 5 extra ids: <extra_id_0> is 68, <extra_id_4> is 64.
    const Sequence s = tok.encode("the <extra_id_0> house <extra_id_4>");
    ASSERT_GE(s.size(), 3u);
    EXPECT_EQ(std::count(s.begin(), s.end(), 68), 1);
    EXPECT_EQ(s.back(), 64);
    // (transformers' T5Tokenizer.decode: no space after a sentinel.)
    EXPECT_EQ(tok.decode(s), "the<extra_id_0> house<extra_id_4>");
    for (int32_t id : tok.encode("<extra_id_5>")) EXPECT_LT(id, 64) << "past extra_ids: plain text";
    GenerateOptions o;
    o.beam = 2;
    o.max_new_tokens = 8;
    auto hyps = m.generate({ids}, o);
    auto out = m.translate({"the red house"}, o);
    ASSERT_TRUE(out[0].ok()) << out[0].error;
    EXPECT_EQ(out[0].text, m.text_of(hyps[0][0].tokens));
}

// T5 at bf16 and int8: the gated feed-forward and the wide attention
// through the packed kernels, near the float32 logits.
TEST(HfT5, ReducedPrecisionStaysNearFloat32) {
    for (const char *name : {"t5_v1_0", "t5_v1_1"}) {
        Model m = Model::load(fixture(name));
        json::Value g = golden(name);
        const json::Value &c = g.find("logits")->array[0];
        const auto f32 = m.logits(batch(*c.find("src")), batch(*c.find("tgt")));
        for (Precision p : {Precision::BF16, Precision::INT8}) {
            m.set_precision(p);
            auto low = m.logits(batch(*c.find("src")), batch(*c.find("tgt")));
            for (size_t b = 0; b < low.size(); b++) {
                double num = 0, den = 0;
                for (size_t k = 0; k < low[b].data.size(); k++) {
                    num += std::pow(low[b].data[k] - f32[b].data[k], 2);
                    den += std::pow(f32[b].data[k], 2);
                }
                EXPECT_LE(std::sqrt(num / den), p == Precision::BF16 ? 0.03 : 0.08) << name << " " << precision_name(p);
            }
        }
    }
}

// fill-mask: the masked-LM head's top tokens at each [MASK] and their
// probabilities, against the softmax of the reference logits.
TEST(HfBert, FillMaskMatchesTheReferenceSoftmax) {
    Model m = Model::load(fixture("bert_mlm"));
    json::Value g = golden("bert_mlm");
    const json::Value &c = g.find("logits")->array[0];
    const Sequence src = batch(*c.find("src"))[0];
    const int V = (int)c.find("width")->number;
    std::vector<Tensor> ids, probs;
    m.top_tokens({src}, 5, ids, probs);
    ASSERT_EQ(ids[0].shape, (std::vector<int64_t>{(int64_t)src.size(), 5}));
    const auto &ref = c.find("logits")->array[0].array;
    for (size_t t = 0; t < src.size(); t++) {
        std::vector<double> p(V);
        double mx = -1e300, sum = 0;
        for (int v = 0; v < V; v++) mx = std::max(mx, ref[t * V + v].number);
        for (int v = 0; v < V; v++) sum += p[v] = std::exp(ref[t * V + v].number - mx);
        std::vector<int> order(V);
        std::iota(order.begin(), order.end(), 0);
        std::stable_sort(order.begin(), order.end(), [&](int a, int b) { return p[a] > p[b]; });
        for (int j = 0; j < 5; j++) {
            EXPECT_EQ((int)ids[0].data[t * 5 + j], order[j]) << "position " << t << " rank " << j;
            EXPECT_NEAR(probs[0].data[t * 5 + j], p[order[j]] / sum, 1e-5) << "position " << t << " rank " << j;
        }
    }
    // Text: each [MASK] gets its guesses; a text without one gets an error.
    auto out = m.fill_mask({"the [MASK] sat on the [MASK].", "no mask here"}, 3);
    ASSERT_TRUE(out[0].ok()) << out[0].error;
    ASSERT_EQ(out[0].masks.size(), 2u);
    const Sequence in = m.tokenizer().encode_input("the [MASK] sat on the [MASK].");
    for (const MaskGuesses &mg : out[0].masks) {
        EXPECT_EQ(in[(size_t)mg.position], m.tokenizer().mask_id());
        ASSERT_EQ(mg.ids.size(), 3u);
        EXPECT_GE(mg.probabilities[0], mg.probabilities[1]);
        EXPECT_EQ(mg.tokens[0], m.tokenizer().decode({mg.ids[0]}));
    }
    EXPECT_FALSE(out[1].ok());
    EXPECT_NE(out[1].error.find("no mask token"), std::string::npos) << out[1].error;
    EXPECT_THROW(m.fill_mask({"a [MASK]"}, 9), Error);
}
