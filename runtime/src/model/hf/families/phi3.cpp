// Phi-3 and Phi-4 (Phi3ForCausalLM, model_type "phi3": Phi-3-mini/medium,
// Phi-3.5-mini, Phi-4, Phi-4-mini): Llama's decoder with Q|K|V in one
// projection (qkv_proj: rows q, then k, then v) and gate|up in one
// (gate_up_proj: rows gate, then up; down(silu(gate) · up)), a sliding
// window on every layer where sliding_window is set, a partial rotary
// (partial_rotary_factor: the first rotary_ndims = head_dim · factor
// dimensions of each head turn, rotate_half within them, the rest pass)
// and "longrope" scaling (short_factor up to original_max_position_
// embeddings, long_factor past it; cos and sin times an attention factor).
// Field names and defaults: configuration_phi3.py; the layer:
// modeling_phi3.py's Phi3DecoderLayer.
//
// The partial rotary runs on the one rope kernel: each Q and K head's
// dimensions are reordered once at load (How::Rows) so that the rotated
// dimensions' halves are the head's pairs 0..R-1 and the passing ones
// pairs R..head_dim/2-1, whose frequency is 0 (turned by angle 0: as they
// were). Q·K is the same sum in any order of a head's dimensions, so
// attention is unchanged. The attention factor a multiplies cos and sin,
// so the rotated dimensions of q and k (not the passing ones): their rows
// of qkv_proj times a, once at load (the rotation is linear).
//
// Long or short factors: transformers decides per forward pass by its
// longest sequence (_longrope_frequency_update), so a cached generation
// turns each new token by the long factors from position
// original_max_position_embeddings on while its earlier keys keep the
// short ones. Halformer decides per row by the same rule (position >=
// original_max_position_embeddings: long), which is exactly that cached
// generation, whatever else shares the call; one transformers forward of a
// prompt longer than original_max_position_embeddings turns its early
// positions by the long factors instead (docs/models.md).
#include "llama_like.h"

#include <cmath>

