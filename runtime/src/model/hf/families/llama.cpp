// The Llama-style decoders: Llama 2/3 (LlamaForCausalLM), Mistral
// (MistralForCausalLM) and Qwen2 (Qwen2ForCausalLM). One description:
// pre-norm RMSNorm, SwiGLU (down(silu(gate(x)) · up(x))), rotary positions,
// grouped-query attention, no position table; they differ in defaults, in
// which projections have biases (Llama: attention_bias, mlp_bias; Qwen2: Q,
// K and V only) and in the sliding window (Mistral). Field names and
// defaults are those of configuration_llama.py, configuration_mistral.py
// and configuration_qwen2.py, as transformers 4 writes them (rope_theta,
// rope_scaling) and as transformers 5 does (rope_parameters).
#include "llama_like.h"

#include "../../layers/layers.h"

namespace halformer {
namespace hf {

void llama_layer(Session &k, const layers::Pass &p, const LayerW &L, bool causal, layers::LayerIO &io) {
    using namespace layers;
    const int M = io.M();
    layer_norm(k, L.norm("norm1"), io.x_in, io.n1, M);                // input_layernorm
    self_projections(k, p, L.attn("self_attn"), io.n1, io);           // q_proj|k_proj rotated, v_proj; K|V to the cache
    self_attention(k, p, causal, io);                                 // causal, the layer's window
    attention_output(k, p, L.attn("self_attn"), io, io.x_in, io.x1);  // o_proj, + residual
    layer_norm(k, L.norm("norm2"), io.x1, io.n3, M);                  // post_attention_layernorm
    feed_forward(k, p, L, io.n3, io.x1, io, io.x_out);                // down(act(gate) · up), + residual
}

// rope_theta and rope_scaling (transformers 4), or rope_parameters
// (transformers 5: both in one object, "rope_type" "default" for none; one
// such object per kind of layer where the layers differ, Gemma 3's).
void rope(const Fields &f, Config &c, const char *layer_type, bool family_rope) {
    c.rope_theta = f.number("rope_theta", 10000.0f);
    c.rope_scaling = {};
    const float top_partial = f.number("partial_rotary_factor", 1.0f);
    if (top_partial != 1.0f && !family_rope) {
        f.fail("field \"partial_rotary_factor\" = " + std::to_string(top_partial) + " is not supported by Halformer");
    }
    const json::Value *params = f.get("rope_parameters", json::Value::Kind::Object);
    std::string what = f.what + (params ? ": rope_parameters" : ": rope_scaling");
    if (params && (params->find("full_attention") || params->find("sliding_attention"))) {
        params = params->find(layer_type);
        if (!params || !params->is_object()) f.fail(std::string("rope_parameters has no object \"") + layer_type + "\"");
        what += std::string(".") + layer_type;
    }
    const json::Value *scaling = params ? params : f.get("rope_scaling", json::Value::Kind::Object);
    if (!scaling) return;
    const Fields s{*scaling, what};
    if (params) c.rope_theta = s.number("rope_theta", c.rope_theta);
    // ("type" is the name transformers before 4.45 wrote.)
    const std::string type = s.string("rope_type", s.string("type", "default"));
    const float partial = s.number("partial_rotary_factor", 1.0f);
    if (partial != 1.0f && !family_rope) s.fail("\"partial_rotary_factor\" = " + std::to_string(partial) + " is not supported by Halformer");
    Config::RopeScaling &r = c.rope_scaling;
    if (type == "default" || (type == "longrope" && family_rope)) return;
    r.factor = s.number("factor", 1.0f);
    if (type == "linear") {
        r.kind = Config::RopeScaling::Kind::Linear;
    } else if (type == "llama3") {
        r.kind = Config::RopeScaling::Kind::Llama3;
        r.low_freq_factor = s.number("low_freq_factor", 1.0f);
        r.high_freq_factor = s.number("high_freq_factor", 4.0f);
        r.original_max_positions = s.integer("original_max_position_embeddings", 8192);
    } else {
        s.fail("rope type \"" + type + "\" is not supported by Halformer (default, linear, llama3)");
    }
}

bool rope_per_layer_type(const Fields &f) {
    const json::Value *params = f.get("rope_parameters", json::Value::Kind::Object);
    return params && (params->find("full_attention") || params->find("sliding_attention"));
}

Config llama_like(const Fields &f, const LlamaDefaults &d) {
    Config c;
    c.family = d.model_type;
    c.architecture = Architecture::Decoder;
    c.d_model = f.integer("hidden_size", d.hidden);
    c.num_heads = f.integer("num_attention_heads", d.heads);
    c.num_kv_heads = f.integer("num_key_value_heads", d.kv_heads > 0 ? d.kv_heads : c.num_heads);
    // head_dim: given (Mistral Nemo, Qwen3-like sizes), or hidden / heads.
    c.d_kv = f.integer("head_dim", d.head_dim);
    if (c.d_kv == 0 && c.num_heads > 0 && c.d_model % c.num_heads != 0) {
        f.fail("hidden_size = " + std::to_string(c.d_model) + " is not a multiple of num_attention_heads = " +
               std::to_string(c.num_heads) + " and no head_dim is given");
    }
    c.d_ff = f.integer("intermediate_size", d.intermediate);
    c.num_encoder_layers = 0;
    c.num_decoder_layers = f.integer("num_hidden_layers", d.layers);
    c.src_vocab_size = 0;
    c.tgt_vocab_size = f.integer("vocab_size", d.vocab);
    c.max_positions = f.integer("max_position_embeddings", d.max_positions);
    c.positional_encoding = Positional::Rotary;
    rope(f, c, "full_attention", d.family_rope);
    c.norm_first = true;
    c.rms_norm = true;
    c.gated_ffn = true;
    c.activation = activation(f, "hidden_act", "silu");
    if (c.activation != Act::SiLU && c.activation != Act::GELUTanh) {
        f.fail("field \"hidden_act\" = \"" + f.string("hidden_act", "") +
               "\" is not supported by Halformer in a gated feed-forward (silu, gelu_pytorch_tanh)");
    }
    c.layer_norm_eps = f.number("rms_norm_eps", 1e-6f);
    c.scale_embeddings = false;
    c.tied_head = f.boolean("tie_word_embeddings", d.tied);
    c.bos_id = f.integer("bos_token_id", d.bos);
    c.eos_id = eos_ids(f, d.eos, c.stop_ids);
    // No padding token in most: padded rows are masked by length, so any
    // valid id serves.
    c.pad_id = f.integer("pad_token_id", c.eos_id >= 0 ? c.eos_id : 0);
    if (c.bos_id < 0) c.bos_id = c.eos_id;
    const std::string arch = f.architecture();
    if (!arch.empty() && arch != d.architecture) {
        f.fail("architectures: \"" + arch + "\" is not supported by Halformer (" + d.architecture + ")");
    }
    return c;
}

std::vector<bool> sliding_layers(const Fields &f, int layers, const std::function<bool(int)> &rule) {
    std::vector<bool> out((size_t)std::max(layers, 0));
    const json::Value *types = f.get("layer_types", json::Value::Kind::Array);
    if (!types) {
        for (int l = 0; l < layers; l++) out[(size_t)l] = rule(l);
        return out;
    }
    if ((int)types->array.size() != layers) {
        f.fail("field \"layer_types\" has " + std::to_string(types->array.size()) + " entries for " +
               std::to_string(layers) + " layers");
    }
    for (int l = 0; l < layers; l++) {
        const json::Value &t = types->array[(size_t)l];
        if (t.is_string() && t.string == "sliding_attention") {
            out[(size_t)l] = true;
        } else if (!t.is_string() || t.string != "full_attention") {
            f.fail("field \"layer_types\": entry " + std::to_string(l) +
                   " is not \"full_attention\" or \"sliding_attention\" (the kinds Halformer runs)");
        }
    }
    return out;
}

std::vector<int> qwen_windows(const Fields &f, int layers) {
    const bool use = f.boolean("use_sliding_window", false);
    const int from = f.integer("max_window_layers", 28), window = f.integer("sliding_window", 4096);
    const std::vector<bool> slide = sliding_layers(f, layers, [&](int l) { return l >= from; });
    std::vector<int> out;
    for (bool s : slide) out.push_back(use && s ? window : 0);
    return out;
}

namespace {

Config llama(const Fields &f) {
    Config c = llama_like(f, {"llama", "LlamaForCausalLM", 32000, 4096, 11008, 32, 32, 0, 2048, 1, 2, false, 0});
    c.qkv_bias = c.out_bias = f.boolean("attention_bias", false);
    c.ffn_bias = f.boolean("mlp_bias", false);
    const int tp = f.integer("pretraining_tp", 1);  // (the same product, in slices: read, nothing to do)
    (void)tp;
    return c;
}

Config mistral(const Fields &f) {
    Config c = llama_like(f, {"mistral", "MistralForCausalLM", 32000, 4096, 14336, 32, 32, 8, 4096 * 32, 1, 2, false, 0});
    c.qkv_bias = c.out_bias = c.ffn_bias = false;
    c.sliding_window = f.integer("sliding_window", 4096);
    return c;
}

Config qwen2(const Fields &f) {
    Config c = llama_like(f, {"qwen2", "Qwen2ForCausalLM", 151936, 4096, 22016, 32, 32, 0, 32768, -1, -1, false, 0});
    c.qkv_bias = true;
    c.out_bias = c.ffn_bias = false;
    (void)qwen_windows(f, c.num_decoder_layers);
    if (c.eos_id < 0) f.fail("field \"eos_token_id\" is missing (Qwen2Config has no default)");
    return c;
}

// Llama's and Mistral's layers: one sequence, one window (Config's).
void llama_describe(const Fields &, const Config &, Description &d) { d.layer = llama_layer; }

// Qwen2's: the window on the layers from max_window_layers on, with
// use_sliding_window (qwen_windows).
void qwen2_describe(const Fields &f, const Config &c, Description &d) {
    d.layer = llama_layer;
    d.layer_specs.clear();
    for (int w : qwen_windows(f, c.num_decoder_layers)) d.layer_specs.push_back({w, 0});
}

}  // namespace

// LlamaForCausalLM's names (Mistral's and Qwen2's are the same).
WeightRules llama_weights(Config &cfg, const Fields &, const Has &has) {
    WeightRules w;
    Rules &r = w.rules;
    const std::string ours = "decoder.layers.{i}.", theirs = "model.layers.{i}.";
    r["tgt_embed.weight"] = {How::Same, {"model.embed_tokens.weight"}};
    for (const char *kind : {"weight", "bias"}) {
        const std::string k = kind, a = theirs + "self_attn.", m = theirs + "mlp.";
        r[ours + "self_attn.in_proj_" + k] = {How::Stacked, {a + "q_proj." + k, a + "k_proj." + k, a + "v_proj." + k}};
        r[ours + "self_attn.out_proj." + k] = {How::Same, {a + "o_proj." + k}};
        // SwiGLU: silu(gate) · up, then down.
        r[ours + "linear1." + k] = {How::Same, {m + "gate_proj." + k}};
        r[ours + "linear_gate." + k] = {How::Same, {m + "up_proj." + k}};
        r[ours + "linear2." + k] = {How::Same, {m + "down_proj." + k}};
    }
    r[ours + "norm1.weight"] = {How::Same, {theirs + "input_layernorm.weight"}};
    r[ours + "norm2.weight"] = {How::Same, {theirs + "post_attention_layernorm.weight"}};
    r["decoder.norm.weight"] = {How::Same, {"model.norm.weight"}};
    if (cfg.tied_head) {
        // (Some saves keep a copy of the tied embedding.)
        if (has("lm_head.weight")) w.ignore.push_back("lm_head.weight");
    } else {
        if (!has("lm_head.weight")) {
            throw Error("tie_word_embeddings is false but the files hold no lm_head.weight");
        }
        r["generator.weight"] = {How::Same, {"lm_head.weight"}};
    }
    return w;
}

namespace {

constexpr const char *kUnused = kRotaryBuffers;

}  // namespace

const Family &llama_family() {
    static const Family f{"llama", llama, llama_weights, kUnused, "llama", llama_describe};
    return f;
}
const Family &mistral_family() {
    static const Family f{"mistral", mistral, llama_weights, kUnused, "llama", llama_describe};
    return f;
}
const Family &qwen2_family() {
    static const Family f{"qwen2", qwen2, llama_weights, kUnused, "llama", qwen2_describe};
    return f;
}

}  // namespace hf
}  // namespace halformer
