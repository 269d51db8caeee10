// Internal: the decoding policies, as small types over a step function
// (CTranslate2's decoding classes). A Search holds what it needs of a batch
// of B inputs, `width()` rows each (slot r = b·width + k: beam k of input b),
// and at each step chooses every live input's next tokens from what the
// step's kernels left on the host (StepResult), never from the logits:
//
//   GreedySearch     the argmax of each row (hf_argmax)
//   SamplingSearch   the id drawn in the kernel from the row's uniform (uniforms())
//   BeamSearch       the width + 1 best log-probabilities of each row (hf_topk8)
//
// The model side (Session::decode) runs the steps, keeps the KV rows and
// compacts the batch as inputs finish; tests drive a Search with a fake step.
#pragma once

#include "halformer/model.h"
#include "../splitmix.h"

#include <memory>
#include <vector>

namespace halformer {
namespace decoding {

// Changes to a step's logits (hf_logits_adjust): entry e scales the logit
// of token ids[e] in row rows[e] by factor[e] (0: banned).
struct Adjustments {
    std::vector<int32_t> rows, ids;
    std::vector<float> factor;
    void clear() {
        rows.clear();
        ids.clear();
        factor.clear();
    }
};

// What a step must compute for each row of its batch.
enum class Need { Argmax, Sample, TopLogProbs };

// One step's results for the rows of its batch (row c): the chosen id at
// ids[c·stride] (Argmax, Sample), or the best candidates' ids and
// log-probabilities, best first (TopLogProbs: `width() + 1` of them; an id
// < 0 is no candidate).
// With return_logprobs, logp[c] is the chosen id's log-probability
// (Argmax, Sample; TopLogProbs: values are log-probabilities already).
struct StepResult {
    const int32_t *ids = nullptr;
    const float *values = nullptr;
    int stride = 1;
    const float *logp = nullptr;
};

class Search {
public:
    // max_new: the steps at most; eos_stop: the id that ends a hypothesis
    // (-2: none), as does each of opt.stop_ids; pad: the token a dead beam
    // reads.
    Search(int inputs, int width, const GenerateOptions &opt, int max_new, int eos_stop, int pad);
    virtual ~Search() = default;
    virtual Need need() const = 0;
    int inputs() const { return B_; }
    int width() const { return K_; }

    // n more inputs (continuous batching: they join a running batch; their
    // seeds and limits are in opt's per-input lists by then).
    virtual void add(int n);
    // A step for `inputs` (each at its own step: the tokens it has chosen
    // so far): asks opt.cancelled for every live one, then chooses each
    // live one's next tokens (row_of[r]: slot r's row in the step's batch).
    void step(const std::vector<int> &inputs, const StepResult &res, const std::vector<int> &row_of);
    // Reports every input done and not yet reported through opt.on_finished.
    void report_done();
    // After step(): the token slot r reads next and the slot it continues
    // (its hypothesis' history, and the cache rows of that history).
    int32_t next(int r) const { return next_[r]; }
    int parent(int r) const { return parent_[r]; }
    // The tokens slot r has chosen so far.
    const std::vector<int32_t> &history(int r) const { return hist_[r]; }
    // Whether the options change the logits before a choice (repetition
    // penalty, no-repeat n-grams, minimum length, a forced last token).
    bool adjusts() const;
    // Row `row` (slot r) at its last step with opt.forced_eos_id ≥ 0: every
    // id of the `vocab` but that one banned, appended to `out` (applied to
    // the log-probabilities, so that the forced id keeps its own).
    void forced(int row, int r, int vocab, Adjustments &out) const;
    // What hf_logits_adjust does to row `row` of a step whose slot has the
    // decoder prefix `prefix` (bos dropped) and slot r's history: appended
    // to `out` (each id once; a ban wins over a penalty).
    void adjustments(int row, int r, const std::vector<int32_t> &prefix, Adjustments &out) const;
    bool done(int b) const { return done_[b] != 0; }
    bool all_done() const;
    // Every input's hypotheses (reporting those not yet reported).
    std::vector<std::vector<Hypothesis>> results();

protected:
    virtual void choose(int b, int step, const StepResult &res, const std::vector<int> &row_of) = 0;
    // Input b leaves the batch now, with what it has.
    virtual void cancel(int b) { done_[b] = 1; }
    // Input b's hypotheses once it is done.
    virtual std::vector<Hypothesis> finish(int b) = 0;
    int limit(int b) const;
    // Whether token `id` ends a hypothesis (eos or a stop id).
    bool ends(int32_t id) const;
    // A hypothesis of slot r's history (tokens and, with return_logprobs,
    // their log-probabilities) scored `score`.
    Hypothesis hypothesis(int r, double score) const;

