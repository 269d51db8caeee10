// The training kernels against double-precision references: analytic
// gradients (linear, embedding) and central finite differences of the
// forward references in tests/reference.h (attention, LayerNorm, the loss,
// the activations) on random and hostile inputs. Each check is the relative
// L2 error over the whole gradient tensor (ref::rel_error).
#include "../reference.h"
#include "../kernels.h"

#include "hf_adam.h"
#include "hf_attention_backward.h"
#include "hf_attention_causal_backward.h"
#include "hf_axpy.h"
#include "hf_cross_entropy.h"
#include "hf_dropout.h"
#include "hf_dropout_residual.h"
#include "hf_embedding_backward.h"
#include "hf_embedding_learned_backward.h"
#include "hf_gelu.h"
#include "hf_gelu_tanh.h"
#include "hf_silu.h"
#include "hf_linear_backward_data_silu.h"
#include "hf_layer_norm_backward.h"
#include "hf_layer_norm_backward_acc.h"
#include "hf_layer_norm_residual_backward.h"
#include "hf_linear_backward_data.h"
#include "hf_linear_backward_data_acc.h"
#include "hf_linear_backward_data_gelu.h"
#include "hf_linear_backward_data_gelu_tanh.h"
#include "hf_linear_backward_data_relu.h"
#include "hf_linear_backward_weight.h"
#include "hf_linear_backward_weight_rows.h"
#include "hf_relu.h"
#include "hf_sum_squares.h"

#include <algorithm>
#include <functional>

HF_DECLARE_GPU(hf_adam)
HF_DECLARE_GPU(hf_attention_backward)
HF_DECLARE_GPU(hf_attention_causal_backward)
HF_DECLARE_GPU(hf_axpy)
HF_DECLARE_GPU(hf_cross_entropy)
HF_DECLARE_GPU(hf_dropout)
HF_DECLARE_GPU(hf_dropout_residual)
HF_DECLARE_GPU(hf_embedding_backward)
HF_DECLARE_GPU(hf_embedding_learned_backward)
HF_DECLARE_GPU(hf_gelu)
HF_DECLARE_GPU(hf_gelu_tanh)
HF_DECLARE_GPU(hf_layer_norm_backward)
HF_DECLARE_GPU(hf_layer_norm_backward_acc)
HF_DECLARE_GPU(hf_layer_norm_residual_backward)
HF_DECLARE_GPU(hf_linear_backward_data)
HF_DECLARE_GPU(hf_linear_backward_data_acc)
HF_DECLARE_GPU(hf_linear_backward_data_gelu)
HF_DECLARE_GPU(hf_linear_backward_data_gelu_tanh)
HF_DECLARE_GPU(hf_linear_backward_data_relu)
HF_DECLARE_GPU(hf_linear_backward_weight)
HF_DECLARE_GPU(hf_linear_backward_weight_rows)
HF_DECLARE_GPU(hf_relu)
HF_DECLARE_GPU(hf_silu)
HF_DECLARE_GPU(hf_linear_backward_data_silu)
HF_DECLARE_GPU(hf_sum_squares)

using ref::Array;
using ref::Buffer;

// A kernel on the device under test, parenthesised so that it can sit inside
// an assertion macro's arguments.
#define K(base) (HF_KERNEL(base))

namespace {

// Gradient tolerance: float32 kernels against exact double gradients.
constexpr double kGradTol = 2e-5;

// dL/dx by central differences of L(x) = f(x) (a double function of the
// array), for every element of x.
Array numeric_grad(Array x, const std::function<double(const Array &)> &f, double h = 1e-6) {
    Array g(x.dims);
    for (size_t i = 0; i < x.v.size(); i++) {
        double keep = x.v[i];
        x.v[i] = keep + h;
        double up = f(x);
        x.v[i] = keep - h;
        double down = f(x);
        x.v[i] = keep;
        g.v[i] = (up - down) / (2 * h);
    }
    return g;
}

double dot(const Array &a, const Array &b) {
    double s = 0;
    for (size_t i = 0; i < a.v.size(); i++) s += a.v[i] * b.v[i];
    return s;
}

double act_derivative(double z, const std::string &act) {
    const double h = 1e-6;
    return (ref::activate(z + h, act) - ref::activate(z - h, act)) / (2 * h);
}

}  // namespace

