// The output head: the vocabulary projection for inference (with the
// log-softmax for decoding), and for training the projection, the
// label-smoothed cross-entropy (section 5.4) and their backward.
#include "layers.h"

#include "hf_linear.h"
#include "hf_linear_dot.h"
#include "hf_log_softmax.h"
#include "hf_logits_adjust.h"
#include "hf_output_head.h"
#include "hf_softcap.h"
#include "hf_softmax.h"
#include "hf_topk8.h"
#include "hf_pool_first.h"
#include "hf_pool_first_l2.h"
#include "hf_pool_mean.h"
#include "hf_pool_mean_l2.h"

HF_DEVICE_KERNELS(hf_softcap)
HF_DEVICE_KERNELS(hf_softmax)
HF_DEVICE_KERNELS(hf_topk8)
HF_DEVICE_KERNELS(hf_pool_first)
HF_DEVICE_KERNELS(hf_pool_first_l2)
HF_DEVICE_KERNELS(hf_pool_mean)
HF_DEVICE_KERNELS(hf_pool_mean_l2)
HF_DEVICE_KERNELS(hf_linear)
HF_DEVICE_KERNELS(hf_linear_dot)
HF_DEVICE_KERNELS(hf_log_softmax)
HF_DEVICE_KERNELS(hf_logits_adjust)
HF_DEVICE_KERNELS(hf_output_head)
#ifdef HALFORMER_HAS_TRAINING
#include "hf_cross_entropy.h"
#include "hf_linear_backward_data.h"
#include "hf_linear_backward_weight.h"
#include "hf_linear_backward_weight_rows.h"
HF_DEVICE_KERNELS(hf_cross_entropy)
HF_DEVICE_KERNELS(hf_linear_backward_data)
HF_DEVICE_KERNELS(hf_linear_backward_weight)
HF_DEVICE_KERNELS(hf_linear_backward_weight_rows)
#endif

