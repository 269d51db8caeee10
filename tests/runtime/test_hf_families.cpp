// The families composed by builders (runtime/src/model/hf/families/: Qwen3,
// Gemma 2 and 3, OLMo 2, Phi-3, Mixtral, Qwen3-MoE): what each builder reads off config.json into the
// description — the layer sequence, per-layer windows and rope tables, the
// q/k norms, the scores' and the embeddings' scales — against what
// tests/make_hf_fixtures.py computed with transformers' rules, and the
// features they do not run refused by name. (Logits, greedy, beam and the
// KV cache against the float64 references: test_models.cpp's Golden suites
// list hf/qwen3, hf/gemma3_text, hf/gemma3_text_v5, hf/olmo2, hf/gemma2,
// hf/phi3, hf/mixtral, hf/qwen3_moe and hf/qwen3_moe_v5.)
#include "halformer/json.h"
#include "halformer/model.h"

#include "test_files.h"
#include "../../runtime/src/model/description.h"
#include "../../runtime/src/model/model_weights.h"
#include "../../runtime/src/model/params.h"

#include <gtest/gtest.h>

#include <cmath>
#include <filesystem>
#include <fstream>
#include <map>
#include <set>
#include <sstream>

using namespace halformer;
namespace fs = std::filesystem;

namespace {

std::string fixture(const std::string &name) { return test_files::hf_fixture(name); }
json::Value golden(const std::string &name) { return test_files::hf_golden(name); }

Description described(const std::string &name) { return describe(Config::from_file(fixture(name) + "/config.json")); }

void expect_table(const std::vector<float> &got, const json::Value &want) {
    ASSERT_EQ(got.size(), want.array.size());
    for (size_t i = 0; i < got.size(); i++) {
        EXPECT_NEAR(got[i], want.array[i].number, 2e-7 * std::fabs(want.array[i].number)) << "pair " << i;
    }
}

// A scratch copy of a fixture whose config.json a test edits.
class EditedFamily : public test_files::FixtureCopy {
protected:
    void edit(const std::string &from, const std::string &to) { FixtureCopy::edit("config.json", from, to); }
};

}  // namespace

TEST(HfFamilies, Qwen3NormalizesEachHeadsQueriesAndKeys) {
    const Description d = described("qwen3");
    EXPECT_NE(d.layer, nullptr) << "a builder, not the Transformer layer";
    EXPECT_EQ(d.qk_norm, Description::QkNorm::Head);
    EXPECT_EQ(d.head_dim, 16) << "head_dim 16, not hidden / heads = 8";
    ASSERT_EQ(d.layer_tensors.size(), 2u);
    EXPECT_EQ(d.layer_tensors[0].key, "q_norm");
    EXPECT_EQ(d.layer_tensors[0].width, 16);
    EXPECT_FALSE(d.qkv_bias || d.out_bias || d.ffn_bias);
    for (int l = 0; l < d.decoder_layers; l++) EXPECT_EQ(d.spec(l).window, 0) << "use_sliding_window false";
    expect_table(d.inv_freq, *golden("qwen3").find("rope_inv_freq"));
}

// Gemma 3 (transformers 4's form): sliding_window_pattern 3 makes layers
// 0, 1, 3 local (window 5, rope_local_base_freq unscaled) and layer 2
// global (rope_theta, linear scaling ×2); scores × 24^-½; embeddings ×
// √32; each layer's four norms and q/k norms as named tensors.
TEST(HfFamilies, Gemma3LayersAreLocalOrGlobal) {
    const Description d = described("gemma3_text");
    const json::Value g = golden("gemma3_text");
    ASSERT_EQ(d.decoder_layers, 4);
    const bool local[] = {true, true, false, true};
    for (int l = 0; l < 4; l++) {
        SCOPED_TRACE(l);
        EXPECT_EQ(d.spec(l).window, local[l] ? 5 : 0);
        EXPECT_EQ(d.spec(l).rope, local[l] ? 1 : 0);
    }
    expect_table(d.rope_table(0), *g.find("rope_inv_freq"));
    expect_table(d.rope_table(1), *g.find("rope_local_inv_freq"));
    EXPECT_FLOAT_EQ(d.attention_scale, 1.0f / std::sqrt(24.0f)) << "query_pre_attn_scalar 24, not head_dim 16";
    EXPECT_FLOAT_EQ(d.dec_dims.scale, d.attention_scale);
    EXPECT_FLOAT_EQ(d.embedding_scale, std::sqrt(32.0f)) << "float32: √32 as float32 holds it";
    EXPECT_EQ(d.activation, Act::GELUTanh) << "hidden_activation";
    EXPECT_EQ(d.qk_norm, Description::QkNorm::Head);
    ASSERT_EQ(d.layer_tensors.size(), 4u);
    EXPECT_EQ(d.layer_tensors[2].key, "post_attention_norm");
    EXPECT_EQ(d.layer_tensors[2].width, 32);
}

