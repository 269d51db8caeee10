// Reduced-precision projections (Precision::BF16, INT8): weights packed once
// by hf_pack_bf16 / hf_pack_int8, products by the hf_linear_{bf16,int8}*
// kernels. CPU only, and x86 only: a build without them (the ARM one, built
// with HALFORMER_NO_LOWP by tests/arm) refuses set_precision(BF16 / INT8).
#include "session.h"

#ifndef HALFORMER_NO_LOWP
#include "hf_linear_bf16.h"
#include "hf_linear_bf16_dot.h"
#include "hf_linear_bf16_dot_gelu.h"
#include "hf_linear_bf16_dot_gelu_tanh.h"
#include "hf_linear_bf16_dot_relu.h"
#include "hf_linear_bf16_dot_residual.h"
#include "hf_linear_bf16_gelu.h"
#include "hf_linear_bf16_gelu_tanh.h"
#include "hf_linear_bf16_silu.h"
#include "hf_linear_bf16_dot_silu.h"
#include "hf_linear_int8_silu.h"
#include "hf_linear_int8_dot_silu.h"
#include "hf_linear_bf16_relu.h"
#include "hf_linear_bf16_residual.h"
#include "hf_linear_int8.h"
#include "hf_linear_int8_dot.h"
#include "hf_linear_int8_dot_gelu.h"
#include "hf_linear_int8_dot_gelu_tanh.h"
#include "hf_linear_int8_dot_relu.h"
#include "hf_linear_int8_dot_residual.h"
#include "hf_linear_int8_gelu.h"
#include "hf_linear_int8_gelu_tanh.h"
#include "hf_linear_int8_relu.h"
#include "hf_linear_int8_residual.h"
#include "hf_pack_bf16.h"
#include "hf_linear_bf16_gelu_tanh_gated.h"
#include "hf_linear_bf16_dot_gelu_tanh_gated.h"
#include "hf_linear_bf16_silu_gated.h"
#include "hf_linear_bf16_dot_silu_gated.h"
#include "hf_linear_int8_gelu_tanh_gated.h"
#include "hf_linear_int8_dot_gelu_tanh_gated.h"
#include "hf_linear_int8_silu_gated.h"
#include "hf_linear_int8_dot_silu_gated.h"
#include "hf_pack_int8.h"
#endif

