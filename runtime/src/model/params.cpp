#include "params.h"

#include "description.h"
#include "model_weights.h"
#include "../splitmix.h"

#include <cmath>
#include <functional>

namespace halformer {
namespace {

struct Table {
    std::vector<ParamSpec> &out;
    const Description &d;
    Slot::Part part = Slot::Head;
    int layer = -1;
    void add(std::string name, std::vector<int64_t> shape, Init init, Field f, std::string key = "") {
        ParamSpec s;
        s.name = std::move(name);
        s.shape = std::move(shape);
        s.init = init;
        s.slot = {part, layer, f, std::move(key)};
        out.push_back(std::move(s));
    }
    // A projection's bias: zeros where the family has none (`has` false:
    // T5 has none, Llama none but where its config says so, Qwen2 Q|K|V's).
    void bias(std::string name, int64_t n, Field f, bool has) {
        add(std::move(name), {n}, Init::Zeros, f);
        if (!has) {
            out.back().required = false;
            out.back().zero_if_absent = true;
        }
    }
    // The queries' rows, then the keys', then the values' in one [A + 2K, D]
    // in_proj (A = heads × head_dim; K = kv_heads × head_dim, A but for
    // grouped-query attention), the output projection [D, A].
    void attention(const std::string &p, bool cross) {
        const int64_t D = d.d_model, A = d.attn_width, K = d.kv_width;
        add(p + "in_proj_weight", {A + 2 * K, D}, Init::Xavier, cross ? Field::CrossInW : Field::SelfInW);
        bias(p + "in_proj_bias", A + 2 * K, cross ? Field::CrossInB : Field::SelfInB, d.qkv_bias);
        add(p + "out_proj.weight", {D, A}, Init::Xavier, cross ? Field::CrossOutW : Field::SelfOutW);
        bias(p + "out_proj.bias", D, cross ? Field::CrossOutB : Field::SelfOutB, d.out_bias);
    }
    // LayerNorm's gain and bias; RMSNorm's gain only.
    void norm(const std::string &p, Field g, Field b) {
        add(p + "weight", {d.d_model}, Init::Ones, g);
        if (!d.rms()) add(p + "bias", {d.d_model}, Init::Zeros, b);
    }
};

void stack(Table &t, const Description &d, const std::string &side, int layers, bool cross) {
    const int64_t D = d.d_model, F = d.dims(side == "decoder").d_ff;
    for (int i = 0; i < layers; i++) {
        const std::string p = side + ".layers." + std::to_string(i) + ".";
        t.layer = i;
        t.attention(p + "self_attn.", false);
        if (cross) t.attention(p + "multihead_attn.", true);
        if (side == "decoder" && d.spec(i).moe) {
            // The router and each expert's gated feed-forward, by name.
            const int64_t E = d.moe.experts, Fe = d.moe.d_ff;
            t.add(p + "router.weight", {E, D}, Init::Xavier, Field::Named, "router");
            for (int64_t e = 0; e < E; e++) {
                const std::string x = "experts." + std::to_string(e) + ".";
                t.add(p + x + "linear1.weight", {Fe, D}, Init::Xavier, Field::Named, x + "linear1");
                t.add(p + x + "linear_gate.weight", {Fe, D}, Init::Xavier, Field::Named, x + "linear_gate");
                t.add(p + x + "linear2.weight", {D, Fe}, Init::Xavier, Field::Named, x + "linear2");
            }
        } else {
            t.add(p + "linear1.weight", {F, D}, Init::Xavier, Field::W1);
            t.bias(p + "linear1.bias", F, Field::B1, d.ffn_bias);
            if (d.gated_ffn) {
                t.add(p + "linear_gate.weight", {F, D}, Init::Xavier, Field::WGate);
                t.bias(p + "linear_gate.bias", F, Field::BGate, d.ffn_bias);
            }
            t.add(p + "linear2.weight", {D, F}, Init::Xavier, Field::W2);
            t.bias(p + "linear2.bias", D, Field::B2, d.ffn_bias);
        }
        t.norm(p + "norm1.", Field::SelfNormG, Field::SelfNormB);
        if (cross) t.norm(p + "norm2.", Field::CrossNormG, Field::CrossNormB);
        t.norm(p + (cross ? "norm3." : "norm2."), Field::FfnNormG, Field::FfnNormB);
        // The family's own (q/k norms, post-norms), by name.
        for (const auto &e : d.layer_tensors) t.add(p + e.key + ".weight", {e.width}, Init::Ones, Field::Named, e.key);
    }
    t.layer = -1;
    // T5: the stack's relative-position bias table [buckets, heads].
    if (d.position == Positional::Relative) {
        t.add(side + ".rel_bias.weight", {d.relative_buckets, d.heads}, Init::Embedding, Field::RelBias);
    }
    // The final norm: optional in a file, present in a new pre-LN model.
    const size_t first = t.out.size();
    t.norm(side + ".norm.", Field::FinalNormG, Field::FinalNormB);
    for (size_t k = first; k < t.out.size(); k++) {
        t.out[k].required = false;
        t.out[k].fresh = d.final_norms;
    }
    if (t.out.size() - first == 2) t.out.back().needs = t.out[first].name;
}

void embeddings(Table &t, const Description &d, const std::string &prefix, int vocab) {
    t.layer = -1;
    t.add(prefix + "_embed.weight", {vocab, d.d_model}, Init::Embedding, Field::Embed);
    if (d.position == Positional::Learned) {
        t.add(prefix + "_pos.weight", {d.max_positions, d.d_model}, Init::Embedding, Field::Pos);
    }
    if (d.token_types > 0) t.add(prefix + "_types.weight", {d.token_types, d.d_model}, Init::Embedding, Field::Types);
    if (d.embedding_norm) t.norm(prefix + "_embed_norm.", Field::EmbedNormG, Field::EmbedNormB);
}

// BERT's heads, before the projection (generator.*): the masked-LM head's
// transform and LayerNorm, or the classifier's pooler.
void encoder_head(Table &t, const Description &d) {
    t.part = Slot::Encoder;
    t.layer = -1;
    const int64_t D = d.d_model;
    if (d.encoder_head == EncoderHead::MaskedLM) {
        t.add("head_transform.weight", {D, D}, Init::Xavier, Field::HeadTransformW);
        t.add("head_transform.bias", {D}, Init::Zeros, Field::HeadTransformB);
        t.norm("head_norm.", Field::HeadNormG, Field::HeadNormB);
    } else if (d.encoder_head == EncoderHead::Classifier) {
        t.add("pooler.weight", {D, D}, Init::Xavier, Field::PoolW);
        t.add("pooler.bias", {D}, Init::Zeros, Field::PoolB);
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
    t.add("generator.weight", {rows, d.d_model}, Init::Xavier, Field::HeadW);
    t.add("generator.bias", {rows}, Init::Zeros, Field::HeadB);
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

const float *&slot_of(StackW &enc, StackW &dec, const float *&head_w, const float *&head_b, const Slot &s) {
    if (s.part == Slot::Head) return s.field == Field::HeadW ? head_w : head_b;
    StackW &st = s.part == Slot::Encoder ? enc : dec;
    switch (s.field) {
    case Field::Embed: return st.embed;
    case Field::Pos: return st.pos;
    case Field::FinalNormG: return st.final_norm.g;
    case Field::FinalNormB: return st.final_norm.b;
    case Field::Types: return st.types;
    case Field::EmbedNormG: return st.embed_norm.g;
    case Field::EmbedNormB: return st.embed_norm.b;
    case Field::HeadTransformW: return st.head_tw;
    case Field::HeadTransformB: return st.head_tb;
    case Field::HeadNormG: return st.head_norm.g;
    case Field::HeadNormB: return st.head_norm.b;
    case Field::PoolW: return st.pool_w;
    case Field::PoolB: return st.pool_b;
    case Field::RelBias: return st.rel_bias;
    default: break;
    }
    LayerW &L = st.layers.at((size_t)s.layer);
    switch (s.field) {
    case Field::Named: return L.named[s.key];
    case Field::SelfInW: return L.self.in_w;
    case Field::SelfInB: return L.self.in_b;
    case Field::SelfOutW: return L.self.out_w;
    case Field::SelfOutB: return L.self.out_b;
    case Field::CrossInW: return L.cross.in_w;
    case Field::CrossInB: return L.cross.in_b;
    case Field::CrossOutW: return L.cross.out_w;
    case Field::CrossOutB: return L.cross.out_b;
    case Field::W1: return L.w1;
    case Field::B1: return L.b1;
    case Field::W2: return L.w2;
    case Field::B2: return L.b2;
    case Field::WGate: return L.wg;
    case Field::BGate: return L.bg;
    case Field::SelfNormG: return L.self_norm.g;
    case Field::SelfNormB: return L.self_norm.b;
    case Field::CrossNormG: return L.cross_norm.g;
    case Field::CrossNormB: return L.cross_norm.b;
    case Field::FfnNormG: return L.ffn_norm.g;
    case Field::FfnNormB: return L.ffn_norm.b;
    default: throw Error("internal: parameter slot out of range");
    }
}

}  // namespace halformer
