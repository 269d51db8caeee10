// Multi-head attention: the Q|K|V projections, self-attention (causal or
// not, prefill or one decode step, rows found through a row map), attention
// over the encoder memory (one copy of a source's K|V read by its beams),
// and the backward of each. Heads are strided views: q (dk, T, H, R) over
// [M, ·] rows, K|V (dk, L, H, rows) over a cache or a fused projection.
#include "layers.h"

#include "hf_attention.h"
#include "hf_attention_causal.h"
#include "hf_attention_causal_decode.h"
#include "hf_attention_causal_decode_paged.h"
#include "hf_attention_decode.h"
#include "hf_attention_decode_paged.h"
#include "hf_attention_causal_window_softcap.h"
#include "hf_attention_causal_decode_window_softcap.h"
#include "hf_attention_causal_decode_paged_window_softcap.h"
#include "hf_attention_bias.h"
#include "hf_attention_causal_bias.h"
#include "hf_attention_causal_decode_bias.h"
#include "hf_attention_causal_decode_paged_bias.h"
#include "hf_position_bias.h"
#include "hf_position_bias_causal.h"
#include "hf_rope.h"

HF_DEVICE_KERNELS(hf_attention)
HF_DEVICE_KERNELS(hf_attention_causal)
HF_DEVICE_KERNELS(hf_attention_causal_decode)
HF_DEVICE_KERNELS(hf_attention_causal_decode_paged)
HF_DEVICE_KERNELS(hf_attention_decode)
HF_DEVICE_KERNELS(hf_attention_decode_paged)
HF_DEVICE_KERNELS(hf_attention_causal_window_softcap)
HF_DEVICE_KERNELS(hf_attention_causal_decode_window_softcap)
HF_DEVICE_KERNELS(hf_attention_causal_decode_paged_window_softcap)
HF_DEVICE_KERNELS(hf_attention_bias)
HF_DEVICE_KERNELS(hf_attention_causal_bias)
HF_DEVICE_KERNELS(hf_attention_causal_decode_bias)
HF_DEVICE_KERNELS(hf_attention_causal_decode_paged_bias)
HF_DEVICE_KERNELS(hf_position_bias)
HF_DEVICE_KERNELS(hf_position_bias_causal)
HF_DEVICE_KERNELS(hf_rope)
#ifdef HALFORMER_HAS_TRAINING
#include "hf_attention_backward.h"
#include "hf_attention_causal_backward.h"
#include "hf_attention_causal_train.h"
#include "hf_attention_train.h"
HF_DEVICE_KERNELS(hf_attention_backward)
HF_DEVICE_KERNELS(hf_attention_causal_backward)
HF_DEVICE_KERNELS(hf_attention_causal_train)
HF_DEVICE_KERNELS(hf_attention_train)
#endif

#include "causal_chunks.h"

#include <cmath>

