// The decoder's sampler: a step's scores for its rows (the output head,
// the search's penalties, bans and forced tokens, the log-softmax where the
// choice needs it) and the choice of each row's next id on the device:
// argmax (greedy), the K + 1 best (beam search) or a draw (sampling, each
// row with its input's settings). Only ids and the few log-probabilities
// asked for come back to the host.
#pragma once

#include "../model/layers/layers.h"
#include "../model/session.h"
#include "search.h"

#include <vector>

namespace halformer::decoding {

constexpr int kTopK = 8;  // hf_topk8: beam + 1 candidates per beam

class Sampler {
public:
    // o: the generate() call's options (their per-input lists grow as
    // inputs join); V the head's rows, D the model width.
    Sampler(Session &s, const GenerateOptions &o, int V, int D) : s(s), o(o), V(V), D(D) {}

    // The choice for `inputs`, whose rows (`slots`, in order: row_of maps a
    // slot to its row) have their last hidden states, normalized, in x;
    // context: each slot's tokens so far (the penalties').
    StepResult choose(Search &search, const std::vector<int> &inputs, const std::vector<int> &slots, const float *x,
                      const std::vector<int> &row_of, const std::vector<Sequence> &context);

private:
    float *step_scores(const std::vector<int> &slots, const float *x, bool lsm);
    void argmax(View &vs, int R, float *topv, int32_t *topi, bool logp);
    StepResult draw(const std::vector<int> &inputs, const std::vector<int> &slots, float *scores, View &vs,
                    float *topv, int32_t *topi);

    Session &s;
    const GenerateOptions &o;
    const int V, D;
    Search *search_ = nullptr;
    const std::vector<int> *row_of_ = nullptr;
    const std::vector<Sequence> *context_ = nullptr;
    std::vector<double> u;
    std::vector<float> chosen_logp;
    std::vector<Sampling> row_sampling;  // per row of a step without beams: its input's
    Adjustments adjust;
};

}  // namespace halformer::decoding
