// Today's decoders from their Hugging Face directories (issue 41): Llama,
// Mistral and Qwen2 configs in transformers 4's and 5's forms, the
// checkpoint's generation settings (generation_config.json, forced eos),
// T5 as transformers 5 saves it, and Llama 2's kind of tokenizer.model.
// (Logits, greedy, beam and the KV cache against the references:
// test_models.cpp's Golden suites list the hf/llama*, mistral_window,
// qwen2 and t5_v5_gated_tied fixtures.)
#include "halformer/json.h"
#include "halformer/model.h"

#include "test_files.h"
#include "../../runtime/src/model/description.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <sstream>

using namespace halformer;
namespace fs = std::filesystem;

namespace {

using test_files::hf_fixture;
std::string fixture(const std::string &name) { return hf_fixture(name); }
json::Value golden(const std::string &name) { return test_files::hf_golden(name); }

Sequence ints(const json::Value &v) {
    Sequence s;
    for (auto &x : v.array) s.push_back((int32_t)x.number);
    return s;
}

using test_files::read;
using test_files::write;

// A scratch copy of a fixture directory whose files a test edits.
using EditedHf = test_files::FixtureCopy;

}  // namespace

TEST(HfLlama, ConfigFieldsOfEachFamily) {
    const Config a = Config::from_file(fixture("llama_gqa") + "/config.json");
    EXPECT_EQ(a.family, "llama");
    EXPECT_EQ(a.architecture, Architecture::Decoder);
    EXPECT_EQ(a.num_heads, 6);
    EXPECT_EQ(a.kv_heads(), 2);
    EXPECT_EQ(a.head_dim(), 8);
    EXPECT_EQ(a.positional_encoding, Positional::Rotary);
    EXPECT_EQ(a.rope_scaling.kind, Config::RopeScaling::Kind::Linear) << "transformers 4's \"type\"";
    EXPECT_EQ(a.rope_scaling.factor, 2.0f);
    EXPECT_TRUE(a.rms_norm && a.gated_ffn && a.norm_first);
    EXPECT_EQ(a.activation, Act::SiLU);
    EXPECT_FALSE(a.qkv_bias || a.out_bias || a.ffn_bias) << "attention_bias, mlp_bias false";
    EXPECT_FALSE(a.tied_head);
    // transformers 5's rope_parameters, head_dim given, one key/value head.
    const Config b = Config::from_file(fixture("llama3_mqa") + "/config.json");
    EXPECT_EQ(b.kv_heads(), 1);
    EXPECT_EQ(b.head_dim(), 16) << "head_dim 16, not hidden_size / heads = 8";
    EXPECT_EQ(b.attention_width(), 64);
    EXPECT_EQ(b.rope_theta, 500000.0f);
    EXPECT_EQ(b.rope_scaling.kind, Config::RopeScaling::Kind::Llama3);
    EXPECT_EQ(b.rope_scaling.original_max_positions, 64);
    EXPECT_TRUE(b.qkv_bias && b.out_bias && b.ffn_bias);
    EXPECT_TRUE(b.tied_head);
    const Config m = Config::from_file(fixture("mistral_window") + "/config.json");
    EXPECT_EQ(m.family, "mistral");
    EXPECT_EQ(m.sliding_window, 6);
    EXPECT_EQ(m.bos_id, 1);
    EXPECT_EQ(m.eos_id, 2);
    const Config q = Config::from_file(fixture("qwen2") + "/config.json");
    EXPECT_EQ(q.family, "qwen2");
    EXPECT_TRUE(q.qkv_bias) << "Qwen2: Q, K, V biases";
    EXPECT_FALSE(q.out_bias || q.ffn_bias);
    EXPECT_EQ(q.sliding_window, 0) << "use_sliding_window false: the window fields are read, not applied";
    EXPECT_EQ(q.rope_theta, 1e6f);
}