// transformers 5's form: layer_types (not a pattern), rope_parameters per
// kind of layer, "dtype" bfloat16: √48 = 6.928… as bfloat16 holds it (6.9375).
TEST(HfFamilies, Gemma3InTransformers5Form) {
    const Description d = described("gemma3_text_v5");
    const json::Value g = golden("gemma3_text_v5");
    const bool local[] = {true, false, false, true};
    for (int l = 0; l < 4; l++) EXPECT_EQ(d.spec(l).window, local[l] ? 6 : 0) << "layer " << l;
    expect_table(d.rope_table(0), *g.find("rope_inv_freq"));
    expect_table(d.rope_table(1), *g.find("rope_local_inv_freq"));
    EXPECT_EQ(d.embedding_scale, 6.9375f) << "√48 rounded to bfloat16";
    EXPECT_FLOAT_EQ(d.attention_scale, 1.0f / std::sqrt(32.0f));
}

TEST(HfFamilies, Olmo2NormalizesTheWholeWidth) {
    const Description d = described("olmo2");
    EXPECT_EQ(d.qk_norm, Description::QkNorm::Width);
    ASSERT_EQ(d.layer_tensors.size(), 2u);
    EXPECT_EQ(d.layer_tensors[0].width, d.attn_width);
    EXPECT_EQ(d.layer_tensors[1].width, d.kv_width);
}

// Gemma 2: even layers local, one rope base, both soft-caps.
TEST(HfFamilies, Gemma2CapsScoresAndLogits) {
    const Description d = described("gemma2");
    for (int l = 0; l < 4; l++) EXPECT_EQ(d.spec(l).window, l % 2 == 0 ? 5 : 0) << "layer " << l;
    EXPECT_FLOAT_EQ(d.attn_softcap, 2.0f);
    EXPECT_FLOAT_EQ(d.logit_softcap, 5.0f);
    EXPECT_EQ(d.qk_norm, Description::QkNorm::None);
    EXPECT_FLOAT_EQ(d.attention_scale, 1.0f / std::sqrt(24.0f));
}

// Phi-3: 6 of each head's 12 dimensions turn (partial_rotary_factor 0.5):
// the tables' last pairs are 0; longrope's short factors up to position
// 32, the long ones from there on (row by row).
TEST(HfFamilies, Phi3TurnsPartOfEachHeadByShortOrLongFactors) {
    const Description d = described("phi3");
    const json::Value g = golden("phi3");
    EXPECT_NE(d.layer, nullptr);
    ASSERT_EQ((int)g.find("rope_rotary_dims")->number, 6);
    ASSERT_EQ(d.inv_freq.size(), 6u) << "head_dim 12: 6 pairs";
    ASSERT_EQ(d.rope_tables.size(), 1u);
    const json::Value &shorts = *g.find("rope_inv_freq"), &longs = *g.find("rope_long_inv_freq");
    ASSERT_EQ(shorts.array.size(), 3u);
    for (size_t i = 0; i < 6; i++) {
        SCOPED_TRACE(i);
        const double s = i < 3 ? shorts.array[i].number : 0.0, l = i < 3 ? longs.array[i].number : 0.0;
        EXPECT_NEAR(d.inv_freq[i], s, 2e-7 * s);
        EXPECT_NEAR(d.rope_tables[0][i], l, 2e-7 * l);
    }
    EXPECT_EQ(d.rope_long.from, 32) << "original_max_position_embeddings";
    EXPECT_EQ(d.rope_long.table, 1);
    // (The attention factor is in the weights: the rotated rows of qkv_proj.)
    EXPECT_FLOAT_EQ(d.attention_scale, 1.0f / std::sqrt(12.0f));
    EXPECT_EQ(d.sliding_window, 7);
    EXPECT_FALSE(d.qkv_bias || d.out_bias || d.ffn_bias);
}