// ---- linear ----

struct LinearShape {
    int M, N, K;
};
const std::vector<LinearShape> kLinearShapes = {{1, 1, 1}, {7, 33, 17}, {129, 48, 64}, {64, 100, 37}, {3, 512, 20}};

TEST(LinearBackward, DataMatchesDyTimesW) {
    uint32_t seed = 1;
    for (auto s : kLinearShapes) {
        Buffer<float> dy = ref::random_buffer({s.N, s.M}, seed++), w = ref::random_buffer({s.K, s.N}, seed++);
        Buffer<float> dx(s.K, s.M);
        ASSERT_EQ(K(hf_linear_backward_data)(dy, w, dx), 0);
        Array rdy = ref::to_array(dy), rw = ref::to_array(w), r({s.K, s.M});
        for (int m = 0; m < s.M; m++)
            for (int k = 0; k < s.K; k++)
                for (int n = 0; n < s.N; n++) r(k, m) += rdy(n, m) * rw(k, n);
        EXPECT_LE(ref::rel_error(dx, r), kGradTol) << s.M << "x" << s.N << "x" << s.K;
        // Accumulating variant: adds to what the buffer holds (passed as both).
        Buffer<float> acc = ref::random_buffer({s.K, s.M}, seed++);
        Array before = ref::to_array(acc);
        ASSERT_EQ(K(hf_linear_backward_data_acc)(dy, w, acc, acc), 0);
        for (size_t i = 0; i < r.v.size(); i++) before.v[i] += r.v[i];
        EXPECT_LE(ref::rel_error(acc, before), kGradTol);
    }
}

TEST(LinearBackward, DataThroughActivation) {
    using Fn = int (*)(halide_buffer_t *, halide_buffer_t *, halide_buffer_t *, halide_buffer_t *);
    const std::vector<std::pair<std::string, Kernel<Fn>>> acts = {
        {"relu", K(hf_linear_backward_data_relu)},
        {"gelu", K(hf_linear_backward_data_gelu)},
        {"gelu_tanh", K(hf_linear_backward_data_gelu_tanh)},
        {"silu", K(hf_linear_backward_data_silu)}};
    uint32_t seed = 10;
    for (auto &[name, fn] : acts) {
        for (auto s : kLinearShapes) {
            Buffer<float> dy = ref::random_buffer({s.N, s.M}, seed++), w = ref::random_buffer({s.K, s.N}, seed++);
            Buffer<float> z = ref::random_buffer({s.K, s.M}, seed++, -4, 4), dz(s.K, s.M);
            ASSERT_EQ(fn(dy, w, z, dz), 0);
            Array rdy = ref::to_array(dy), rw = ref::to_array(w), rz = ref::to_array(z), r({s.K, s.M});
            for (int m = 0; m < s.M; m++)
                for (int k = 0; k < s.K; k++) {
                    double acc = 0;
                    for (int n = 0; n < s.N; n++) acc += rdy(n, m) * rw(k, n);
                    r(k, m) = acc * act_derivative(rz(k, m), name);
                }
            // relu's derivative is a step; z is never within 1e-6 of 0 here.
            EXPECT_LE(ref::rel_error(dz, r), 1e-4) << name << " " << s.M << "x" << s.N << "x" << s.K;
        }
    }
}