TEST_F(EditedHf, UnsupportedLlamaFeaturesAreNamed) {
    use("llama_gqa");
    edit("config.json", "\"type\": \"linear\"", "\"type\": \"yarn\"");
    expect_error({"rope_scaling", "yarn", "not supported", "llama3"});
    use("llama_gqa");
    edit("config.json", "\"num_key_value_heads\": 2", "\"num_key_value_heads\": 4");
    expect_error({"num_heads = 6", "num_kv_heads = 4"});
    use("llama_gqa");
    edit("config.json", "\"model_type\": \"llama\"", "\"model_type\": \"llama\", \"partial_rotary_factor\": 0.5");
    expect_error({"partial_rotary_factor", "not supported"});
    use("llama_gqa");
    edit("config.json", "LlamaForCausalLM", "LlamaForSequenceClassification");
    expect_error({"LlamaForSequenceClassification", "not supported"});
    // An untied head the files lack is named, not tied silently.
    use("llama_gqa");
    edit("config.json", "\"tie_word_embeddings\": false", "\"tie_word_embeddings\": false, \"x\": 0");
    test_files::rewrite_safetensors(dir + "/model.safetensors", [](std::vector<TensorRef> &refs) {
        refs.erase(std::remove_if(refs.begin(), refs.end(), [](const TensorRef &r) { return r.name == "lm_head.weight"; }),
                   refs.end());
    });
    expect_error({"tie_word_embeddings is false", "lm_head.weight"});
}

// Llama 2's kind of tokenizer.model (SentencePiece BPE with byte_fallback:
// characters outside the vocabulary become their UTF-8 bytes' pieces),
// through tokenizer_config.json: bos before each input, "<s>", "</s>" and
// "<unk>" matched whole, the stretches between them encoded each on its
// own; the ids from SentencePiece's own library (make_hf_fixtures.py).
TEST(HfLlama, TokenizerModelMatchesSentencePiece) {
    Model m = Model::load(fixture("mistral_window"));
    ASSERT_TRUE(m.has_tokenizer());
    int cases = 0;
    const json::Value g = golden("mistral_window");
    for (auto &c : g.find("tokenizer")->array) {
        const std::string text = c.find("text")->string;
        const Sequence ids = ints(*c.find("ids"));
        EXPECT_EQ(m.tokenizer().encode_input(text), ids) << "'" << text << "'";
        EXPECT_EQ(m.tokenizer().decode(ids), c.find("decoded")->string) << "'" << text << "'";
        cases++;
    }
    EXPECT_GE(cases, 15);
}

TEST_F(EditedHf, TokenizerConfigAddsEosWhenAsked) {
    use("mistral_window");
    edit("tokenizer_config.json", "\"add_eos_token\": false", "\"add_eos_token\": true");
    Model m = Model::load(dir);
    const Sequence ids = m.tokenizer().encode_input("the dog");
    ASSERT_GE(ids.size(), 3u);
    EXPECT_EQ(ids.front(), 1);
    EXPECT_EQ(ids.back(), 2);
}

// Mistral's window: a prompt of 40 positions (the goldens' longest) runs;
// the window is the checkpoint's (6), and decoding past it goes on.
TEST(HfLlama, SlidingWindowDecodesPastTheWindow) {
    Model m = Model::load(fixture("mistral_window"));
    Sequence prompt;
    for (int t = 0; t < 20; t++) prompt.push_back(3 + (t * 7) % 250);
    GenerateOptions o;
    o.max_new_tokens = 30;
    o.stop_at_eos = false;
    auto g = m.generate({prompt}, o)[0][0].tokens;
    ASSERT_EQ(g.size(), 30u);
    // Each token is the argmax of the whole prefix recomputed.
    Sequence full = prompt;
    full.insert(full.end(), g.begin(), g.end() - 1);
    auto lg = m.logits({full});
    const int V = (int)lg[0].shape[1];
    for (size_t k = 0; k < g.size(); k++) {
        const float *row = &lg[0].data[(prompt.size() - 1 + k) * V];
        EXPECT_EQ(g[k], (int32_t)(std::max_element(row, row + V) - row)) << "step " << k;
    }
}

// The checkpoint's forced_eos_token_id (Marian: 0 = eos) ends every
// hypothesis at the length limit, as transformers does; an option turns it
// off. (The marian goldens were made with it: without it they fail.)
TEST(HfGeneration, ForcedEosEndsAtTheLimit) {
    Model m = Model::load(fixture("marian"));
    EXPECT_EQ(m.config().forced_eos_id, 0);
    const Sequence src = {7, 9, 11, 13, 0};
    GenerateOptions o;
    o.max_new_tokens = 3;
    auto forced = m.generate({src}, o)[0][0].tokens;
    ASSERT_FALSE(forced.empty());
    EXPECT_EQ(forced.back(), 0);
    o.forced_eos_id = -1;
    auto free = m.generate({src}, o)[0][0].tokens;
    ASSERT_EQ(free.size(), 3u);
    EXPECT_NE(free.back(), 0) << "(this source does not end by itself in 3 tokens)";
    EXPECT_EQ(Sequence(free.begin(), free.end() - 1), Sequence(forced.begin(), forced.end() - 1));
    o.beam = 3;
    o.forced_eos_id = -2;
    const auto beams = m.generate({src}, o);
    ASSERT_EQ(beams.size(), 1u);
    for (auto &h : beams[0]) EXPECT_EQ(h.tokens.back(), 0);
}

