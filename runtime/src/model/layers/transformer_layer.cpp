// One Transformer layer (section 3.1): self-attention, attention over the
// encoder memory in an encoder-decoder's decoder, and the feed-forward
// network, each a sub-layer whose output joins the residual stream, with
// LayerNorm after the join (post-LN, the paper) or before the sub-layer
// (pre-LN). The forward sequence is the one inference and training both
// run; the backward is its mirror.
#include "layers.h"

namespace halformer {
namespace layers {

namespace {
// The Transformer layer's tensors (params.cpp): self_attn and norm1;
// multihead_attn and norm2 in a decoder over an encoder's memory; the
// feed-forward network's norm, norm3 there and norm2 elsewhere.
const char *ffn_norm(const LayerW &L) { return L.get("norm3.weight") ? "norm3" : "norm2"; }
}  // namespace

void layer_forward(Kernels &k, const Pass &p, const LayerW &L, bool causal, LayerIO &io) {
    const bool pre = k.desc.norm_before();
    const int M = io.M();
    // Pre-LN normalizes a sub-layer's input; post-LN reads the stream itself.
    auto input = [&](const NormW &n, const float *x, float *normed) -> const float * {
        if (!pre) return x;
        layer_norm(k, n, x, normed, M);
        return normed;
    };
    const AttnW self = L.attn("self_attn");
    const NormW n1 = L.norm("norm1"), nf = L.norm(ffn_norm(L));
    self_projections(k, p, self, input(n1, io.x_in, io.n1), io);
    self_attention(k, p, causal, io);
    project_join(k, p, self, io.att, io.x_in, io.y1, io.x1, n1, M, io.tensor + 1);
    const float *x = io.x1;
    if (io.cross.memory || io.cross.kv) {
        const AttnW cross = L.attn("multihead_attn");
        const NormW n2 = L.norm("norm2");
        cross_attention(k, p, cross, input(n2, io.x1, io.n2), io);
        project_join(k, p, cross, io.attc, io.x1, io.y2, io.x2, n2, M, io.tensor + 2);
        x = io.x2;
    }
    feed_forward_join(k, p, L, nf, input(nf, x, io.n3), x, io);
}

#ifdef HALFORMER_HAS_TRAINING

namespace {

// One sub-layer's backward: out = res + drop(y) (pre-LN, y from LN(res)) or
// LN(res + drop(y)) (post-LN, y from res). dx holds d out and ends as d
// res; body(dy, din, acc) turns d y into d of the sub-layer's input.
template <typename Body>
void sublayer_backward(Kernels &k, const Pass &p, const NormW &n, const NormW &gn, const float *res,
                       const float *y, const LayerIO &io, const BackwardBuffers &b, float *&dx, float *&spare,
                       int tensor, Body &&body) {
    const bool pre = k.desc.norm_before();
    const int M = io.M(), D = k.cfg.d_model;
    if (!pre) {
        add_layer_norm_backward(k, n, gn, y, res, dx, spare, M);
        std::swap(dx, spare);
    }
    dropout(k, p, dx, nullptr, b.t1, M, D, tensor);
    body(b.t1, pre ? b.t2 : dx, !pre);
    if (pre) layer_norm_backward_acc(k, n, gn, res, b.t2, dx, M);
}

// An attention sub-layer's output projection: its weights' gradients and
// d att → b.da.
void out_projection_backward(Kernels &k, const AttnW &w, const AttnW &g, const float *att, const float *dy,
                             const BackwardBuffers &b, int M) {
    const int D = k.cfg.d_model;
    linear_backward_weight(k, dy, D, att, D, const_cast<float *>(g.out_w), const_cast<float *>(g.out_b), M);
    linear_backward_data(k, dy, D, w.out_w, D, b.da, M, false);
}

}  // namespace

void layer_backward(Kernels &k, const Pass &p, const LayerW &L, const LayerW &G, const LayerIO &io, bool causal,
                    const BackwardBuffers &b, float *dmem, float *&dx, float *&spare) {
    const bool pre = k.desc.norm_before();
    const int D = k.cfg.d_model, M = io.M();
    const bool cross = io.cross.memory != nullptr;
    const float *x_ffn = cross ? io.x2 : io.x1;
    const char *nf = ffn_norm(L);
    sublayer_backward(k, p, L.norm(nf), G.norm(nf), x_ffn, io.y3, io, b, dx, spare, io.tensor + 3,
                      [&](const float *dy, float *din, bool acc) {
                          feed_forward_backward(k, L, G, io, pre ? io.n3 : x_ffn, dy, b.dz, din, acc);
                      });
    if (cross) {
        const CrossMemory &c = io.cross;
        const AttnW w = L.attn("multihead_attn"), g = G.attn("multihead_attn");
        sublayer_backward(k, p, L.norm("norm2"), G.norm("norm2"), io.x1, io.y2, io, b, dx, spare, io.tensor + 2,
                          [&](const float *dy, float *din, bool acc) {
                              out_projection_backward(k, w, g, io.attc, dy, b, M);
                              cross_attention_backward(k, io, b.da, {b.dqc, D, b.dkv_mem, 2 * D});
                              // K|V came from the memory: in_proj rows D..3D, and d memory +=.
                              const int Mm = c.S * c.rows;
                              linear_backward_weight(k, b.dkv_mem, 2 * D, c.memory, D,
                                                     const_cast<float *>(g.in_w) + (size_t)D * D,
                                                     const_cast<float *>(g.in_b) + D, Mm);
                              linear_backward_data(k, b.dkv_mem, 2 * D, w.in_w + (size_t)D * D, D, dmem, Mm, true);
                              linear_backward_weight(k, b.dqc, D, pre ? io.n2 : io.x1, D, const_cast<float *>(g.in_w),
                                                     const_cast<float *>(g.in_b), M);
                              linear_backward_data(k, b.dqc, D, w.in_w, D, din, M, acc);
                          });
    }
    const AttnW w = L.attn("self_attn"), g = G.attn("self_attn");
    sublayer_backward(k, p, L.norm("norm1"), G.norm("norm1"), io.x_in, io.y1, io, b, dx, spare, io.tensor + 1,
                      [&](const float *dy, float *din, bool acc) {
                          out_projection_backward(k, w, g, io.att, dy, b, M);
                          self_attention_backward(k, causal, io, b.da, {b.dqkv, 3 * D, b.dqkv + D, 3 * D});
                          linear_backward_weight(k, b.dqkv, 3 * D, pre ? io.n1 : io.x_in, D,
                                                 const_cast<float *>(g.in_w), const_cast<float *>(g.in_b), M);
                          linear_backward_data(k, b.dqkv, 3 * D, w.in_w, D, din, M, acc);
                      });
}

#endif  // HALFORMER_HAS_TRAINING

}  // namespace layers
}  // namespace halformer
