// Forward passes: embedding, encoder and decoder layers (post-LN or pre-LN),
// final norms and the output projection. Activations are time-major
// (row m = t·R + r for R sequences), so the K|V of new positions of every
// sequence are one dense block of the cache and a linear kernel writes them
// in place. Every step is one kernel call; this file only lays out views.
#include "model_impl.h"

#include "hf_attention.h"
#include "hf_attention_causal.h"
#include "hf_attention_causal_decode.h"
#include "hf_attention_causal_decode_rows.h"
#include "hf_attention_decode.h"
#include "hf_attention_decode_rows.h"
#include "hf_embedding.h"
#include "hf_embedding_concat.h"
#include "hf_embedding_learned.h"
#include "hf_ffn.h"
#include "hf_ffn_gelu.h"
#include "hf_ffn_gelu_residual.h"
#include "hf_ffn_gelu_tanh.h"
#include "hf_ffn_gelu_tanh_residual.h"
#include "hf_ffn_residual.h"
#include "hf_layer_norm.h"
#include "hf_layer_norm_residual.h"
#include "hf_linear.h"
#include "hf_linear_dot.h"
#include "hf_linear_dot_gelu.h"
#include "hf_linear_dot_gelu_tanh.h"
#include "hf_linear_dot_relu.h"
#include "hf_linear_dot_residual.h"
#include "hf_linear_residual.h"
#include "hf_log_softmax.h"
#include "hf_output_head.h"

HF_DEVICE_KERNELS(hf_attention)
HF_DEVICE_KERNELS(hf_attention_causal)
HF_DEVICE_KERNELS(hf_attention_causal_decode)
HF_DEVICE_KERNELS(hf_attention_causal_decode_rows)
HF_DEVICE_KERNELS(hf_attention_decode)
HF_DEVICE_KERNELS(hf_attention_decode_rows)
HF_DEVICE_KERNELS(hf_embedding)
HF_DEVICE_KERNELS(hf_embedding_concat)
HF_DEVICE_KERNELS(hf_embedding_learned)
HF_DEVICE_KERNELS(hf_ffn)
HF_DEVICE_KERNELS(hf_ffn_gelu)
HF_DEVICE_KERNELS(hf_ffn_gelu_residual)
HF_DEVICE_KERNELS(hf_ffn_gelu_tanh)
HF_DEVICE_KERNELS(hf_ffn_gelu_tanh_residual)
HF_DEVICE_KERNELS(hf_ffn_residual)
HF_DEVICE_KERNELS(hf_layer_norm)
HF_DEVICE_KERNELS(hf_layer_norm_residual)
HF_DEVICE_KERNELS(hf_linear)
HF_DEVICE_KERNELS(hf_linear_dot)
HF_DEVICE_KERNELS(hf_linear_dot_gelu)
HF_DEVICE_KERNELS(hf_linear_dot_gelu_tanh)
HF_DEVICE_KERNELS(hf_linear_dot_relu)
HF_DEVICE_KERNELS(hf_linear_dot_residual)
HF_DEVICE_KERNELS(hf_linear_residual)
HF_DEVICE_KERNELS(hf_log_softmax)
HF_DEVICE_KERNELS(hf_output_head)

#include <cmath>
#include <cstring>

