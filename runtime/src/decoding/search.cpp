#include "search.h"

#include <algorithm>
#include <cmath>
#include <map>

namespace halformer {
namespace decoding {

Search::Search(int inputs, int width, const GenerateOptions &opt, int max_new, int eos_stop, int pad)
    : opt_(opt), B_(inputs), K_(width), max_new_(max_new), eos_stop_(eos_stop), pad_(pad),
      hist_((size_t)inputs * width), logp_((size_t)inputs * width), next_((size_t)inputs * width),
      parent_((size_t)inputs * width),
      done_(inputs, 0), steps_(inputs, 0), result_(inputs), reported_(inputs, 0) {
    for (int r = 0; r < B_ * K_; r++) parent_[r] = r;
}

void Search::add(int n) {
    const size_t B = (size_t)B_ + n, R = B * K_;
    hist_.resize(R);
    logp_.resize(R);
    next_.resize(R);
    parent_.resize(R);
    for (size_t r = (size_t)B_ * K_; r < R; r++) parent_[r] = (int)r;
    done_.resize(B, 0);
    steps_.resize(B, 0);
    result_.resize(B);
    reported_.resize(B, 0);
    B_ = (int)B;
}

int Search::limit(int b) const {
    return opt_.max_new_tokens_each.empty() ? max_new_ : std::min(max_new_, opt_.max_new_tokens_each[b]);
}

bool Search::ends(int32_t id) const {
    return id == eos_stop_ || std::find(opt_.stop_ids.begin(), opt_.stop_ids.end(), id) != opt_.stop_ids.end();
}

Hypothesis Search::hypothesis(int r, double score) const {
    Hypothesis h{hist_[r], score, {}};
    if (opt_.return_logprobs) h.log_probs = logp_[r];
    return h;
}

bool Search::adjusts() const {
    return opt_.repetition_penalty != 1.0f || opt_.no_repeat_ngram_size > 0 || opt_.min_length > 0 ||
           opt_.forced_eos_id >= 0;
}

void Search::forced(int row, int r, int vocab, Adjustments &out) const {
    const int id = opt_.forced_eos_id;
    if (id < 0 || (int)hist_[r].size() + 1 != limit(r / K_)) return;
    for (int v = 0; v < vocab; v++) {
        if (v == id) continue;
        out.rows.push_back(row);
        out.ids.push_back(v);
        out.factor.push_back(0.0f);
    }
}

void Search::adjustments(int row, int r, const std::vector<int32_t> &prefix, Adjustments &out) const {
    // The sequence so far: the prefix, then what slot r chose.
    std::vector<int32_t> seq(prefix);
    seq.insert(seq.end(), hist_[r].begin(), hist_[r].end());
    std::map<int32_t, float> f;  // id → factor (0: banned)
    if (opt_.repetition_penalty != 1.0f) {
        for (int32_t id : seq) f[id] = opt_.repetition_penalty;
    }
    const int n = opt_.no_repeat_ngram_size;
    if (n > 0 && (int)seq.size() >= n - 1) {
        // Every earlier n-gram whose first n - 1 tokens are the last n - 1.
        const size_t tail = seq.size() - (size_t)(n - 1);
        for (size_t i = 0; i + (size_t)n <= seq.size(); i++) {
            if (std::equal(seq.begin() + (ptrdiff_t)i, seq.begin() + (ptrdiff_t)i + n - 1, seq.begin() + (ptrdiff_t)tail)) {
                f[seq[i + (size_t)n - 1]] = 0.0f;
            }
        }
    }
    if ((int)hist_[r].size() < opt_.min_length) {
        if (eos_stop_ >= 0) f[eos_stop_] = 0.0f;
        for (int32_t id : opt_.stop_ids) f[id] = 0.0f;
    }
    for (auto &[id, factor] : f) {
        out.rows.push_back(row);
        out.ids.push_back(id);
        out.factor.push_back(factor);
    }
}

void Search::step(const std::vector<int> &inputs, const StepResult &res, const std::vector<int> &row_of) {
    for (int b : inputs) {
        if (done_[b]) continue;  // left the batch
        if (opt_.cancelled && opt_.cancelled(b)) {
            cancel(b);
            continue;
        }
        choose(b, steps_[b]++, res, row_of);
    }
}

void Search::report(int b) {
    result_[b] = finish(b);
    reported_[b] = 1;
    if (opt_.on_finished) opt_.on_finished(b, result_[b]);
}

void Search::report_done() {
    for (int b = 0; b < B_; b++) {
        if (done_[b] && !reported_[b]) report(b);
    }
}

bool Search::all_done() const {
    return std::all_of(done_.begin(), done_.end(), [](char d) { return d != 0; });
}

std::vector<std::vector<Hypothesis>> Search::results() {
    for (int b = 0; b < B_; b++) {
        if (!reported_[b]) report(b);
    }
    return result_;
}

void GreedySearch::choose(int b, int, const StepResult &res, const std::vector<int> &row_of) {
    const int r = b;
    next_[r] = res.ids[(size_t)row_of[r] * res.stride];
    hist_[r].push_back(next_[r]);
    if (res.logp) logp_[r].push_back(res.logp[row_of[r]]);
    if (ends(next_[r]) || (int)hist_[r].size() >= limit(b)) done_[b] = 1;
    if (opt_.on_token) opt_.on_token(b, next_[r]);
}

std::vector<Hypothesis> GreedySearch::finish(int b) {
    // The score: the total log-probability (a sum in double, in token order).
    double total = 0;
    for (float lp : logp_[b]) total += lp;
    return {hypothesis(b, opt_.return_logprobs ? total : 0.0)};
}

SamplingSearch::SamplingSearch(int inputs, const GenerateOptions &opt, int max_new, int eos_stop, int pad)
    : GreedySearch(inputs, opt, max_new, eos_stop, pad) {
    seed_streams(0);
}

void SamplingSearch::seed_streams(int from) {
    rng_.resize(B_);
    for (int b = from; b < B_; b++) {
        // With seeds, input b draws as input 0 of a batch of one.
        // (Inputs given without seeds, then joined by inputs with seeds:
        // seeds is read only as an input is added.)
        rng_[b].s = (size_t)b >= opt_.seeds.size() || opt_.seeds.empty()
                        ? opt_.seed * 0x2545F4914F6CDD1Dull + (uint64_t)b
                        : opt_.seeds[b] * 0x2545F4914F6CDD1Dull;
    }
}

void SamplingSearch::add(int n) {
    const int from = B_;
    Search::add(n);
    seed_streams(from);
}

void SamplingSearch::uniforms(const std::vector<int> &inputs, const std::vector<int> &row_of, int rows,
                              std::vector<double> &u) {
    u.assign((size_t)rows, 0.0);
    for (int b : inputs) {
        // (A greedy input draws nothing, as alone.)
        const bool draws = opt_.sampling_each.empty() ? opt_.sample : opt_.sampling_each[(size_t)b].sample;
        if (!done_[b] && draws) u[(size_t)row_of[b]] = rng_[b].uniform();
    }
}

BeamSearch::BeamSearch(int inputs, int width, const GenerateOptions &opt, int max_new, int eos_stop, int pad)
    : Search(inputs, width, opt, max_new, eos_stop, pad), score_((size_t)inputs * width, 0.0),
      alive_((size_t)inputs * width, 0), finished_(inputs) {
    for (int r = 0; r < inputs * width; r++) alive_[r] = (r % width == 0);  // one live beam to start
}

void BeamSearch::add(int n) {
    const int from = B_ * K_;
    Search::add(n);
    score_.resize((size_t)B_ * K_, 0.0);
    alive_.resize((size_t)B_ * K_, 0);
    for (int r = from; r < B_ * K_; r++) alive_[r] = (r % K_ == 0);
    finished_.resize(B_);
}

double BeamSearch::penalty(size_t len) const {
    return std::pow((5.0 + (double)len) / 6.0, (double)opt_.length_penalty);
}

namespace {

struct Candidate {
    double score;
    int beam, rank;
    int32_t id;
};

}  // namespace

void BeamSearch::choose(int b, int step, const StepResult &res, const std::vector<int> &row_of) {
    const int K = K_;
    for (int k = 0; k < K; k++) {
        parent_[b * K + k] = b * K + k;
        next_[b * K + k] = pad_;
    }
    // Every live beam's K + 1 best continuations (one may be eos).
    std::vector<Candidate> cands;
    for (int k = 0; k < K; k++) {
        const int r = b * K + k;
        if (!alive_[r]) continue;
        const size_t c = (size_t)row_of[r] * res.stride;
        for (int j = 0; j < K + 1; j++) {
            const int32_t id = res.ids[c + j];
            if (id >= 0) cands.push_back({score_[r] + (double)res.values[c + j], k, j, id});
        }
    }
    std::stable_sort(cands.begin(), cands.end(), [](const Candidate &p, const Candidate &q) {
        if (p.score != q.score) return p.score > q.score;
        if (p.beam != q.beam) return p.beam < q.beam;
        return p.rank < q.rank;
    });
    std::vector<Candidate> chosen;
    for (const auto &c : cands) {
        if ((int)chosen.size() == K) break;
        if (!ends(c.id)) {
            chosen.push_back(c);
            continue;
        }
        Hypothesis h = hypothesis(b * K + c.beam, 0.0);
        h.tokens.push_back(c.id);
        if (opt_.return_logprobs) h.log_probs.push_back(res.values[(size_t)row_of[b * K + c.beam] * res.stride + c.rank]);
        h.score = c.score / penalty(h.tokens.size());
        finished_[b].push_back(std::move(h));
    }
    std::vector<std::vector<int32_t>> new_hist(K);
    std::vector<std::vector<float>> new_logp(K);
    for (int k = 0; k < K; k++) {
        const int r = b * K + k;
        alive_[r] = k < (int)chosen.size();
        if (!alive_[r]) continue;
        const int from = b * K + chosen[k].beam;
        parent_[r] = from;
        new_hist[k] = hist_[from];
        new_hist[k].push_back(chosen[k].id);
        if (opt_.return_logprobs) {
            new_logp[k] = logp_[from];
            new_logp[k].push_back(res.values[(size_t)row_of[from] * res.stride + chosen[k].rank]);
        }
        next_[r] = chosen[k].id;
        score_[r] = chosen[k].score;
    }
    for (int k = 0; k < K; k++) {
        hist_[b * K + k] = std::move(new_hist[k]);
        logp_[b * K + k] = std::move(new_logp[k]);
    }
    if ((int)finished_[b].size() >= K || chosen.empty()) done_[b] = 1;
    if (step == limit(b) - 1 && !done_[b]) {
        for (int k = 0; k < K; k++) {
            const int r = b * K + k;
            if (alive_[r]) finished_[b].push_back(hypothesis(r, score_[r] / penalty(hist_[r].size())));
        }
        done_[b] = 1;
    }
}

void BeamSearch::cancel(int b) {
    for (int k = 0; k < K_; k++) {  // what it has: its live beams as they are
        const int r = b * K_ + k;
        if (alive_[r]) finished_[b].push_back(hypothesis(r, score_[r] / penalty(std::max<size_t>(hist_[r].size(), 1))));
    }
    done_[b] = 1;
}

std::vector<Hypothesis> BeamSearch::finish(int b) {
    auto f = std::move(finished_[b]);
    std::stable_sort(f.begin(), f.end(), [](const Hypothesis &p, const Hypothesis &q) { return p.score > q.score; });
    if ((int)f.size() > opt_.n_best) f.resize(opt_.n_best);
    return f;
}

std::unique_ptr<Search> make_search(int inputs, const GenerateOptions &opt, int max_new, int eos_stop, int pad) {
    if (!opt.sample && opt.beam > 1) return std::make_unique<BeamSearch>(inputs, opt.beam, opt, max_new, eos_stop, pad);
    // Per-input settings, or inputs that may join with theirs: greedy and
    // sampled inputs in one batch.
    bool sample = opt.sample || opt.join;
    for (const Sampling &x : opt.sampling_each) sample = sample || x.sample;
    if (sample) return std::make_unique<SamplingSearch>(inputs, opt, max_new, eos_stop, pad);
    return std::make_unique<GreedySearch>(inputs, opt, max_new, eos_stop, pad);
}

}  // namespace decoding
}  // namespace halformer