namespace halformer {

namespace {

constexpr int kPanel = 48;  // generators/packing.h

// Rows up to which a projection uses the one-row register blocks (_dot):
// measured 2026-11-23 (sapphirerapids, 2 threads, 1 × 512 → 2048) 84 GFLOP/s
// bf16 and 136 GOP/s int8 against 38 and 56 with the 9-row blocks.
constexpr int kDotRows = 1;

using Buf = halide_buffer_t *;
using Bf16Fn = int (*)(Buf, Buf, Buf, Buf);            // x, w, bias, y
using Bf16ResFn = int (*)(Buf, Buf, Buf, Buf, Buf);    // x, w, bias, residual, y
using Int8Fn = int (*)(Buf, Buf, Buf, Buf, Buf, Buf);  // x, w, scale, colsum, bias, y
using Int8ResFn = int (*)(Buf, Buf, Buf, Buf, Buf, Buf, Buf);

template <typename Fn>
Fn pick(bool dot, const Act *act, Fn plain, Fn relu, Fn gelu, Fn gelu_tanh, Fn silu, Fn dplain, Fn drelu, Fn dgelu,
        Fn dgelu_tanh, Fn dsilu) {
    if (!act) return dot ? dplain : plain;
    switch (*act) {
    case Act::ReLU: return dot ? drelu : relu;
    case Act::GELU: return dot ? dgelu : gelu;
    case Act::GELUTanh: return dot ? dgelu_tanh : gelu_tanh;
    case Act::SiLU: return dot ? dsilu : silu;
    }
    throw Error("internal: activation out of range");
}

}  // namespace

Precision parse_precision(const std::string &name) {
    if (name == "fp32" || name == "f32" || name == "float32") return Precision::FP32;
    if (name == "bf16" || name == "bfloat16") return Precision::BF16;
    if (name == "int8") return Precision::INT8;
    throw Error("unknown precision '" + name + "' (expected fp32, bf16 or int8)");
}

const char *precision_name(Precision p) {
    switch (p) {
    case Precision::FP32: return "fp32";
    case Precision::BF16: return "bf16";
    case Precision::INT8: return "int8";
    }
    return "?";
}

#ifndef HALFORMER_NO_LOWP
const PackedLinear &Session::pack(const float *weight, int N, int K) {
    // Sessions share the cache: prepack() has filled it, so this is a lookup
    // (entries of a std::map stay where they are while others are added).
    std::lock_guard<std::mutex> lock(w->packs->mu);
    auto key = std::make_pair(weight, N);
    auto it = w->packs->map.find(key);
    if (it != w->packs->map.end()) return it->second;
    PackedLinear &p = w->packs->map[key];
    const bool int8 = w->precision == Precision::INT8;
    p.N = N;
    p.K = K;
    p.kf = int8 ? 4 : 2;
    p.Np = (N + kPanel - 1) / kPanel * kPanel;
    p.groups = (K + p.kf - 1) / p.kf;
    const size_t values = (size_t)p.Np * p.groups * p.kf, bytes = values * (int8 ? 1 : 2);
    void *data = p.data.need((bytes + 3) / 4);
    const halide_type_t type = int8 ? halide_type_t(halide_type_int, 8) : halide_type_t(halide_type_bfloat, 16);
    View vw(weight, {{K, 1}, {N, K}}),
        vp(data, {{p.kf, 1}, {kPanel, p.kf}, {p.groups, p.kf * kPanel}, {p.Np / kPanel, p.kf * kPanel * p.groups}},
           type);
    if (int8) {
        View vs(p.scale.need(p.Np), {{p.Np, 1}}), vc(p.colsum.need(p.Np), {{p.Np, 1}}, true);
        run("pack", [&] { return hf_pack_int8(vw.get(), vp.get(), vs.get(), vc.get()); });
    } else {
        run("pack", [&] { return hf_pack_bf16(vw.get(), vp.get()); });
    }
    return p;
}

void Session::linear_lowp(const char *name, const float *x, int M, int x_stride, const float *weight, int N,
                              int K, const float *bias, const Act *act, const float *residual, float *y,
                              int y_stride) {
    const PackedLinear &p = pack(weight, N, K);
    const bool int8 = w->precision == Precision::INT8, dot = M <= kDotRows;
    const halide_type_t type = int8 ? halide_type_t(halide_type_int, 8) : halide_type_t(halide_type_bfloat, 16);
    View vx(x, {{K, 1}, {M, x_stride}}), vb(bias, {{N, 1}}), vy(y, {{N, 1}, {M, y_stride}}),
        vp(p.data.get(), {{p.kf, 1}, {kPanel, p.kf}, {p.groups, p.kf * kPanel}, {p.Np / kPanel, p.kf * kPanel * p.groups}},
           type);
    if (residual) {
        View vr(residual, {{N, 1}, {M, y_stride}});
        if (int8) {
            View vs(p.scale.get(), {{p.Np, 1}}), vc(p.colsum.get(), {{p.Np, 1}}, true);
            Int8ResFn fn = dot ? hf_linear_int8_dot_residual : hf_linear_int8_residual;
            run(name, [&] { return fn(vx.get(), vp.get(), vs.get(), vc.get(), vb.get(), vr.get(), vy.get()); });
        } else {
            Bf16ResFn fn = dot ? hf_linear_bf16_dot_residual : hf_linear_bf16_residual;
            run(name, [&] { return fn(vx.get(), vp.get(), vb.get(), vr.get(), vy.get()); });
        }
        return;
    }
    if (int8) {
        View vs(p.scale.get(), {{p.Np, 1}}), vc(p.colsum.get(), {{p.Np, 1}}, true);
        Int8Fn fn = pick<Int8Fn>(dot, act, hf_linear_int8, hf_linear_int8_relu, hf_linear_int8_gelu,
                                 hf_linear_int8_gelu_tanh, hf_linear_int8_silu, hf_linear_int8_dot,
                                 hf_linear_int8_dot_relu, hf_linear_int8_dot_gelu, hf_linear_int8_dot_gelu_tanh,
                                 hf_linear_int8_dot_silu);
        run(name, [&] { return fn(vx.get(), vp.get(), vs.get(), vc.get(), vb.get(), vy.get()); });
    } else {
        Bf16Fn fn = pick<Bf16Fn>(dot, act, hf_linear_bf16, hf_linear_bf16_relu, hf_linear_bf16_gelu,
                                 hf_linear_bf16_gelu_tanh, hf_linear_bf16_silu, hf_linear_bf16_dot,
                                 hf_linear_bf16_dot_relu, hf_linear_bf16_dot_gelu, hf_linear_bf16_dot_gelu_tanh,
                                 hf_linear_bf16_dot_silu);
        run(name, [&] { return fn(vx.get(), vp.get(), vb.get(), vy.get()); });
    }
}

void Session::linear_lowp_gated(const char *name, const float *x, int M, int x_stride, const float *weight, int N,
                                int K, const float *bias, Act act, const float *gate, float *y, int y_stride) {
    if (act != Act::GELUTanh && act != Act::SiLU) throw Error("internal: no gated kernel for this activation");
    const PackedLinear &p = pack(weight, N, K);
    const bool int8 = w->precision == Precision::INT8, dot = M <= kDotRows, tanh = act == Act::GELUTanh;
    const halide_type_t type = int8 ? halide_type_t(halide_type_int, 8) : halide_type_t(halide_type_bfloat, 16);
    View vx(x, {{K, 1}, {M, x_stride}}), vb(bias, {{N, 1}}), vy(y, {{N, 1}, {M, y_stride}}),
        vg(gate, {{N, 1}, {M, y_stride}}),
        vp(p.data.get(), {{p.kf, 1}, {kPanel, p.kf}, {p.groups, p.kf * kPanel}, {p.Np / kPanel, p.kf * kPanel * p.groups}},
           type);
    if (int8) {
        View vs(p.scale.get(), {{p.Np, 1}}), vc(p.colsum.get(), {{p.Np, 1}}, true);
        Int8ResFn fn = dot ? (tanh ? hf_linear_int8_dot_gelu_tanh_gated : hf_linear_int8_dot_silu_gated)
                           : (tanh ? hf_linear_int8_gelu_tanh_gated : hf_linear_int8_silu_gated);
        run(name, [&] { return fn(vx.get(), vp.get(), vs.get(), vc.get(), vb.get(), vg.get(), vy.get()); });
    } else {
        Bf16ResFn fn = dot ? (tanh ? hf_linear_bf16_dot_gelu_tanh_gated : hf_linear_bf16_dot_silu_gated)
                           : (tanh ? hf_linear_bf16_gelu_tanh_gated : hf_linear_bf16_silu_gated);
        run(name, [&] { return fn(vx.get(), vp.get(), vb.get(), vg.get(), vy.get()); });
    }
}
#else
const PackedLinear &Session::pack(const float *, int, int) {
    throw Error("this build has no bf16 / int8 kernels (x86 only)");
}

void Session::linear_lowp(const char *, const float *, int, int, const float *, int, int, const float *,
                              const Act *, const float *, float *, int) {
    throw Error("this build has no bf16 / int8 kernels (x86 only)");
}

void Session::linear_lowp_gated(const char *, const float *, int, int, const float *, int, int, const float *, Act,
                                const float *, float *, int) {
    throw Error("this build has no bf16 / int8 kernels (x86 only)");
}
#endif

void Model::set_precision(Precision p) {
    Session &m = *impl_->first;
    if (p != Precision::FP32 && m.device() != Device::CPU) {
        throw Error(std::string("precision ") + precision_name(p) + " runs on the CPU only (this model is on " +
                    device_name(m.device()) + ")");
    }
#ifdef HALFORMER_NO_LOWP
    if (p != Precision::FP32) {
        throw Error(std::string("precision ") + precision_name(p) +
                    " needs the x86 bf16 / int8 kernels, which this build (no x86) does not have: fp32 only");
    }
#endif
    std::lock_guard<std::mutex> lock(pool_->mu);
    pool_->require_idle("set_precision");
    // The weights' packed copies are shared by every session.
    impl_->w->packs = std::make_shared<PackCache>();
    impl_->w->precision = p;
    if (p != Precision::FP32) {
        DeviceScope scope(m.dev.get());
        m.prepack();
    }
}

void Session::prepack() {
    const int D = cfg.d_model, F = cfg.d_ff, A = desc.attn_width;
    for (const StackW *s : {&w->enc, &w->dec}) {
        for (const LayerW &L : s->layers) {
            for (const AttnW *a : {&L.self, &L.cross}) {
                if (!a->in_w) continue;
                pack(a->in_w, A, D);                      // the queries
                pack(a->in_w + (size_t)A * D, 2 * A, D);  // keys and values
                pack(a->out_w, D, A);
            }
            pack(L.w1, F, D);
            if (L.wg) pack(L.wg, F, D);
            pack(L.w2, D, F);
        }
    }
    if (w->gen_w) pack(w->gen_w, w->gen_rows, D);
}

Precision Model::precision() const { return impl_->w->precision; }

}  // namespace halformer