namespace halformer {
namespace layers {
namespace {

// H query heads of dk: queries and outputs are D = H·dk wide (the
// description's attn_width: d_model but for T5 and Llama's head_dim); Hkv
// key and value heads, K = Hkv·dk wide each (grouped-query attention: the
// kernels read key/value head h / (H / Hkv) for query head h).
struct Heads {
    int D, H, dk, Hkv, K;
    float scale;
    // (The stack's heads where the layer says: Marian's decoder may have
    // its own; attn_width and kv_width are every stack's.)
    Heads(const Description &d, const LayerIO &io)
        : D(d.attn_width), H(io.dims ? io.dims->heads : d.heads), dk(io.dims ? io.dims->head_dim : d.head_dim),
          Hkv(io.dims ? io.dims->kv_heads : d.kv_heads), K(d.kv_width),
          scale(io.dims ? io.dims->scale : d.attention_scale) {}
    // Queries (or outputs): T positions of R rows, row stride `stride`.
    View q(const float *p, int T, int R, int stride) const {
        return View(p, {{dk, 1}, {T, R * stride}, {H, dk}, {R, stride}});
    }
    // Keys or values: L positions of `rows` rows, row stride `stride`.
    View kv(const float *p, int L, int rows, int stride) const {
        return View(p, {{dk, 1}, {L, rows * stride}, {Hkv, dk}, {rows, stride}});
    }
    // Keys or values of L positions anywhere among `rows` cache rows: a
    // block table gives each position's row (the position dimension has no
    // stride of its own).
    View kv_listed(const float *p, int L, int rows, int stride) const {
        return View(p, {{dk, 1}, {L, 0}, {Hkv, dk}, {rows, stride}});
    }
    // The gradient of K|V together: (dk, 2, T, H, R).
    View dkv(const float *p, int T, int R, int stride) const {
        return View(p, {{dk, 1}, {2, K}, {T, R * stride}, {Hkv, dk}, {R, stride}});
    }
    // `heads` heads of M rows (row stride `stride`) as RoPE's (i, p, h, m)
    // pairs: dimension i turns with i + dk/2 (transformers' rotate_half).
    View pairs(const float *p, int heads, int M, int stride) const {
        return View(p, {{dk / 2, 1}, {2, dk / 2}, {heads, dk}, {M, stride}});
    }
};

// Cross-attention over the paged cache: source g's positions through its
// block table (cross_table + g·cross_stride). One step (T = 1): the G beams of a source are G
// queries of one sequence over its one copy of K|V (rows r = g·G + k); a
// prefill chunk (T > 1, G = 1): T queries of each row.
void listed_cross_attention(Kernels &k, const Heads &h, const LayerIO &io) {
    const CrossMemory &c = io.cross;
    const int G = c.group, Bs = io.R / G, D = h.D, K = h.K;
    if (io.R % G || (G > 1 && io.T != 1)) throw Error("internal: grouped cross-attention needs one step of whole groups");
    View vq = io.T == 1 ? View(io.qc, {{h.dk, 1}, {G, D}, {h.H, h.dk}, {Bs, G * D}}) : h.q(io.qc, io.T, io.R, D);
    View vo = io.T == 1 ? View(io.attc, {{h.dk, 1}, {G, D}, {h.H, h.dk}, {Bs, G * D}}) : h.q(io.attc, io.T, io.R, D);
    View vk = h.kv_listed(c.kv, c.S, io.rows.pool_rows, 2 * K), vv = h.kv_listed(c.kv + K, c.S, io.rows.pool_rows, 2 * K);
    const int NB = (c.S + kPageRows - 1) / kPageRows;
    if (io.rows.cross_stride < NB) throw Error("internal: block tables shorter than the source");
    View vl(c.len, {{Bs, 1}}, true), vtable(io.rows.cross_table, {{NB, 1}, {Bs, io.rows.cross_stride}}, true);
    k.run("attention", [&] {
        return HF_PICK(k.device(), hf_attention_decode_paged)(vq.get(), vk.get(), vv.get(), vl.get(), 0, h.scale,
                                                              vtable.get(), vo.get());
    });
}

// Rotates `heads` heads of M rows by their positions (io.positions): from
// `in` (row stride in_stride) to `out` (row stride out_stride), by the
// layer's table; where the description switches tables by position
// (rope_long), each run of rows on one side of the switch by its own.
void rotate(Kernels &k, const Heads &h, const LayerIO &io, const float *in, int in_stride, int heads, float *out,
            int out_stride) {
    const int M = io.M();
    if (!io.positions) throw Error("internal: rotary positions without the rows' positions");
    const std::vector<float> &layer = io.inv_freq ? *io.inv_freq : k.desc.inv_freq;
    auto run = [&](int first, int n, const std::vector<float> &freq) {
        if ((int)freq.size() != h.dk / 2) throw Error("internal: a rope table of another head size");
        View vx = h.pairs(in + (size_t)first * in_stride, heads, n, in_stride);
        View vy = h.pairs(out + (size_t)first * out_stride, heads, n, out_stride);
        View vp(io.positions + first, {{n, 1}}, true), vf(freq.data(), {{h.dk / 2, 1}});
        k.run("rope", [&] { return HF_PICK(k.device(), hf_rope)(vx.get(), vp.get(), vf.get(), vy.get()); });
    };
    const Description::RopeSwitch &sw = k.desc.rope_long;
    if (sw.from <= 0) return run(0, M, layer);
    for (int a = 0, b; a < M; a = b) {
        const bool past = io.positions[a] >= sw.from;
        for (b = a + 1; b < M && (io.positions[b] >= sw.from) == past;) b++;
        run(a, b - a, past ? k.desc.rope_table(sw.table) : layer);
    }
}

}  // namespace

std::vector<ProjectionRows> self_projection_rows(const Description &d) {
    const int A = d.attn_width, K = d.kv_width;
    // Q and K normalized before their rotation: each apart, then V.
    if (d.qk_norm != Description::QkNorm::None) return {{0, A}, {A, K}, {A + K, K}};
    // Rotary: Q and K together (both are rotated), then V; else all three.
    if (d.rotary()) return {{0, A + K}, {A + K, K}};
    return {{0, A + 2 * K}};
}

QK project_qkv(Kernels &k, const Pass &p, const AttnW &w, const float *in, LayerIO &io) {
    const Heads h(k.desc, io);
    const int D = k.cfg.d_model, A = h.D, K = h.K, M = io.M(), QW = A + 2 * K;
    if (p.train) throw Error("training: normalized queries and keys have no backward kernels (inference only)");
    const Mat x{in, M, D, D};
    const auto parts = self_projection_rows(k.desc);
    if (parts.size() != 3) throw Error("internal: project_qkv of a family whose Q and K are not normalized");
    QK out{io.rope_in, io.rope_in + (size_t)M * A};
    auto rows = [&](int part, int n, float *y, int stride) {
        const int first = parts[(size_t)part].first;
        linear(k, p, "linear", x, w.in_w + (size_t)first * D, w.in_b ? w.in_b + first : nullptr, n, y, stride);
    };
    rows(0, A, out.q, A);
    rows(1, K, out.k, K);
    rows(2, K, io.q + A + K, QW);
    return out;
}

QK qk_norm(Kernels &k, const NormW &qn, const NormW &kn, const QK &x, bool per_head, LayerIO &io) {
    const Heads h(k.desc, io);
    const int M = io.M();
    if (!io.qk_normed) throw Error("internal: qk_norm without its buffer");
    QK out{io.qk_normed, io.qk_normed + (size_t)M * h.D};
    if (per_head) {
        layer_norm(k, qn, x.q, out.q, M * h.H, h.dk);
        layer_norm(k, kn, x.k, out.k, M * h.Hkv, h.dk);
    } else {
        layer_norm(k, qn, x.q, out.q, M, h.D);
        layer_norm(k, kn, x.k, out.k, M, h.K);
    }
    return out;
}

void rotate_qk(Kernels &k, const QK &x, LayerIO &io) {
    const Heads h(k.desc, io);
    const int A = h.D, K = h.K, M = io.M(), QW = A + 2 * K;
    if (!k.desc.rotary()) throw Error("internal: rotate_qk in a model without rotary positions");
    rotate(k, h, io, x.q, A, h.H, io.q, QW);
    rotate(k, h, io, x.k, K, h.Hkv, io.q + A, QW);
    if (io.rows.write_rows) scatter_rows(k, io.q + A, 2 * K, M, io.rows.write_rows, io.kv, io.rows.pool_rows, QW);
}

void attention_output(Kernels &k, const Pass &p, const AttnW &w, const LayerIO &io, const float *res, float *out) {
    const int D = k.cfg.d_model, A = k.desc.attn_width;
    linear(k, p, "linear", Mat{io.att, io.M(), A, A}, w.out_w, w.out_b, D, out, D, res);
}

void cross_attention_output(Kernels &k, const Pass &p, const AttnW &w, const LayerIO &io, const float *res,
                            float *out) {
    const int D = k.cfg.d_model, A = k.desc.attn_width;
    linear(k, p, "linear", Mat{io.attc, io.M(), A, A}, w.out_w, w.out_b, D, out, D, res);
}

void self_projections(Kernels &k, const Pass &p, const AttnW &w, const float *in, LayerIO &io) {
    const Heads h(k.desc, io);
    const int D = k.cfg.d_model, A = h.D, K = h.K, M = io.M(), QW = A + 2 * K;
    const Mat x{in, M, D, D};
    // Q|K|V side by side in io.q ([M, A + 2K]): attention reads the queries
    // there, and a pass over whole sequences its keys and values (io.kv =
    // io.q + A); the paged cache's go on to their rows.
    if (!k.desc.rotary()) {
        linear(k, p, "linear", x, w.in_w, w.in_b, QW, io.q, QW);
    } else {
        if (p.train) throw Error("training: rotary positions have no backward kernels (inference only)");
        // Q|K unrotated, turned by position into io.q in one call (the same
        // rows and positions for both), then V.
        const auto parts = self_projection_rows(k.desc);
        linear(k, p, "linear", x, w.in_w, w.in_b, A + K, io.rope_in, A + K);
        if (h.H * h.dk == A && h.Hkv * h.dk == K) {
            rotate(k, h, io, io.rope_in, A + K, h.H + h.Hkv, io.q, QW);
        } else {
            rotate(k, h, io, io.rope_in, A + K, h.H, io.q, QW);
            rotate(k, h, io, io.rope_in + A, A + K, h.Hkv, io.q + A, QW);
        }
        const int v = parts[1].first;
        linear(k, p, "linear", x, w.in_w + (size_t)v * D, w.in_b ? w.in_b + v : nullptr, K, io.q + A + K, QW);
    }
    if (io.rows.write_rows) scatter_rows(k, io.q + A, 2 * K, M, io.rows.write_rows, io.kv, io.rows.pool_rows, QW);
}

void position_bias(Kernels &k, const StackW &s, bool causal, float *out) {
    const int H = k.desc.heads, B = k.desc.relative_buckets, R = k.desc.relative_max_distance;
    View w(s.rel_bias, {{H, 1}, {B, H}}), vo(out, {{2 * R + 1, 1}, {H, 2 * R + 1}});
    vo.dim[0].min = -R;  // entry n: relative position n (key − query)
    auto fn = causal ? HF_PICK(k.device(), hf_position_bias_causal) : HF_PICK(k.device(), hf_position_bias);
    k.run("position_bias", [&] { return fn(w.get(), R, vo.get()); });
}

size_t position_bias_size(const Description &d) {
    return (size_t)(2 * d.relative_max_distance + 1) * d.heads;
}

// A self-attention call's views: queries, keys and values (dense, or
// listed through the block tables of a paged cache), outputs, lengths.
struct SelfViews {
    View q, k, v, o, len, table;
    bool listed = false;  // keys through block tables (one decoding step)
};

SelfViews self_views(Kernels &k, const Pass &p, const Heads &h, bool causal, const LayerIO &io) {
    const int T = io.T, R = io.R, L = io.start + T;
    const int NB = (L + kPageRows - 1) / kPageRows;
    SelfViews s{h.q(io.q, T, R, h.D + 2 * h.K), h.kv(io.kv, L, io.cache_rows, io.kv_stride),
                h.kv(io.kv + h.K, L, io.cache_rows, io.kv_stride), h.q(io.att, T, R, h.D),
                View(io.kv_len, {{R, 1}}, true), View(io.rows.block_table, {{NB, 1}, {R, io.rows.table_stride}}, true)};
    s.listed = io.rows.block_table && causal;
    if (s.listed && T > 1) {
        // A prefill chunk: its rows' keys and values gathered into one dense
        // time-major block (dense_rows: position t of row r at t·R + r),
        // then the prefill kernels (they tile queries and keys; a row list
        // per key would defeat that).
        const int W = io.kv_stride;
        layers::gather_rows(k, io.kv, W, io.rows.pool_rows, io.rows.dense_rows, L * R, io.rows.dense);
        s.k = h.kv(io.rows.dense, L, R, W);
        s.v = h.kv(io.rows.dense + h.K, L, R, W);
        s.listed = false;
    }
    if (s.listed) {
        // Position t of row r through its block table in the paged cache
        // (one decoding step: T = 1).
        if (io.rows.table_stride < NB) throw Error("internal: block tables shorter than the keys");
        s.k = h.kv_listed(io.kv, L, io.rows.pool_rows, io.kv_stride);
        s.v = h.kv_listed(io.kv + h.K, L, io.rows.pool_rows, io.kv_stride);
    }
    return s;
}

// One call, or a causal prefill's call per chunk of queries, each over the
// keys its queries can see (layers/causal_chunks.h): the same bits, without
// the key blocks every query of a chunk masks. call(q, k, v, o, q_offset).
template <typename Call>
void run_query_chunks(Kernels &k, bool causal, int T, int start, SelfViews &s, Call &&call) {
    if (!causal || T == 1) return k.run("attention", [&] { return call(s.q, s.k, s.v, s.o, start); });
    for (const QueryChunk &c : causal_query_chunks(T)) {
        View q = s.q.slice(1, c.begin, c.end - c.begin), o = s.o.slice(1, c.begin, c.end - c.begin);
        View kc = s.k.slice(1, 0, start + c.end), vc = s.v.slice(1, 0, start + c.end);
        k.run("attention", [&] { return call(q, kc, vc, o, start + c.begin); });
    }
}

void self_attention(Kernels &k, const Pass &p, bool causal, LayerIO &io) {
    const Heads h(k.desc, io);
    SelfViews s = self_views(k, p, h, causal, io);
    const bool listed = s.listed;
    View &vl = s.len, &vtable = s.table;
    auto run = [&](auto call) { run_query_chunks(k, causal, io.T, io.start, s, call); };
    const bool step = io.T == 1;
    if (io.pos_bias) {
        if (p.train) throw Error("training: no attention kernels with a relative-position bias (T5 is inference only)");
        const int Rb = k.desc.relative_max_distance;
        View vb(io.pos_bias, {{2 * Rb + 1, 1}, {h.H, 2 * Rb + 1}});
        vb.dim[0].min = -Rb;
        // (Listed, the bias is by the query's position: `start` for every
        // row. T5 decodes behind an encoder, every prefix of one length.)
        // The encoder's (bidirectional) always takes the prefill kernel.
        auto fn = listed ? nullptr
                  : !causal ? HF_PICK(k.device(), hf_attention_bias)
                  : step    ? HF_PICK(k.device(), hf_attention_causal_decode_bias)
                            : HF_PICK(k.device(), hf_attention_causal_bias);
        return run([&](View &q, View &kk, View &v, View &o, int offset) {
            if (listed) {
                return HF_PICK(k.device(), hf_attention_causal_decode_paged_bias)(
                    q.get(), kk.get(), v.get(), vl.get(), offset, h.scale, vtable.get(), vb.get(), o.get());
            }
            return fn(q.get(), kk.get(), v.get(), vl.get(), offset, h.scale, vb.get(), o.get());
        });
    }
    const int window = io.window;
    const float cap = k.desc.attn_softcap;
    if (cap > 0) {
        // Gemma 2: each scaled score capped, cap·tanh(s/cap), in every layer
        // (window 0: every key).
        if (!causal) throw Error("internal: soft-capped attention is causal self-attention only");
        if (p.train) throw Error("training: soft-capped attention has no backward kernels (inference only)");
        auto fn = step ? HF_PICK(k.device(), hf_attention_causal_decode_window_softcap)
                       : HF_PICK(k.device(), hf_attention_causal_window_softcap);
        return run([&](View &q, View &kk, View &v, View &o, int offset) {
            if (listed) {
                return HF_PICK(k.device(), hf_attention_causal_decode_paged_window_softcap)(
                    q.get(), kk.get(), v.get(), vl.get(), offset, h.scale, vtable.get(), window, cap, o.get());
            }
            return fn(q.get(), kk.get(), v.get(), vl.get(), offset, h.scale, window, cap, o.get());
        });
    }
    if (window > 0 && p.train) {
        throw Error("training: a sliding window has no backward kernels (inference only)");
    }
    if (causal && !p.train) {
        // The causal kernels take the window at run time (Mistral, Gemma's
        // local layers: each query sees its `window` most recent keys; 0:
        // every key).
        auto fn = step ? HF_PICK(k.device(), hf_attention_causal_decode) : HF_PICK(k.device(), hf_attention_causal);
        return run([&](View &q, View &kk, View &v, View &o, int offset) {
            if (listed) {
                return HF_PICK(k.device(), hf_attention_causal_decode_paged)(
                    q.get(), kk.get(), v.get(), vl.get(), offset, h.scale, vtable.get(), window, o.get());
            }
            return fn(q.get(), kk.get(), v.get(), vl.get(), offset, h.scale, window, o.get());
        });
    }
    if (listed) throw Error("internal: the paged KV cache is read by causal self-attention only");
    auto fn = step ? HF_PICK(k.device(), hf_attention_decode) : HF_PICK(k.device(), hf_attention);
    if (p.train) {
#ifdef HALFORMER_HAS_TRAINING
        fn = causal ? HF_PICK(k.device(), hf_attention_causal_train) : HF_PICK(k.device(), hf_attention_train);
#else
        no_training();
#endif
    }
    run([&](View &q, View &kk, View &v, View &o, int offset) {
        return fn(q.get(), kk.get(), v.get(), vl.get(), offset, h.scale, o.get());
    });
}

void memory_kv(Kernels &k, const Pass &p, const AttnW &w, const float *memory, int rows, float *out) {
    const int D = k.cfg.d_model, A = k.desc.attn_width, K = k.desc.kv_width;
    linear(k, p, "linear", Mat{memory, rows, D, D}, w.in_w + (size_t)A * D, w.in_b + A, 2 * K, out, 2 * K, nullptr,
           Shape::Prefill);
}

void cross_attention(Kernels &k, const Pass &p, const AttnW &w, const float *in, LayerIO &io) {
    const Heads h(k.desc, io);
    const CrossMemory &c = io.cross;
    if (p.train) memory_kv(k, p, w, c.memory, c.S * c.rows, io.kv_mem);
    const int Dm = k.cfg.d_model;
    linear(k, p, "linear", Mat{in, io.M(), Dm, Dm}, w.in_w, w.in_b, h.D, io.qc, h.D);
    if (!p.train && io.rows.cross_table) return listed_cross_attention(k, h, io);
    const float *kv = p.train ? io.kv_mem : c.kv;
    View vq = h.q(io.qc, io.T, io.R, h.D), vk = h.kv(kv, c.S, c.rows, 2 * h.K), vv = h.kv(kv + h.K, c.S, c.rows, 2 * h.K);
    View vo = h.q(io.attc, io.T, io.R, h.D), vl(c.len, {{p.train ? c.rows : io.R, 1}}, true);
    // One query a row takes the step kernel only after a cache (decoding).
    // Teacher-forced targets of one token take the prefill kernel, as they
    // would beside longer targets: the two sum a score's products in other
    // orders (BatchInvariance.EncoderAndLogitsAreTheSameBitsAlone).
    auto fn = io.T == 1 && io.start > 0 ? HF_PICK(k.device(), hf_attention_decode) : HF_PICK(k.device(), hf_attention);
    if (p.train) {
#ifdef HALFORMER_HAS_TRAINING
        fn = HF_PICK(k.device(), hf_attention_train);
#else
        no_training();
#endif
    }
    k.run("attention", [&] { return fn(vq.get(), vk.get(), vv.get(), vl.get(), 0, h.scale, vo.get()); });
}

#ifdef HALFORMER_HAS_TRAINING

void self_attention_backward(Kernels &k, bool causal, const LayerIO &io, const float *datt, const AttnGrad &g) {
    const Heads h(k.desc, io);
    const int T = io.T, R = io.R, D = h.D, W = h.D + 2 * h.K;
    View vq = h.q(io.q, T, R, W), vk = h.kv(io.q + D, T, R, W), vv = h.kv(io.q + D + h.K, T, R, W);
    View vo = h.q(io.att, T, R, D), vdo = h.q(datt, T, R, D), vl(io.kv_len, {{R, 1}}, true);
    View vdq = h.q(g.dq, T, R, g.dq_stride), vdkv = h.dkv(g.dkv, T, R, g.dkv_stride);
    auto fn = causal ? HF_PICK(k.device(), hf_attention_causal_backward) : HF_PICK(k.device(), hf_attention_backward);
    k.run("attention_backward", [&] {
        return fn(vq.get(), vk.get(), vv.get(), vo.get(), vdo.get(), vl.get(), 0, h.scale, vdq.get(), vdkv.get());
    });
}

void cross_attention_backward(Kernels &k, const LayerIO &io, const float *datt, const AttnGrad &g) {
    const Heads h(k.desc, io);
    const CrossMemory &c = io.cross;
    const int T = io.T, R = io.R, D = h.D;
    View vq = h.q(io.qc, T, R, D), vo = h.q(io.attc, T, R, D), vdo = h.q(datt, T, R, D);
    View vk = h.kv(io.kv_mem, c.S, c.rows, 2 * h.K), vv = h.kv(io.kv_mem + h.K, c.S, c.rows, 2 * h.K);
    View ml(c.len, {{c.rows, 1}}, true), vdq = h.q(g.dq, T, R, g.dq_stride);
    View vdkv = h.dkv(g.dkv, c.S, c.rows, g.dkv_stride);
    k.run("attention_backward", [&] {
        return HF_PICK(k.device(), hf_attention_backward)(vq.get(), vk.get(), vv.get(), vo.get(), vdo.get(), ml.get(),
                                                          0, h.scale, vdq.get(), vdkv.get());
    });
}

#endif  // HALFORMER_HAS_TRAINING

}  // namespace layers
}  // namespace halformer