TEST(LinearBackward, WeightAndBiasAccumulate) {
    uint32_t seed = 30;
    for (auto s : kLinearShapes)
    for (bool by_rows : {false, true}) {
        Buffer<float> dy = ref::random_buffer({s.N, s.M}, seed++), x = ref::random_buffer({s.K, s.M}, seed++);
        Buffer<float> dw = ref::random_buffer({s.K, s.N}, seed++), db = ref::random_buffer({s.N}, seed++);
        Array rw = ref::to_array(dw), rb = ref::to_array(db), rdy = ref::to_array(dy), rx = ref::to_array(x);
        ASSERT_EQ(by_rows ? K(hf_linear_backward_weight_rows)(dy, x, dw, db, dw, db)
                          : K(hf_linear_backward_weight)(dy, x, dw, db, dw, db),
                  0);
        for (int n = 0; n < s.N; n++) {
            for (int m = 0; m < s.M; m++) {
                rb(n) += rdy(n, m);
                for (int k = 0; k < s.K; k++) rw(k, n) += rdy(n, m) * rx(k, m);
            }
        }
        EXPECT_LE(ref::rel_error(dw, rw), kGradTol) << s.M << "x" << s.N << "x" << s.K << (by_rows ? " by rows" : "");
        EXPECT_LE(ref::rel_error(db, rb), kGradTol);
    }
}

// ---- attention ----

struct AttnCase {
    const char *name;
    int dk, Tq, Tkv, H, B;
    std::vector<int> kv_len;
    int q_offset;
    bool causal;
    float amplitude;  // of q and k: 30 gives scores of ±1e3 (one key takes all)
};

class AttentionBackwardTest : public testing::TestWithParam<AttnCase> {};

TEST_P(AttentionBackwardTest, MatchesFiniteDifferences) {
    const AttnCase c = GetParam();
    const double scale = 1.0 / std::sqrt((double)c.dk);
    uint32_t seed = 100 + c.dk * 7 + c.Tq;
    Buffer<float> q = ref::random_buffer({c.dk, c.Tq, c.H, c.B}, seed++, -c.amplitude, c.amplitude);
    Buffer<float> k = ref::random_buffer({c.dk, c.Tkv, c.H, c.B}, seed++, -c.amplitude, c.amplitude);
    Buffer<float> v = ref::random_buffer({c.dk, c.Tkv, c.H, c.B}, seed++);
    Buffer<float> dout = ref::random_buffer({c.dk, c.Tq, c.H, c.B}, seed++);
    Buffer<int32_t> lens(c.B);
    for (int b = 0; b < c.B; b++) lens(b) = c.kv_len[b];
    Array rq = ref::to_array(q), rk = ref::to_array(k), rv = ref::to_array(v), rdo = ref::to_array(dout);
    Array o = ref::attention(rq, rk, rv, c.kv_len, c.q_offset, scale, c.causal);
    Buffer<float> ob(c.dk, c.Tq, c.H, c.B);
    for (int b = 0; b < c.B; b++)
        for (int h = 0; h < c.H; h++)
            for (int i = 0; i < c.Tq; i++)
                for (int d = 0; d < c.dk; d++) ob(d, i, h, b) = (float)o(d, i, h, b);
    // dK and dV interleaved as the runtime's fused buffers hold them: c = 0
    // is K, c = 1 is V (a plain 5-D buffer here).
    Buffer<float> dq(c.dk, c.Tq, c.H, c.B), dkv(c.dk, 2, c.Tkv, c.H, c.B);
    auto fn = c.causal ? K(hf_attention_causal_backward) : K(hf_attention_backward);
    ASSERT_EQ(fn(q, k, v, ob, dout, lens, c.q_offset, (float)scale, dq, dkv), 0) << halformer::last_kernel_error();
    auto loss = [&](const Array &qq, const Array &kk, const Array &vv) {
        return dot(rdo, ref::attention(qq, kk, vv, c.kv_len, c.q_offset, scale, c.causal));
    };
    Array gq = numeric_grad(rq, [&](const Array &x) { return loss(x, rk, rv); });
    Array gk = numeric_grad(rk, [&](const Array &x) { return loss(rq, x, rv); });
    Array gv = numeric_grad(rv, [&](const Array &x) { return loss(rq, rk, x); });
    Array dk_out({c.dk, c.Tkv, c.H, c.B}), dv_out({c.dk, c.Tkv, c.H, c.B});
    for (int b = 0; b < c.B; b++)
        for (int h = 0; h < c.H; h++)
            for (int j = 0; j < c.Tkv; j++)
                for (int d = 0; d < c.dk; d++) {
                    dk_out(d, j, h, b) = dkv(d, 0, j, h, b);
                    dv_out(d, j, h, b) = dkv(d, 1, j, h, b);
                }
    // Large scores make the finite differences themselves less exact.
    const double tol = c.amplitude > 2 ? 2e-3 : 1e-4;
    EXPECT_LE(ref::rel_error(dq, gq), tol) << "dQ";
    EXPECT_LE(ref::rel_error_arrays(dk_out, gk), tol) << "dK";
    EXPECT_LE(ref::rel_error_arrays(dv_out, gv), tol) << "dV";
}

