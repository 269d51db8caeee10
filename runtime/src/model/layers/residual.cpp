// A sub-layer's output joining the residual stream (section 5.4: dropout on
// each sub-layer's output before the residual add; post-LN normalizes the
// sum, pre-LN leaves it), and the dropout masks of training.
#include "layers.h"


#ifdef HALFORMER_HAS_TRAINING
#include "hf_dropout.h"
#include "hf_dropout_residual.h"
HF_DEVICE_KERNELS(hf_dropout)
HF_DEVICE_KERNELS(hf_dropout_residual)
#endif

namespace halformer {
namespace layers {

void dropout(Kernels &k, const Pass &p, float *y, const float *res, float *out, int M, int N, int tensor) {
    if (p.dropout <= 0.0f && !res) {
        if (out != y) k.dev->copy(out, y, (size_t)M * N * sizeof(float));
        return;
    }
#ifndef HALFORMER_HAS_TRAINING
    no_training();
#else
    View vy(y, {{N, 1}, {M, N}}), vo(out, {{N, 1}, {M, N}});
    if (res) {
        View vr(res, {{N, 1}, {M, N}});
        k.run("dropout", [&] {
            return HF_PICK(k.device(), hf_dropout_residual)(vy.get(), p.dropout, p.seed, p.step, tensor, vr.get(),
                                                            vo.get());
        });
    } else {
        k.run("dropout", [&] {
            return HF_PICK(k.device(), hf_dropout)(vy.get(), p.dropout, p.seed, p.step, tensor, vo.get());
        });
    }
#endif
}

void join(Kernels &k, const Pass &p, float *y, const float *res, float *out, const NormW &n, int M, int tensor) {
    const bool pre = k.desc.norm_before();
    if (!p.train && pre) throw Error("internal: an inference pre-LN join belongs in its projection");
    if (p.train && pre) return dropout(k, p, y, res, out, M, k.cfg.d_model, tensor);
    if (p.train) dropout(k, p, y, nullptr, y, M, k.cfg.d_model, tensor);
    add_layer_norm(k, n, y, res, out, M);
}

void project_join(Kernels &k, const Pass &p, const AttnW &w, const float *att, const float *res, float *y,
                  float *out, const NormW &n, int M, int tensor) {
    const int D = k.cfg.d_model, A = k.desc.attn_width;
    const Mat a{att, M, A, A};
    // Inference, pre-LN: the residual is added by the projection's kernel.
    if (!p.train && k.desc.norm_before()) return linear(k, p, "linear", a, w.out_w, w.out_b, D, out, D, res);
    linear(k, p, "linear", a, w.out_w, w.out_b, D, y, D);
    join(k, p, y, res, out, n, M, tensor);
}

}  // namespace layers
}  // namespace halformer