// generation_config.json over config.json: eos as a list (the others end
// a hypothesis too), forced_eos_token_id, bad_words_ids, num_beams,
// max_length.
TEST_F(EditedHf, GenerationConfigIsRead) {
    use("gpt2_lm");
    write(dir + "/generation_config.json",
          "{\"eos_token_id\": [60, 17], \"forced_eos_token_id\": 60, \"bad_words_ids\": [[5], [9]], "
          "\"num_beams\": 4, \"max_length\": 20}");
    Model m = Model::load(dir);
    const Config &c = m.config();
    EXPECT_EQ(c.eos_id, 60);
    EXPECT_EQ(c.stop_ids, std::vector<int32_t>{17});
    EXPECT_EQ(c.forced_eos_id, 60);
    EXPECT_NE(std::find(c.banned_ids.begin(), c.banned_ids.end(), 5), c.banned_ids.end());
    EXPECT_NE(std::find(c.banned_ids.begin(), c.banned_ids.end(), 9), c.banned_ids.end());
    EXPECT_EQ(c.default_beams, 4);
    EXPECT_EQ(c.default_max_length, 20);
    write(dir + "/generation_config.json", "{\"bad_words_ids\": [[5, 6]]}");
    test_files::expect_load_error(dir, {"generation_config.json", "bad_words_ids", "single-token"});
    write(dir + "/generation_config.json", "{\"forced_eos_token_id\": 1000}");
    test_files::expect_load_error(dir, {"generation_config.json", "forced_eos_token_id", "1000", "out of range"});
}

// T5 as transformers 5 saves a gated model: tie_word_embeddings true (the
// head is shared.weight) with scale_decoder_outputs false: no d_model^-0.5
// before the head (its goldens: test_models.cpp). Read as transformers 4
// would (scaled), every logit is 1/sqrt(32) of the reference's.
TEST_F(EditedHf, T5ScaleDecoderOutputsIsRead) {
    Model m = Model::load(fixture("t5_v5_gated_tied"));
    EXPECT_TRUE(m.tied_head());
    const Sequence src = {5, 9, 11, 1}, tgt = {0, 7, 8};
    auto unscaled = m.logits({src}, {tgt});
    use("t5_v5_gated_tied");
    edit("config.json", "\"scale_decoder_outputs\": false", "\"scale_decoder_outputs\": true");
    auto scaled = Model::load(dir).logits({src}, {tgt});
    ASSERT_EQ(scaled[0].data.size(), unscaled[0].data.size());
    for (size_t k = 0; k < scaled[0].data.size(); k += 7) {
        EXPECT_NEAR(scaled[0].data[k], unscaled[0].data[k] / std::sqrt(32.0f), 1e-4f * std::fabs(unscaled[0].data[k]) + 1e-6f);
    }
}

// Llama 3's and Qwen2's tokenizer.json through their checkpoints: Llama 3
// puts <|begin_of_text|> (294 here) before an input by its post-processor,
// Qwen2 nothing; special tokens are matched whole and dropped when
// decoding. (The splits and ids themselves: test_tokenizers.cpp's
// ByteLevelBpe.Llama3AndQwen2Split.)
TEST(HfLlama, TokenizerJsonOfLlama3AndQwen2) {
    Model l = Model::load(fixture("llama3_mqa"));
    ASSERT_TRUE(l.has_tokenizer());
    const Sequence a = l.tokenizer().encode_input("Hello world");
    ASSERT_GE(a.size(), 2u);
    EXPECT_EQ(a.front(), 294) << "<|begin_of_text|>";
    EXPECT_EQ(l.tokenizer().decode(a), "Hello world");
    const Sequence e = l.tokenizer().encode_input("hi<|eot_id|>");
    EXPECT_EQ(e.back(), 296) << "<|eot_id|> whole";
    EXPECT_EQ(l.tokenizer().decode(e), "hi");
    Model q = Model::load(fixture("qwen2"));
    const Sequence b = q.tokenizer().encode_input("<|im_start|>user\nHello world<|im_end|>");
    ASSERT_GE(b.size(), 3u);
    EXPECT_EQ(b.front(), 294) << "<|im_start|>, no bos before it";
    EXPECT_EQ(b.back(), 295) << "<|im_end|>";
    EXPECT_EQ(q.tokenizer().decode(b), "user\nHello world");
    // Text in, text out through the model.
    GenerateOptions o;
    o.max_new_tokens = 4;
    auto r = q.continue_text({"Hello world"}, o);
    ASSERT_TRUE(r[0].ok()) << r[0].error;
}