INSTANTIATE_TEST_SUITE_P(
    Cases, AttentionBackwardTest,
    testing::Values(
        AttnCase{"self_padded", 8, 5, 5, 2, 2, {5, 3}, 0, false, 1},
        AttnCase{"causal_padded", 8, 6, 6, 2, 2, {6, 4}, 0, true, 1},
        AttnCase{"cross_odd_head", 12, 3, 7, 1, 2, {7, 2}, 0, false, 1},  // Tq ≠ Tkv
        AttnCase{"length_1", 4, 1, 1, 1, 1, {1}, 0, true, 1},
        AttnCase{"fully_masked_sequence", 8, 4, 4, 2, 2, {4, 0}, 0, false, 1},
        AttnCase{"causal_after_prefix", 16, 3, 9, 2, 1, {9}, 6, true, 1},
        AttnCase{"more_keys_than_a_tile", 8, 4, 20, 1, 1, {17}, 0, false, 1},
        AttnCase{"huge_scores", 8, 4, 4, 1, 1, {4}, 0, false, 30}),
    [](const testing::TestParamInfo<AttnCase> &i) { return std::string(i.param.name); });

// ---- LayerNorm ----

TEST(LayerNormBackward, AllVariantsMatchFiniteDifferences) {
    uint32_t seed = 200;
    for (auto [D, R] : std::vector<std::pair<int, int>>{{1, 1}, {7, 3}, {37, 5}, {64, 2}}) {
        for (int variant = 0; variant < 3; variant++) {
            const bool residual = variant == 2, accumulate = variant == 1;
            Buffer<float> x = ref::random_buffer({D, R}, seed++, -2, 2), res = ref::random_buffer({D, R}, seed++, -2, 2);
            Buffer<float> g = ref::random_buffer({D}, seed++, 0.5f, 1.5f), dy = ref::random_buffer({D, R}, seed++);
            Buffer<float> dg = ref::random_buffer({D}, seed++), db = ref::random_buffer({D}, seed++);
            Buffer<float> dx = ref::random_buffer({D, R}, seed++);
            Array rx = ref::to_array(x), rr = ref::to_array(res), rg = ref::to_array(g), rdy = ref::to_array(dy);
            Array dg0 = ref::to_array(dg), db0 = ref::to_array(db), dx0 = ref::to_array(dx);
            Array beta(std::vector<int>{D});
            const float eps = 1e-5f;
            int rc = residual ? K(hf_layer_norm_residual_backward)(x, g, eps, dy, dg, db, res, dx, dg, db)
                     : accumulate ? K(hf_layer_norm_backward_acc)(x, g, eps, dy, dg, db, dx, dx, dg, db)
                                  : K(hf_layer_norm_backward)(x, g, eps, dy, dg, db, dx, dg, db);
            ASSERT_EQ(rc, 0) << halformer::last_kernel_error();
            auto f = [&](const Array &xx, const Array &gg, const Array &bb) {
                return dot(rdy, ref::layer_norm(xx, residual ? &rr : nullptr, gg, bb, eps));
            };
            Array gx = numeric_grad(rx, [&](const Array &a) { return f(a, rg, beta); });
            Array gg = numeric_grad(rg, [&](const Array &a) { return f(rx, a, beta); });
            Array gb = numeric_grad(beta, [&](const Array &a) { return f(rx, rg, a); });
            if (accumulate) for (size_t i = 0; i < gx.v.size(); i++) gx.v[i] += dx0.v[i];
            for (int d = 0; d < D; d++) {
                gg(d) += dg0(d);
                gb(d) += db0(d);
            }
            // D = 1: the output is β whatever x is; dx must be 0.
            EXPECT_LE(ref::rel_error(dx, gx), 1e-4) << "dx D=" << D << " R=" << R << " variant " << variant;
            EXPECT_LE(ref::rel_error(dg, gg), 1e-4) << "dgamma D=" << D;
            EXPECT_LE(ref::rel_error(db, gb), 1e-4) << "dbeta D=" << D;
        }
    }
}

