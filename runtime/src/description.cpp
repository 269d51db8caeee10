#include "description.h"

#include <cmath>

namespace halformer {

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
    d.attention_scale = c.attention_scale > 0 ? c.attention_scale : 1.0f / std::sqrt((float)d.head_dim);
    d.max_positions = c.max_positions;
    d.src_vocab = c.src_vocab_size;
    d.tgt_vocab = c.tgt_vocab_size;
    d.norm_place = c.norm_first ? Description::NormPlace::Before : Description::NormPlace::After;
    d.norm_eps = c.layer_norm_eps;
    d.activation = c.activation;
    d.norm_kind = c.rms_norm ? Description::NormKind::RMS : Description::NormKind::Layer;
    d.gated_ffn = c.gated_ffn;
    d.biases = c.biases;
    d.relative_buckets = c.relative_buckets;
    d.relative_max_distance = c.relative_max_distance;
    d.final_norms = c.norm_first;
    d.embedding_scale = c.scale_embeddings ? std::sqrt((float)c.d_model) : 1.0f;
    d.position = c.positional_encoding;
    d.token_types = c.type_vocab_size;
    d.embedding_norm = c.embedding_norm;
    d.encoder_head = c.encoder_head;
    return d;
}

}  // namespace halformer
