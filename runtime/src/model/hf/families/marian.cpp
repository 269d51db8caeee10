// Marian (MarianMTModel: OPUS-MT).
#include "../family.h"

#include "../../layers/layers.h"

#include <algorithm>
#include <climits>
#include <cstdint>
#include <cstdlib>

namespace halformer {
namespace hf {
namespace {

// MarianEncoderLayer / MarianDecoderLayer (modeling_marian.py): post-LN;
// the decoder's attends to the encoder's output between its self-attention
// and its feed-forward network.
void marian_layer(Session &k, const layers::Pass &p, const LayerW &L, bool causal, layers::LayerIO &io) {
    using namespace layers;
    const int M = io.M();
    const AttnW self = L.attn("self_attn");
    self_projections(k, p, self, io.x_in, io);                     // self_attn: q|k|v_proj
    self_attention(k, p, causal, io);                              // encoder: every key; decoder: causal
    attention_output(k, p, self, io, nullptr, io.y1);              // self_attn.out_proj
    add_layer_norm(k, L.norm("norm1"), io.y1, io.x_in, io.x1, M);  // self_attn_layer_norm(residual + ·)
    const float *x = io.x1;
    const char *ffn_norm = "norm2";
    if (has_memory(io)) {
        const AttnW cross = L.attn("multihead_attn");
        cross_attention(k, p, cross, io.x1, io);                       // encoder_attn: q_proj; k|v of the memory
        cross_attention_output(k, p, cross, io, nullptr, io.y2);       // encoder_attn.out_proj
        add_layer_norm(k, L.norm("norm2"), io.y2, io.x1, io.x2, M);    // encoder_attn_layer_norm(residual + ·)
        x = io.x2;
        ffn_norm = "norm3";
    }
    feed_forward(k, p, L, x, nullptr, io, io.y3);                // fc1, activation, fc2
    add_layer_norm(k, L.norm(ffn_norm), io.y3, x, io.x_out, M);  // final_layer_norm(residual + ·)
}

void marian_describe(const Fields &, const Config &, Description &d) { d.layer = marian_layer; }

// MarianConfig: an encoder-decoder, post-LN, with sinusoidal positions in
// [sin | cos] halves, the head tied to the shared embedding plus
// final_logits_bias, the decoder started from decoder_start_token_id.
Config marian(const Fields &f) {
    Config c;
    c.family = "marian";
    c.architecture = Architecture::EncoderDecoder;
    c.d_model = f.integer("d_model", 1024);
    c.num_heads = f.integer("encoder_attention_heads", 16);
    c.d_ff = f.integer("encoder_ffn_dim", 4096);
    c.num_encoder_layers = f.integer("encoder_layers", 12);
    c.num_decoder_layers = f.integer("decoder_layers", 12);
    // The decoder's heads and feed-forward width may be its own.
    const int heads_dec = f.integer("decoder_attention_heads", 16), ffn_dec = f.integer("decoder_ffn_dim", 4096);
    if (heads_dec != c.num_heads) c.decoder_num_heads = heads_dec;
    if (ffn_dec != c.d_ff) c.decoder_d_ff = ffn_dec;
    c.src_vocab_size = f.integer("vocab_size", 58101);
    c.tgt_vocab_size = f.integer("decoder_vocab_size", c.src_vocab_size);
    if (f.boolean("share_encoder_decoder_embeddings", true) && c.tgt_vocab_size != c.src_vocab_size) {
        f.fail("decoder_vocab_size = " + std::to_string(c.tgt_vocab_size) + " differs from vocab_size = " +
               std::to_string(c.src_vocab_size) + " with share_encoder_decoder_embeddings");
    }
    c.max_positions = f.integer("max_position_embeddings", 1024);
    c.positional_encoding = Positional::SinusoidalConcat;
    c.norm_first = f.boolean("normalize_before", false);
    f.require("normalize_before", !c.norm_first, "true");
    c.activation = activation(f, "activation_function", "gelu");
    c.layer_norm_eps = 1e-5f;
    c.scale_embeddings = f.boolean("scale_embedding", false);
    c.pad_id = f.integer("pad_token_id", 58100);
    c.eos_id = f.integer("eos_token_id", 0);
    c.bos_id = f.integer("decoder_start_token_id", c.pad_id);
    // (MarianConfig's default; every opus-mt config says 0 = eos too.)
    c.forced_eos_id = f.integer("forced_eos_token_id", 0);
    // MarianMTModel never generates pad (transformers sets its logit to
    // −inf while generating; OPUS-MT configs also say bad_words_ids [[pad]]).
    c.banned_ids = {c.pad_id};
    add_bad_words(f, c.banned_ids);
    f.require("normalize_embedding", !f.boolean("normalize_embedding", false), "true");
    f.require("add_final_layer_norm", !f.boolean("add_final_layer_norm", false), "true");
    return c;
}

// Marian's separate q, k, v projections → one in_proj.
void marian_attention(Rules &r, const std::string &ours, const std::string &theirs) {
    for (const char *kind : {"weight", "bias"}) {
        const std::string k = kind;
        r[ours + (k == "weight" ? "in_proj_weight" : "in_proj_bias")] = {
            How::Stacked, {theirs + "q_proj." + k, theirs + "k_proj." + k, theirs + "v_proj." + k}};
        r[ours + "out_proj." + k] = {How::Same, {theirs + "out_proj." + k}};
    }
}
// MarianMTModel: the shared embedding (or each stack's own), post-LN layers,
// the head tied to the target embedding plus final_logits_bias [1, V].
Rules marian_rules(bool shared) {
    Rules r;
    r["src_embed.weight"] = {How::Same, {shared ? "model.shared.weight" : "model.encoder.embed_tokens.weight"}};
    r["tgt_embed.weight"] = {How::Same, {shared ? "model.shared.weight" : "model.decoder.embed_tokens.weight"}};
    r["src_pos.weight"] = {How::Same, {"model.encoder.embed_positions.weight"}};
    r["tgt_pos.weight"] = {How::Same, {"model.decoder.embed_positions.weight"}};
    for (const char *side : {"encoder", "decoder"}) {
        const std::string s = side, ours = s + ".layers.{i}.", theirs = "model." + s + ".layers.{i}.";
        marian_attention(r, ours + "self_attn.", theirs + "self_attn.");
        norm(r, ours + "norm1.", theirs + "self_attn_layer_norm.");
        if (s == "decoder") {
            marian_attention(r, ours + "multihead_attn.", theirs + "encoder_attn.");
            norm(r, ours + "norm2.", theirs + "encoder_attn_layer_norm.");
        }
        norm(r, ours + (s == "decoder" ? "norm3." : "norm2."), theirs + "final_layer_norm.");
        r[ours + "linear1.weight"] = {How::Same, {theirs + "fc1.weight"}};
        r[ours + "linear1.bias"] = {How::Same, {theirs + "fc1.bias"}};
        r[ours + "linear2.weight"] = {How::Same, {theirs + "fc2.weight"}};
        r[ours + "linear2.bias"] = {How::Same, {theirs + "fc2.bias"}};
    }
    r["generator.weight"] = {How::Same, {"lm_head.weight"}};
    r["generator.bias"] = {How::Flat, {"final_logits_bias"}};
    return r;
}

WeightRules marian_weights(Config &cfg, const Fields &, const Has &has) {
    WeightRules w{marian_rules(has("model.shared.weight")), {}};
    // Files converted before transformers stopped saving them hold the
    // position tables: the same values, used as they are.
    if (has("model.encoder.embed_positions.weight") && has("model.decoder.embed_positions.weight")) {
        cfg.positional_encoding = Positional::Learned;
    }
    return w;
}

}  // namespace

// (The stacks' copies of the shared embedding, which transformers ties to
// model.shared on load.)
const Family &marian_family() {
    static const Family f{"marian", marian, marian_weights,
                          R"(^model\.(encoder|decoder)\.(embed_positions\._float_tensor|embed_tokens\.weight)$)",
                          "marian", marian_describe};
    return f;
}

}  // namespace hf
}  // namespace halformer