// The mixtures of experts: every Mixtral layer sparse; Qwen3-MoE's
// mlp_only_layers dense, and transformers 5's decoder_sparse_step.
TEST(HfFamilies, ExpertsPerLayer) {
    const Description x = described("mixtral");
    EXPECT_EQ(x.moe.experts, 8);
    EXPECT_EQ(x.moe.top_k, 2);
    EXPECT_TRUE(x.moe.renormalize);
    EXPECT_TRUE(x.spec(0).moe && x.spec(1).moe);
    const Description q = described("qwen3_moe");
    EXPECT_EQ(q.moe.experts, 4);
    EXPECT_EQ(q.moe.d_ff, 24) << "moe_intermediate_size";
    EXPECT_FALSE(q.moe.renormalize) << "norm_topk_prob false";
    EXPECT_TRUE(q.spec(0).moe);
    EXPECT_FALSE(q.spec(1).moe) << "mlp_only_layers [1]";
    EXPECT_TRUE(q.spec(2).moe);
    const Description v = described("qwen3_moe_v5");
    EXPECT_TRUE(v.moe.renormalize);
    for (int l = 0; l < 4; l++) EXPECT_EQ(v.spec(l).moe, l % 2 == 1) << "decoder_sparse_step 2: layer " << l;
}

// Every family is a builder: Llama, Mistral and Qwen2 run Llama's layer,
// the paper's families (GPT-2, BERT, T5, Marian) their own; only
// Halformer's own configs run the Transformer layer (the one training runs).
TEST(HfFamilies, EveryFamilyIsABuilder) {
    for (const char *name : {"llama_gqa", "mistral_window", "qwen2"}) {
        const Description d = described(name);
        EXPECT_NE(d.layer, nullptr) << name;
        EXPECT_EQ(d.qk_norm, Description::QkNorm::None) << name;
    }
    EXPECT_EQ(described("mistral_window").spec(1).window, 6) << "one window for every layer";
    for (int l = 0; l < 2; l++) EXPECT_EQ(described("qwen2").spec(l).window, 0) << "use_sliding_window false";
    std::set<Description::Builder> builders;
    for (const char *name : {"gpt2_lm", "t5_v1_1", "bert_mlm", "marian"}) {
        const Description d = described(name);
        EXPECT_NE(d.layer, nullptr) << name;
        builders.insert(d.layer);
        EXPECT_TRUE(d.layer_specs.empty()) << name;
    }
    EXPECT_EQ(builders.size(), 4u) << "one builder each";
    EXPECT_EQ(describe(Config{}).layer, nullptr) << "Halformer's own config: the Transformer layer";
}

// Qwen2's window on the layers from max_window_layers on (with
// use_sliding_window), as Qwen3's.
TEST_F(EditedFamily, Qwen2SlidesFromMaxWindowLayersOn) {
    use("qwen2");
    edit("\"use_sliding_window\": false", "\"use_sliding_window\": true");
    edit("\"max_window_layers\": 2", "\"max_window_layers\": 1");
    const Description d = describe(Config::from_file(dir + "/config.json"));
    EXPECT_EQ(d.spec(0).window, 0);
    EXPECT_EQ(d.spec(1).window, 4096);
}

TEST_F(EditedFamily, WhatTheBuildersDoNotRunIsNamed) {
    use("gemma3_text");
    edit("\"final_logit_softcapping\": null", "\"final_logit_softcapping\": 30.0");
    expect_error({"final_logit_softcapping", "not supported", "gemma3_text"});
    use("gemma3_text");
    edit("\"attn_logit_softcapping\": null", "\"attn_logit_softcapping\": 50.0");
    expect_error({"attn_logit_softcapping", "not supported"});
    use("gemma3_text");
    edit("\"sliding_window_pattern\": 3", "\"sliding_window_pattern\": 0");
    expect_error({"sliding_window_pattern", "at least 1"});
    use("gemma3_text_v5");
    edit("\"sliding_attention\",\n    \"full_attention\",\n    \"full_attention\",", "\"sliding_attention\",");
    expect_error({"layer_types", "2 entries for 4 layers"});
    use("gemma3_text_v5");
    edit("\"full_attention\",\n    \"full_attention\"", "\"full_attention\",\n    \"chunked_attention\"");
    expect_error({"layer_types", "entry 2", "full_attention"});
    use("gemma3_text_v5");
    edit("\"use_bidirectional_attention\": false", "\"use_bidirectional_attention\": true");
    expect_error({"use_bidirectional_attention", "not supported"});
    use("gemma3_text_v5");
    edit("\"sliding_attention\": {", "\"other_attention\": {");
    expect_error({"rope_parameters", "sliding_attention"});
    use("mixtral");
    edit("\"num_experts_per_tok\": 2", "\"num_experts_per_tok\": 9");
    expect_error({"num_experts_per_tok = 9", "1 to 8"});
    use("qwen3_moe");
    edit("\"decoder_sparse_step\": 1", "\"decoder_sparse_step\": 0");
    expect_error({"decoder_sparse_step", "at least 1"});
    use("qwen3");
    edit("\"Qwen3ForCausalLM\"", "\"Qwen3ForSequenceClassification\"");
    expect_error({"Qwen3ForSequenceClassification", "not supported"});
    use("qwen3");
    edit("\"rope_scaling\": null", "\"rope_scaling\": {\"rope_type\": \"yarn\", \"factor\": 4.0}");
    expect_error({"yarn", "not supported"});
    use("qwen3");
    edit("\"rope_theta\"", "\"partial_rotary_factor\": 0.5,\n  \"rope_theta\"");
    expect_error({"partial_rotary_factor", "not supported"});
    use("phi3");
    edit("\"partial_rotary_factor\": 0.5", "\"partial_rotary_factor\": 0.25");
    expect_error({"partial_rotary_factor", "rotates 3", "even"});
    use("phi3");
    edit("\"long_factor\": [\n      1.0,", "\"long_factor\": [");
    expect_error({"long_factor", "2 entries", "3 expected"});
    use("phi3");
    edit("\"short_factor\": [\n      1.0,", "\"short_factor\": [\n      -1.0,");
    expect_error({"short_factor", "entry 0", "positive"});
    use("phi3");
    edit("\"type\": \"longrope\"", "\"type\": \"dynamic\"");
    expect_error({"rope_scaling", "dynamic", "not supported"});
}

