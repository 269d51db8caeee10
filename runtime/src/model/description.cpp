#include "description.h"

#include "hf/family.h"

#include <cmath>

namespace halformer {

std::vector<float> rope_frequencies(const Config &c) {
    // transformers' _compute_default_rope_parameters: 1 / base^(2i/d) in
    // float32, then the scaling's (modeling_rope_utils.py).
    const int dim = c.head_dim(), half = dim / 2;
    const Config::RopeScaling &s = c.rope_scaling;
    std::vector<float> f((size_t)half);
    for (int i = 0; i < half; i++) {
        float inv = 1.0f / std::pow(c.rope_theta, (float)(2 * i) / (float)dim);
        if (s.kind == Config::RopeScaling::Kind::Linear) inv /= s.factor;
        if (s.kind == Config::RopeScaling::Kind::Llama3) {
            const float old_len = (float)s.original_max_positions;
            const float low_wavelen = old_len / s.low_freq_factor, high_wavelen = old_len / s.high_freq_factor;
            const float wavelen = 2.0f * (float)M_PI / inv;
            const float scaled = wavelen > low_wavelen ? inv / s.factor : inv;
            if (!(wavelen < high_wavelen) && !(wavelen > low_wavelen)) {
                const float smooth = (old_len / wavelen - s.low_freq_factor) / (s.high_freq_factor - s.low_freq_factor);
                inv = (1 - smooth) * scaled / s.factor + smooth * scaled;
            } else {
                inv = scaled;
            }
        }
        f[(size_t)i] = inv;
    }
    return f;
}

Description describe(const Config &c) {
    Description d;
    d.encoder = c.has_encoder();
    d.decoder = c.has_decoder();
    d.encoder_layers = c.has_encoder() ? c.num_encoder_layers : 0;
    d.decoder_layers = c.has_decoder() ? c.num_decoder_layers : 0;
    d.cross_attention = c.architecture == Architecture::EncoderDecoder;
    d.d_model = c.d_model;
    d.heads = c.num_heads;
    d.d_ff = c.d_ff;
    d.head_dim = c.head_dim();
    d.attn_width = c.attention_width();
    d.kv_heads = c.kv_heads();
    d.kv_width = c.kv_width();
    d.attention_scale = c.attention_scale > 0 ? c.attention_scale : 1.0f / std::sqrt((float)d.head_dim);
    d.enc_dims = {d.heads, d.head_dim, d.kv_heads, c.d_ff, d.attention_scale};
    d.dec_dims = d.enc_dims;
    if (c.decoder_num_heads > 0) {
        d.dec_dims.heads = d.dec_dims.kv_heads = c.decoder_num_heads;
        d.dec_dims.head_dim = d.attn_width / c.decoder_num_heads;
        d.dec_dims.scale = 1.0f / std::sqrt((float)d.dec_dims.head_dim);
    }
    if (c.decoder_d_ff > 0) d.dec_dims.d_ff = c.decoder_d_ff;
    d.max_positions = c.max_positions;
    d.src_vocab = c.src_vocab_size;
    d.tgt_vocab = c.tgt_vocab_size;
    d.norm_place = c.norm_first ? Description::NormPlace::Before : Description::NormPlace::After;
    d.norm_eps = c.layer_norm_eps;
    d.activation = c.activation;
    d.norm_kind = c.rms_norm ? Description::NormKind::RMS : Description::NormKind::Layer;
    d.gated_ffn = c.gated_ffn;
    d.qkv_bias = c.biases && c.qkv_bias;
    d.out_bias = c.biases && c.out_bias;
    d.ffn_bias = c.biases && c.ffn_bias;
    d.relative_buckets = c.relative_buckets;
    d.relative_max_distance = c.relative_max_distance;
    d.final_norms = c.norm_first;
    d.embedding_scale = c.scale_embeddings ? std::sqrt((float)c.d_model) : 1.0f;
    d.position = c.positional_encoding;
    if (d.rotary()) d.inv_freq = rope_frequencies(c);
    d.sliding_window = c.sliding_window;
    d.token_types = c.type_vocab_size;
    d.embedding_norm = c.embedding_norm;
    d.encoder_head = c.encoder_head;
    // A Hugging Face family's builder: its layer sequence and per-layer data.
    hf::describe_family(c, d);
    return d;
}

}  // namespace halformer
