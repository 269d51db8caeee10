// BERT (BertModel, BertForMaskedLM, BertForPreTraining, BertForSequenceClassification).
#include "../family.h"

#include "../../layers/layers.h"

#include <algorithm>
#include <climits>
#include <cstdint>
#include <cstdlib>

namespace halformer {
namespace hf {
namespace {

// BertLayer (modeling_bert.py): post-LN, bidirectional.
void bert_layer(Session &k, const layers::Pass &p, const LayerW &L, bool causal, layers::LayerIO &io) {
    using namespace layers;
    const int M = io.M();
    const AttnW attn = L.attn("self_attn");
    self_projections(k, p, attn, io.x_in, io);                      // attention.self: query|key|value
    self_attention(k, p, causal, io);                               // every key but the padding
    attention_output(k, p, attn, io, nullptr, io.y1);               // attention.output.dense
    add_layer_norm(k, L.norm("norm1"), io.y1, io.x_in, io.x1, M);   // attention.output.LayerNorm(· + input)
    feed_forward(k, p, L, io.x1, nullptr, io, io.y3);               // intermediate.dense, act, output.dense
    add_layer_norm(k, L.norm("norm2"), io.y3, io.x1, io.x_out, M);  // output.LayerNorm(· + attention's)
}

void bert_describe(const Fields &, const Config &, Description &d) { d.layer = bert_layer; }

// BertConfig: an encoder, post-LN, learned positions plus token types, a
// LayerNorm over the embeddings; the head from "architectures":
// BertForMaskedLM (or BertForPreTraining's files: its MLM head is read),
// BertForSequenceClassification (labels from id2label), BertModel (hidden
// states only).
Config bert(const Fields &f) {
    Config c;
    c.family = "bert";
    c.architecture = Architecture::Encoder;
    c.d_model = f.integer("hidden_size", 768);
    c.num_heads = f.integer("num_attention_heads", 12);
    c.d_ff = f.integer("intermediate_size", 3072);
    c.num_encoder_layers = f.integer("num_hidden_layers", 12);
    c.num_decoder_layers = 0;
    c.src_vocab_size = f.integer("vocab_size", 30522);
    c.tgt_vocab_size = 0;
    c.max_positions = f.integer("max_position_embeddings", 512);
    c.positional_encoding = Positional::Learned;
    c.norm_first = false;
    c.activation = activation(f, "hidden_act", "gelu");
    c.layer_norm_eps = f.number("layer_norm_eps", 1e-12f);
    c.scale_embeddings = false;
    c.pad_id = f.integer("pad_token_id", 0);
    c.bos_id = c.eos_id = -1;
    c.type_vocab_size = f.integer("type_vocab_size", 2);
    c.embedding_norm = true;
    const std::string pe = f.string("position_embedding_type", "absolute");
    f.require("position_embedding_type", pe == "absolute", "\"" + pe + "\"");
    f.require("is_decoder", !f.boolean("is_decoder", false), "true");
    f.require("add_cross_attention", !f.boolean("add_cross_attention", false), "true");
    const std::string arch = f.architecture();
    if (arch == "BertForMaskedLM" || arch == "BertForPreTraining") {
        c.encoder_head = EncoderHead::MaskedLM;
        // The head's transform runs the activation in a plain projection kernel.
        f.require("hidden_act", c.activation != Act::SiLU, "\"" + f.string("hidden_act", "") +
                                                               "\" with a masked-LM head (relu, gelu, gelu_new)");
    } else if (arch == "BertForSequenceClassification") {
        c.encoder_head = EncoderHead::Classifier;
        const json::Value *labels = f.get("id2label", json::Value::Kind::Object);
        const int n = labels ? (int)labels->object.size() : 2;
        c.labels.assign((size_t)n, "");
        for (int i = 0; i < n; i++) c.labels[(size_t)i] = "LABEL_" + std::to_string(i);
        if (labels) {
            for (auto &[key, name] : labels->object) {
                char *end = nullptr;
                const long i = std::strtol(key.c_str(), &end, 10);
                if (key.empty() || *end || i < 0 || i >= n || !name.is_string()) {
                    f.fail("id2label: entry \"" + key + "\" is not a label name under an id in [0, " +
                           std::to_string(n) + ")");
                }
                c.labels[(size_t)i] = name.string;
            }
        }
    } else if (!arch.empty() && arch != "BertModel") {
        f.fail("architectures: \"" + arch +
               "\" is not supported by Halformer (BertModel, BertForMaskedLM, BertForPreTraining, "
               "BertForSequenceClassification)");
    }
    return c;
}

// BertModel ("embeddings...") or a model with a head ("bert.embeddings...").
Rules bert_rules(const std::string &p) {
    Rules r;
    const std::string e = p + "embeddings.";
    r["src_embed.weight"] = {How::Same, {e + "word_embeddings.weight"}};
    r["src_pos.weight"] = {How::Same, {e + "position_embeddings.weight"}};
    r["src_types.weight"] = {How::Same, {e + "token_type_embeddings.weight"}};
    norm(r, "src_embed_norm.", e + "LayerNorm.");
    const std::string ours = "encoder.layers.{i}.", l = p + "encoder.layer.{i}.";
    for (const char *kind : {"weight", "bias"}) {
        const std::string k = kind;
        r[ours + "self_attn.in_proj_" + k] = {
            How::Stacked,
            {l + "attention.self.query." + k, l + "attention.self.key." + k, l + "attention.self.value." + k}};
        r[ours + "self_attn.out_proj." + k] = {How::Same, {l + "attention.output.dense." + k}};
        r[ours + "linear1." + k] = {How::Same, {l + "intermediate.dense." + k}};
        r[ours + "linear2." + k] = {How::Same, {l + "output.dense." + k}};
    }
    norm(r, ours + "norm1.", l + "attention.output.LayerNorm.");
    norm(r, ours + "norm2.", l + "output.LayerNorm.");
    // The masked-LM head (its projection tied to word_embeddings unless the
    // file has its own) ...
    r["generator.weight"] = {How::Same, {"cls.predictions.decoder.weight"}};
    r["head_transform.weight"] = {How::Same, {"cls.predictions.transform.dense.weight"}};
    r["head_transform.bias"] = {How::Same, {"cls.predictions.transform.dense.bias"}};
    norm(r, "head_norm.", "cls.predictions.transform.LayerNorm.");
    r["generator.bias"] = {How::Same, {"cls.predictions.bias"}};
    // ... or the classifier's pooler and projection.
    r["pooler.weight"] = {How::Same, {p + "pooler.dense.weight"}};
    r["pooler.bias"] = {How::Same, {p + "pooler.dense.bias"}};
    return r;
}

WeightRules bert_weights(Config &cfg, const Fields &, const Has &has) {
    Rules rules = bert_rules(has("bert.embeddings.word_embeddings.weight") ? "bert." : "");
    if (cfg.encoder_head == EncoderHead::Classifier) {
        rules["generator.weight"] = {How::Same, {"classifier.weight"}};
        rules["generator.bias"] = {How::Same, {"classifier.bias"}};
    }
    return {rules, {}};
}

}  // namespace

// (Position ids; the pooler of a model whose head does not read it;
// BertForPreTraining's next-sentence head; the MLM projection's copy of its
// bias.)
const Family &bert_family() {
    static const Family f{
        "bert", bert, bert_weights,
        R"(^(bert\.)?embeddings\.position_ids$|^(bert\.)?pooler\.dense\.(weight|bias)$|^cls\.seq_relationship\.(weight|bias)$|^cls\.predictions\.decoder\.bias$)",
        "wordpiece", bert_describe};
    return f;
}

}  // namespace hf
}  // namespace halformer
