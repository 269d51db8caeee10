#include "params.h"

#include "description.h"
#include "model_weights.h"
#include "../splitmix.h"

#include <cmath>
#include <functional>
#include <map>

namespace halformer {
namespace {

struct Table {
    std::vector<ParamSpec> &out;
    const Description &d;
    Slot::Part part = Slot::Head;
    int layer = -1;
    // A tensor named prefix + key; the layers find it by key (Slot).
    void add(const std::string &prefix, std::string key, std::vector<int64_t> shape, Init init) {
        ParamSpec s;
        s.name = prefix + key;
        s.shape = std::move(shape);
        s.init = init;
        s.slot = {part, layer, std::move(key)};
        out.push_back(std::move(s));
    }
    // A projection's bias: zeros where the family has none (`has` false:
    // T5 has none, Llama none but where its config says so, Qwen2 Q|K|V's).
    void bias(const std::string &prefix, std::string key, int64_t n, bool has) {
        add(prefix, std::move(key), {n}, Init::Zeros);
        if (!has) {
            out.back().required = false;
            out.back().zero_if_absent = true;
        }
    }
    // The queries' rows, then the keys', then the values' in one [A + 2K, D]
    // in_proj (A = heads × head_dim; K = kv_heads × head_dim, A but for
    // grouped-query attention), the output projection [D, A].
    void attention(const std::string &p, const std::string &module) {
        const int64_t D = d.d_model, A = d.attn_width, K = d.kv_width;
        add(p, module + ".in_proj_weight", {A + 2 * K, D}, Init::Xavier);
        bias(p, module + ".in_proj_bias", A + 2 * K, d.qkv_bias);
        add(p, module + ".out_proj.weight", {D, A}, Init::Xavier);
        bias(p, module + ".out_proj.bias", D, d.out_bias);
    }
    // LayerNorm's gain and bias; RMSNorm's gain only.
    void norm(const std::string &p, const std::string &module) {
        add(p, module + ".weight", {d.d_model}, Init::Ones);
        if (!d.rms()) add(p, module + ".bias", {d.d_model}, Init::Zeros);
    }
};

void stack(Table &t, const Description &d, const std::string &side, int layers, bool cross) {
    const int64_t D = d.d_model, F = d.dims(side == "decoder").d_ff;
    for (int i = 0; i < layers; i++) {
        const std::string p = side + ".layers." + std::to_string(i) + ".";
        t.layer = i;
        t.attention(p, "self_attn");
        if (cross) t.attention(p, "multihead_attn");
        if (side == "decoder" && d.spec(i).moe) {
            // The router and each expert's gated feed-forward.
            const int64_t E = d.moe.experts, Fe = d.moe.d_ff;
            t.add(p, "router.weight", {E, D}, Init::Xavier);
            for (int64_t e = 0; e < E; e++) {
                const std::string x = "experts." + std::to_string(e) + ".";
                t.add(p, x + "linear1.weight", {Fe, D}, Init::Xavier);
                t.add(p, x + "linear_gate.weight", {Fe, D}, Init::Xavier);
                t.add(p, x + "linear2.weight", {D, Fe}, Init::Xavier);
            }
        } else {
            t.add(p, "linear1.weight", {F, D}, Init::Xavier);
            t.bias(p, "linear1.bias", F, d.ffn_bias);
            if (d.gated_ffn) {
                t.add(p, "linear_gate.weight", {F, D}, Init::Xavier);
                t.bias(p, "linear_gate.bias", F, d.ffn_bias);
            }
            t.add(p, "linear2.weight", {D, F}, Init::Xavier);
            t.bias(p, "linear2.bias", D, d.ffn_bias);
        }
        // Before (pre-LN) or after (post-LN) each sub-layer: self-attention,
        // cross-attention, the feed-forward network.
        t.norm(p, "norm1");
        if (cross) t.norm(p, "norm2");
        t.norm(p, cross ? "norm3" : "norm2");
        // The family's own (q/k norms, post-norms).
        for (const auto &e : d.layer_tensors) t.add(p, e.key + ".weight", {e.width}, Init::Ones);
    }
    t.layer = -1;
    const std::string s = side + ".";
    // T5: the stack's relative-position bias table [buckets, heads].
    if (d.position == Positional::Relative) {
        t.add(s, "rel_bias.weight", {d.relative_buckets, d.heads}, Init::Embedding);
    }
    // The final norm: optional in a file, present in a new pre-LN model.
    const size_t first = t.out.size();
    t.norm(s, "norm");
    for (size_t k = first; k < t.out.size(); k++) {
        t.out[k].required = false;
        t.out[k].fresh = d.final_norms;
    }
    if (t.out.size() - first == 2) t.out.back().needs = t.out[first].name;
}

void embeddings(Table &t, const Description &d, const std::string &prefix, int vocab) {
    t.layer = -1;
    t.add(prefix, "_embed.weight", {vocab, d.d_model}, Init::Embedding);
    if (d.position == Positional::Learned) {
        t.add(prefix, "_pos.weight", {d.max_positions, d.d_model}, Init::Embedding);
    }
    if (d.token_types > 0) t.add(prefix, "_types.weight", {d.token_types, d.d_model}, Init::Embedding);
    if (d.embedding_norm) t.norm(prefix, "_embed_norm");
}

// BERT's heads, before the projection (generator.*): the masked-LM head's
// transform and LayerNorm, or the classifier's pooler.
void encoder_head(Table &t, const Description &d) {
    t.part = Slot::Encoder;
    t.layer = -1;
    const int64_t D = d.d_model;
    if (d.encoder_head == EncoderHead::MaskedLM) {
        t.add("", "head_transform.weight", {D, D}, Init::Xavier);
        t.add("", "head_transform.bias", {D}, Init::Zeros);
        t.norm("", "head_norm");
    } else if (d.encoder_head == EncoderHead::Classifier) {
        t.add("", "pooler.weight", {D, D}, Init::Xavier);
        t.add("", "pooler.bias", {D}, Init::Zeros);
    }
}

}  // namespace

std::vector<ParamSpec> param_specs(const Config &c, int head_rows) {
    const Description d = describe(c);
    std::vector<ParamSpec> out;
    Table t{out, d};
    if (d.encoder) {
        t.part = Slot::Encoder;
        embeddings(t, d, "src", d.src_vocab);
        stack(t, d, "encoder", d.encoder_layers, false);
    }
    if (d.decoder) {
        t.part = Slot::Decoder;
        embeddings(t, d, "tgt", d.tgt_vocab);
        if (d.cross_attention && d.src_vocab == d.tgt_vocab) {
            // Fresh models share one embedding matrix (section 3.4).
            for (auto &s : out) {
                if (s.name == "tgt_embed.weight") s.tied_to = "src_embed.weight";
            }
        }
        stack(t, d, "decoder", d.decoder_layers, d.cross_attention);
    }
    if (d.encoder && !d.decoder) encoder_head(t, d);
    // The output head: tied to the target embedding unless the file has one
    // (decoders); a classification head of head_rows rows (encoders); BERT's
    // masked-LM projection, tied to the token embedding.
    t.part = Slot::Head;
    const bool decoder = d.decoder;
    const int64_t rows = decoder ? d.tgt_vocab : head_rows;
    t.add("", "generator.weight", {rows, d.d_model}, Init::Xavier);
    t.add("", "generator.bias", {rows}, Init::Zeros);
    for (size_t k : {out.size() - 2, out.size() - 1}) {
        out[k].required = false;
        out[k].fresh = !decoder && head_rows > 0;
    }
    if (decoder) out[out.size() - 2].tied_to = "tgt_embed.weight";
    if (d.encoder_head == EncoderHead::MaskedLM) {
        out[out.size() - 2].tied_to = "src_embed.weight";
        out[out.size() - 2].shape = {d.src_vocab, d.d_model};
        out[out.size() - 2].required = out[out.size() - 1].required = true;
    }
    if (d.encoder_head == EncoderHead::Classifier) {
        out[out.size() - 2].required = out[out.size() - 1].required = true;
    }
    return out;
}

int64_t numel(const std::vector<int64_t> &shape) {
    int64_t n = 1;
    for (auto d : shape) n *= d;
    return n;
}

void init_param(const ParamSpec &spec, const Config &c, uint64_t seed, float *out) {
    const size_t n = (size_t)numel(spec.shape);
    float fill = 0, range = 0;
    switch (spec.init) {
    case Init::Ones: fill = 1; break;
    case Init::Zeros: fill = 0; break;
    // Variance 1/D: with the √D scale the embedded tokens have unit variance.
    case Init::Embedding: range = std::sqrt(3.0f / (float)c.d_model); break;
    case Init::Xavier: range = std::sqrt(6.0f / float(spec.shape[0] + spec.shape[1])); break;
    }
    SplitMix rng{seed ^ (std::hash<std::string>{}(spec.name) * 0x9E3779B97F4A7C15ull)};
    for (size_t k = 0; k < n; k++) {
        out[k] = range == 0 ? fill : range * (float(rng.next() >> 40) * (2.0f / 16777216.0f) - 1.0f);
    }
}

const float *&StackW::slot(const std::string &key) {
    // (The table's names without the stack's prefix: "src" / "tgt" for the
    // embeddings, "encoder." / "decoder." for the rest; BERT's heads'.)
    static const std::map<std::string, const float *StackW::*> plain = {
        {"_embed.weight", &StackW::embed},          {"_pos.weight", &StackW::pos},
        {"_types.weight", &StackW::types},          {"rel_bias.weight", &StackW::rel_bias},
        {"head_transform.weight", &StackW::head_tw}, {"head_transform.bias", &StackW::head_tb},
        {"pooler.weight", &StackW::pool_w},         {"pooler.bias", &StackW::pool_b},
    };
    static const std::map<std::string, NormW StackW::*> norms = {
        {"norm", &StackW::final_norm}, {"_embed_norm", &StackW::embed_norm}, {"head_norm", &StackW::head_norm}};
    if (auto it = plain.find(key); it != plain.end()) return this->*(it->second);
    const size_t dot = key.rfind('.');
    if (dot != std::string::npos) {
        auto it = norms.find(key.substr(0, dot));
        const std::string part = key.substr(dot + 1);
        if (it != norms.end() && part == "weight") return (this->*(it->second)).g;
        if (it != norms.end() && part == "bias") return (this->*(it->second)).b;
    }
    throw Error("internal: a stack has no tensor '" + key + "'");
}

const float *&slot_of(StackW &enc, StackW &dec, const float *&head_w, const float *&head_b, const Slot &s) {
    if (s.part == Slot::Head) {
        if (s.key == "generator.weight") return head_w;
        if (s.key == "generator.bias") return head_b;
        throw Error("internal: the head has no tensor '" + s.key + "'");
    }
    StackW &st = s.part == Slot::Encoder ? enc : dec;
    if (s.layer < 0) return st.slot(s.key);
    return st.layers.at((size_t)s.layer).slot(s.key);
}

}  // namespace halformer