// ---- embedding ----

TEST(EmbeddingBackward, ScatterAddsRepeatedTokens) {
    const int D = 24, V = 11, T = 6, B = 3, P = 10;
    Buffer<int32_t> tok(T, B);
    for (int b = 0; b < B; b++)
        for (int t = 0; t < T; t++) tok(t, b) = (t * 3 + b) % 4 == 0 ? 5 : (t + 2 * b) % V;  // 5 repeats
    // Slots: the distinct ids in order (what the trainer passes).
    std::vector<int32_t> ids;
    tok.for_each_value([&](int32_t v) { ids.push_back(v); });
    std::sort(ids.begin(), ids.end());
    ids.erase(std::unique(ids.begin(), ids.end()), ids.end());
    Buffer<int32_t> slots(T, B), rows((int)ids.size());
    for (size_t u = 0; u < ids.size(); u++) rows((int)u) = ids[u];
    for (int b = 0; b < B; b++)
        for (int t = 0; t < T; t++)
            slots(t, b) = (int32_t)(std::lower_bound(ids.begin(), ids.end(), tok(t, b)) - ids.begin());
    Buffer<float> dout = ref::random_buffer({D, T, B}, 7);
    for (bool learned : {false, true}) {
        Buffer<float> dtab = ref::random_buffer({D, V}, 8), dpos = ref::random_buffer({D, P}, 9);
        Array rt = ref::to_array(dtab), rp = ref::to_array(dpos);
        const float scale = 2.5f;
        const int start = 3;
        int rc = learned ? K(hf_embedding_learned_backward)(slots, rows, dout, scale, start, dtab, dpos)
                         : K(hf_embedding_backward)(slots, rows, dout, scale, start, dtab);
        ASSERT_EQ(rc, 0) << halformer::last_kernel_error();
        for (int b = 0; b < B; b++)
            for (int t = 0; t < T; t++)
                for (int d = 0; d < D; d++) {
                    rt(d, tok(t, b)) += dout(d, t, b) * (double)scale;
                    rp(d, start + t) += dout(d, t, b);
                }
        EXPECT_LE(ref::rel_error(dtab, rt), kGradTol);
        if (learned) EXPECT_LE(ref::rel_error(dpos, rp), kGradTol);
        // Rows no token uses are untouched, bit for bit.
        Buffer<float> fresh = ref::random_buffer({D, V}, 8);
        for (int v = 0; v < V; v++) {
            if (std::binary_search(ids.begin(), ids.end(), v)) continue;
            for (int d = 0; d < D; d++) ASSERT_EQ(dtab(d, v), fresh(d, v));
        }
    }
}

// ---- loss ----

struct CeResult {
    double loss;
    int tokens;
    Array grad;
};

CeResult ce_reference(const Array &logits, const std::vector<int> &targets, double eps, int pad, double gscale) {
    const int V = logits.dims[0], M = logits.dims[1];
    CeResult r{0, 0, Array({V, M})};
    for (int m = 0; m < M; m++) {
        if (targets[m] == pad) continue;
        r.tokens++;
        double mx = -INFINITY, s = 0;
        for (int v = 0; v < V; v++) mx = std::max(mx, logits.v[(size_t)m * V + v]);
        for (int v = 0; v < V; v++) s += std::exp(logits.v[(size_t)m * V + v] - mx);
        double lse = mx + std::log(s);
        for (int v = 0; v < V; v++) {
            double lp = logits.v[(size_t)m * V + v] - lse;
            double q = (v == targets[m] ? 1 - eps : 0) + eps / V;
            r.loss -= q * lp;
            r.grad.v[(size_t)m * V + v] = gscale * (std::exp(lp) - q);
        }
    }
    return r;
}

