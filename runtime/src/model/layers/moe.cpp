// A mixture-of-experts feed-forward (Mixtral, Qwen3-MoE): the router's
// scores, each token's top-k experts and weights (hf_moe_route), the
// tokens grouped by expert, each chosen expert's gated FFN over its own
// tokens with the FFN kernels, and the weighted outputs joined to the
// stream (hf_moe_combine). Grouping reads only the route's ids on the host
// (bookkeeping: which rows go where); every value is a kernel's.
#include "layers.h"

#include "hf_moe_combine.h"
#include "hf_moe_route.h"

HF_DEVICE_KERNELS(hf_moe_combine)
HF_DEVICE_KERNELS(hf_moe_route)

#include <string>
#include <vector>

namespace halformer {
namespace layers {

void moe(Kernels &k, const Pass &p, const LayerW &L, const float *in, const float *res, LayerIO &io, float *out) {
    const Description::Moe &m = k.desc.moe;
    const int D = k.cfg.d_model, M = io.M(), E = m.experts, K = m.top_k, F = m.d_ff;
    if (p.train) throw Error("training: a mixture of experts has no backward kernels (inference only)");
    if (!io.moe.logits || !res) throw Error("internal: moe without its scratch or residual");
    // The router: scores [M, E], then the top-k experts and weights.
    // (No biases: the model's zero vector, ModelWeights::zeros, stands in.)
    const float *zero = k.w->zeros.get();
    if (!zero) throw Error("internal: moe without the model's zero biases");
    float *scores = io.moe.logits->need((size_t)M * E);
    linear(k, p, "moe_router", Mat{in, M, D, D}, L.need("router.weight"), zero, E, scores, E);
    float *weights = io.moe.weights->need((size_t)M * K);
    int32_t *ids = (int32_t *)io.moe.ids->need((size_t)M * K);
    {
        View vs(scores, {{E, 1}, {M, E}}), vw(weights, {{K, 1}, {M, K}}), vi(ids, {{K, 1}, {M, K}}, true);
        const int renormalize = m.renormalize ? 1 : 0;
        k.run("moe_route", [&] { return HF_PICK(k.device(), hf_moe_route)(vs.get(), K, renormalize, vw.get(), vi.get()); });
    }
    k.dev->to_host(ids, (size_t)M * K * sizeof(int32_t));
    // Group: expert e's (token, j) pairs, in token order, experts in order;
    // slot[m·K + j] is the row of y holding token m's j-th expert's output.
    std::vector<int> count((size_t)E, 0);
    for (int t = 0; t < M * K; t++) {
        if (ids[t] < 0 || ids[t] >= E) {
            throw Error("moe: the router of token " + std::to_string(t / K) + " chose expert " +
                        std::to_string(ids[t]) + " of " + std::to_string(E) + " (NaN scores?)");
        }
        count[(size_t)ids[t]]++;
    }
    std::vector<int> first((size_t)E + 1, 0);
    for (int e = 0; e < E; e++) first[(size_t)e + 1] = first[(size_t)e] + count[(size_t)e];
    std::vector<int32_t> rows((size_t)M * K), slot((size_t)M * K);
    std::vector<int> fill(first.begin(), first.end() - 1);
    for (int t = 0; t < M * K; t++) {
        const int at = fill[(size_t)ids[t]]++;
        rows[(size_t)at] = t / K;  // the routed row's token
        slot[(size_t)t] = at;
    }
    const int N = M * K;
    float *x = io.moe.x->need((size_t)N * D), *y = io.moe.y->need((size_t)N * D);
    gather_rows(k, in, D, M, rows.data(), N, x);
    // Each chosen expert over its rows.
    for (int e = 0; e < E; e++) {
        const int n = count[(size_t)e];
        if (n == 0) continue;
        const std::string x_ = "experts." + std::to_string(e) + ".";
        const FfnW f{L.need(x_ + "linear1.weight"), zero, L.need(x_ + "linear_gate.weight"), zero,
                     L.need(x_ + "linear2.weight"), zero, F};
        const size_t at = (size_t)first[(size_t)e] * D;
        feed_forward(k, p, f, x + at, n, nullptr, *io.hidden, y + at);
    }
    View vy(y, {{D, 1}, {N, D}}), vslot(slot.data(), {{K, 1}, {M, K}}, true), vw(weights, {{K, 1}, {M, K}});
    View vr(res, {{D, 1}, {M, D}}), vo(out, {{D, 1}, {M, D}});
    k.run("moe_combine", [&] {
        return HF_PICK(k.device(), hf_moe_combine)(vy.get(), vslot.get(), vw.get(), vr.get(), vo.get());
    });
}

}  // namespace layers
}  // namespace halformer