// Marian whose decoder has its own heads and feed-forward width (legal in
// MarianConfig; refused before): each stack runs with its own (its goldens:
// test_models.cpp's marian_widths).
TEST(HfGeneration, MarianDecoderOfItsOwnWidths) {
    const Config c = Config::from_file(fixture("marian_widths") + "/config.json");
    EXPECT_EQ(c.num_heads, 4);
    EXPECT_EQ(c.d_ff, 56);
    EXPECT_EQ(c.decoder_num_heads, 5);
    EXPECT_EQ(c.decoder_d_ff, 72);
    Model m = Model::load(fixture("marian_widths"));
    auto out = m.logits({{5, 9, 11, 0}}, {{c.bos_id, 7, 8}});
    ASSERT_EQ(out.size(), 1u);
    EXPECT_EQ(out[0].shape[0], 3);
}

// The checkpoint's chat template (tokenizer_config.json's chat_template)
// with its special tokens' spellings: Qwen2's adds a system message,
// Llama 3's starts with bos_token; a checkpoint without one says so.
TEST(HfLlama, ChatPromptOfTheCheckpoint) {
    Model q = Model::load(fixture("qwen2"));
    ASSERT_TRUE(q.has_chat_template());
    EXPECT_EQ(q.chat_prompt({{"user", "Hello there"}}),
              "<|im_start|>system\nYou are a helpful assistant.<|im_end|>\n<|im_start|>user\nHello there<|im_end|>\n"
              "<|im_start|>assistant\n");
    Model l = Model::load(fixture("llama3_mqa"));
    EXPECT_EQ(l.chat_prompt({{"user", " hi "}}, false),
              "<|begin_of_text|><|start_header_id|>user<|end_header_id|>\n\nhi<|eot_id|>");
    const Sequence ids = l.tokenizer().encode(l.chat_prompt({{"user", "hi"}}));
    EXPECT_EQ(ids.front(), 294) << "<|begin_of_text|> written by the template, matched whole";
    Model g = Model::load(fixture("gpt2_lm"));
    EXPECT_FALSE(g.has_chat_template());
    try {
        g.chat_prompt({{"user", "hi"}});
        ADD_FAILURE() << "no error";
    } catch (const Error &e) {
        EXPECT_NE(std::string(e.what()).find("has no chat template"), std::string::npos) << e.what();
    }
}

// Known answers for the rotary frequencies: transformers' inv_freq as
// tests/make_hf_fixtures.py computes it (modeling_rope_utils' default,
// linear and llama3 rules in float32), against the description's.
TEST(HfLlama, RopeFrequenciesAsTransformersComputesThem) {
    for (const char *name : {"llama_gqa", "llama3_mqa", "mistral_window", "qwen2"}) {
        SCOPED_TRACE(name);
        const Config c = Config::from_file(fixture(name) + "/config.json");
        const std::vector<float> got = rope_frequencies(c);
        const json::Value g = golden(name);
        const auto &want = g.find("rope_inv_freq")->array;
        ASSERT_EQ(got.size(), want.size());
        for (size_t i = 0; i < got.size(); i++) {
            EXPECT_NEAR(got[i], want[i].number, 2e-7 * std::fabs(want[i].number)) << "pair " << i;
        }
    }
    // llama3_mqa's three bands: kept (wavelength under 64 / 4), divided by 8 (over 64), blended between.
    const std::vector<float> f = rope_frequencies(Config::from_file(fixture("llama3_mqa") + "/config.json"));
    EXPECT_FLOAT_EQ(f[0], 1.0f) << "wavelength 2π: kept";
    const float base1 = 1.0f / std::pow(500000.0f, 2.0f / 16.0f);
    EXPECT_GT(f[1], base1 / 8) << "pair 1 (wavelength 2π / " << base1 << "): blended";
    EXPECT_LT(f[1], base1);
    const float base7 = 1.0f / std::pow(500000.0f, 14.0f / 16.0f);
    EXPECT_NEAR(f[7], base7 / 8, 1e-7f * base7) << "the longest wavelength: divided by the factor";
}
