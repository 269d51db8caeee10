// Forward passes: embedding, encoder and decoder layers (post-LN or pre-LN),
// final norms and the output projection. Activations are time-major
// (row m = t·R + r for R sequences), so the K|V of new positions of every
// sequence are one dense block of the cache and a linear kernel writes them
// in place. Every step is one kernel call; this file only lays out views.
#include "session.h"
#include "../decoding/generate.h"

#include "layers/layers.h"

#include <cmath>
#include <cstring>

namespace halformer {

void Session::set_device(Device d) {
    if (d == dev->device()) return;
    release_buffers();  // from the old device's memory
    dev = std::make_unique<DeviceContext>(d);
    wire();
}

void Session::check_tokens(const std::vector<Sequence> &seqs, int vocab, const char *what,
                               int extra_positions) const {
    decoding::check_tokens(cfg, seqs, vocab, what, extra_positions);
}

void Session::stack(const StackW &s, bool causal, float *&x, float *&x_alt, const StackPass &pass) {
    const int T = pass.T, R = pass.R, start = pass.start;
    const int D = cfg.d_model, A = desc.attn_width, K = desc.kv_width, M = T * R;
    const RowMap &rows = pass.rows;
    const int CR = rows.cache_rows ? rows.cache_rows : R;
    if (CR < R) throw Error("internal: a cache of fewer rows than the batch");
    if (desc.rotary()) {
        positions.resize((size_t)M);
        for (int t = 0; t < T; t++) {
            for (int r = 0; r < R; r++) positions[(size_t)t * R + r] = (rows.row_pos ? rows.row_pos[r] : start) + t;
        }
    }
    const bool cross = (bool)pass.cross_kv;
    auto io_for = [&](size_t l) {
        layers::LayerIO io;
        io.T = T;
        io.R = R;
        io.start = start;
        io.x_in = x;
        // One buffer serves every sub-layer: inference keeps no activation.
        io.n1 = io.n2 = io.n3 = h.need((size_t)M * D);
        // The self-attention's new Q|K|V side by side ([M, A + 2K]: one
        // projection); the cross-attention's queries in the same buffer.
        io.q = io.qc = q.need((size_t)M * (A + 2 * K));
        io.att = io.attc = a.need((size_t)M * A);
        io.y1 = io.y2 = io.y3 = y.need((size_t)M * D);
        io.hidden = &ffn_hidden;
        if (desc.rotary()) {
            io.positions = positions.data();
            io.rope_in = rope_in.need((size_t)M * (A + K));
            if (desc.qk_norm != Description::QkNorm::None) io.qk_normed = qk_normed.need((size_t)M * (A + K));
        }
        // The layer's own window and rope table (the decoder's layers: the
        // description's per-layer data).
        const Description::LayerSpec spec = &s == &w->dec ? desc.spec((int)l) : Description::LayerSpec{desc.sliding_window, 0};
        io.window = spec.window;
        io.moe_layer = spec.moe;
        io.moe = {&moe_logits, &moe_weights, &moe_ids, &moe_x, &moe_y};
        if (desc.rotary()) io.inv_freq = &desc.rope_table(spec.rope);
        if (rows.write_rows) {
            // The paged cache: K|V go from io.q to their cache rows.
            io.kv = pass.self_kv(l);
            io.kv_stride = 2 * K;
            io.cache_rows = CR;
        } else {
            // One pass over whole sequences: its keys are the new ones.
            if (start != 0) throw Error("internal: a pass from position " + std::to_string(start) + " without a cache");
            io.kv = io.q + A;
            io.kv_stride = A + 2 * K;
            io.cache_rows = R;
        }
        io.kv_len = pass.kv_len;
        // The stream moves between x and x_alt at each sub-layer.
        io.x1 = x_alt;
        io.x2 = x;
        io.x_out = cross ? x_alt : x;
        io.cross.kv = cross ? pass.cross_kv(l) : nullptr;
        io.cross.len = pass.cross_len;
        io.cross.S = pass.S;
        io.cross.group = pass.cross_group;
        // (The paged cache's sources: one per group of rows.)
        io.cross.rows = rows.cross_table ? R / pass.cross_group : CR;
        io.rows = rows;
        io.pos_bias = pass.pos_bias;
        // The stack's widths: the encoder's layers are w->enc's.
        io.dims = &s == &w->enc ? &desc.enc_dims : &desc.dec_dims;
        return io;
    };
    layers::stack_forward(*this, layers::Pass{}, s, causal, io_for, [&](size_t, const layers::LayerIO &io) {
        if (io.x_out == x_alt) std::swap(x, x_alt);
    });
}

const float *Session::stack_bias(const StackW &s, bool causal) {
    if (desc.position != Positional::Relative) return nullptr;
    float *out = pos_bias.need(layers::position_bias_size(desc));
    layers::position_bias(*this, s, causal, out);
    return out;
}

void Session::final_norm(const NormW &n, float *x, int M) {
    if (!n) return;
    float *out = y.need((size_t)M * cfg.d_model);
    layers::layer_norm(*this, n, x, out, M);
    dev->copy(x, out, (size_t)M * cfg.d_model * sizeof(float));
}

void Session::project(const float *x, int M, int row_stride, float *out, bool log_softmax, bool decoding) {
    const float *b = decoding && w->gen_b_decode ? w->gen_b_decode : w->gen_b;
    layers::project(*this, {w->gen_w, b, w->gen_rows}, x, M, row_stride, out, log_softmax);
}

int pad_time_major(const std::vector<const Sequence *> &seqs, int pad, std::vector<int32_t> &tokens,
                   std::vector<int32_t> &lens) {
    const int R = (int)seqs.size();
    int T = 0;
    for (auto *s : seqs) T = std::max(T, (int)s->size());
    tokens.assign((size_t)T * R, pad);
    lens.resize(R);
    for (int r = 0; r < R; r++) {
        lens[r] = (int)seqs[r]->size();
        for (int t = 0; t < lens[r]; t++) tokens[(size_t)t * R + r] = (*seqs[r])[t];
    }
    return T;
}

namespace {

std::vector<const Sequence *> pointers(const std::vector<Sequence> &seqs) {
    std::vector<const Sequence *> out;
    for (auto &s : seqs) out.push_back(&s);
    return out;
}

}  // namespace

float *Session::encoder(const std::vector<Sequence> &src, int S, std::vector<int32_t> &lens) {
    const int D = cfg.d_model, R = (int)src.size();
    std::vector<int32_t> tokens;
    pad_time_major(pointers(src), cfg.pad_id, tokens, lens);
    const size_t n = (size_t)S * R * D;
    float *x = x0.need(n), *xa = x1.need(n);
    layers::embed(*this, w->enc, tokens.data(), S, R, 0, x);
    const float *bias = stack_bias(w->enc, false);
    StackPass pass;
    pass.T = S;
    pass.R = R;
    pass.kv_len = lens.data();
    pass.pos_bias = bias;
    stack(w->enc, false, x, xa, pass);
    final_norm(w->enc.final_norm, x, S * R);
    float *out = enc_out.need(n);
    dev->copy(out, x, n * sizeof(float));
    return out;
}

namespace {

// [T][R][W] time-major rows → one [len_r, W] Tensor per sequence.
std::vector<Tensor> split_rows(const float *data, int R, int W, const std::vector<int32_t> &lens) {
    std::vector<Tensor> out(R);
    for (int r = 0; r < R; r++) {
        out[r].shape = {lens[r], W};
        out[r].data.resize((size_t)lens[r] * W);
        for (int t = 0; t < lens[r]; t++) {
            std::memcpy(&out[r].data[(size_t)t * W], data + ((size_t)t * R + r) * W, W * sizeof(float));
        }
    }
    return out;
}

// Activations and caches of a teacher-forced pass (Session::
// require_pass_fits): the encoder over B × S, the decoder over R × T (its
// self K|V of T positions) and `width` outputs per position.
void require_pass_fits(Session &m, int64_t B, int64_t S, int64_t R, int64_t T, int64_t width, const char *what) {
    Session::PassShapes p;
    p.sources = B;
    p.source_len = S;
    p.rows = R;
    p.positions = p.cache = T;
    p.out_rows = std::max(checked_product({B, S}, what), checked_product({R, T}, what));
    p.width = width;
    m.require_pass_fits(p, what, std::string(what) + " (" + std::to_string(std::max(B, R)) + " sequences of up to " +
                                     std::to_string(std::max(S, T)) + " tokens)");
}

// An encoder pass's sources checked (ids, positions) and its activations
// plus `width` outputs a position within the budget; returns the longest
// source's length.
int checked_sources(Session &m, const std::vector<Sequence> &src, int64_t width, const char *what) {
    m.check_tokens(src, m.cfg.src_vocab_size, "source", 0);
    int S = 0;
    for (auto &s : src) S = std::max(S, (int)s.size());
    require_pass_fits(m, (int64_t)src.size(), S, 0, 0, width, what);
    return S;
}

std::vector<Tensor> encode_in(Session &m, const std::vector<Sequence> &src) {
    if (!m.cfg.has_encoder()) throw Error("encode: a decoder-only model has no encoder");
    const int S = checked_sources(m, src, 0, "encode");
    std::vector<int32_t> lens;
    DeviceScope scope(m.dev.get());
    const float *x = m.encoder(src, S, lens);
    m.dev->to_host(x, (size_t)S * src.size() * m.cfg.d_model * sizeof(float));
    return split_rows(x, (int)src.size(), m.cfg.d_model, lens);
}

// The projection head's logits [rows, V] (on the device): BERT's masked-LM
// head first transforms x (dense, activation, LayerNorm).
const float *head_logits(Session &m, const float *x, int rows) {
    const int D = m.cfg.d_model, V = m.w->gen_rows;
    const StackW &e = m.w->enc;
    if (m.desc.encoder_head == EncoderHead::MaskedLM) {
        float *t = m.h.need((size_t)rows * D), *n = m.y.need((size_t)rows * D);
        layers::linear_act(m, "head_transform", {x, rows, D, D}, e.head_tw, e.head_tb, D, t,
                           layers::head_act(m.desc.activation));
        layers::layer_norm(m, e.head_norm, t, n, rows);
        x = n;
    }
    float *out = m.logits.need((size_t)rows * V);
    m.project(x, rows, D, out, false);
    return out;
}

// An encoder-only model's head over its output x (S positions of R rows):
// a projection of each position, BERT's masked-LM head (transform,
// LayerNorm, projection), or its classifier (tanh pooler over each row's
// first position, then the projection: one [1, labels] Tensor a sequence).
std::vector<Tensor> encoder_head(Session &m, const float *x, int S, int R, const std::vector<int32_t> &lens,
                                 bool probabilities = false, std::vector<Tensor> *logits = nullptr) {
    const int D = m.cfg.d_model, V = m.w->gen_rows, rows = S * R;
    const StackW &e = m.w->enc;
    if (m.desc.encoder_head == EncoderHead::Classifier) {
        // Time-major: the R first positions are the first R rows.
        float *pooled = m.h.need((size_t)R * D), *out = m.logits.need((size_t)R * V);
        layers::linear_act(m, "pooler", {x, R, D, D}, e.pool_w, e.pool_b, D, pooled, layers::HeadAct::Tanh);
        m.project(pooled, R, D, out, false);
        if (probabilities) {
            float *p = m.head_tmp.need((size_t)R * V);
            layers::softmax(m, out, R, V, p);
            if (logits) {
                m.dev->to_host(out, (size_t)R * V * sizeof(float));
                *logits = split_rows(out, R, V, std::vector<int32_t>(R, 1));
            }
            out = p;
        }
        m.dev->to_host(out, (size_t)R * V * sizeof(float));
        return split_rows(out, R, V, std::vector<int32_t>(R, 1));
    }
    const float *out = head_logits(m, x, rows);
    m.dev->to_host(out, (size_t)rows * V * sizeof(float));
    return split_rows(out, R, V, lens);
}

}  // namespace

std::vector<Tensor> Model::encode(const std::vector<Sequence> &src) {
    Lease lease(*pool_);
    return encode_in(*lease, src);
}

std::vector<Tensor> Model::class_probabilities(const std::vector<Sequence> &src, std::vector<Tensor> *logits) {
    Lease lease(*pool_);
    Session &m = *lease;
    if (m.desc.encoder_head != EncoderHead::Classifier) {
        throw Error("class_probabilities: the model is no sequence classifier");
    }
    const int S = checked_sources(m, src, m.w->gen_rows, "class_probabilities");
    std::vector<int32_t> lens;
    DeviceScope scope(m.dev.get());
    const float *x = m.encoder(src, S, lens);
    return encoder_head(m, x, S, (int)src.size(), lens, true, logits);
}

void Model::top_tokens(const std::vector<Sequence> &src, int top, std::vector<Tensor> &ids,
                       std::vector<Tensor> &probabilities) {
    Lease lease(*pool_);
    Session &m = *lease;
    if (m.desc.encoder_head != EncoderHead::MaskedLM) {
        throw Error("top_tokens: the model has no masked-LM head (architectures: BertForMaskedLM)");
    }
    if (top < 1 || top > 8) throw Error("top_tokens: top must be in [1, 8], not " + std::to_string(top));
    const int S = checked_sources(m, src, 2 * (int64_t)m.w->gen_rows, "top_tokens");
    const int R = (int)src.size(), rows = S * R, V = m.w->gen_rows;
    std::vector<int32_t> lens;
    DeviceScope scope(m.dev.get());
    const float *x = m.encoder(src, S, lens);
    layers::top8(m, head_logits(m, x, rows), rows, V, m.head_tmp.need((size_t)rows * V), m.topv.need((size_t)rows * 8),
                 (int32_t *)m.topi.need((size_t)rows * 8));
    m.dev->to_host(m.topv.get(), (size_t)rows * 8 * sizeof(float));
    m.dev->to_host(m.topi.get(), (size_t)rows * 8 * sizeof(int32_t));
    const float *pv = m.topv.get();
    const int32_t *pi = (const int32_t *)m.topi.get();
    ids.assign((size_t)R, Tensor{});
    probabilities.assign((size_t)R, Tensor{});
    for (int r = 0; r < R; r++) {
        ids[r].shape = probabilities[r].shape = {lens[r], top};
        for (int t = 0; t < lens[r]; t++) {
            const size_t row = ((size_t)t * R + r) * 8;
            ids[r].data.insert(ids[r].data.end(), pi + row, pi + row + top);
            probabilities[r].data.insert(probabilities[r].data.end(), pv + row, pv + row + top);
        }
    }
}

std::vector<Tensor> Model::pool(const std::vector<Sequence> &src, const PoolOptions &options) {
    Lease lease(*pool_);
    Session &m = *lease;
    if (!m.cfg.has_encoder()) throw Error("pool: a decoder-only model has no encoder");
    const int S = checked_sources(m, src, 0, "pool");
    const int R = (int)src.size(), D = m.cfg.d_model;
    std::vector<int32_t> lens;
    DeviceScope scope(m.dev.get());
    const float *x = m.encoder(src, S, lens);
    float *out = m.logits.need((size_t)R * D);
    layers::pool(m, x, S, R, lens.data(), options.pooling == Pooling::Mean, options.normalize, out);
    m.dev->to_host(out, (size_t)R * D * sizeof(float));
    return split_rows(out, R, D, std::vector<int32_t>(R, 1));
}

std::vector<Tensor> Model::logits(const std::vector<Sequence> &src, const std::vector<Sequence> &tgt) {
    Lease lease(*pool_);
    Session &m = *lease;
    const Config &c = m.cfg;
    const int D = c.d_model;
    if (c.architecture == Architecture::Encoder) {
        if (!tgt.empty()) throw Error("logits: an encoder-only model takes no target sequence");
        if (!m.w->gen_w) return encode_in(m, src);
        const int S = checked_sources(m, src, m.w->gen_rows, "logits");
        std::vector<int32_t> lens;
        DeviceScope scope(m.dev.get());
        const float *x = m.encoder(src, S, lens);
        return encoder_head(m, x, S, (int)src.size(), lens);
    }
    const bool ed = c.architecture == Architecture::EncoderDecoder;
    const std::vector<Sequence> &dec_in = ed ? tgt : src;
    if (ed && tgt.size() != src.size()) {
        throw Error("logits: " + std::to_string(src.size()) + " source sequences but " +
                    std::to_string(tgt.size()) + " target sequences");
    }
    if (!ed && !tgt.empty()) throw Error("logits: a decoder-only model takes its tokens as src only");
    m.check_tokens(dec_in, c.tgt_vocab_size, ed ? "target" : "input", 0);
    const int R = (int)dec_in.size();
    {
        int S = 0, T = 0;
        if (ed) for (auto &s : src) S = std::max(S, (int)s.size());
        for (auto &s : dec_in) T = std::max(T, (int)s.size());
        require_pass_fits(m, ed ? (int64_t)src.size() : 0, S, R, T, m.w->gen_rows, "logits");
    }
    DeviceScope scope(m.dev.get());
    // Encoder memory and its K|V per decoder layer.
    std::vector<int32_t> src_lens;
    int S = 0;
    const float *memory = nullptr;
    if (ed) {
        m.check_tokens(src, c.src_vocab_size, "source", 0);
        for (auto &s : src) S = std::max(S, (int)s.size());
        memory = m.encoder(src, S, src_lens);
        m.cross_kv.resize(m.w->dec.layers.size());
        m.attach(m.cross_kv);
        for (size_t l = 0; l < m.w->dec.layers.size(); l++) {
            layers::memory_kv(m, layers::Pass{}, m.w->dec.layers[l].attn("multihead_attn"), memory, S * R,
                              m.cross_kv[l].need((size_t)S * R * 2 * m.desc.kv_width));
        }
    }
    std::vector<int32_t> tokens, lens;
    const int T = pad_time_major(pointers(dec_in), c.pad_id, tokens, lens);
    const size_t n = (size_t)T * R * D;
    float *x = m.x0.need(n), *xa = m.x1.need(n);
    layers::embed(m, m.w->dec, tokens.data(), T, R, 0, x);
    Session::StackPass pass;
    pass.T = T;
    pass.R = R;
    pass.kv_len = lens.data();
    if (ed) {
        pass.cross_kv = [&](size_t l) -> const float * { return m.cross_kv[l].get(); };
        pass.cross_len = src_lens.data();
        pass.S = S;
    }
    pass.pos_bias = m.stack_bias(m.w->dec, true);
    m.stack(m.w->dec, true, x, xa, pass);
    m.final_norm(m.w->dec.final_norm, x, T * R);
    // All T·R rows in one projection (padding rows included), then per sequence.
    float *all = m.logits.need((size_t)T * R * m.w->gen_rows);
    m.project(x, T * R, D, all, false);
    m.dev->to_host(all, (size_t)T * R * m.w->gen_rows * sizeof(float));
    std::vector<Tensor> out = split_rows(all, R, m.w->gen_rows, lens);
    return out;
}

}  // namespace halformer
