#include "sampler.h"

#include "hf_argmax.h"
#include "hf_sample.h"
#include "hf_topk8.h"

HF_DEVICE_KERNELS(hf_argmax)
HF_DEVICE_KERNELS(hf_sample)
HF_DEVICE_KERNELS(hf_topk8)

#include <utility>

namespace halformer::decoding {

namespace {

bool same_sampling(const Sampling &a, const Sampling &b) {
    return a.sample == b.sample && a.temperature == b.temperature && a.top_k == b.top_k && a.top_p == b.top_p;
}

}  // namespace

// The choice for `inputs`, whose rows (`slots`, in order) have their
// last hidden states, normalized, in x: only ids (and for beam search
// the K + 1 best log-probabilities) come back to the host.
StepResult Sampler::choose(Search &search, const std::vector<int> &inputs, const std::vector<int> &slots, const float *x,
                  const std::vector<int> &row_of, const std::vector<Sequence> &context) {
    search_ = &search;
    row_of_ = &row_of;
    context_ = &context;
    const int R = (int)slots.size();
    float *topv = s.topv.need((size_t)R * kTopK);
    int32_t *topi = (int32_t *)s.topi.need((size_t)R * kTopK);
    const Need need = search.need();
    const bool logp = o.return_logprobs;
    float *scores = step_scores(slots, x, need == Need::TopLogProbs || logp);
    View vs(scores, {{V, 1}, {R, V}});
    if (need == Need::TopLogProbs) {
        View vv(topv, {{kTopK, 1}, {R, kTopK}}), vi(topi, {{kTopK, 1}, {R, kTopK}}, true);
        s.run("topk", [&] { return HF_PICK(s.device(), hf_topk8)(vs.get(), vv.get(), vi.get()); });
        s.dev->to_host(topv, (size_t)R * kTopK * sizeof(float));
        s.dev->to_host(topi, (size_t)R * kTopK * sizeof(int32_t));
        return {topi, topv, kTopK};
    }
    if (need == Need::Argmax) {
        argmax(vs, R, topv, topi, logp);
        StepResult res{topi, nullptr, 1};
        // (The argmax of the log-probabilities is the chosen id's.)
        if (logp) res.logp = topv;
        return res;
    }
    return draw(inputs, slots, scores, vs, topv, topi);
}

// The step's scores for its rows (`slots`), from their last hidden
// states x: the logits, after the search's penalties and bans, or
// their log-softmax (lsm).
float *Sampler::step_scores(const std::vector<int> &slots, const float *x, bool lsm) {
    const int R = (int)slots.size();
    float *out = s.logits.need((size_t)R * V);
    if (!search_->adjusts()) {
        s.project(x, R, D, out, lsm, true);
        return out;
    }
    // The penalties and bans change the logits, then the log-softmax
    // (where needed) normalizes what they left.
    s.project(x, R, D, out, false, true);
    adjust.clear();
    for (int c = 0; c < R; c++) {
        const int r = slots[(size_t)c];
        search_->adjustments(c, r, (*context_)[(size_t)r], adjust);
    }
    float *tmp = s.head_tmp.need((size_t)R * V);
    float *scores = out;
    if (!adjust.ids.empty()) {
        layers::logits_adjust(s, out, R, V, adjust.rows.data(), adjust.ids.data(), adjust.factor.data(),
                              (int)adjust.ids.size(), tmp);
        std::swap(scores, tmp);
    }
    if (lsm) {
        layers::log_softmax(s, scores, R, V, tmp);
        std::swap(scores, tmp);
    }
    // A forced last token: every other id banned after the log-softmax
    // (the forced one keeps its own log-probability, as transformers
    // scores it).
    adjust.clear();
    for (int c = 0; c < R; c++) search_->forced(c, slots[(size_t)c], V, adjust);
    if (adjust.ids.empty()) return scores;
    layers::logits_adjust(s, scores, R, V, adjust.rows.data(), adjust.ids.data(), adjust.factor.data(),
                          (int)adjust.ids.size(), tmp);
    return tmp;
}

// Each row's argmax id into topi (and its value into topv, with
// return_logprobs), on the host.
void Sampler::argmax(View &vs, int R, float *topv, int32_t *topi, bool logp) {
    View vv(topv, {{1, 1}, {R, 1}}), vi(topi, {{1, 1}, {R, 1}}, true);
    s.run("argmax", [&] { return HF_PICK(s.device(), hf_argmax)(vs.get(), vv.get(), vi.get()); });
    s.dev->to_host(topi, (size_t)R * sizeof(int32_t));
    if (logp) s.dev->to_host(topv, (size_t)R * sizeof(float));
}

// Without beams, each input greedy or sampling with its own settings
// (sampling_each): the greedy rows take hf_argmax's ids, one call for
// the step's rows; each run of consecutive rows that sample alike, one
// hf_sample call, which draws each row's id from the row's uniform. On a
// GPU both run on the device and only the ids come back (and, with
// return_logprobs, a sampled step's scores, to read the drawn ids').
StepResult Sampler::draw(const std::vector<int> &inputs, const std::vector<int> &slots, float *scores,
                          View &vs, float *topv, int32_t *topi) {
    const int R = (int)slots.size();
    static_cast<SamplingSearch &>(*search_).uniforms(inputs, *row_of_, R, u);
    std::vector<float> uf(u.begin(), u.end());
    row_sampling.assign((size_t)R, Sampling{});
    bool greedy_rows = false, sampled_rows = false;
    for (int c = 0; c < R; c++) {
        row_sampling[(size_t)c] = o.sampling_each[(size_t)slots[(size_t)c]];
        (row_sampling[(size_t)c].sample ? sampled_rows : greedy_rows) = true;
    }
    const bool logp = o.return_logprobs;
    if (greedy_rows) argmax(vs, R, topv, topi, logp);
    if (sampled_rows && logp && s.dev->on_gpu()) s.dev->to_host(scores, (size_t)R * V * sizeof(float));
    for (int c0 = 0, c1 = 0; c0 < R; c0 = c1) {
        const Sampling &a = row_sampling[(size_t)c0];
        for (c1 = c0 + 1; c1 < R && same_sampling(row_sampling[(size_t)c1], a); c1++) {}
        if (!a.sample) continue;
        const int n = c1 - c0;
        View vh(scores + (size_t)c0 * V, {{V, 1}, {n, V}}), vu(uf.data() + c0, {{n, 1}}),
            vid(topi + c0, {{n, 1}}, true);
        vu.per_call();  // this step's uniforms, at an address the next step reuses
        s.run("sample", [&] {
            return HF_PICK(s.device(), hf_sample)(vh.get(), a.temperature, a.top_k, a.top_p, vu.get(), vid.get());
        });
    }
    if (sampled_rows && s.dev->on_gpu()) s.dev->to_host(topi, (size_t)R * sizeof(int32_t));
    StepResult res{topi, nullptr, 1};
    if (logp) {
        // The chosen ids' log-probabilities: a greedy row's is its
        // argmax's value; a drawn id's is read from its row (on the host).
        chosen_logp.resize(R);
        for (int c = 0; c < R; c++) {
            chosen_logp[c] = row_sampling[(size_t)c].sample ? scores[(size_t)c * V + topi[c]] : topv[c];
        }
        res.logp = chosen_logp.data();
    }
    return res;
}

}  // namespace halformer::decoding