namespace halformer {
namespace hf {
namespace {

// What Phi3Config says of rope beyond Config: the rotated dimensions,
// and longrope's factors.
struct Phi3Rope {
    int head_dim = 0, rotary = 0;  // rotary: rotary_ndims, even, <= head_dim
    bool longrope = false;
    std::vector<float> short_factor, long_factor;
    int original = 0;        // original_max_position_embeddings
    double attention = 1.0;  // the attention factor
};

std::vector<float> factors(const Fields &s, const char *key, int n) {
    const json::Value *v = s.get(key, json::Value::Kind::Array);
    if (!v) s.fail(std::string("longrope needs \"") + key + "\"");
    if ((int)v->array.size() != n) {
        s.fail(std::string("\"") + key + "\" has " + std::to_string(v->array.size()) + " entries; rotary_ndims / 2 = " +
               std::to_string(n) + " expected");
    }
    std::vector<float> out;
    for (size_t i = 0; i < v->array.size(); i++) {
        const json::Value &x = v->array[i];
        if (!x.is_number() || !(x.number > 0)) {
            s.fail(std::string("\"") + key + "\": entry " + std::to_string(i) + " is not a positive number");
        }
        out.push_back((float)x.number);
    }
    return out;
}

Phi3Rope phi3_rope(const Fields &f, const Config &c) {
    Phi3Rope r;
    r.head_dim = c.head_dim();
    const float partial = f.number("partial_rotary_factor", 1.0f);
    if (!(partial > 0 && partial <= 1)) f.fail("field \"partial_rotary_factor\" must lie in (0, 1]");
    r.rotary = (int)((float)r.head_dim * partial);  // int(head_dim * partial_rotary_factor)
    if (r.rotary < 2 || r.rotary % 2) {
        f.fail("partial_rotary_factor = " + std::to_string(partial) + " rotates " + std::to_string(r.rotary) +
               " of each head's " + std::to_string(r.head_dim) + " dimensions: an even number >= 2 is needed");
    }
    const json::Value *scaling = f.get("rope_scaling", json::Value::Kind::Object);
    if (!scaling) return r;
    const Fields s{*scaling, f.what + ": rope_scaling"};
    const std::string type = s.string("type", s.string("rope_type", "default"));
    if (type == "default") return r;
    // ("su": the name the first Phi-3 files used; transformers reads it as longrope.)
    if (type != "longrope" && type != "su") {
        s.fail("rope type \"" + type + "\" is not supported by Halformer for phi3 (longrope)");
    }
    r.longrope = true;
    r.short_factor = factors(s, "short_factor", r.rotary / 2);
    r.long_factor = factors(s, "long_factor", r.rotary / 2);
    // transformers 4 reads original_max_position_embeddings at the top level (5: in rope_parameters too).
    r.original = f.integer("original_max_position_embeddings", s.integer("original_max_position_embeddings", 4096));
    if (r.original < 1) f.fail("field \"original_max_position_embeddings\" must be at least 1");
    const json::Value *given = s.get("attention_factor", json::Value::Kind::Number);
    const double factor = (double)c.max_positions / r.original;
    r.attention = given ? given->number
                        : factor <= 1.0 ? 1.0 : std::sqrt(1.0 + std::log(factor) / std::log((double)r.original));
    if (!(r.attention > 0)) s.fail("\"attention_factor\" must be positive");
    return r;
}

// A head's pairs' frequencies: 1 / (ext_i · θ^(2i / rotary)) for the
// rotated pairs (in float32, as transformers computes them), 0 for the
// passing ones.
std::vector<float> rope_table(const Phi3Rope &r, float theta, const std::vector<float> &ext) {
    std::vector<float> t((size_t)r.head_dim / 2, 0.0f);
    for (int i = 0; i < r.rotary / 2; i++) {
        const float base = std::pow(theta, (float)(2 * i) / (float)r.rotary);
        t[(size_t)i] = 1.0f / ((ext.empty() ? 1.0f : ext[(size_t)i]) * base);
    }
    return t;
}

// The load-time order of a head's dimensions (row j of ours ← row
// order[j] of the head's): rotated first half, passing first half, rotated
// second half, passing second half, so that pair i is (i, i + head_dim/2).
std::vector<int64_t> head_order(const Phi3Rope &r) {
    const int R = r.rotary / 2, P = (r.head_dim - r.rotary) / 2;
    std::vector<int64_t> o;
    for (int t = 0; t < R; t++) o.push_back(t);
    for (int t = 0; t < P; t++) o.push_back(r.rotary + t);
    for (int t = 0; t < R; t++) o.push_back(R + t);
    for (int t = 0; t < P; t++) o.push_back(r.rotary + P + t);
    return o;
}

Config phi3(const Fields &f) {
    LlamaDefaults d{"phi3", "Phi3ForCausalLM", 32064, 3072, 8192, 32, 32, 0, 4096, 1, 32000, false, 0};
    d.family_rope = true;
    Config c = llama_like(f, d);
    c.pad_id = f.integer("pad_token_id", 32000);
    c.rms_norm = true;
    c.layer_norm_eps = f.number("rms_norm_eps", 1e-5f);
    c.qkv_bias = c.out_bias = c.ffn_bias = false;
    c.sliding_window = f.integer("sliding_window", 0);
    if (c.sliding_window < 0) f.fail("field \"sliding_window\" must not be negative");
    if (c.activation != Act::SiLU) f.fail("field \"hidden_act\" is not supported by Halformer for phi3 (silu)");
    (void)phi3_rope(f, c);
    return c;
}

void phi3_describe(const Fields &f, const Config &c, Description &d) {
    const Phi3Rope r = phi3_rope(f, c);
    d.layer = llama_layer;  // Phi3DecoderLayer: Llama's (its dropouts are inference's identity)
    d.inv_freq = rope_table(r, c.rope_theta, r.short_factor);
    if (r.longrope) {
        d.rope_tables = {rope_table(r, c.rope_theta, r.long_factor)};
        d.rope_long = {r.original, 1};
    }
}

WeightRules phi3_weights(Config &cfg, const Fields &f, const Has &has) {
    WeightRules w = llama_weights(cfg, f, has);
    Rules &r = w.rules;
    const std::string ours = "decoder.layers.{i}.", theirs = "model.layers.{i}.";
    // (No biases: Phi3Attention's and Phi3MLP's projections have none.)
    for (const char *part : {"self_attn.in_proj_bias", "self_attn.out_proj.bias", "linear1.bias", "linear_gate.bias",
                             "linear2.bias"})
        r.erase(ours + part);
    // qkv_proj as it is, each Q and K head's dimensions in the rope kernel's order.
    const Phi3Rope rope = phi3_rope(f, cfg);
    const std::vector<int64_t> head = head_order(rope);
    const int dk = rope.head_dim, qk_heads = cfg.num_heads + cfg.kv_heads();
    Rule qkv{How::Rows, {theirs + "self_attn.qkv_proj.weight"}};
    for (int h = 0; h < qk_heads; h++)
        for (int64_t t : head) {
            qkv.rows.push_back((int64_t)h * dk + t);
            qkv.row_factors.push_back(t < rope.rotary ? (float)rope.attention : 1.0f);  // cos and sin times a
        }
    for (int64_t j = (int64_t)qkv.rows.size(); j < (int64_t)(qk_heads + cfg.kv_heads()) * dk; j++) {  // V
        qkv.rows.push_back(j);
        qkv.row_factors.push_back(1.0f);
    }
    r[ours + "self_attn.in_proj_weight"] = qkv;
    r[ours + "self_attn.out_proj.weight"] = {How::Same, {theirs + "self_attn.o_proj.weight"}};
    // gate_up_proj [2F, D]: rows 0..F-1 the gate, F..2F-1 up.
    const int64_t F = cfg.d_ff, D = cfg.d_model;
    r[ours + "linear1.weight"] = {How::Slice, {theirs + "mlp.gate_up_proj.weight"}, 1, 0, {F, D}};
    r[ours + "linear_gate.weight"] = {How::Slice, {theirs + "mlp.gate_up_proj.weight"}, 1, F * D, {F, D}};
    r[ours + "linear2.weight"] = {How::Same, {theirs + "mlp.down_proj.weight"}};
    return w;
}

}  // namespace

const Family &phi3_family() {
    static const Family f{"phi3", phi3, phi3_weights, kRotaryBuffers, "llama", phi3_describe};
    return f;
}

}  // namespace hf
}  // namespace halformer
