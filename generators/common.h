// Shared algorithm pieces for Halformer's generators: activations and small
// numerical helpers. Nothing here says how anything runs.
#pragma once

#include "Halide.h"

#include <map>
#include <string>

namespace halformer {

enum class Activation { None, ReLU, GELU, GELUTanh, SiLU, Tanh };

inline const std::map<std::string, Activation> &activation_names() {
    static const std::map<std::string, Activation> names = {
        {"none", Activation::None},
        {"relu", Activation::ReLU},
        {"gelu", Activation::GELU},
        {"gelu_tanh", Activation::GELUTanh},
        {"silu", Activation::SiLU},
        {"tanh", Activation::Tanh},
    };
    return names;
}

// erf(z) for fp32 from the complementary error function's Chebyshev fit
// (Numerical Recipes' erfcc): fractional error below 1.2e-7 for all z, so
// GELU's 0.5·x·(1 + erf(x/√2)) stays within fp32 rounding of the exact value.
// Halide 14 has no erf intrinsic.
inline Halide::Expr erf_f32(Halide::Expr z) {
    using namespace Halide;
    Expr a = abs(z);
    Expr t = 1.0f / (1.0f + 0.5f * a);
    Expr poly = -1.26551223f +
                t * (1.00002368f +
                t * (0.37409196f +
                t * (0.09678418f +
                t * (-0.18628806f +
                t * (0.27886807f +
                t * (-1.13520398f +
                t * (1.48851587f +
                t * (-0.82215223f +
                t * 0.17087277f))))))));
    Expr erfc_a = t * exp(-a * a + poly);
    Expr erf_a = 1.0f - erfc_a;
    return select(z >= 0.0f, erf_a, -erf_a);
}

// σ(x) = 1 / (1 + e^−x) from e^−|x| ≤ 1, so that nothing overflows (the
// kernels are compiled assuming no inf).
inline Halide::Expr sigmoid_f32(Halide::Expr x) {
    using namespace Halide;
    Expr e = exp(-abs(x));
    return select(x >= 0.0f, 1.0f / (1.0f + e), e / (1.0f + e));
}

// The activation of v, evaluated in strict float (no contraction of a
// product and a sum into an FMA): exp's polynomial and the sums around it
// were contracted in some kernels and not in others, so SiLU's values
// differed by an ulp between the packed kernels (decode shapes) and the
// panel kernels (prefill), and a prompt's logits depended on how many rows
// its call had. ReLU has nothing to contract.
inline Halide::Expr activation_formula(Halide::Expr v, Activation act);
inline Halide::Expr activate(Halide::Expr v, Activation act) {
    if (act == Activation::None || act == Activation::ReLU) return activation_formula(v, act);
    return Halide::strict_float(activation_formula(v, act));
}

inline Halide::Expr activation_formula(Halide::Expr v, Activation act) {
    using namespace Halide;
    switch (act) {
    case Activation::None:
        return v;
    case Activation::ReLU:
        return max(v, 0.0f);
    case Activation::GELU:
        // Exact (erf) form, as torch.nn.functional.gelu(approximate='none').
        return 0.5f * v * (1.0f + erf_f32(v * 0.70710678118654752f));
    case Activation::GELUTanh: {
        // tanh form, as gelu(approximate='tanh'): √(2/π)·(x + 0.044715·x³).
        Expr inner = 0.79788456080286536f * (v + 0.044715f * v * v * v);
        return 0.5f * v * (1.0f + tanh(inner));
    }
    case Activation::SiLU:
        // x·σ(x) (swish), as torch.nn.functional.silu.
        return v * sigmoid_f32(v);
    case Activation::Tanh:
        // BERT's pooler.
        return tanh(v);
    }
    return v;
}

// tanh from exp: sign(x)·(1 − e)/(1 + e) with e = exp(−2|x|) (never
// overflows). Halide 14's tanh is a scalar libm call inside vector loops:
// per attention score it made Gemma 2's soft-capped kernels 6-8× slower
// than the uncapped ones (bench/kernels_bench.cpp, 2026-12-02); exp is
// vectorized. Absolute error below 1e-7 (relative error grows as |x| → 0,
// where tanh(x) ≈ x is tiny).
inline Halide::Expr tanh_via_exp(Halide::Expr x) {
    using namespace Halide;
    Expr e = exp(-2.0f * abs(x));
    Expr t = (1.0f - e) / (1.0f + e);
    return select(x < 0.0f, -t, t);
}

// A finite stand-in for -inf in masked scores. Every mask test compares
// against kMaskedHalf, so no inf or NaN ever enters the arithmetic: a fully
// masked row is detected, not computed.
constexpr float kMasked = -3.0e38f;
constexpr float kMaskedHalf = -1.5e38f;

}  // namespace halformer

namespace halformer {

// acc(n, m) = Σ_k x(k, m) · w(k, n): the X·Wᵀ product of nn.Linear, with W in
// PyTorch's [N, K] layout. Reads past the last row of x or w are clamped (a
// schedule may compute whole register blocks past the edge; those values are
// never stored). The operands are Funcs a schedule may place (all inline
// unless scheduled, so they cost nothing where no schedule touches them):
//   wk(k, n) = W as read (its rows, k contiguous), wt(n, k) = W transposed;
//   xk(k, m) = X as read, xt(m, k) = X transposed.
// The CPU schedules pack wt into panels; the GPU prefill schedule makes wt
// and xt contiguous copies so that a thread's loads are vectors along n and m.
struct Matmul {
    Halide::Func acc, wt;
    Halide::RDom r;
    Halide::Func wk, xk, xt;
    Halide::Expr rows, cols;  // M and N
};

inline Matmul define_matmul(Halide::Func x, Halide::Expr rows, Halide::Expr K,
                            Halide::Func w, Halide::Expr N, const std::string &name) {
    using namespace Halide;
    Var k("k"), n("n"), m("m");
    Matmul mm{Func(name + "_acc"), Func(name + "_wt"), RDom(0, K, name + "_r"),
              Func(name + "_wk"), Func(name + "_xk"), Func(name + "_xt"), rows, N};
    mm.wk(k, n) = w(k, clamp(n, 0, N - 1));
    mm.wt(n, k) = mm.wk(k, n);
    mm.xk(k, m) = x(k, clamp(m, 0, rows - 1));
    mm.xt(m, k) = mm.xk(k, m);
    mm.acc(n, m) = 0.0f;
    mm.acc(n, m) += mm.xt(m, mm.r) * mm.wt(n, mm.r);
    return mm;
}

}  // namespace halformer