TEST(CrossEntropy, LossAndGradientInPlace) {
    const int pad = 0;
    uint32_t seed = 300;
    for (auto [V, M, amp] : std::vector<std::tuple<int, int, float>>{{5, 1, 1}, {37, 9, 3}, {1000, 6, 5}, {17, 4, 3e4}}) {
        Buffer<float> logits = ref::random_buffer({V, M}, seed++, -amp, amp);
        Buffer<int32_t> tgt(M);
        std::vector<int> t(M);
        for (int m = 0; m < M; m++) t[m] = tgt(m) = (m * 7 + 3) % V;
        if (M > 2) t[1] = tgt(1) = pad;  // a padded row: no loss, zero gradient
        Array rl = ref::to_array(logits);
        const float gscale = 0.25f;
        CeResult r = ce_reference(rl, t, 0.1, pad, gscale);
        Buffer<float> loss = Buffer<float>::make_scalar();
        Buffer<int32_t> count = Buffer<int32_t>::make_scalar();
        ASSERT_EQ(K(hf_cross_entropy)(logits, tgt, 0.1f, pad, gscale, logits, loss, count), 0);
        EXPECT_EQ(count(), r.tokens);
        EXPECT_NEAR(loss(), r.loss, 1e-5 * std::max(1.0, std::abs(r.loss))) << "V=" << V;
        EXPECT_LE(ref::rel_error(logits, r.grad), 1e-5) << "V=" << V;
        // Finite differences of the reference loss agree with the analytic one.
        if (V <= 37 && amp < 100) {
            Array g = numeric_grad(rl, [&](const Array &a) { return gscale * ce_reference(a, t, 0.1, pad, 1).loss; });
            EXPECT_LE(ref::rel_error_arrays(g, r.grad), 1e-6);
        }
    }
}

TEST(CrossEntropy, TargetOutsideVocabularyIsAnError) {
    Buffer<float> logits = ref::random_buffer({7, 2}, 1);
    Buffer<int32_t> tgt(2);
    tgt(0) = 3;
    tgt(1) = 7;
    Buffer<float> loss = Buffer<float>::make_scalar();
    Buffer<int32_t> count = Buffer<int32_t>::make_scalar();
    EXPECT_NE(K(hf_cross_entropy)(logits, tgt, 0.1f, 0, 1.0f, logits, loss, count), 0);
}

// ---- elementwise ----

TEST(Activation, ForwardMatchesReference) {
    using Fn = int (*)(halide_buffer_t *, halide_buffer_t *);
    const std::vector<std::pair<std::string, Kernel<Fn>>> acts = {
        {"relu", K(hf_relu)}, {"gelu", K(hf_gelu)}, {"gelu_tanh", K(hf_gelu_tanh)}, {"silu", K(hf_silu)}};
    for (auto &[name, fn] : acts) {
        Buffer<float> z = ref::random_buffer({37, 5}, 3, -6, 6), out(37, 5);
        ASSERT_EQ(fn(z, out), 0);
        Array r = ref::to_array(z);
        for (auto &x : r.v) x = ref::activate(x, name);
        EXPECT_LE(ref::rel_error(out, r), 1e-6) << name;
    }
}