    const GenerateOptions &opt_;
    int B_, K_, max_new_, eos_stop_, pad_;
    std::vector<std::vector<int32_t>> hist_;  // per slot: the tokens chosen so far
    std::vector<std::vector<float>> logp_;    // per slot, with return_logprobs: their log-probabilities
    std::vector<int32_t> next_;
    std::vector<int> parent_;
    std::vector<char> done_;
    std::vector<int> steps_;  // per input: the steps it has taken

private:
    void report(int b);
    std::vector<std::vector<Hypothesis>> result_;
    std::vector<char> reported_;
};

// One row per input; the id of each step is the kernel's argmax.
class GreedySearch : public Search {
public:
    GreedySearch(int inputs, const GenerateOptions &opt, int max_new, int eos_stop, int pad)
        : Search(inputs, 1, opt, max_new, eos_stop, pad) {}
    Need need() const override { return Need::Argmax; }

protected:
    void choose(int b, int step, const StepResult &res, const std::vector<int> &row_of) override;
    std::vector<Hypothesis> finish(int b) override;
};

// Greedy's bookkeeping; the id is drawn in the kernel (temperature, top-k,
// top-p) from one uniform per row that uniforms() takes from the input's
// own stream: input b draws what it would alone with its seed. With
// sampling_each, some inputs may be greedy: they draw nothing, and their
// rows take the argmax.
class SamplingSearch : public GreedySearch {
public:
    SamplingSearch(int inputs, const GenerateOptions &opt, int max_new, int eos_stop, int pad);
    Need need() const override { return Need::Sample; }
    void add(int n) override;
    // The uniforms of a step's rows (`rows` of them): u[c] for row c =
    // row_of[b] of each input b of `inputs` still decoding.
    void uniforms(const std::vector<int> &inputs, const std::vector<int> &row_of, int rows, std::vector<double> &u);

private:
    void seed_streams(int from);  // inputs from..B-1
    std::vector<SplitMix> rng_;
};

// Beam search (section 6.1: beam 4, length penalty α = 0.6): each step
// keeps the `width` best continuations of an input's live beams by total
// log-probability; a continuation ending in eos becomes a finished
// hypothesis scored total / ((5 + len) / 6)^α. An input is done when it has
// `width` finished hypotheses, no live beam, or its last step; it returns
// its n_best best.
class BeamSearch : public Search {
public:
    BeamSearch(int inputs, int width, const GenerateOptions &opt, int max_new, int eos_stop, int pad);
    Need need() const override { return Need::TopLogProbs; }
    void add(int n) override;

protected:
    void choose(int b, int step, const StepResult &res, const std::vector<int> &row_of) override;
    void cancel(int b) override;
    std::vector<Hypothesis> finish(int b) override;

private:
    double penalty(size_t len) const;
    std::vector<double> score_;
    std::vector<char> alive_;
    std::vector<std::vector<Hypothesis>> finished_;
};

// The search `opt` asks for (beam > 1: beam search; sample: sampling).
std::unique_ptr<Search> make_search(int inputs, const GenerateOptions &opt, int max_new, int eos_stop, int pad);

}  // namespace decoding
}  // namespace halformer