namespace halformer {
namespace layers {

void softmax(Kernels &k, const float *x, int R, int N, float *out) {
    View vx(x, {{N, 1}, {R, N}}), vo(out, {{N, 1}, {R, N}});
    k.run("softmax", [&] { return HF_PICK(k.device(), hf_softmax)(vx.get(), vo.get()); });
}

void log_softmax(Kernels &k, const float *x, int R, int N, float *out) {
    View vx(x, {{N, 1}, {R, N}}), vo(out, {{N, 1}, {R, N}});
    k.run("log_softmax", [&] { return HF_PICK(k.device(), hf_log_softmax)(vx.get(), vo.get()); });
}

void logits_adjust(Kernels &k, const float *x, int R, int V, const int32_t *rows, const int32_t *ids,
                   const float *factor, int n, float *out) {
    View vx(x, {{V, 1}, {R, V}}), vo(out, {{V, 1}, {R, V}});
    View vr(rows, {{n, 1}}, true), vi(ids, {{n, 1}}, true), vf(factor, {{n, 1}});
    vf.per_call();  // a step's factors, refilled in place each step
    k.run("logits_adjust", [&] {
        return HF_PICK(k.device(), hf_logits_adjust)(vx.get(), vr.get(), vi.get(), vf.get(), vo.get());
    });
}

void pool(Kernels &k, const float *x, int T, int R, const int32_t *lens, bool mean, bool normalize, float *out) {
    const int D = k.cfg.d_model;
    View vx(x, {{D, 1}, {R, D}, {T, R * D}}), vl(lens, {{R, 1}}, true), vo(out, {{D, 1}, {R, D}});
    auto fn = mean ? (normalize ? HF_PICK(k.device(), hf_pool_mean_l2) : HF_PICK(k.device(), hf_pool_mean))
                   : (normalize ? HF_PICK(k.device(), hf_pool_first_l2) : HF_PICK(k.device(), hf_pool_first));
    k.run("pool", [&] { return fn(vx.get(), vl.get(), vo.get()); });
}

void top8(Kernels &k, const float *x, int R, int N, float *probs, float *values, int32_t *ids) {
    softmax(k, x, R, N, probs);
    View vp(probs, {{N, 1}, {R, N}}), vv(values, {{8, 1}, {R, 8}}), vi(ids, {{8, 1}, {R, 8}}, true);
    k.run("topk", [&] { return HF_PICK(k.device(), hf_topk8)(vp.get(), vv.get(), vi.get()); });
}

void project(Kernels &k, const HeadW &h, const float *x, int M, int row_stride, float *out, bool log_softmax) {
    const int D = k.cfg.d_model, V = h.rows;
    View vx(x, {{D, 1}, {M, row_stride}}), vw(h.w, {{D, 1}, {V, D}}), vb(h.b, {{V, 1}}), vy(out, {{V, 1}, {M, V}});
    if (k.desc.logit_softcap > 0) {
        // Gemma 2: the logits capped, cap·tanh(l/cap), before any softmax.
        float *raw = log_softmax ? k.head_tmp.need((size_t)M * V) : out;
        linear(k, Pass{}, "output_head", Mat{x, M, D, row_stride}, h.w, h.b, V, raw, V);
        View vr(raw, {{V, 1}, {M, V}});
        const float cap = k.desc.logit_softcap;
        k.run("softcap", [&] { return HF_PICK(k.device(), hf_softcap)(vr.get(), cap, vr.get()); });
        if (log_softmax) k.run("output_head", [&] { return HF_PICK(k.device(), hf_log_softmax)(vr.get(), vy.get()); });
        return;
    }
    if (!log_softmax) {
        return linear(k, Pass{}, "output_projection", Mat{x, M, D, row_stride}, h.w, h.b, V, out, V);
    }
    // The projection (packed, or the one-pass dot for the decode shape: the
    // fused head's panels would transpose all of W on every call), then the
    // log-softmax. Wherever one-row steps run packed (packed(1)) every row
    // count takes this path: the fused head's log-softmax sums in another
    // order, and a row's scores would depend on its batch.
    if (k.packed(1) || M <= dot_rows(k.device())) {
        float *raw = k.head_tmp.need((size_t)M * V);
        View vr(raw, {{V, 1}, {M, V}});
        linear(k, Pass{}, "output_head", Mat{x, M, D, row_stride}, h.w, h.b, V, raw, V);
        k.run("output_head", [&] { return HF_PICK(k.device(), hf_log_softmax)(vr.get(), vy.get()); });
        return;
    }
    k.run("output_head", [&] { return HF_PICK(k.device(), hf_output_head)(vx.get(), vw.get(), vb.get(), vy.get()); });
}

#ifdef HALFORMER_HAS_TRAINING

Loss head_loss(Kernels &k, const HeadW &h, const float *x, int M, const int32_t *targets, float label_smoothing,
               float *logits) {
    const int D = k.cfg.d_model, V = h.rows;
    Pass train;
    train.train = true;
    linear(k, train, "linear", Mat{x, M, D, D}, h.w, h.b, V, logits, V);
    ScalarOut<float> loss;
    ScalarOut<int32_t> count;
    View vl(logits, {{V, 1}, {M, V}}), vt(targets, {{M, 1}}, true);
    k.run("cross_entropy", [&] {
        return HF_PICK(k.device(), hf_cross_entropy)(vl.get(), vt.get(), label_smoothing, -1, 1.0f, vl.get(),
                                                      loss.get(), count.get());
    });
    return {(double)loss.read(), (int64_t)count.read()};
}

void head_backward(Kernels &k, const HeadW &h, const HeadW &g, const float *x, int M, const float *dlogits,
                   float *dx) {
    const int D = k.cfg.d_model, V = h.rows;
    linear_backward_data(k, dlogits, V, h.w, D, dx, M, false);
    View vdl(dlogits, {{V, 1}, {M, V}}), vx(x, {{D, 1}, {M, D}}), vgw(g.w, {{D, 1}, {V, D}}), vgb(g.b, {{V, 1}});
    // The vocabulary is wide: vectorized along it (see generators/CMakeLists.txt).
    auto fn = V >= 2 * D ? HF_PICK(k.device(), hf_linear_backward_weight_rows) : HF_PICK(k.device(), hf_linear_backward_weight);
    k.run("linear_backward", [&] { return fn(vdl.get(), vx.get(), vgw.get(), vgb.get(), vgw.get(), vgb.get()); });
}

#endif  // HALFORMER_HAS_TRAINING

}  // namespace layers
}  // namespace halformer