// A file without a tensor the builder's table declares names it.
TEST_F(EditedFamily, AMissingLayerTensorIsNamed) {
    use("qwen3");
    // (q_norm's rule reads model.layers.{i}.self_attn.q_norm.weight.)
    std::string s = test_files::read(dir + "/model.safetensors");
    const std::string from = "model.layers.1.self_attn.q_norm.weight";
    const size_t k = s.find(from);
    ASSERT_NE(k, std::string::npos);
    s.replace(k, from.size(), "model.layers.1.self_attn.q_xorm.weight");
    test_files::write(dir + "/model.safetensors", s);
    expect_error({"q_norm"});
}

// The parameter table names each layer's tensors as the layer finds them:
// a tensor's slot is its name within its layer (LayerW::tensors), a stack's
// own by its key (StackW::slot), and the views the ops take (attn, norm)
// read those names. Each tensor's slot here holds the address of its spec,
// so that every lookup can be checked against the spec it must find.
TEST(ParamTable, LayerTensorsAreFoundByTheirNames) {
    for (const char *name : {"qwen3", "t5_v1_1", "marian", "bert_mlm", "mixtral", "gemma3_text"}) {
        const Config c = Config::from_file(fixture(name) + "/config.json");
        const std::vector<ParamSpec> specs = param_specs(c);
        StackW enc, dec;
        enc.layers.resize((size_t)std::max(c.num_encoder_layers, 0));
        dec.layers.resize((size_t)std::max(c.num_decoder_layers, 0));
        const float *head_w = nullptr, *head_b = nullptr;
        std::map<std::string, const float *> where;
        for (const ParamSpec &s : specs) {
            const float *at = reinterpret_cast<const float *>(&s);
            slot_of(enc, dec, head_w, head_b, s.slot) = at;
            where[s.name] = at;
            if (s.slot.layer < 0) continue;
            const std::string side = s.slot.part == Slot::Encoder ? "encoder" : "decoder";
            EXPECT_EQ(s.name, side + ".layers." + std::to_string(s.slot.layer) + "." + s.slot.key) << name;
        }
        for (const auto &[stack, side] : {std::pair{&enc, "encoder"}, std::pair{&dec, "decoder"}}) {
            for (size_t l = 0; l < stack->layers.size(); l++) {
                const LayerW &L = stack->layers[l];
                const std::string p = std::string(side) + ".layers." + std::to_string(l) + ".";
                EXPECT_EQ(L.attn("self_attn").in_w, where.at(p + "self_attn.in_proj_weight")) << name;
                EXPECT_EQ(L.attn("self_attn").out_w, where.at(p + "self_attn.out_proj.weight")) << name;
                EXPECT_EQ(L.norm("norm1").g, where.at(p + "norm1.weight")) << name;
                EXPECT_EQ(L.get("no_such.weight"), nullptr);
                EXPECT_THROW(L.need("no_such.weight"), Error);
                for (const auto &[key, at] : L.tensors) EXPECT_EQ(at, where.at(p + key)) << name << " " << key;
            }
        }
        if (c.has_decoder()) EXPECT_EQ(dec.embed, where.at("tgt_embed.weight")) << name;
        if (c.has_encoder()) EXPECT_EQ(enc.embed, where.at("src_embed.weight")) << name;
        EXPECT_EQ(head_w, where.count("generator.weight") ? where.at("generator.weight") : nullptr) << name;
        EXPECT_THROW(enc.slot("no_such.weight"), Error);
    }
}
