// The mixture-of-experts kernels (generators/moe_generator.cpp) and Gemma
// 2's logit soft-cap (softcap_generator.cpp) against double-precision
// loops: the router's top-k and weights, renormalized or not, ties to the
// lower expert, NaN scores never chosen, k out of range refused; the
// experts' outputs weighted in slot order with the residual, a slot out of
// range refused; the cap on hostile logits (±1e4, 0).
#include "reference.h"
#include "kernels.h"

#include "hf_moe_combine.h"
#include "hf_moe_route.h"
#include "hf_softcap.h"

#include <algorithm>
#include <cmath>
#include <numeric>

HF_DECLARE_GPU(hf_moe_route)
HF_DECLARE_GPU(hf_moe_combine)
HF_DECLARE_GPU(hf_softcap)

using ref::Buffer;

using RouteFn = int (*)(halide_buffer_t *, int32_t, int32_t, halide_buffer_t *, halide_buffer_t *);
using CombineFn = int (*)(halide_buffer_t *, halide_buffer_t *, halide_buffer_t *, halide_buffer_t *,
                          halide_buffer_t *);
using SoftCapFn = int (*)(halide_buffer_t *, float, halide_buffer_t *);

namespace {

// The reference router: softmax in double, the top k by score (ties to the
// lower id: a stable sort), renormalized or not.
void route_reference(const Buffer<float> &logits, int K, bool renorm, std::vector<double> &w, std::vector<int> &ids) {
    const int E = logits.dim(0).extent(), M = logits.dim(1).extent();
    w.assign((size_t)M * K, 0);
    ids.assign((size_t)M * K, -1);
    for (int m = 0; m < M; m++) {
        std::vector<int> order(E);
        std::iota(order.begin(), order.end(), 0);
        auto score = [&](int e) {
            const float s = logits(e, m);
            return std::isnan(s) ? -INFINITY : (double)s;
        };
        std::stable_sort(order.begin(), order.end(), [&](int a, int b) { return score(a) > score(b); });
        const double mx = score(order[0]);
        double total = 0, chosen = 0;
        for (int e = 0; e < E; e++) total += std::isnan(logits(e, m)) ? 0 : std::exp(score(e) - mx);
        for (int j = 0; j < K; j++) chosen += std::exp(score(order[j]) - mx);
        for (int j = 0; j < K; j++) {
            ids[(size_t)m * K + j] = order[j];
            w[(size_t)m * K + j] = std::exp(score(order[j]) - mx) / (renorm ? chosen : total);
        }
    }
}

}  // namespace

TEST(MoeRoute, TopKAndWeightsMatchReference) {
    for (auto fn : on_device(std::vector<Impl<RouteFn>>{{"hf_moe_route", HF_KERNEL(hf_moe_route)}})) {
        uint32_t seed = 5100;
        for (auto [E, K, M] : std::vector<std::tuple<int, int, int>>{{8, 2, 1}, {8, 2, 37}, {128, 8, 5}, {4, 4, 3}, {3, 1, 9}}) {
            for (bool renorm : {true, false}) {
                Buffer<float> logits = ref::random_buffer({E, M}, seed++, -4, 4), w(K, M);
                Buffer<int32_t> ids(K, M);
                HF_CALL(fn.fn(logits, K, renorm ? 1 : 0, w, ids));
                std::vector<double> rw;
                std::vector<int> rid;
                route_reference(logits, K, renorm, rw, rid);
                for (int m = 0; m < M; m++) {
                    double sum = 0;
                    for (int j = 0; j < K; j++) {
                        EXPECT_EQ(ids(j, m), rid[(size_t)m * K + j]) << fn.name << " E=" << E << " m=" << m << " j=" << j;
                        EXPECT_NEAR(w(j, m), rw[(size_t)m * K + j], 2e-6) << fn.name << " E=" << E << " m=" << m;
                        sum += w(j, m);
                    }
                    if (renorm) EXPECT_NEAR(sum, 1.0, 1e-5) << "renormalized weights sum to 1";
                    if (!renorm && K < E) EXPECT_LT(sum, 1.0) << "softmax's own weights: the others' share is missing";
                }
            }
        }
    }
}

