// T5 (T5ForConditionalGeneration: v1.0, v1.1, flan).
#include "../family.h"

#include "../../layers/layers.h"

#include <algorithm>
#include <climits>
#include <cstdint>
#include <cstdlib>

namespace halformer {
namespace hf {
namespace {

// T5Block (modeling_t5.py): T5LayerSelfAttention, T5LayerCrossAttention in
// the decoder, T5LayerFF; each RMS-normalizes its input and adds its
// output to the stream. Self-attention adds the stack's relative-position
// bias (bidirectional in the encoder, causal in the decoder).
void t5_layer(Session &k, const layers::Pass &p, const LayerW &L, bool causal, layers::LayerIO &io) {
    using namespace layers;
    const int M = io.M();
    const AttnW self = L.attn("self_attn");
    layer_norm(k, L.norm("norm1"), io.x_in, io.n1, M);  // layer[0].layer_norm
    self_projections(k, p, self, io.n1, io);            // SelfAttention: q|k|v
    self_attention(k, p, causal, io);                   // scores unscaled, + position bias
    attention_output(k, p, self, io, io.x_in, io.x1);   // SelfAttention.o, + residual
    const float *x = io.x1;
    const char *ffn_norm = "norm2";
    if (has_memory(io)) {
        const AttnW cross = L.attn("multihead_attn");
        layer_norm(k, L.norm("norm2"), io.x1, io.n2, M);          // layer[1].layer_norm
        cross_attention(k, p, cross, io.n2, io);                  // EncDecAttention: q; k|v of the memory
        cross_attention_output(k, p, cross, io, io.x1, io.x2);    // EncDecAttention.o, + residual
        x = io.x2;
        ffn_norm = "norm3";
    }
    layer_norm(k, L.norm(ffn_norm), x, io.n3, M);   // layer[-1].layer_norm
    feed_forward(k, p, L, io.n3, x, io, io.x_out);  // DenseReluDense (or gated), + residual
}

void t5_describe(const Fields &, const Config &, Description &d) { d.layer = t5_layer; }

// T5Config (T5ForConditionalGeneration): an encoder-decoder, pre-norm with
// RMSNorm, no biases, no embedding scale, positions as a learned bias per
// head by bucketed relative position (layer 0 of each stack holds the
// table), scores not scaled, heads of d_kv. feed_forward_proj "{act}" or
// "gated-{act}" ("gated-gelu" means gelu_new, as transformers reads it).
// The head: tied to the shared embedding (v1.0; the decoder's output is
// scaled by d_model^-0.5, folded into its final norm at load) or its own
// lm_head (tie_word_embeddings false: v1.1, flan), or the shared embedding
// unscaled (transformers 5's gated models: scale_decoder_outputs false).
Config t5(const Fields &f) {
    Config c;
    c.family = "t5";
    c.architecture = Architecture::EncoderDecoder;
    c.d_model = f.integer("d_model", 512);
    c.d_kv = f.integer("d_kv", 64);
    c.num_heads = f.integer("num_heads", 8);
    c.d_ff = f.integer("d_ff", 2048);
    c.num_encoder_layers = f.integer("num_layers", 6);
    c.num_decoder_layers = f.integer("num_decoder_layers", c.num_encoder_layers);
    c.src_vocab_size = c.tgt_vocab_size = f.integer("vocab_size", 32128);
    c.max_positions = f.integer("n_positions", 512);
    c.positional_encoding = Positional::Relative;
    c.relative_buckets = f.integer("relative_attention_num_buckets", 32);
    c.relative_max_distance = f.integer("relative_attention_max_distance", 128);
    c.norm_first = true;
    c.rms_norm = true;
    c.biases = false;
    c.attention_scale = 1.0f;
    const std::string proj = f.string("feed_forward_proj", "relu");
    const size_t dash = proj.find('-');
    const std::string kind = dash == std::string::npos ? "" : proj.substr(0, dash);
    const std::string act = dash == std::string::npos ? proj : proj.substr(dash + 1);
    if ((dash != std::string::npos && kind != "gated") || act.empty() || act.find('-') != std::string::npos) {
        f.fail("field \"feed_forward_proj\" = \"" + proj + "\" is not of the form {act} or gated-{act}");
    }
    c.gated_ffn = kind == "gated";
    c.activation = activation_named(f, "feed_forward_proj", proj == "gated-gelu" ? "gelu_new" : act);
    if (c.gated_ffn && c.activation != Act::GELUTanh && c.activation != Act::SiLU) {
        f.fail("field \"feed_forward_proj\" = \"" + proj +
               "\" is not supported by Halformer (gated: gated-gelu, gated-gelu_new, gated-silu)");
    }
    c.layer_norm_eps = f.number("layer_norm_epsilon", 1e-6f);
    c.scale_embeddings = false;
    c.tied_head = f.boolean("tie_word_embeddings", true);
    c.pad_id = f.integer("pad_token_id", 0);
    c.eos_id = f.integer("eos_token_id", 1);
    c.bos_id = f.integer("decoder_start_token_id", c.pad_id);
    f.require("is_encoder_decoder", f.boolean("is_encoder_decoder", true), "false");
    const std::string arch = f.architecture();
    if (!arch.empty() && arch != "T5ForConditionalGeneration") {
        f.fail("architectures: \"" + arch + "\" is not supported by Halformer (T5ForConditionalGeneration)");
    }
    return c;
}

// T5ForConditionalGeneration: separate q, k, v, o without biases; RMSNorm
// gains only; the relative-position tables of each stack's block 0; the
// feed-forward's wi (or wi_0 gated by wi_1) and wo. With the head tied to
// the shared embedding (v1.0) the decoder's output is scaled by
// d_model^-0.5 before it: folded into the final norm's gain here.
Rules t5_rules(const Config &c, bool tied, bool scaled) {
    Rules r;
    r["src_embed.weight"] = {How::Same, {"shared.weight"}};
    r["tgt_embed.weight"] = {How::Same, {"shared.weight"}};
    auto attention = [&](const std::string &ours, const std::string &theirs) {
        r[ours + "in_proj_weight"] = {How::Stacked, {theirs + "q.weight", theirs + "k.weight", theirs + "v.weight"}};
        r[ours + "out_proj.weight"] = {How::Same, {theirs + "o.weight"}};
    };
    for (const char *side : {"encoder", "decoder"}) {
        const std::string s = side, ours = s + ".layers.{i}.", theirs = s + ".block.{i}.layer.";
        const bool dec = s == "decoder";
        attention(ours + "self_attn.", theirs + "0.SelfAttention.");
        r[ours + "norm1.weight"] = {How::Same, {theirs + "0.layer_norm.weight"}};
        if (dec) {
            attention(ours + "multihead_attn.", theirs + "1.EncDecAttention.");
            r[ours + "norm2.weight"] = {How::Same, {theirs + "1.layer_norm.weight"}};
        }
        const std::string ff = theirs + (dec ? "2." : "1.");
        if (c.gated_ffn) {
            r[ours + "linear1.weight"] = {How::Same, {ff + "DenseReluDense.wi_0.weight"}};
            r[ours + "linear_gate.weight"] = {How::Same, {ff + "DenseReluDense.wi_1.weight"}};
        } else {
            r[ours + "linear1.weight"] = {How::Same, {ff + "DenseReluDense.wi.weight"}};
        }
        r[ours + "linear2.weight"] = {How::Same, {ff + "DenseReluDense.wo.weight"}};
        r[ours + (dec ? "norm3.weight" : "norm2.weight")] = {How::Same, {ff + "layer_norm.weight"}};
        r[s + ".rel_bias.weight"] = {How::Same, {s + ".block.0.layer.0.SelfAttention.relative_attention_bias.weight"}};
        r[s + ".norm.weight"] = {How::Same, {s + ".final_layer_norm.weight"}};
    }
    if (tied && scaled) {
        r["decoder.norm.weight"] = {How::Scaled, {"decoder.final_layer_norm.weight"},
                                    1.0f / std::sqrt((float)c.d_model)};
    }
    if (!tied) {
        r["generator.weight"] = {How::Same, {"lm_head.weight"}};
    }
    return r;
}

WeightRules t5_weights(Config &cfg, const Fields &f, const Has &) {
    // tie_word_embeddings (default true): no lm_head.weight is read (a
    // file may still hold a copy of shared.weight under that name).
    // transformers 5 writes tie_word_embeddings true for every T5 and says
    // in scale_decoder_outputs whether the decoder's output is scaled (v1.0
    // relu models) or not (the gated ones); before it, a tied head was
    // always scaled.
    const bool scaled = f.boolean("scale_decoder_outputs", true);
    WeightRules w{t5_rules(cfg, cfg.tied_head, scaled), {}};
    if (cfg.tied_head) w.ignore.push_back("lm_head.weight");
    return w;
}

}  // namespace

// (The stacks' copies of the shared embedding; the cross-attention table
// old checkpoints hold in decoder block 0, which T5 never reads.)
const Family &t5_family() {
    static const Family f{
        "t5", t5, t5_weights,
        R"(^(encoder|decoder)\.embed_tokens\.weight$|^decoder\.block\.0\.layer\.1\.EncDecAttention\.relative_attention_bias\.weight$)",
        "t5", t5_describe};
    return f;
}

}  // namespace hf
}  // namespace halformer
