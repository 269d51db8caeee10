// Training: the forward pass with every activation the backward pass needs
// kept, the backward pass layer by layer in reverse, and the optimizer step.
// Each arithmetic step is one generated kernel (the forward ones of
// forward.cpp plus generators/*_backward_*, cross_entropy, dropout,
// activation, adam, sum_squares, axpy); this file lays out buffers and views.
//
// Layout: activations are time-major (row m = t·R + r for R sequences), as
// in forward.cpp, so the attention kernels read Q, K and V as strided views
// of one fused [M, 3·D] projection, and their gradients land in one fused
// [M, 3·D] buffer that the in_proj weight gradient reads at once.
#include "trainer_impl.h"


#include <algorithm>
#include <cmath>
#include <cstring>

namespace halformer {

double learning_rate(const Config &c, const TrainOptions &o, int64_t step) {
    const double s = (double)std::max<int64_t>(step, 1), w = (double)std::max(o.warmup_steps, 1);
    return o.lr_scale * std::pow((double)c.d_model, -0.5) * std::min(std::pow(s, -0.5), s * std::pow(w, -1.5));
}


// ---------------------------------------------------------------- forward

void Trainer::Impl::layer_forward(const LayerW &L, LayerActs &a, const Shape &s, bool causal,
                                  const float *memory, const Shape *mem, bool train, int tensor) {
    Model::Impl &k = mi();
    const int D = cfg.d_model, H = cfg.num_heads, dk = D / H, F = cfg.d_ff, M = s.M;
    const float eps = cfg.layer_norm_eps, scale = 1.0f / std::sqrt((float)dk);
    const bool pre = cfg.norm_first;
    auto mat = [&](const float *p, int N) { return View(p, {{N, 1}, {M, N}}); };
    auto linear = [&](const float *in, int K, const float *w, const float *b, int N, float *out, int rows,
                      int out_stride) {
        View vx(in, {{K, 1}, {rows, K}}), vw(w, {{K, 1}, {N, K}}), vb(b, {{N, 1}}), vy(out, {{N, 1}, {rows, out_stride}});
        k.run("linear", [&] { return HF_PICK(k.device(), hf_linear)(vx.get(), vw.get(), vb.get(), vy.get()); });
    };
    auto norm = [&](const NormW &n, const float *in, float *out) {
        View vi = mat(in, D), vo = mat(out, D), g(n.g, {{D, 1}}), b(n.b, {{D, 1}});
        k.run("layer_norm", [&] { return HF_PICK(k.device(), hf_layer_norm)(vi.get(), g.get(), b.get(), eps, vo.get()); });
    };
    auto add_norm = [&](const NormW &n, const float *in, const float *res, float *out) {
        View vi = mat(in, D), vr = mat(res, D), vo = mat(out, D), g(n.g, {{D, 1}}), b(n.b, {{D, 1}});
        k.run("layer_norm", [&] {
            return HF_PICK(k.device(), hf_layer_norm_residual)(vi.get(), g.get(), b.get(), eps, vr.get(), vo.get());
        });
    };
    // y ← dropout(y) in place; with a residual r: out = r + dropout(y).
    auto drop = [&](float *y, const float *res, float *out, int id) {
        dropout(y, res, out, M, D, id, train);
    };
    // A sub-layer's output y joins the residual stream: pre-LN
    // out = res + dropout(y); post-LN out = LN(res + dropout(y)).
    auto join = [&](float *y, const float *res, float *out, const NormW &n, int id) {
        if (pre) {
            drop(y, res, out, id);
        } else {
            drop(y, nullptr, y, id);
            add_norm(n, y, res, out);
        }
    };
    auto heads = [&](const float *p, int T, int stride) {
        return View(p, {{dk, 1}, {T, s.R * stride}, {H, dk}, {s.R, stride}});
    };
    View lens(s.lens, {{s.R, 1}}, true);

    // Self-attention sub-layer.
    const float *in = a.x_in;
    if (pre) {
        norm(L.self_norm, a.x_in, a.n1);
        in = a.n1;
    }
    linear(in, D, L.self.in_w, L.self.in_b, 3 * D, a.qkv, M, 3 * D);
    {
        View vq = heads(a.qkv, s.T, 3 * D), vk = heads(a.qkv + D, s.T, 3 * D), vv = heads(a.qkv + 2 * D, s.T, 3 * D);
        View vo = heads(a.att, s.T, D);
        auto fn = causal ? HF_PICK(k.device(), hf_attention_causal_train) : HF_PICK(k.device(), hf_attention_train);
        k.run("attention", [&] { return fn(vq.get(), vk.get(), vv.get(), lens.get(), 0, scale, vo.get()); });
    }
    linear(a.att, D, L.self.out_w, L.self.out_b, D, a.y1, M, D);
    join(a.y1, a.x_in, a.x1, L.self_norm, tensor + 1);

    // Cross-attention sub-layer (encoder-decoder decoders).
    const float *x_ffn = a.x1;
    if (memory) {
        // K|V of the encoder memory for this layer: rows D..3D of in_proj.
        linear(memory, D, L.cross.in_w + (size_t)D * D, L.cross.in_b + D, 2 * D, a.kv_mem, mem->M, 2 * D);
        in = a.x1;
        if (pre) {
            norm(L.cross_norm, a.x1, a.n2);
            in = a.n2;
        }
        linear(in, D, L.cross.in_w, L.cross.in_b, D, a.qc, M, D);
        View vq = heads(a.qc, s.T, D), vk = View(a.kv_mem, {{dk, 1}, {mem->T, mem->R * 2 * D}, {H, dk}, {mem->R, 2 * D}});
        View vv = View(a.kv_mem + D, {{dk, 1}, {mem->T, mem->R * 2 * D}, {H, dk}, {mem->R, 2 * D}});
        View vo = heads(a.attc, s.T, D), ml(mem->lens, {{mem->R, 1}}, true);
        k.run("attention", [&] {
            return HF_PICK(k.device(), hf_attention_train)(vq.get(), vk.get(), vv.get(), ml.get(), 0, scale, vo.get());
        });
        linear(a.attc, D, L.cross.out_w, L.cross.out_b, D, a.y2, M, D);
        join(a.y2, a.x1, a.x2, L.cross_norm, tensor + 2);
        x_ffn = a.x2;
    }

    // Feed-forward sub-layer: z = x·W1ᵀ + b1 kept for act'(z), h = act(z).
    in = x_ffn;
    if (pre) {
        norm(L.ffn_norm, x_ffn, a.n3);
        in = a.n3;
    }
    linear(in, D, L.w1, L.b1, F, a.z1, M, F);
    {
        View vz = mat(a.z1, F), vh = mat(a.h1, F);
        auto fn = activation_kernel(k.device(), cfg.activation);
        k.run("activation", [&] { return fn(vz.get(), vh.get()); });
    }
    linear(a.h1, F, L.w2, L.b2, D, a.y3, M, D);
    join(a.y3, x_ffn, a.x_out, L.ffn_norm, tensor + 3);
}

void Trainer::Impl::dropout(float *y, const float *res, float *out, int M, int N, int tensor, bool train) {
    Model::Impl &k = mi();
    const float p = train ? opt.dropout : 0.0f;
    if (p <= 0.0f && !res) {
        if (out != y) k.dev->copy(out, y, (size_t)M * N * sizeof(float));
        return;
    }
    View vy(y, {{N, 1}, {M, N}}), vo(out, {{N, 1}, {M, N}});
    const int seed = (int)(uint32_t)(opt.seed * 0x9E3779B97F4A7C15ull >> 32);
    const int step = (int)(uint32_t)micro_steps;
    if (res) {
        View vr(res, {{N, 1}, {M, N}});
        k.run("dropout", [&] {
            return HF_PICK(k.device(), hf_dropout_residual)(vy.get(), p, seed, step, tensor, vr.get(), vo.get());
        });
    } else {
        k.run("dropout", [&] { return HF_PICK(k.device(), hf_dropout)(vy.get(), p, seed, step, tensor, vo.get()); });
    }
}

// Embedding (+ dropout) and every layer of one stack; returns its output
// (after the final norm, if any).
const float *Trainer::Impl::stack_forward(const StackW &w, StackActs &sa, const Shape &s, bool causal,
                                          const float *memory, const Shape *mem, bool train, int tensor) {
    Model::Impl &k = mi();
    const int D = cfg.d_model;
    sa.layers.resize(w.layers.size());
    const size_t per_layer = layer_floats(s, mem);
    const size_t total = per_layer * w.layers.size() + (size_t)s.M * D * 2;
    float *base = sa.arena.need(total);
    sa.embedded = base;
    k.embed(w, s.tokens, s.T, s.R, 0, sa.embedded);
    dropout(sa.embedded, nullptr, sa.embedded, s.M, D, tensor, train);
    const float *x = sa.embedded;
    float *p = base + (size_t)s.M * D;
    for (size_t l = 0; l < w.layers.size(); l++) {
        LayerActs &a = sa.layers[l];
        a.carve(p, s, mem, cfg);
        a.x_in = x;
        layer_forward(w.layers[l], a, s, causal, memory, mem, train, tensor + 10 * (int)(l + 1));
        x = a.x_out;
        p += per_layer;
    }
    sa.pre_norm = x;
    if (w.final_norm) {
        float *out = p;
        View vi(x, {{D, 1}, {s.M, D}}), vo(out, {{D, 1}, {s.M, D}}), g(w.final_norm.g, {{D, 1}}), b(w.final_norm.b, {{D, 1}});
        k.run("layer_norm", [&] {
            return HF_PICK(k.device(), hf_layer_norm)(vi.get(), g.get(), b.get(), cfg.layer_norm_eps, vo.get());
        });
        x = out;
    }
    sa.out = x;
    return x;
}

// ---------------------------------------------------------------- backward

void Trainer::Impl::layer_backward(const LayerW &L, const LayerW &G, LayerActs &a, const Shape &s, bool causal,
                                   const float *memory, const Shape *mem, float *dmem, float *&dx, float *&spare,
                                   int tensor) {
    Model::Impl &k = mi();
    const int D = cfg.d_model, H = cfg.num_heads, dk = D / H, F = cfg.d_ff, M = s.M;
    const float eps = cfg.layer_norm_eps, scale = 1.0f / std::sqrt((float)dk);
    const bool pre = cfg.norm_first;
    Backward &b = bw;
    auto mat = [&](const float *p, int N) { return View(p, {{N, 1}, {M, N}}); };
    // dX = dY·W, optionally added to dX's old value (acc) or through act'(z).
    auto back_data = [&](const float *dy, int N, const float *w, int K, float *out, int rows, bool acc) {
        View vdy(dy, {{N, 1}, {rows, N}}), vw(w, {{K, 1}, {N, K}}), vo(out, {{K, 1}, {rows, K}});
        if (acc) {
            k.run("linear_backward", [&] {
                return HF_PICK(k.device(), hf_linear_backward_data_acc)(vdy.get(), vw.get(), vo.get(), vo.get());
            });
        } else {
            k.run("linear_backward", [&] {
                return HF_PICK(k.device(), hf_linear_backward_data)(vdy.get(), vw.get(), vo.get());
            });
        }
    };
    // dW += dYᵀ·X, db += Σ dY.
    auto back_weight = [&](const float *dy, int N, const float *x, int K, float *dw, float *db, int rows) {
        View vdy(dy, {{N, 1}, {rows, N}}), vx(x, {{K, 1}, {rows, K}}), vdw(dw, {{K, 1}, {N, K}}), vdb(db, {{N, 1}});
        k.run("linear_backward", [&] {
            return HF_PICK(k.device(), hf_linear_backward_weight)(vdy.get(), vx.get(), vdw.get(), vdb.get(), vdw.get(),
                                                                  vdb.get());
        });
    };
    // Post-LN: d(in + res) from d LN(in + res) into `out`.
    auto norm_back_res = [&](const NormW &n, const NormW &gn, const float *in, const float *res, const float *dy,
                             float *out) {
        View vi = mat(in, D), vr = mat(res, D), vdy = mat(dy, D), vo = mat(out, D), g(n.g, {{D, 1}});
        View dg(gn.g, {{D, 1}}), db(gn.b, {{D, 1}});
        k.run("layer_norm_backward", [&] {
            return HF_PICK(k.device(), hf_layer_norm_residual_backward)(vi.get(), g.get(), eps, vdy.get(), dg.get(),
                                                                        db.get(), vr.get(), vo.get(), dg.get(), db.get());
        });
    };
    // Pre-LN: out += d LN(in).
    auto norm_back_acc = [&](const NormW &n, const NormW &gn, const float *in, const float *dy, float *out) {
        View vi = mat(in, D), vdy = mat(dy, D), vo = mat(out, D), g(n.g, {{D, 1}});
        View dg(gn.g, {{D, 1}}), db(gn.b, {{D, 1}});
        k.run("layer_norm_backward", [&] {
            return HF_PICK(k.device(), hf_layer_norm_backward_acc)(vi.get(), g.get(), eps, vdy.get(), dg.get(),
                                                                   db.get(), vo.get(), vo.get(), dg.get(), db.get());
        });
    };
    auto heads = [&](const float *p, int T, int stride) {
        return View(p, {{dk, 1}, {T, s.R * stride}, {H, dk}, {s.R, stride}});
    };
    auto heads_kv = [&](const float *p, int T, int R, int stride) {
        return View(p, {{dk, 1}, {2, D}, {T, R * stride}, {H, dk}, {R, stride}});
    };
    // The gradient of one sub-layer's output y (post-dropout, in dy) through
    // dropout into b.t1, then the output projection: weights, and dA → b.da.
    auto back_out_proj = [&](const float *dy, const AttnW &w, const AttnW &gw, const float *att, int id) {
        dropout(const_cast<float *>(dy), nullptr, b.t1, M, D, id, true);
        back_weight(b.t1, D, att, D, const_cast<float *>(gw.out_w), const_cast<float *>(gw.out_b), M);
        back_data(b.t1, D, w.out_w, D, b.da, M, false);
    };

    // dx holds d x_out. Feed-forward sub-layer first.
    const float *x_ffn = memory ? a.x2 : a.x1;
    float *dffn;  // the gradient of the FFN's input x_ffn, built in `spare` or in `dx`
    if (pre) {
        // x_out = x_ffn + drop(y3): d x_ffn = dx + (LN3 path), d y3 = dx.
        dropout(dx, nullptr, b.t1, M, D, tensor + 3, true);
        back_weight(b.t1, D, a.h1, F, const_cast<float *>(G.w2), const_cast<float *>(G.b2), M);
        {
            View vdy = mat(b.t1, D), vw(L.w2, {{F, 1}, {D, F}}), vz = mat(a.z1, F), vo = mat(b.dz, F);
            auto fn = activation_backward_kernel(k.device(), cfg.activation);
            k.run("linear_backward", [&] { return fn(vdy.get(), vw.get(), vz.get(), vo.get()); });
        }
        back_weight(b.dz, F, a.n3, D, const_cast<float *>(G.w1), const_cast<float *>(G.b1), M);
        back_data(b.dz, F, L.w1, D, b.t2, M, false);
        norm_back_acc(L.ffn_norm, G.ffn_norm, x_ffn, b.t2, dx);
        dffn = dx;
    } else {
        // x_out = LN3(y3 + x_ffn): dh → spare; then d x_ffn = dh + dz·W1.
        norm_back_res(L.ffn_norm, G.ffn_norm, a.y3, x_ffn, dx, spare);
        std::swap(dx, spare);
        dropout(dx, nullptr, b.t1, M, D, tensor + 3, true);
        back_weight(b.t1, D, a.h1, F, const_cast<float *>(G.w2), const_cast<float *>(G.b2), M);
        {
            View vdy = mat(b.t1, D), vw(L.w2, {{F, 1}, {D, F}}), vz = mat(a.z1, F), vo = mat(b.dz, F);
            auto fn = activation_backward_kernel(k.device(), cfg.activation);
            k.run("linear_backward", [&] { return fn(vdy.get(), vw.get(), vz.get(), vo.get()); });
        }
        back_weight(b.dz, F, x_ffn, D, const_cast<float *>(G.w1), const_cast<float *>(G.b1), M);
        back_data(b.dz, F, L.w1, D, dx, M, true);
        dffn = dx;
    }
    (void)dffn;

    // Cross-attention sub-layer.
    if (memory) {
        const float *dy2;
        if (pre) {
            dy2 = dx;  // x2 = x1 + drop(y2)
        } else {
            norm_back_res(L.cross_norm, G.cross_norm, a.y2, a.x1, dx, spare);
            std::swap(dx, spare);
            dy2 = dx;
        }
        back_out_proj(dy2, L.cross, G.cross, a.attc, tensor + 2);
        {
            View vq = heads(a.qc, s.T, D), vo = heads(a.attc, s.T, D), vdo = heads(b.da, s.T, D);
            View vk(a.kv_mem, {{dk, 1}, {mem->T, mem->R * 2 * D}, {H, dk}, {mem->R, 2 * D}});
            View vv(a.kv_mem + D, {{dk, 1}, {mem->T, mem->R * 2 * D}, {H, dk}, {mem->R, 2 * D}});
            View ml(mem->lens, {{mem->R, 1}}, true), vdq = heads(b.dqc, s.T, D);
            View vdkv = heads_kv(b.dkv_mem, mem->T, mem->R, 2 * D);
            k.run("attention_backward", [&] {
                return HF_PICK(k.device(), hf_attention_backward)(vq.get(), vk.get(), vv.get(), vo.get(), vdo.get(),
                                                                   ml.get(), 0, scale, vdq.get(), vdkv.get());
            });
        }
        // K|V came from the memory: weights rows D..3D, and d memory +=.
        back_weight(b.dkv_mem, 2 * D, memory, D, const_cast<float *>(G.cross.in_w) + (size_t)D * D,
                    const_cast<float *>(G.cross.in_b) + D, mem->M);
        back_data(b.dkv_mem, 2 * D, L.cross.in_w + (size_t)D * D, D, dmem, mem->M, true);
        const float *qin = pre ? a.n2 : a.x1;
        back_weight(b.dqc, D, qin, D, const_cast<float *>(G.cross.in_w), const_cast<float *>(G.cross.in_b), M);
        if (pre) {
            back_data(b.dqc, D, L.cross.in_w, D, b.t2, M, false);
            norm_back_acc(L.cross_norm, G.cross_norm, a.x1, b.t2, dx);
        } else {
            back_data(b.dqc, D, L.cross.in_w, D, dx, M, true);
        }
    }

    // Self-attention sub-layer.
    {
        const float *dy1;
        if (pre) {
            dy1 = dx;
        } else {
            norm_back_res(L.self_norm, G.self_norm, a.y1, a.x_in, dx, spare);
            std::swap(dx, spare);
            dy1 = dx;
        }
        back_out_proj(dy1, L.self, G.self, a.att, tensor + 1);
        {
            View vq = heads(a.qkv, s.T, 3 * D), vk = heads(a.qkv + D, s.T, 3 * D), vv = heads(a.qkv + 2 * D, s.T, 3 * D);
            View vo = heads(a.att, s.T, D), vdo = heads(b.da, s.T, D), vl(s.lens, {{s.R, 1}}, true);
            View vdq = heads(b.dqkv, s.T, 3 * D), vdkv = heads_kv(b.dqkv + D, s.T, s.R, 3 * D);
            auto fn = causal ? HF_PICK(k.device(), hf_attention_causal_backward)
                             : HF_PICK(k.device(), hf_attention_backward);
            k.run("attention_backward", [&] {
                return fn(vq.get(), vk.get(), vv.get(), vo.get(), vdo.get(), vl.get(), 0, scale, vdq.get(), vdkv.get());
            });
        }
        const float *in = pre ? a.n1 : a.x_in;
        back_weight(b.dqkv, 3 * D, in, D, const_cast<float *>(G.self.in_w), const_cast<float *>(G.self.in_b), M);
        if (pre) {
            back_data(b.dqkv, 3 * D, L.self.in_w, D, b.t2, M, false);
            norm_back_acc(L.self_norm, G.self_norm, a.x_in, b.t2, dx);
        } else {
            back_data(b.dqkv, 3 * D, L.self.in_w, D, dx, M, true);
        }
    }
}

// d output of a stack (in dx) → every layer's gradients, the embedding's.
// `dx`/`spare` are [M, D] buffers that the layers ping-pong between.
void Trainer::Impl::stack_backward(const StackW &w, const StackW &g, StackActs &sa, const Shape &s, bool causal,
                                   const float *memory, const Shape *mem, float *dmem, float *dx, float *spare,
                                   int tensor) {
    Model::Impl &k = mi();
    const int D = cfg.d_model;
    if (w.final_norm) {
        View vi(sa.pre_norm, {{D, 1}, {s.M, D}}), vdy(dx, {{D, 1}, {s.M, D}}), vo(spare, {{D, 1}, {s.M, D}});
        View gm(w.final_norm.g, {{D, 1}}), dg(g.final_norm.g, {{D, 1}}), db(g.final_norm.b, {{D, 1}});
        k.run("layer_norm_backward", [&] {
            return HF_PICK(k.device(), hf_layer_norm_backward)(vi.get(), gm.get(), cfg.layer_norm_eps, vdy.get(),
                                                               dg.get(), db.get(), vo.get(), dg.get(), db.get());
        });
        std::swap(dx, spare);
    }
    for (size_t l = w.layers.size(); l-- > 0;) {
        layer_backward(w.layers[l], g.layers[l], sa.layers[l], s, causal, memory, mem, dmem, dx, spare,
                       tensor + 10 * (int)(l + 1));
    }
    // Embedding sums: dropout, then the scatter into the table (and the
    // learned positions).
    dropout(dx, nullptr, dx, s.M, D, tensor, true);
    // Each token as a slot among the batch's distinct ids (the kernel sums
    // per slot, then adds each slot's sum to its row once).
    std::vector<int32_t> rows(s.tokens, s.tokens + (size_t)s.T * s.R);
    std::sort(rows.begin(), rows.end());
    rows.erase(std::unique(rows.begin(), rows.end()), rows.end());
    std::vector<int32_t> slots((size_t)s.T * s.R);
    for (int t = 0; t < s.T; t++)
        for (int r = 0; r < s.R; r++) {
            const int32_t id = s.tokens[(size_t)t * s.R + r];
            slots[(size_t)r * s.T + t] = (int32_t)(std::lower_bound(rows.begin(), rows.end(), id) - rows.begin());
        }
    View tok(slots.data(), {{s.T, 1}, {s.R, s.T}}, true), vrows(rows.data(), {{(int)rows.size(), 1}}, true);
    View vd(dx, {{D, 1}, {s.T, s.R * D}, {s.R, D}});
    View tab(g.embed, {{D, 1}, {w.vocab, D}});
    const float escale = cfg.scale_embeddings ? std::sqrt((float)D) : 1.0f;
    if (cfg.positional_encoding == Positional::Learned) {
        View pos(g.pos, {{D, 1}, {cfg.max_positions, D}});
        k.run("embedding_backward", [&] {
            return HF_PICK(k.device(), hf_embedding_learned_backward)(tok.get(), vrows.get(), vd.get(), escale, 0,
                                                                      tab.get(), pos.get());
        });
    } else {
        k.run("embedding_backward", [&] {
            return HF_PICK(k.device(), hf_embedding_backward)(tok.get(), vrows.get(), vd.get(), escale, 0, tab.get());
        });
    }
}

}  // namespace halformer