TEST(MoeRoute, TiesGoToTheLowerExpertAndNaNIsNeverChosen) {
    for (auto fn : on_device(std::vector<Impl<RouteFn>>{{"hf_moe_route", HF_KERNEL(hf_moe_route)}})) {
        Buffer<float> logits(6, 2), w(2, 2);
        Buffer<int32_t> ids(2, 2);
        const float row0[] = {1, 3, 3, 0, 3, -1}, row1[] = {NAN, 2, NAN, 5, 1, 1};
        for (int e = 0; e < 6; e++) {
            logits(e, 0) = row0[e];
            logits(e, 1) = row1[e];
        }
        HF_CALL(fn.fn(logits, 2, 1, w, ids));
        EXPECT_EQ(ids(0, 0), 1) << fn.name << ": of three equal scores, the lowest expert first";
        EXPECT_EQ(ids(1, 0), 2);
        EXPECT_FLOAT_EQ(w(0, 0), 0.5f);
        EXPECT_EQ(ids(0, 1), 3);
        EXPECT_EQ(ids(1, 1), 1) << "NaN scores are never chosen";
        EXPECT_TRUE(std::isfinite(w(1, 1)));
        // k out of range: more than 8, more than the experts.
        Buffer<float> w9(9, 2), w7(7, 2);
        Buffer<int32_t> i9(9, 2), i7(7, 2);
        EXPECT_NE(fn.fn(logits, 7, 1, w7, i7), 0) << "7 experts of 6";
        EXPECT_NE(fn.fn(logits, 2, 1, w7, i7), 0) << "outputs of 7 entries for k = 2";
        Buffer<float> wide(20, 2);
        wide.fill(0.0f);
        EXPECT_NE(fn.fn(wide, 9, 1, w9, i9), 0) << "9 experts per token";
    }
}

TEST(MoeCombine, WeightedOutputsJoinTheResidual) {
    for (auto fn : on_device(std::vector<Impl<CombineFn>>{{"hf_moe_combine", HF_KERNEL(hf_moe_combine)}})) {
        uint32_t seed = 5300;
        for (auto [D, K, M] : std::vector<std::tuple<int, int, int>>{{37, 2, 1}, {64, 2, 19}, {100, 8, 3}}) {
            const int R = M * K;
            Buffer<float> y = ref::random_buffer({D, R}, seed++, -3, 3), res = ref::random_buffer({D, M}, seed++, -3, 3);
            Buffer<float> w = ref::random_buffer({K, M}, seed++, 0, 1), out(D, M);
            Buffer<int32_t> slot(K, M);
            // A permutation of the rows, as grouping by expert makes one.
            std::vector<int> perm(R);
            std::iota(perm.begin(), perm.end(), 0);
            std::reverse(perm.begin(), perm.end());
            for (int m = 0; m < M; m++)
                for (int j = 0; j < K; j++) slot(j, m) = perm[(size_t)m * K + j];
            HF_CALL(fn.fn(y, slot, w, res, out));
            ref::Array want({D, M});
            for (int m = 0; m < M; m++)
                for (int d = 0; d < D; d++) {
                    double acc = res(d, m);
                    for (int j = 0; j < K; j++) acc += (double)w(j, m) * y(d, slot(j, m));
                    want(d, m) = acc;
                }
            EXPECT_LE(ref::rel_error(out, want), ref::kTolerance) << fn.name << " D=" << D << " K=" << K;
        }
        // A slot outside the rows is an error, not a read.
        Buffer<float> y(8, 2), res(8, 1), w(2, 1), out(8, 1);
        Buffer<int32_t> slot(2, 1);
        y.fill(1.0f);
        res.fill(0.0f);
        w.fill(0.5f);
        slot(0, 0) = 0;
        slot(1, 0) = 2;
        EXPECT_NE(fn.fn(y, slot, w, res, out), 0) << fn.name << ": row 2 of 2";
    }
}

TEST(SoftCap, CapsLogitsAsTanh) {
    for (auto fn : on_device(std::vector<Impl<SoftCapFn>>{{"hf_softcap", HF_KERNEL(hf_softcap)}})) {
        Buffer<float> x = ref::random_buffer({211, 5}, 5400, -20, 20), y(211, 5);
        x(0, 0) = 1e4f;
        x(1, 0) = -1e4f;
        x(2, 0) = 0.0f;
        HF_CALL(fn.fn(x, 5.0f, y));
        ref::Array want({211, 5});
        for (int r = 0; r < 5; r++)
            for (int n = 0; n < 211; n++) want(n, r) = 5.0 * std::tanh(x(n, r) / 5.0);
        EXPECT_LE(ref::rel_error(y, want), ref::kTolerance) << fn.name;
        EXPECT_FLOAT_EQ(y(0, 0), 5.0f);
        EXPECT_FLOAT_EQ(y(1, 0), -5.0f);
        EXPECT_EQ(y(2, 0), 0.0f);
        EXPECT_NE(fn.fn(x, 0.0f, y), 0) << "a cap of 0";
    }
}