namespace halformer {

void Model::Impl::set_device(Device d) {
    if (d == dev->device()) return;
    release_buffers();  // from the old device's memory
    dev = std::make_unique<DeviceContext>(d);
    wire();
}

// Up to this many rows a projection uses the decode shape class (one-row
// register blocks): measured 2026-11-22 (bench/kernels_bench.cpp), 1 × 512 →
// 2048 runs at 29 GB/s with it against 21 GB/s with the prefill blocks; at 4
// rows they tie; at 32 the prefill blocks are 1.8× faster.
constexpr int kDotRows = 4;

void Model::Impl::check_tokens(const std::vector<Sequence> &seqs, int vocab, const char *what,
                               int extra_positions) const {
    if (seqs.empty()) throw Error(std::string(what) + ": empty batch");
    for (size_t b = 0; b < seqs.size(); b++) {
        const auto &s = seqs[b];
        if (s.empty()) throw Error(std::string(what) + " sequence " + std::to_string(b) + " is empty");
        if ((int64_t)s.size() + extra_positions > cfg.max_positions) {
            throw Error(std::string(what) + " sequence " + std::to_string(b) + " needs " +
                        std::to_string(s.size() + extra_positions) + " positions; the model has max_positions = " +
                        std::to_string(cfg.max_positions));
        }
        for (size_t t = 0; t < s.size(); t++) {
            if (s[t] < 0 || s[t] >= vocab) {
                throw Error(std::string(what) + " token id " + std::to_string(s[t]) + " at position " +
                            std::to_string(t) + " of sequence " + std::to_string(b) +
                            " is out of range [0, " + std::to_string(vocab) + ")");
            }
        }
    }
}

void Model::Impl::embed(const StackW &s, const int32_t *tokens, int T, int R, int start, float *x) {
    const int D = cfg.d_model;
    // The kernel reads tokens as (t, b) with unit stride in t.
    std::vector<int32_t> by_row((size_t)T * R);
    for (int t = 0; t < T; t++) {
        for (int r = 0; r < R; r++) by_row[(size_t)r * T + t] = tokens[(size_t)t * R + r];
    }
    View tok(by_row.data(), {{T, 1}, {R, T}}, true);
    View table(s.embed, {{D, 1}, {s.vocab, D}});
    View out(x, {{D, 1}, {T, R * D}, {R, D}});
    const float scale = cfg.scale_embeddings ? std::sqrt((float)D) : 1.0f;
    switch (cfg.positional_encoding) {
    case Positional::Sinusoidal:
        run("embedding", [&] { return HF_PICK(device(), hf_embedding)(tok.get(), table.get(), start, scale, out.get()); });
        break;
    case Positional::SinusoidalConcat:
        run("embedding", [&] { return HF_PICK(device(), hf_embedding_concat)(tok.get(), table.get(), start, scale, out.get()); });
        break;
    case Positional::Learned: {
        View pos(s.pos, {{D, 1}, {cfg.max_positions, D}});
        run("embedding", [&] {
            return HF_PICK(device(), hf_embedding_learned)(tok.get(), table.get(), start, scale, pos.get(), out.get());
        });
        break;
    }
    }
}

namespace {

using LinearFn = int (*)(halide_buffer_t *, halide_buffer_t *, halide_buffer_t *, halide_buffer_t *);
using FFNFn = int (*)(halide_buffer_t *, halide_buffer_t *, halide_buffer_t *, halide_buffer_t *,
                      halide_buffer_t *, halide_buffer_t *);
using FFNResFn = int (*)(halide_buffer_t *, halide_buffer_t *, halide_buffer_t *, halide_buffer_t *,
                         halide_buffer_t *, halide_buffer_t *, halide_buffer_t *);

FFNFn ffn_kernel(Device d, Act a) {
    return a == Act::ReLU ? HF_PICK(d, hf_ffn) : a == Act::GELU ? HF_PICK(d, hf_ffn_gelu) : HF_PICK(d, hf_ffn_gelu_tanh);
}
FFNResFn ffn_residual_kernel(Device d, Act a) {
    return a == Act::ReLU   ? HF_PICK(d, hf_ffn_residual)
           : a == Act::GELU ? HF_PICK(d, hf_ffn_gelu_residual)
                            : HF_PICK(d, hf_ffn_gelu_tanh_residual);
}

LinearFn linear_dot_act_kernel(Device d, Act a) {
    return a == Act::ReLU   ? HF_PICK(d, hf_linear_dot_relu)
           : a == Act::GELU ? HF_PICK(d, hf_linear_dot_gelu)
                            : HF_PICK(d, hf_linear_dot_gelu_tanh);
}

}  // namespace

void Model::Impl::layer(const LayerW &L, bool causal, float *&x, float *&x_alt, int T, int R, int start,
                        float *kv, const int32_t *kv_len, const float *cross_mem,
                        const int32_t *cross_len, int S, int cross_group, const RowMap &rows) {
    const int D = cfg.d_model, H = cfg.num_heads, dk = D / H, F = cfg.d_ff, M = T * R;
    const float eps = cfg.layer_norm_eps, scale = 1.0f / std::sqrt((float)dk);
    const bool pre = cfg.norm_first;
    float *hb = h.need((size_t)M * D), *qb = q.need((size_t)M * D), *ab = a.need((size_t)M * D),
          *yb = y.need((size_t)M * D);
    auto act = [&](float *p) { return View(p, {{D, 1}, {M, D}}); };
    auto norm = [&](const NormW &n, float *in, float *out) {
        View vi = act(in), vo = act(out), g(n.g, {{D, 1}}), b(n.b, {{D, 1}});
        run("layer_norm", [&] { return HF_PICK(device(), hf_layer_norm)(vi.get(), g.get(), b.get(), eps, vo.get()); });
    };
    auto add_norm = [&](const NormW &n, float *in, float *res, float *out) {
        View vi = act(in), vr = act(res), vo = act(out), g(n.g, {{D, 1}}), b(n.b, {{D, 1}});
        run("layer_norm", [&] {
            return HF_PICK(device(), hf_layer_norm_residual)(vi.get(), g.get(), b.get(), eps, vr.get(), vo.get());
        });
    };
    auto linear = [&](const char *name, const float *in, const float *w, const float *bias, int N,
                      float *out, int out_stride) {
        if (lowp()) return linear_lowp(name, in, M, D, w, N, D, bias, nullptr, nullptr, out, out_stride);
        View vx(in, {{D, 1}, {M, D}}), vw(w, {{D, 1}, {N, D}}), vb(bias, {{N, 1}}),
            vy(out, {{N, 1}, {M, out_stride}});
        auto fn = M <= kDotRows ? HF_PICK(device(), hf_linear_dot) : HF_PICK(device(), hf_linear);
        run(name, [&] { return fn(vx.get(), vw.get(), vb.get(), vy.get()); });
    };
    // Output projection + residual + norm (post-LN) or + residual (pre-LN):
    // x_alt ← x + Wo·a (+ norm), then swap.
    auto out_proj = [&](const AttnW &w, const NormW &n) {
        View va = act(ab), vw(w.out_w, {{D, 1}, {D, D}}), vb(w.out_b, {{D, 1}});
        if (lowp() && pre) {
            linear_lowp("linear", ab, M, D, w.out_w, D, D, w.out_b, nullptr, x, x_alt, D);
        } else if (lowp()) {
            linear_lowp("linear", ab, M, D, w.out_w, D, D, w.out_b, nullptr, nullptr, yb, D);
            add_norm(n, yb, x, x_alt);
        } else if (pre) {
            View vr = act(x), vo = act(x_alt);
            auto fn = M <= kDotRows ? HF_PICK(device(), hf_linear_dot_residual) : HF_PICK(device(), hf_linear_residual);
            run("linear", [&] { return fn(va.get(), vw.get(), vb.get(), vr.get(), vo.get()); });
        } else {
            View vo = act(yb);
            auto fn = M <= kDotRows ? HF_PICK(device(), hf_linear_dot) : HF_PICK(device(), hf_linear);
            run("linear", [&] { return fn(va.get(), vw.get(), vb.get(), vo.get()); });
            add_norm(n, yb, x, x_alt);
        }
        std::swap(x, x_alt);
    };
    // q (d, i, h, r) over a (D, M) buffer; k/v over a (2D, CR, L) cache.
    const int CR = rows.cache_rows ? rows.cache_rows : R;
    if (CR < R) throw Error("internal: a cache of fewer rows than the batch");
    auto qview = [&](float *p) { return View(p, {{dk, 1}, {T, R * D}, {H, dk}, {R, D}}); };
    auto kvview = [&](const float *p, int L) { return View(p, {{dk, 1}, {L, CR * 2 * D}, {H, dk}, {CR, 2 * D}}); };

    // Self-attention.
    const float *in = x;
    if (pre) {
        norm(L.self_norm, x, hb);
        in = hb;
    }
    linear("linear", in, L.self.in_w, L.self.in_b, D, qb, D);
    linear("linear", in, L.self.in_w + (size_t)D * D, L.self.in_b + D, 2 * D,
           kv + (size_t)start * CR * 2 * D, 2 * D);
    {
        View vq = qview(qb), vk = kvview(kv, start + T), vv = kvview(kv + D, start + T), vo = qview(ab);
        View vl(kv_len, {{R, 1}}, true);
        if (rows.kv_rows && causal && T == 1) {
            View vrows(rows.kv_rows, {{start + T, 1}, {R, rows.kv_rows_stride}}, true);
            run("attention", [&] {
                return HF_PICK(device(), hf_attention_causal_decode_rows)(vq.get(), vk.get(), vv.get(), vl.get(), start,
                                                                          scale, vrows.get(), vo.get());
            });
        } else {
            auto fn = T == 1 ? (causal ? HF_PICK(device(), hf_attention_causal_decode) : HF_PICK(device(), hf_attention_decode))
                             : (causal ? HF_PICK(device(), hf_attention_causal) : HF_PICK(device(), hf_attention));
            run("attention", [&] { return fn(vq.get(), vk.get(), vv.get(), vl.get(), start, scale, vo.get()); });
        }
    }
    out_proj(L.self, L.self_norm);

    // Cross-attention over the encoder memory (its K|V computed once).
    if (cross_mem) {
        in = x;
        if (pre) {
            norm(L.cross_norm, x, hb);
            in = hb;
        }
        linear("linear", in, L.cross.in_w, L.cross.in_b, D, qb, D);
        if (cross_group > 1 || rows.cross_rows) {
            // One query per beam: the G beams of source s are G queries of
            // sequence s over its one copy of K|V (rows r = s·G + g).
            if (T != 1 || R % cross_group) throw Error("internal: grouped cross-attention needs one step of whole groups");
            const int G = cross_group, Bs = R / G, Bm = rows.cross_rows ? rows.cross_sources : Bs;
            auto gview = [&](float *p) { return View(p, {{dk, 1}, {G, D}, {H, dk}, {Bs, G * D}}); };
            auto mview = [&](const float *p) { return View(p, {{dk, 1}, {S, Bm * 2 * D}, {H, dk}, {Bm, 2 * D}}); };
            View vq = gview(qb), vk = mview(cross_mem), vv = mview(cross_mem + D), vo = gview(ab);
            View vl(cross_len, {{Bs, 1}}, true);
            if (rows.cross_rows) {
                // Sources that left the batch keep their K|V in place.
                View vrows(rows.cross_rows, {{S, 1}, {Bs, S}}, true);
                run("attention", [&] {
                    return HF_PICK(device(), hf_attention_decode_rows)(vq.get(), vk.get(), vv.get(), vl.get(), 0, scale,
                                                                       vrows.get(), vo.get());
                });
            } else {
                run("attention", [&] {
                    return HF_PICK(device(), hf_attention_decode)(vq.get(), vk.get(), vv.get(), vl.get(), 0, scale,
                                                                  vo.get());
                });
            }
        } else {
            View vq = qview(qb), vk = kvview(cross_mem, S), vv = kvview(cross_mem + D, S), vo = qview(ab);
            View vl(cross_len, {{R, 1}}, true);
            auto fn = T == 1 ? HF_PICK(device(), hf_attention_decode) : HF_PICK(device(), hf_attention);
            run("attention", [&] { return fn(vq.get(), vk.get(), vv.get(), vl.get(), 0, scale, vo.get()); });
        }
        out_proj(L.cross, L.cross_norm);
    }

    // Feed-forward.
    View w1(L.w1, {{D, 1}, {F, D}}), b1(L.b1, {{F, 1}}), w2(L.w2, {{F, 1}, {D, F}}), b2(L.b2, {{D, 1}});
    if (lowp()) {
        // Two packed projections through a hidden [M, F].
        float *hidden = ffn_hidden.need((size_t)M * F);
        const float *fin = pre ? (norm(L.ffn_norm, x, hb), hb) : x;
        linear_lowp("ffn", fin, M, D, L.w1, F, D, L.b1, &cfg.activation, nullptr, hidden, F);
        if (pre) {
            linear_lowp("ffn", hidden, M, F, L.w2, D, F, L.b2, nullptr, x, x_alt, D);
        } else {
            linear_lowp("ffn", hidden, M, F, L.w2, D, F, L.b2, nullptr, nullptr, yb, D);
            add_norm(L.ffn_norm, yb, x, x_alt);
        }
    } else if (M <= kDotRows) {
        // Decode shape: two one-row projections through a hidden [M, F].
        float *hidden = ffn_hidden.need((size_t)M * F);
        View vin = act(pre ? (norm(L.ffn_norm, x, hb), hb) : x), vh(hidden, {{F, 1}, {M, F}});
        auto first = linear_dot_act_kernel(device(), cfg.activation);
        run("ffn", [&] { return first(vin.get(), w1.get(), b1.get(), vh.get()); });
        if (pre) {
            View vr = act(x), vo = act(x_alt);
            run("ffn", [&] { return HF_PICK(device(), hf_linear_dot_residual)(vh.get(), w2.get(), b2.get(), vr.get(), vo.get()); });
        } else {
            View vo = act(yb);
            run("ffn", [&] { return HF_PICK(device(), hf_linear_dot)(vh.get(), w2.get(), b2.get(), vo.get()); });
            add_norm(L.ffn_norm, yb, x, x_alt);
        }
    } else if (pre) {
        norm(L.ffn_norm, x, hb);
        View vh = act(hb), vr = act(x), vo = act(x_alt);
        auto fn = ffn_residual_kernel(device(), cfg.activation);
        run("ffn", [&] { return fn(vh.get(), w1.get(), b1.get(), w2.get(), b2.get(), vr.get(), vo.get()); });
    } else {
        View vx = act(x), vo = act(yb);
        auto fn = ffn_kernel(device(), cfg.activation);
        run("ffn", [&] { return fn(vx.get(), w1.get(), b1.get(), w2.get(), b2.get(), vo.get()); });
        add_norm(L.ffn_norm, yb, x, x_alt);
    }
    std::swap(x, x_alt);
}

void Model::Impl::cross_kv_of(size_t l, const float *memory, int rows, float *out) {
    const int D = cfg.d_model;
    const AttnW &w = dec.layers[l].cross;
    const float *wkv = w.in_w + (size_t)D * D, *bkv = w.in_b + D;  // rows D..3D of in_proj
    if (lowp()) return linear_lowp("linear", memory, rows, D, wkv, 2 * D, D, bkv, nullptr, nullptr, out, 2 * D);
    View vx(memory, {{D, 1}, {rows, D}}), vw(wkv, {{D, 1}, {2 * D, D}}), vb(bkv, {{2 * D, 1}}),
        vy(out, {{2 * D, 1}, {rows, 2 * D}});
    run("linear", [&] { return HF_PICK(device(), hf_linear)(vx.get(), vw.get(), vb.get(), vy.get()); });
}

void Model::Impl::final_norm(const NormW &n, float *x, int M) {
    if (!n) return;
    const int D = cfg.d_model;
    float *out = y.need((size_t)M * D);
    View vi(x, {{D, 1}, {M, D}}), vo(out, {{D, 1}, {M, D}}), g(n.g, {{D, 1}}), b(n.b, {{D, 1}});
    run("layer_norm", [&] { return HF_PICK(device(), hf_layer_norm)(vi.get(), g.get(), b.get(), cfg.layer_norm_eps, vo.get()); });
    dev->copy(x, out, (size_t)M * D * sizeof(float));
}

void Model::Impl::project(const float *x, int M, int row_stride, float *out, bool log_softmax) {
    const int D = cfg.d_model, V = gen_rows;
    View vx(x, {{D, 1}, {M, row_stride}}), vw(gen_w, {{D, 1}, {V, D}}), vb(gen_b, {{V, 1}}),
        vy(out, {{V, 1}, {M, V}});
    if (lowp() && log_softmax) {
        float *raw = head_tmp.need((size_t)M * V);
        View vr(raw, {{V, 1}, {M, V}});
        linear_lowp("output_head", x, M, row_stride, gen_w, V, D, gen_b, nullptr, nullptr, raw, V);
        run("output_head", [&] { return HF_PICK(device(), hf_log_softmax)(vr.get(), vy.get()); });
    } else if (lowp()) {
        linear_lowp("output_projection", x, M, row_stride, gen_w, V, D, gen_b, nullptr, nullptr, out, V);
    } else if (log_softmax && M <= kDotRows) {
        // Decode shape: the one-pass dot projection, then log_softmax (the
        // fused head's panels would transpose all of W on every call).
        float *raw = head_tmp.need((size_t)M * V);
        View vr(raw, {{V, 1}, {M, V}});
        run("output_head", [&] { return HF_PICK(device(), hf_linear_dot)(vx.get(), vw.get(), vb.get(), vr.get()); });
        run("output_head", [&] { return HF_PICK(device(), hf_log_softmax)(vr.get(), vy.get()); });
    } else if (log_softmax) {
        run("output_head", [&] { return HF_PICK(device(), hf_output_head)(vx.get(), vw.get(), vb.get(), vy.get()); });
    } else {
        auto fn = M <= kDotRows ? HF_PICK(device(), hf_linear_dot) : HF_PICK(device(), hf_linear);
        run("output_projection", [&] { return fn(vx.get(), vw.get(), vb.get(), vy.get()); });
    }
}

namespace {

// Pads a batch to [T][R] time-major tokens; returns T.
int pad_batch(const std::vector<Sequence> &seqs, int pad, std::vector<int32_t> &tokens,
              std::vector<int32_t> &lens) {
    const int R = (int)seqs.size();
    int T = 0;
    for (auto &s : seqs) T = std::max(T, (int)s.size());
    tokens.assign((size_t)T * R, pad);
    lens.resize(R);
    for (int r = 0; r < R; r++) {
        lens[r] = (int)seqs[r].size();
        for (int t = 0; t < lens[r]; t++) tokens[(size_t)t * R + r] = seqs[r][t];
    }
    return T;
}

}  // namespace

float *Model::Impl::encoder(const std::vector<Sequence> &src, int S, std::vector<int32_t> &lens) {
    const int D = cfg.d_model, R = (int)src.size();
    std::vector<int32_t> tokens;
    pad_batch(src, cfg.pad_id, tokens, lens);
    const size_t n = (size_t)S * R * D;
    float *x = x0.need(n), *xa = x1.need(n);
    float *kv = kv_tmp.need(2 * n);
    embed(enc, tokens.data(), S, R, 0, x);
    for (auto &L : enc.layers) layer(L, false, x, xa, S, R, 0, kv, lens.data(), nullptr, nullptr, 0);
    final_norm(enc.final_norm, x, S * R);
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

// Activations and caches of a teacher-forced pass, from its shapes: the
// encoder over B × S, the decoder over R × T (its K|V and the cross K|V per
// layer) and `width` outputs per position.
void require_pass_fits(Model::Impl &m, int64_t B, int64_t S, int64_t R, int64_t T, int64_t width, const char *what) {
    const int64_t D = m.cfg.d_model, F = m.cfg.d_ff, L = m.cfg.num_decoder_layers;
    const int64_t enc = checked_product({B, S, 6 * D + F}, what), cross = checked_product({L, B, S, 2 * D}, what),
                  dec = checked_product({R, T, 6 * D + F + 2 * D * L}, what),
                  out = checked_product({std::max(B * S, R * T), width}, what);
    m.require_fits(enc + cross + dec + out, std::string(what) + " (" + std::to_string(std::max(B, R)) + " sequences of up to " +
                                                std::to_string(std::max(S, T)) + " tokens)");
}

std::vector<Tensor> encode_in(Model::Impl &m, const std::vector<Sequence> &src) {
    if (!m.cfg.has_encoder()) throw Error("encode: a decoder-only model has no encoder");
    m.check_tokens(src, m.cfg.src_vocab_size, "source", 0);
    int S = 0;
    for (auto &s : src) S = std::max(S, (int)s.size());
    require_pass_fits(m, (int64_t)src.size(), S, 0, 0, 0, "encode");
    std::vector<int32_t> lens;
    DeviceScope scope(m.dev.get());
    const float *x = m.encoder(src, S, lens);
    m.dev->to_host(x, (size_t)S * src.size() * m.cfg.d_model * sizeof(float));
    return split_rows(x, (int)src.size(), m.cfg.d_model, lens);
}

}  // namespace

std::vector<Tensor> Model::encode(const std::vector<Sequence> &src) {
    Lease lease(*pool_);
    return encode_in(*lease, src);
}

std::vector<Tensor> Model::logits(const std::vector<Sequence> &src, const std::vector<Sequence> &tgt) {
    Lease lease(*pool_);
    Impl &m = *lease;
    const Config &c = m.cfg;
    const int D = c.d_model;
    if (c.architecture == Architecture::Encoder) {
        if (!tgt.empty()) throw Error("logits: an encoder-only model takes no target sequence");
        if (!m.gen_w) return encode_in(m, src);
        m.check_tokens(src, c.src_vocab_size, "source", 0);
        int S = 0;
        for (auto &s : src) S = std::max(S, (int)s.size());
        require_pass_fits(m, (int64_t)src.size(), S, 0, 0, m.gen_rows, "logits");
        std::vector<int32_t> lens;
        DeviceScope scope(m.dev.get());
        const float *x = m.encoder(src, S, lens);
        const int rows = S * (int)src.size();
        float *out = m.logits.need((size_t)rows * m.gen_rows);
        m.project(x, rows, D, out, false);
        m.dev->to_host(out, (size_t)rows * m.gen_rows * sizeof(float));
        return split_rows(out, (int)src.size(), m.gen_rows, lens);
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
        require_pass_fits(m, ed ? (int64_t)src.size() : 0, S, R, T, m.gen_rows, "logits");
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
        m.cross_kv.resize(m.dec.layers.size());
        m.attach(m.cross_kv);
        for (size_t l = 0; l < m.dec.layers.size(); l++) {
            m.cross_kv_of(l, memory, S * R, m.cross_kv[l].need((size_t)S * R * 2 * D));
        }
    }
    std::vector<int32_t> tokens, lens;
    const int T = pad_batch(dec_in, c.pad_id, tokens, lens);
    const size_t n = (size_t)T * R * D;
    float *x = m.x0.need(n), *xa = m.x1.need(n);
    m.self_kv.resize(m.dec.layers.size());
    m.attach(m.self_kv);
    m.embed(m.dec, tokens.data(), T, R, 0, x);
    for (size_t l = 0; l < m.dec.layers.size(); l++) {
        float *kv = m.self_kv[l].need(2 * n);
        m.layer(m.dec.layers[l], true, x, xa, T, R, 0, kv, lens.data(),
                ed ? m.cross_kv[l].get() : nullptr, ed ? src_lens.data() : nullptr, S);
    }
    m.final_norm(m.dec.final_norm, x, T * R);
    // All T·R rows in one projection (padding rows included), then per sequence.
    float *all = m.logits.need((size_t)T * R * m.gen_rows);
    m.project(x, T * R, D, all, false);
    m.dev->to_host(all, (size_t)T * R * m.gen_rows * sizeof(float));
    std::vector<Tensor> out = split_rows(all, R, m.gen_rows, lens);
    return out;
}

}  // namespace halformer
