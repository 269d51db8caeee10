// The position-wise feed-forward network (section 3.3), act(x·W1ᵀ + b1)·W2ᵀ
// + b2, joined to the residual stream; and its backward. Inference fuses
// it: one kernel (prefill), two one-row projections (decode), or two packed
// projections (reduced precision), the residual added by the last kernel
// with pre-LN. Training keeps z = x·W1ᵀ + b1 and act(z) for the backward.
#include "layers.h"

#include "hf_ffn.h"
#include "hf_ffn_gelu.h"
#include "hf_ffn_gelu_residual.h"
#include "hf_ffn_gelu_tanh.h"
#include "hf_ffn_gelu_tanh_residual.h"
#include "hf_ffn_residual.h"
#include "hf_linear_dot_gelu.h"
#include "hf_linear_dot_gelu_tanh.h"
#include "hf_linear_dot_relu.h"
#include "hf_ffn_silu.h"
#include "hf_ffn_silu_residual.h"
#include "hf_linear_dot_silu.h"
#include "hf_linear_gelu_tanh_gated.h"
#include "hf_linear_dot_gelu_tanh_gated.h"
#include "hf_linear_silu_gated.h"
#include "hf_linear_dot_silu_gated.h"

HF_DEVICE_KERNELS(hf_ffn)
HF_DEVICE_KERNELS(hf_ffn_gelu)
HF_DEVICE_KERNELS(hf_ffn_gelu_residual)
HF_DEVICE_KERNELS(hf_ffn_gelu_tanh)
HF_DEVICE_KERNELS(hf_ffn_gelu_tanh_residual)
HF_DEVICE_KERNELS(hf_ffn_residual)
HF_DEVICE_KERNELS(hf_linear_dot_gelu)
HF_DEVICE_KERNELS(hf_linear_dot_gelu_tanh)
HF_DEVICE_KERNELS(hf_linear_dot_relu)
HF_DEVICE_KERNELS(hf_ffn_silu)
HF_DEVICE_KERNELS(hf_ffn_silu_residual)
HF_DEVICE_KERNELS(hf_linear_dot_silu)
HF_DEVICE_KERNELS(hf_linear_gelu_tanh_gated)
HF_DEVICE_KERNELS(hf_linear_dot_gelu_tanh_gated)
HF_DEVICE_KERNELS(hf_linear_silu_gated)
HF_DEVICE_KERNELS(hf_linear_dot_silu_gated)
#ifdef HALFORMER_HAS_TRAINING
#include "hf_gelu.h"
#include "hf_gelu_tanh.h"
#include "hf_relu.h"
#include "hf_silu.h"
#include "hf_linear_backward_data_silu.h"
#include "hf_linear_backward_data_gelu.h"
#include "hf_linear_backward_data_gelu_tanh.h"
#include "hf_linear_backward_data_relu.h"
HF_DEVICE_KERNELS(hf_gelu)
HF_DEVICE_KERNELS(hf_gelu_tanh)
HF_DEVICE_KERNELS(hf_relu)
HF_DEVICE_KERNELS(hf_silu)
HF_DEVICE_KERNELS(hf_linear_backward_data_silu)
HF_DEVICE_KERNELS(hf_linear_backward_data_gelu)
HF_DEVICE_KERNELS(hf_linear_backward_data_gelu_tanh)
HF_DEVICE_KERNELS(hf_linear_backward_data_relu)
#endif

