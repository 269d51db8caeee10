// Projections y = x·Wᵀ + b [+ residual], in the model's precision for
// inference and in float32 for training, and their backward.
#include "layers.h"

#include "hf_linear.h"
#include "hf_linear_dot.h"
#include "hf_linear_dot_residual.h"
#include "hf_linear_residual.h"
#include "hf_linear_relu.h"
#include "hf_linear_gelu.h"
#include "hf_linear_gelu_tanh.h"
#include "hf_linear_tanh.h"

HF_DEVICE_KERNELS(hf_linear_relu)
HF_DEVICE_KERNELS(hf_linear_gelu)
HF_DEVICE_KERNELS(hf_linear_gelu_tanh)
HF_DEVICE_KERNELS(hf_linear_tanh)
HF_DEVICE_KERNELS(hf_linear)
HF_DEVICE_KERNELS(hf_linear_dot)
HF_DEVICE_KERNELS(hf_linear_dot_residual)
HF_DEVICE_KERNELS(hf_linear_residual)
#ifdef HALFORMER_HAS_TRAINING
#include "hf_linear_backward_data.h"
#include "hf_linear_backward_data_acc.h"
#include "hf_linear_backward_weight.h"
HF_DEVICE_KERNELS(hf_linear_backward_data)
HF_DEVICE_KERNELS(hf_linear_backward_data_acc)
HF_DEVICE_KERNELS(hf_linear_backward_weight)
#endif

namespace halformer {
namespace layers {

void linear(Kernels &k, const Pass &p, const char *name, const Mat &x, const float *w, const float *b, int N,
            float *y, int y_stride, const float *residual, Shape shape) {
    const int M = x.rows, K = x.cols;
    if (!p.train && k.packed(M)) {
        return k.linear_packed(name, x.p, M, x.stride, w, N, K, b, nullptr, residual, y, y_stride);
    }
    View vx(x.p, {{K, 1}, {M, x.stride}}), vw(w, {{K, 1}, {N, K}}), vb(b, {{N, 1}}), vy(y, {{N, 1}, {M, y_stride}});
    const bool dot = !p.train && shape == Shape::Auto && M <= dot_rows(k.device());
    if (residual) {
        View vr(residual, {{N, 1}, {M, y_stride}});
        auto fn = dot ? HF_PICK(k.device(), hf_linear_dot_residual) : HF_PICK(k.device(), hf_linear_residual);
        k.run(name, [&] { return fn(vx.get(), vw.get(), vb.get(), vr.get(), vy.get()); });
    } else {
        auto fn = dot ? HF_PICK(k.device(), hf_linear_dot) : HF_PICK(k.device(), hf_linear);
        k.run(name, [&] { return fn(vx.get(), vw.get(), vb.get(), vy.get()); });
    }
}

void linear_act(Kernels &k, const char *name, const Mat &x, const float *w, const float *b, int N, float *y,
                HeadAct act) {
    const int M = x.rows, K = x.cols;
    View vx(x.p, {{K, 1}, {M, x.stride}}), vw(w, {{K, 1}, {N, K}}), vb(b, {{N, 1}}), vy(y, {{N, 1}, {M, N}});
    using Fn = int (*)(halide_buffer_t *, halide_buffer_t *, halide_buffer_t *, halide_buffer_t *);
    Fn fn = nullptr;
    switch (act) {
    case HeadAct::ReLU: fn = HF_PICK(k.device(), hf_linear_relu); break;
    case HeadAct::GELU: fn = HF_PICK(k.device(), hf_linear_gelu); break;
    case HeadAct::GELUTanh: fn = HF_PICK(k.device(), hf_linear_gelu_tanh); break;
    case HeadAct::Tanh: fn = HF_PICK(k.device(), hf_linear_tanh); break;
    }
    k.run(name, [&] { return fn(vx.get(), vw.get(), vb.get(), vy.get()); });
}

HeadAct head_act(Act a) {
    switch (a) {
    case Act::ReLU: return HeadAct::ReLU;
    case Act::GELU: return HeadAct::GELU;
    case Act::GELUTanh: return HeadAct::GELUTanh;
    case Act::SiLU: break;
    }
    throw Error(std::string("a masked-LM head with activation ") + act_name(a) + " has no kernel");
}

#ifdef HALFORMER_HAS_TRAINING

void linear_backward_data(Kernels &k, const float *dy, int N, const float *w, int K, float *dx, int M, bool acc) {
    View vdy(dy, {{N, 1}, {M, N}}), vw(w, {{K, 1}, {N, K}}), vo(dx, {{K, 1}, {M, K}});
    if (acc) {
        k.run("linear_backward", [&] {
            return HF_PICK(k.device(), hf_linear_backward_data_acc)(vdy.get(), vw.get(), vo.get(), vo.get());
        });
    } else {
        k.run("linear_backward",
              [&] { return HF_PICK(k.device(), hf_linear_backward_data)(vdy.get(), vw.get(), vo.get()); });
    }
}

void linear_backward_weight(Kernels &k, const float *dy, int N, const float *x, int K, float *dw, float *db, int M) {
    View vdy(dy, {{N, 1}, {M, N}}), vx(x, {{K, 1}, {M, K}}), vdw(dw, {{K, 1}, {N, K}}), vdb(db, {{N, 1}});
    k.run("linear_backward", [&] {
        return HF_PICK(k.device(), hf_linear_backward_weight)(vdy.get(), vx.get(), vdw.get(), vdb.get(), vdw.get(),
                                                              vdb.get());
    });
}

#endif  // HALFORMER_HAS_TRAINING

}  // namespace layers
}  // namespace halformer
