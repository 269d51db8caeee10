// LayerNorm (or T5's RMSNorm) over D-wide rows (or rows of any width: a
// head's queries), with the residual added first or after (a post-norm
// join), and the backward of each (LayerNorm only).
#include "layers.h"

#include "hf_layer_norm.h"
#include "hf_layer_norm_residual.h"
#include "hf_rms_norm.h"
#include "hf_rms_norm_residual.h"
#include "hf_rms_norm_add.h"

HF_DEVICE_KERNELS(hf_layer_norm)
HF_DEVICE_KERNELS(hf_layer_norm_residual)
HF_DEVICE_KERNELS(hf_rms_norm)
HF_DEVICE_KERNELS(hf_rms_norm_residual)
HF_DEVICE_KERNELS(hf_rms_norm_add)
#ifdef HALFORMER_HAS_TRAINING
#include "hf_layer_norm_backward.h"
#include "hf_layer_norm_backward_acc.h"
#include "hf_layer_norm_residual_backward.h"
HF_DEVICE_KERNELS(hf_layer_norm_backward)
HF_DEVICE_KERNELS(hf_layer_norm_backward_acc)
HF_DEVICE_KERNELS(hf_layer_norm_residual_backward)
#endif

namespace halformer {
namespace layers {
namespace {

View rows(const float *p, int D, int M) { return View(p, {{D, 1}, {M, D}}); }

}  // namespace

void layer_norm(Kernels &k, const NormW &n, const float *x, float *out, int M, int width) {
    const int D = width > 0 ? width : k.cfg.d_model;
    View vi = rows(x, D, M), vo = rows(out, D, M), g(n.g, {{D, 1}}), b(n.b, {{D, 1}});
    const float eps = k.desc.norm_eps;
    if (k.desc.rms()) {
        k.run("layer_norm", [&] { return HF_PICK(k.device(), hf_rms_norm)(vi.get(), g.get(), eps, vo.get()); });
        return;
    }
    k.run("layer_norm", [&] { return HF_PICK(k.device(), hf_layer_norm)(vi.get(), g.get(), b.get(), eps, vo.get()); });
}

void add_layer_norm(Kernels &k, const NormW &n, const float *x, const float *res, float *out, int M) {
    const int D = k.cfg.d_model;
    View vi = rows(x, D, M), vr = rows(res, D, M), vo = rows(out, D, M), g(n.g, {{D, 1}}), b(n.b, {{D, 1}});
    const float eps = k.desc.norm_eps;
    if (k.desc.rms()) {
        k.run("layer_norm", [&] {
            return HF_PICK(k.device(), hf_rms_norm_residual)(vi.get(), g.get(), eps, vr.get(), vo.get());
        });
        return;
    }
    k.run("layer_norm", [&] {
        return HF_PICK(k.device(), hf_layer_norm_residual)(vi.get(), g.get(), b.get(), eps, vr.get(), vo.get());
    });
}

void norm_add(Kernels &k, const NormW &n, const float *x, const float *res, float *out, int M) {
    const int D = k.cfg.d_model;
    if (!k.desc.rms()) throw Error("internal: a post-norm join of LayerNorm has no kernel (RMSNorm's has)");
    View vi = rows(x, D, M), vr = rows(res, D, M), vo = rows(out, D, M), g(n.g, {{D, 1}});
    const float eps = k.desc.norm_eps;
    k.run("layer_norm", [&] {
        return HF_PICK(k.device(), hf_rms_norm_add)(vi.get(), g.get(), eps, vr.get(), vo.get());
    });
}

#ifdef HALFORMER_HAS_TRAINING

void layer_norm_backward(Kernels &k, const NormW &n, const NormW &gn, const float *x, const float *dy, float *dx,
                         int M) {
    const int D = k.cfg.d_model;
    View vi = rows(x, D, M), vdy = rows(dy, D, M), vo = rows(dx, D, M), g(n.g, {{D, 1}});
    View dg(gn.g, {{D, 1}}), db(gn.b, {{D, 1}});
    const float eps = k.desc.norm_eps;
    k.run("layer_norm_backward", [&] {
        return HF_PICK(k.device(), hf_layer_norm_backward)(vi.get(), g.get(), eps, vdy.get(), dg.get(), db.get(),
                                                           vo.get(), dg.get(), db.get());
    });
}

void layer_norm_backward_acc(Kernels &k, const NormW &n, const NormW &gn, const float *x, const float *dy,
                             float *dx, int M) {
    const int D = k.cfg.d_model;
    View vi = rows(x, D, M), vdy = rows(dy, D, M), vo = rows(dx, D, M), g(n.g, {{D, 1}});
    View dg(gn.g, {{D, 1}}), db(gn.b, {{D, 1}});
    const float eps = k.desc.norm_eps;
    k.run("layer_norm_backward", [&] {
        return HF_PICK(k.device(), hf_layer_norm_backward_acc)(vi.get(), g.get(), eps, vdy.get(), dg.get(), db.get(),
                                                               vo.get(), vo.get(), dg.get(), db.get());
    });
}

void add_layer_norm_backward(Kernels &k, const NormW &n, const NormW &gn, const float *x, const float *res,
                             const float *dy, float *dx, int M) {
    const int D = k.cfg.d_model;
    View vi = rows(x, D, M), vr = rows(res, D, M), vdy = rows(dy, D, M), vo = rows(dx, D, M), g(n.g, {{D, 1}});
    View dg(gn.g, {{D, 1}}), db(gn.b, {{D, 1}});
    const float eps = k.desc.norm_eps;
    k.run("layer_norm_backward", [&] {
        return HF_PICK(k.device(), hf_layer_norm_residual_backward)(vi.get(), g.get(), eps, vdy.get(), dg.get(),
                                                                    db.get(), vr.get(), vo.get(), dg.get(), db.get());
    });
}

#endif  // HALFORMER_HAS_TRAINING

}  // namespace layers
}  // namespace halformer