TEST(Dropout, KeepsAboutOneMinusPScaledAndReplaysTheMask) {
    const int N = 300, M = 50;
    const float p = 0.1f;
    Buffer<float> x = ref::random_buffer({N, M}, 4, 0.5f, 1.5f), y(N, M), g(N, M), res = ref::random_buffer({N, M}, 5);
    ASSERT_EQ(K(hf_dropout)(x, p, 42, 7, 3, y), 0);
    int kept = 0;
    for (int m = 0; m < M; m++)
        for (int n = 0; n < N; n++) {
            if (y(n, m) != 0) {
                kept++;
                EXPECT_FLOAT_EQ(y(n, m), x(n, m) / (1 - p));
            }
        }
    const double frac = (double)kept / (N * M);
    EXPECT_NEAR(frac, 1 - p, 0.01);  // 15000 draws: σ ≈ 0.0025
    // The backward pass: the same key drops the same elements of the gradient.
    Buffer<float> ones(N, M);
    ones.fill(1.0f);
    ASSERT_EQ(K(hf_dropout)(ones, p, 42, 7, 3, g), 0);
    for (int m = 0; m < M; m++)
        for (int n = 0; n < N; n++) EXPECT_EQ(g(n, m) != 0, y(n, m) != 0);
    // Another step, tensor or seed: another mask.
    for (auto [seed, step, tensor] : std::vector<std::tuple<int, int, int>>{{43, 7, 3}, {42, 8, 3}, {42, 7, 4}}) {
        ASSERT_EQ(K(hf_dropout)(ones, p, seed, step, tensor, g), 0);
        int same = 0;
        for (int m = 0; m < M; m++)
            for (int n = 0; n < N; n++) same += (g(n, m) != 0) == (y(n, m) != 0);
        EXPECT_LT(same, N * M * 0.9);  // independent masks agree on ~82%
    }
    // With a residual; and p = 0 is an exact add.
    ASSERT_EQ(K(hf_dropout_residual)(x, 0.0f, 1, 1, 1, res, y), 0);
    for (int m = 0; m < M; m++)
        for (int n = 0; n < N; n++) EXPECT_EQ(y(n, m), x(n, m) + res(n, m));
}

TEST(Adam, OneStepMatchesTheFormula) {
    const int P = 1000;
    Buffer<float> p = ref::random_buffer({P}, 1), g = ref::random_buffer({P}, 2), m = ref::random_buffer({P}, 3, -0.1f, 0.1f);
    Buffer<float> v = ref::random_buffer({P}, 4, 0, 0.01f);
    g(0) = 0;
    g(1) = 1e6f;
    Array rp = ref::to_array(p), rg = ref::to_array(g), rm = ref::to_array(m), rv = ref::to_array(v);
    const double lr = 0.01, b1 = 0.9, b2 = 0.98, eps = 1e-9, c1 = 1 - std::pow(b1, 3), c2 = 1 - std::pow(b2, 3);
    const double gs = 0.5, wd = 0.01;
    ASSERT_EQ(K(hf_adam)(p, g, m, v, lr, b1, b2, eps, c1, c2, gs, wd, p, m, v), 0);
    for (int i = 0; i < P; i++) {
        double gg = gs * rg(i) + wd * rp(i);
        rm(i) = b1 * rm(i) + (1 - b1) * gg;
        rv(i) = b2 * rv(i) + (1 - b2) * gg * gg;
        rp(i) -= lr / c1 * rm(i) / (std::sqrt(rv(i)) / std::sqrt(c2) + eps);
    }
    // A few float32 roundings per element (PoCL contracts differently).
    EXPECT_LE(ref::rel_error(p, rp), 3e-6);
    EXPECT_LE(ref::rel_error(m, rm), 3e-6);
    EXPECT_LE(ref::rel_error(v, rv), 3e-6);
}

TEST(VectorOps, SumSquaresAndAxpy) {
    for (int P : {1, 17, 4096, 100003}) {
        Buffer<float> x = ref::random_buffer({P}, 5), y = ref::random_buffer({P}, 6);
        Buffer<double> s = Buffer<double>::make_scalar();
        ASSERT_EQ(K(hf_sum_squares)(x, s), 0);
        double r = 0;
        for (int i = 0; i < P; i++) r += (double)x(i) * x(i);
        EXPECT_NEAR(s(), r, 1e-12 * r) << P;
        Array ry = ref::to_array(y);
        ASSERT_EQ(K(hf_axpy)(y, x, 0.5f, -2.0f, y), 0);
        for (int i = 0; i < P; i++) ry(i) = 0.5 * ry(i) - 2.0 * x(i);
        EXPECT_LE(ref::rel_error(y, ry), 1e-7);
        // a = b = 0 writes zeros over anything, NaN included.
        y(0) = NAN;
        ASSERT_EQ(K(hf_axpy)(y, x, 0.0f, 0.0f, y), 0);
        for (int i = 0; i < P; i++) ASSERT_EQ(y(i), 0.0f);
    }
}