namespace halformer {
namespace layers {
namespace {

using Buf = halide_buffer_t *;

// Kernels by activation: the fused FFN (with the residual), the first
// one-row projection, the activation alone, and act'(z)·(dy·W).
template <typename Fn>
Fn by_act(Act a, Fn relu, Fn gelu, Fn gelu_tanh, Fn silu) {
    switch (a) {
    case Act::ReLU: return relu;
    case Act::GELU: return gelu;
    case Act::GELUTanh: return gelu_tanh;
    case Act::SiLU: return silu;
    }
    throw Error("internal: activation out of range");
}
auto ffn_kernel(Device d, Act a) {
    return by_act(a, HF_PICK(d, hf_ffn), HF_PICK(d, hf_ffn_gelu), HF_PICK(d, hf_ffn_gelu_tanh), HF_PICK(d, hf_ffn_silu));
}
auto ffn_residual_kernel(Device d, Act a) {
    return by_act(a, HF_PICK(d, hf_ffn_residual), HF_PICK(d, hf_ffn_gelu_residual), HF_PICK(d, hf_ffn_gelu_tanh_residual),
                  HF_PICK(d, hf_ffn_silu_residual));
}
auto linear_dot_act_kernel(Device d, Act a) {
    return by_act(a, HF_PICK(d, hf_linear_dot_relu), HF_PICK(d, hf_linear_dot_gelu), HF_PICK(d, hf_linear_dot_gelu_tanh),
                  HF_PICK(d, hf_linear_dot_silu));
}
#ifdef HALFORMER_HAS_TRAINING
auto activation_kernel(Device d, Act a) {
    return by_act(a, HF_PICK(d, hf_relu), HF_PICK(d, hf_gelu), HF_PICK(d, hf_gelu_tanh), HF_PICK(d, hf_silu));
}
auto activation_backward_kernel(Device d, Act a) {
    return by_act(a, HF_PICK(d, hf_linear_backward_data_relu), HF_PICK(d, hf_linear_backward_data_gelu),
                  HF_PICK(d, hf_linear_backward_data_gelu_tanh), HF_PICK(d, hf_linear_backward_data_silu));
}

#endif

// Every inference FFN below writes out = FFN(in) [+ res] (res null: none)
// for M rows of `in`, with the weights f (a layer's, or one expert's).
// Through a hidden [M, F]: packed projections, or one-row ones.
void two_projections(Kernels &k, const Pass &p, const FfnW &f, const float *in, int M, const float *res,
                     Scratch &hid, float *out) {
    const int D = k.cfg.d_model, F = f.F;
    float *hidden = hid.need((size_t)M * F);
    if (k.packed(M)) {
        k.linear_packed("ffn", in, M, D, f.w1, F, D, f.b1, &k.desc.activation, nullptr, hidden, F);
        k.linear_packed("ffn", hidden, M, F, f.w2, D, F, f.b2, nullptr, res, out, D);
    } else {
        View vin(in, {{D, 1}, {M, D}}), w1(f.w1, {{D, 1}, {F, D}}), b1(f.b1, {{F, 1}}), vh(hidden, {{F, 1}, {M, F}});
        auto first = linear_dot_act_kernel(k.device(), k.desc.activation);
        k.run("ffn", [&] { return first(vin.get(), w1.get(), b1.get(), vh.get()); });
        linear(k, p, "ffn", Mat{hidden, M, F, F}, f.w2, f.b2, D, out, D, res);
    }
}

// The gated feed-forward (T5 v1.1, flan, Llama's SwiGLU): G = x·Wgᵀ + bg,
// then H = act(x·W1ᵀ + b1)·G in one kernel, then H·W2ᵀ + b2 (+ the residual).
void gated(Kernels &k, const Pass &p, const FfnW &f, const float *in, int M, const float *res, Scratch &hid,
           float *out) {
    const int D = k.cfg.d_model, F = f.F;
    const Act act = k.desc.activation;
    if (act != Act::GELUTanh && act != Act::SiLU) throw Error("internal: no gated kernel for this activation");
    float *gate = hid.need((size_t)2 * M * F), *hidden = gate + (size_t)M * F;
    linear(k, p, "ffn", Mat{in, M, D, D}, f.wg, f.bg, F, gate, F);
    if (k.packed(M)) {
        k.linear_packed_gated("ffn", in, M, D, f.w1, F, D, f.b1, act, gate, hidden, F);
    } else {
        View vin(in, {{D, 1}, {M, D}}), w1(f.w1, {{D, 1}, {F, D}}), b1(f.b1, {{F, 1}});
        View vg(gate, {{F, 1}, {M, F}}), vh(hidden, {{F, 1}, {M, F}});
        const bool dot = M <= dot_rows(k.device()), tanh = act == Act::GELUTanh;
        auto fn = dot ? (tanh ? HF_PICK(k.device(), hf_linear_dot_gelu_tanh_gated) : HF_PICK(k.device(), hf_linear_dot_silu_gated))
                      : (tanh ? HF_PICK(k.device(), hf_linear_gelu_tanh_gated) : HF_PICK(k.device(), hf_linear_silu_gated));
        k.run("ffn", [&] { return fn(vin.get(), w1.get(), b1.get(), vg.get(), vh.get()); });
    }
    linear(k, p, "ffn", Mat{hidden, M, F, F}, f.w2, f.b2, D, out, D, res);
}

void fused(Kernels &k, const FfnW &f, const float *in, int M, const float *res, float *out) {
    const int D = k.cfg.d_model, F = f.F;
    View w1(f.w1, {{D, 1}, {F, D}}), b1(f.b1, {{F, 1}}), w2(f.w2, {{F, 1}, {D, F}}), b2(f.b2, {{D, 1}});
    View vin(in, {{D, 1}, {M, D}}), vo(out, {{D, 1}, {M, D}});
    if (res) {
        View vr(res, {{D, 1}, {M, D}});
        auto fn = ffn_residual_kernel(k.device(), k.desc.activation);
        k.run("ffn", [&] { return fn(vin.get(), w1.get(), b1.get(), w2.get(), b2.get(), vr.get(), vo.get()); });
        return;
    }
    auto fn = ffn_kernel(k.device(), k.desc.activation);
    k.run("ffn", [&] { return fn(vin.get(), w1.get(), b1.get(), w2.get(), b2.get(), vo.get()); });
}

}  // namespace

FfnW ffn_weights(const Description &d, const LayerW &L, const LayerIO &io) {
    return {L.get("linear1.weight"), L.get("linear1.bias"), L.get("linear_gate.weight"), L.get("linear_gate.bias"),
            L.get("linear2.weight"), L.get("linear2.bias"), io.ffn_width(d)};
}

void feed_forward(Kernels &k, const Pass &p, const FfnW &f, const float *in, int M, const float *res, Scratch &hidden,
                  float *out) {
    if (p.train) throw Error("internal: feed_forward is inference's (training: feed_forward_join)");
    if (!f.w1 || !f.w2 || (k.desc.gated_ffn && !f.wg)) throw Error("internal: a feed-forward without its weights");
    if (k.desc.gated_ffn) return gated(k, p, f, in, M, res, hidden, out);
    if (k.packed(M) || M <= dot_rows(k.device())) return two_projections(k, p, f, in, M, res, hidden, out);
    fused(k, f, in, M, res, out);
}

void feed_forward(Kernels &k, const Pass &p, const LayerW &L, const float *in, const float *res, LayerIO &io,
                  float *out) {
    feed_forward(k, p, ffn_weights(k.desc, L, io), in, io.M(), res, *io.hidden, out);
}

void feed_forward_join(Kernels &k, const Pass &p, const LayerW &L, const NormW &n, const float *in, const float *res,
                       LayerIO &io) {
    const int D = k.cfg.d_model, F = io.ffn_width(k.desc), M = io.M();
    if (p.train && k.desc.gated_ffn) throw Error("training: no backward kernels for the gated feed-forward (T5 is inference only)");
    if (!p.train) {
        // Pre-LN: the residual added by the last kernel; post-LN: the
        // output alone, then LN(y + res).
        if (k.desc.norm_before()) return feed_forward(k, p, L, in, res, io, io.x_out);
        feed_forward(k, p, L, in, nullptr, io, io.y3);
        return add_layer_norm(k, n, io.y3, res, io.x_out, M);
    }
#ifndef HALFORMER_HAS_TRAINING
    no_training();
#else
    const FfnW f = ffn_weights(k.desc, L, io);
    linear(k, p, "linear", Mat{in, M, D, D}, f.w1, f.b1, F, io.z1, F);
    View vz(io.z1, {{F, 1}, {M, F}}), vh(io.h1, {{F, 1}, {M, F}});
    auto fn = activation_kernel(k.device(), k.desc.activation);
    k.run("activation", [&] { return fn(vz.get(), vh.get()); });
    linear(k, p, "linear", Mat{io.h1, M, F, F}, f.w2, f.b2, D, io.y3, D);
    join(k, p, io.y3, res, io.x_out, n, M, io.tensor + 3);
#endif
}

#ifdef HALFORMER_HAS_TRAINING

void feed_forward_backward(Kernels &k, const LayerW &L, const LayerW &G, const LayerIO &io, const float *in,
                           const float *dy, float *dz, float *din, bool acc) {
    const int D = k.cfg.d_model, F = io.ffn_width(k.desc), M = io.M();
    const FfnW w = ffn_weights(k.desc, L, io), g = ffn_weights(k.desc, G, io);
    linear_backward_weight(k, dy, D, io.h1, F, const_cast<float *>(g.w2), const_cast<float *>(g.b2), M);
    View vdy(dy, {{D, 1}, {M, D}}), vw(w.w2, {{F, 1}, {D, F}}), vz(io.z1, {{F, 1}, {M, F}}), vo(dz, {{F, 1}, {M, F}});
    auto fn = activation_backward_kernel(k.device(), k.desc.activation);
    k.run("linear_backward", [&] { return fn(vdy.get(), vw.get(), vz.get(), vo.get()); });
    linear_backward_weight(k, dz, F, in, D, const_cast<float *>(g.w1), const_cast<float *>(g.b1), M);
    linear_backward_data(k, dz, F, w.w1, D, din, M, acc);
}

#endif  // HALFORMER_HAS_TRAINING

}  // namespace layers
}  // namespace halformer
