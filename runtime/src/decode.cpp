// Generation with a KV cache: greedy (argmax kernel, ties to the lowest id),
// beam search (log-softmax head + top-k kernel, length penalty
// ((5 + len) / 6)^α, early stop once `beam` hypotheses have ended), and
// sampling (hf_sample: temperature, top-k, top-p, drawn from one seeded
// uniform a row; only the ids leave the kernels). The decoder runs one position
// per step over all beams of all inputs at once (R = batch × beam rows);
// self-attention K|V are appended to the cache, the cross-attention K|V are
// computed once per source. An input that is done leaves the batch: the
// later steps run only the rows of inputs still decoding, whose caches stay
// where they were written and are read through row lists.
//
// Beam search, exactly (tests/make_fixtures.py implements the same rule in
// PyTorch): each live beam proposes its beam+1 best next tokens with score
// = beam score + log p; candidates are ranked by score (ties: lower beam, then
// lower id); walking down the ranking, a candidate ending in eos becomes a
// finished hypothesis with score / ((5 + len) / 6)^α (len counts the generated
// tokens, eos included) and any other becomes one of the next step's beams,
// until `beam` beams are chosen. An input is done when `beam` hypotheses have
// finished, no beam is left, or the length limit is reached (live beams are
// then finished as they are). The n_best highest normalised scores are
// returned.
#include "layers/layers.h"
#include "session.h"
#include "decoding/search.h"

#include "hf_argmax.h"
#include "hf_gather_rows.h"
#include "hf_sample.h"
#include "hf_topk8.h"

HF_DEVICE_KERNELS(hf_argmax)
HF_DEVICE_KERNELS(hf_gather_rows)
HF_DEVICE_KERNELS(hf_topk8)

#include <algorithm>
#include <chrono>
#include <cmath>
#include <map>

namespace halformer {
namespace {

constexpr int kTopK = 8;  // hf_topk8: beam + 1 candidates per beam

}  // namespace

// One generate() call's decoder over a batch of B inputs × K rows (slots r
// = b·K + k). Row c of a step's batch (c < Ra, the rows still decoding) is
// slot act[c], and slot r is row pos[r].
//
// The self-attention caches hold cap time slots of R rows each (cache row
// slot·R + c): the prefill writes slots 0..P-1 (P: the longest prefix; a
// shorter prefix leaves its row's last slots unused), and step s writes
// slot P + s at the batch's row c. Positions are per row: input b's prefix
// has plen[b] tokens, so the token a row reads at step s is at position
// plen[b] + s, whatever the others' lengths. Row kv_rows[c·cap + t] of the
// cache holds position t of row c; a hypothesis that takes another parent
// takes the parent's list (cap ints), never its cache. Every position is
// written once and read in place by the attention kernel. The lists are
// passed to the kernel for beam search, for prefixes of different lengths,
// and for greedy or sampling once an input has left the batch (before that
// position t of row c is at cache row t·R + c, as the lists say).
struct Session::Decoder {
    Session &s;
    const GenerateOptions &opt;
    const float *memory;
    int S, B, K, R, P, V, D, A, cap, max_new;  // A: the attention width
    size_t layers;
    decoding::Search &search;
    int Ra;
    bool uniform = true;  // every prefix of length P
    std::vector<int> act, pos, pos_next;
    std::vector<int32_t> plen, kv_rows, kv_rows_alt, kv_len, src_lens, cross_len, cross_rows, row_pos;
    bool compacted = false;
    float *x = nullptr, *xa = nullptr, *last = nullptr;
    const float *bias = nullptr;
    std::vector<double> u;
    std::vector<float> chosen_logp;
    decoding::Adjustments adjust;
    std::vector<Sequence> context;  // per slot: its decoder prefix, bos dropped (the penalties' context)

    static int longest(const std::vector<Sequence> &prefix) {
        size_t P = 0;
        for (auto &p : prefix) P = std::max(P, p.size());
        return (int)P;
    }

    Decoder(Session &s_, const std::vector<Sequence> &prefix, const float *memory_, int S_,
            const std::vector<int32_t> &src_lens_, const GenerateOptions &o, int max_new_, decoding::Search &search_)
        : s(s_), opt(o), memory(memory_), S(S_), B((int)prefix.size()), K(search_.width()), R(B * K),
          P(longest(prefix)), V(s_.w->gen_rows), D(s_.cfg.d_model), A(s_.desc.attn_width), cap(P + max_new_ - 1),
          max_new(max_new_), layers(s_.w->dec.layers.size()), search(search_), Ra(R), act(R), pos(R), pos_next(R),
          plen(R), kv_rows((size_t)R * cap), kv_rows_alt((size_t)R * cap), kv_len(R), src_lens(src_lens_),
          cross_len(src_lens_), row_pos(R) {
        for (int r = 0; r < R; r++) {
            const Sequence &p = prefix[r / K];
            context.emplace_back(p.begin() + (memory ? 1 : 0), p.end());
            act[r] = pos[r] = r;
            plen[r] = kv_len[r] = (int)prefix[r / K].size();
            if (plen[r] != P) uniform = false;
            for (int t = 0; t < cap; t++) kv_rows[(size_t)r * cap + t] = t * R + r;
        }
    }

    // The caches: the cross-attention K|V once per source, read by all of
    // its beams (the attention kernel takes a source's beams as queries of
    // one sequence), and room for every position of the self-attention.
    void allocate() {
        s.cross_kv.resize(layers);
        s.attach(s.cross_kv);
        for (size_t l = 0; memory && l < layers; l++) {
            layers::memory_kv(s, layers::Pass{}, s.w->dec.layers[l].cross, memory, S * B,
                              s.cross_kv[l].need((size_t)S * B * 2 * A));
        }
        s.self_kv.resize(layers);
        s.attach(s.self_kv);
        for (size_t l = 0; l < layers; l++) s.self_kv[l].need((size_t)cap * R * 2 * A);
        // T5: the decoder's relative-position bias, once for every step.
        bias = s.stack_bias(s.w->dec, true);
        // (Its kernels take one query position a step: every prefix of one length.)
        if (bias && !uniform) {
            throw Error("generate: this model's relative-position attention (T5) takes one query position a step: "
                        "give every input a target prefix of one length");
        }
    }

    // T new positions of the Ra rows, written at cache slots slot..slot+T-1.
    void run_layers(int T, int slot) {
        RowMap rows;
        rows.cache_rows = R;
        if (T == 1 && (K > 1 || compacted || !uniform)) {
            rows.kv_rows = kv_rows.data();
            rows.kv_rows_stride = cap;
            rows.slots = cap;
        }
        if (compacted && memory) {
            rows.cross_rows = cross_rows.data();
            rows.cross_sources = B;
        }
        // A target prefix under beam search: the prefill's R rows read their
        // sources' K|V repeated for each beam (gathered per layer into
        // kv_tmp; the steps read one copy per source, cross_group).
        const bool repeat = memory && T > 1 && K > 1;
        std::vector<int32_t> beam_src, beam_len;
        if (repeat) {
            for (int r = 0; r < R; r++) {
                beam_src.push_back(r / K);
                beam_len.push_back(src_lens[r / K]);
            }
        }
        for (size_t l = 0; l < layers; l++) {
            const float *mem = memory ? s.cross_kv[l].get() : nullptr;
            if (repeat) {
                float *out = s.kv_tmp.need((size_t)S * R * 2 * A);
                View from(mem, {{2 * A, 1}, {B, 2 * A}, {S, B * 2 * A}}), idx(beam_src.data(), {{R, 1}}, true);
                View to(out, {{2 * A, 1}, {R, 2 * A}, {S, R * 2 * A}});
                s.run("gather", [&] { return HF_PICK(s.device(), hf_gather_rows)(from.get(), idx.get(), to.get()); });
                mem = out;
            }
            s.layer(s.w->dec.layers[l], true, x, xa, T, Ra, slot, s.self_kv[l].get(), kv_len.data(), mem,
                    memory ? (repeat ? beam_len.data() : cross_len.data()) : nullptr, S, memory && T == 1 ? K : 1,
                    rows, bias);
        }
    }

    // The prefixes at positions 0..plen-1 of every row (a shorter one
    // padded at its end: its own keys stop at plen, kv_len), then each
    // row's last position, normalized.
    void prefill(const std::vector<Sequence> &prefix) {
        std::vector<int32_t> tokens((size_t)P * R, s.cfg.pad_id);
        for (int r = 0; r < R; r++) {
            const Sequence &p = prefix[r / K];
            for (size_t t = 0; t < p.size(); t++) tokens[t * R + r] = p[t];
        }
        x = s.x0.need((size_t)std::max(P, 1) * R * D);
        xa = s.x1.need((size_t)std::max(P, 1) * R * D);
        layers::embed(s, s.w->dec, tokens.data(), P, R, 0, x);
        run_layers(P, 0);
        if (uniform) {
            last = x + (size_t)(P - 1) * R * D;
        } else {
            // Row r's last position, plen[r] - 1, gathered into xa.
            std::vector<int32_t> at(R);
            for (int r = 0; r < R; r++) at[r] = (plen[r] - 1) * R + r;
            View src(x, {{D, 1}, {P * R, D}, {1, P * R * D}}), idx(at.data(), {{R, 1}}, true);
            View out(xa, {{D, 1}, {R, D}, {1, R * D}});
            s.run("gather", [&] { return HF_PICK(s.device(), hf_gather_rows)(src.get(), idx.get(), out.get()); });
            last = xa;
        }
        s.final_norm(s.w->dec.final_norm, last, R);
    }

    // The step's results for its Ra rows: only ids (and for beam search the
    // K + 1 best log-probabilities) come back to the host.
    decoding::StepResult results() {
        float *out = s.logits.need((size_t)R * V);
        float *topv = s.topv.need((size_t)R * kTopK);
        int32_t *topi = (int32_t *)s.topi.need((size_t)R * kTopK);
        const decoding::Need need = search.need();
        const bool logp = opt.return_logprobs, lsm = need == decoding::Need::TopLogProbs || logp;
        // scores: what the choice reads (logits, or log-probabilities).
        float *scores = out;
        if (!search.adjusts()) {
            s.project(last, Ra, D, out, lsm, true);
        } else {
            // The penalties and bans change the logits, then the
            // log-softmax (where needed) normalizes what they left.
            s.project(last, Ra, D, out, false, true);
            adjust.clear();
            for (int c = 0; c < Ra; c++) search.adjustments(c, act[c], context[act[c]], adjust);
            float *tmp = s.head_tmp.need((size_t)R * V);
            if (!adjust.ids.empty()) {
                layers::logits_adjust(s, out, Ra, V, adjust.rows.data(), adjust.ids.data(), adjust.factor.data(),
                                      (int)adjust.ids.size(), tmp);
                if (lsm) layers::log_softmax(s, tmp, Ra, V, out);
                else scores = tmp;
            } else if (lsm) {
                layers::log_softmax(s, out, Ra, V, tmp);
                scores = tmp;
            }
        }
        View vs(scores, {{V, 1}, {Ra, V}});
        if (need == decoding::Need::TopLogProbs) {
            View vv(topv, {{kTopK, 1}, {Ra, kTopK}}), vi(topi, {{kTopK, 1}, {Ra, kTopK}}, true);
            s.run("topk", [&] { return HF_PICK(s.device(), hf_topk8)(vs.get(), vv.get(), vi.get()); });
            s.dev->to_host(topv, (size_t)Ra * kTopK * sizeof(float));
            s.dev->to_host(topi, (size_t)Ra * kTopK * sizeof(int32_t));
            return {topi, topv, kTopK};
        }
        if (need == decoding::Need::Argmax) {
            View vv(topv, {{1, 1}, {Ra, 1}}), vi(topi, {{1, 1}, {Ra, 1}}, true);
            s.run("argmax", [&] { return HF_PICK(s.device(), hf_argmax)(vs.get(), vv.get(), vi.get()); });
        } else {
            // Sampling: the kernel draws each row's id from the row's
            // uniform, on the CPU (hf_sample has no GPU build: a GPU session
            // brings the step's logits to the host first).
            static_cast<decoding::SamplingSearch &>(search).uniforms(pos, u);
            std::vector<float> uf(u.begin(), u.begin() + Ra);
            if (s.dev->on_gpu()) s.dev->to_host(scores, (size_t)Ra * V * sizeof(float));
            View vh(scores, {{V, 1}, {Ra, V}}), vu(uf.data(), {{Ra, 1}}), vid(topi, {{Ra, 1}}, true);
            s.run("sample", [&] {
                return hf_sample(vh.host(), opt.temperature, opt.top_k, opt.top_p, vu.host(), vid.host());
            });
            if (!logp) return {topi, nullptr, 1};
            // The drawn ids' log-probabilities, read from the rows (on the host).
            chosen_logp.resize(Ra);
            for (int c = 0; c < Ra; c++) chosen_logp[c] = scores[(size_t)c * V + topi[c]];
            return {topi, nullptr, 1, chosen_logp.data()};
        }
        s.dev->to_host(topi, (size_t)Ra * sizeof(int32_t));
        if (!logp) return {topi, nullptr, 1};
        // The argmax of the log-probabilities is the chosen id's.
        s.dev->to_host(topv, (size_t)Ra * sizeof(float));
        return {topi, nullptr, 1, topv};
    }

    // The next batch: the slots of the inputs not done, in order, with
    // their row lists (a beam's is its parent's) and sources. `slots`:
    // the cache slots written so far (no list holds a later one).
    void compact(int slots) {
        int Rn = 0;
        for (int c = 0; c < Ra; c++) {
            if (!search.done(act[c] / K)) act[Rn++] = act[c];
        }
        if (Rn < Ra) {
            compacted = true;
            if (memory) {
                const int Bs = Rn / K;
                cross_len.resize(Bs);
                cross_rows.resize((size_t)Bs * S);
                for (int g = 0; g < Bs; g++) {
                    const int src = act[g * K] / K;
                    cross_len[g] = src_lens[src];
                    std::fill_n(&cross_rows[(size_t)g * S], S, src);
                }
            }
        }
        for (int c = 0; c < Rn; c++) pos_next[act[c]] = c;
        for (int c = 0; c < Rn; c++) {
            const int32_t *from = &kv_rows[(size_t)pos[search.parent(act[c])] * cap];
            std::copy(from, from + slots, &kv_rows_alt[(size_t)c * cap]);
        }
        std::swap(kv_rows, kv_rows_alt);
        std::swap(pos, pos_next);
        Ra = Rn;
    }

    // One position more for the rows still decoding: at step `step`, each
    // row's token goes to position plen + step and cache slot P + step.
    void advance(int step) {
        const int slot = P + step;
        std::vector<int32_t> tokens_now(Ra);
        kv_len.resize(Ra);
        row_pos.resize(Ra);
        for (int c = 0; c < Ra; c++) {
            tokens_now[c] = search.next(act[c]);
            row_pos[c] = plen[act[c]] + step;
            kv_len[c] = row_pos[c] + 1;
            kv_rows[(size_t)c * cap + row_pos[c]] = slot * R + c;
        }
        x = s.x0.get();
        xa = s.x1.get();
        layers::embed(s, s.w->dec, tokens_now.data(), 1, Ra, slot, x, uniform ? nullptr : row_pos.data());
        run_layers(1, slot);
        last = x;
        s.final_norm(s.w->dec.final_norm, last, Ra);
    }
};

std::vector<std::vector<Hypothesis>> Session::decode(const std::vector<Sequence> &prefix, const float *memory, int S,
                                                     const std::vector<int32_t> &src_lens, const GenerateOptions &opt,
                                                     int max_new) {
    const int eos_stop = opt.stop_at_eos ? cfg.eos_id : -2;  // -2: no token id matches
    auto search = decoding::make_search((int)prefix.size(), opt, max_new, eos_stop, cfg.pad_id);
    Decoder d(*this, prefix, memory, S, src_lens, opt, max_new, *search);
    d.allocate();
    step_seconds.clear();
    step_rows.clear();
    auto step_start = std::chrono::steady_clock::now();
    d.prefill(prefix);
    for (int step = 0; step < max_new; step++) {
        search->step(step, d.results(), d.pos);
        auto now = std::chrono::steady_clock::now();
        step_seconds.push_back(std::chrono::duration<double>(now - step_start).count());
        step_rows.push_back(d.Ra);
        step_start = now;
        search->report_done();
        if (step == max_new - 1 || search->all_done()) break;
        d.compact(d.P + step);
        d.advance(step);
    }
    return search->results();
}

namespace {

// generate()'s options and inputs, before anything runs.
void check_generate(const Config &c, const std::vector<Sequence> &src, const GenerateOptions &opt) {
    if (c.architecture == Architecture::Encoder) throw Error("generate: an encoder-only model does not generate");
    if (opt.beam < 1 || opt.beam > kTopK - 1) {
        throw Error("generate: beam size " + std::to_string(opt.beam) + " is out of range [1, " +
                    std::to_string(kTopK - 1) + "]");
    }
    if (opt.n_best < 1 || opt.n_best > opt.beam) {
        throw Error("generate: n_best " + std::to_string(opt.n_best) + " must be in [1, beam = " +
                    std::to_string(opt.beam) + "]");
    }
    if (opt.sample && opt.beam > 1) throw Error("generate: sampling and beam search are exclusive");
    if (opt.sample && !(opt.temperature > 0 && std::isfinite(opt.temperature))) {
        throw Error("generate: temperature must be positive, not " + std::to_string(opt.temperature));
    }
    if (opt.top_k < 0) throw Error("generate: top_k must be >= 0");
    if (!(opt.top_p > 0 && opt.top_p <= 1)) throw Error("generate: top_p must be in (0, 1], not " + std::to_string(opt.top_p));
    if (!std::isfinite(opt.length_penalty)) throw Error("generate: length_penalty must be finite");
    if (!opt.max_new_tokens_each.empty()) {
        if (opt.max_new_tokens_each.size() != src.size()) {
            throw Error("generate: " + std::to_string(opt.max_new_tokens_each.size()) + " max_new_tokens_each for " +
                        std::to_string(src.size()) + " inputs (give one per input, or none)");
        }
        for (int n : opt.max_new_tokens_each) {
            if (n < 1) throw Error("generate: max_new_tokens_each must be >= 1, not " + std::to_string(n));
        }
    }
    if (!(opt.repetition_penalty > 0 && std::isfinite(opt.repetition_penalty))) {
        throw Error("generate: repetition_penalty must be positive and finite, not " +
                    std::to_string(opt.repetition_penalty));
    }
    if (opt.no_repeat_ngram_size < 0) throw Error("generate: no_repeat_ngram_size must be >= 0");
    if (opt.min_length < 0) throw Error("generate: min_length must be >= 0");
    const int V = c.tgt_vocab_size;
    for (int32_t id : opt.stop_ids) {
        if (id < 0 || id >= V) {
            throw Error("generate: stop id " + std::to_string(id) + " is out of range [0, " + std::to_string(V) + ")");
        }
    }
    if (!opt.target_prefix.empty()) {
        if (c.architecture != Architecture::EncoderDecoder) {
            throw Error("generate: target_prefix is for encoder-decoder models (a decoder-only model's prompt "
                        "is its prefix)");
        }
        if (opt.target_prefix.size() != src.size()) {
            throw Error("generate: " + std::to_string(opt.target_prefix.size()) + " target prefixes for " +
                        std::to_string(src.size()) + " inputs (give one per input, or none)");
        }
        for (size_t b = 0; b < opt.target_prefix.size(); b++) {
            for (size_t t = 0; t < opt.target_prefix[b].size(); t++) {
                const int32_t id = opt.target_prefix[b][t];
                if (id < 0 || id >= V) {
                    throw Error("generate: target prefix token id " + std::to_string(id) + " at position " +
                                std::to_string(t) + " of input " + std::to_string(b) + " is out of range [0, " +
                                std::to_string(V) + ")");
                }
            }
        }
    }
    if (!opt.seeds.empty() && opt.seeds.size() != src.size()) {
        throw Error("generate: " + std::to_string(opt.seeds.size()) + " seeds for " + std::to_string(src.size()) +
                    " inputs (give one per input, or none)");
    }
}

}  // namespace

namespace {

// New tokens per input for prefixes of P tokens: max_new_tokens (-1: up to
// 256), within max_positions.
int new_token_limit(const Config &c, const GenerateOptions &opt, int P) {
    const int allowed = c.max_positions - P + 1;
    if (opt.max_new_tokens == -1) return std::min(256, allowed);
    if (opt.max_new_tokens < 1) throw Error("generate: max_new_tokens must be >= 1");
    if (opt.max_new_tokens > allowed) {
        throw Error("generate: " + std::to_string(P) + " prefix tokens + " + std::to_string(opt.max_new_tokens) +
                    " new tokens need " + std::to_string(P + opt.max_new_tokens - 1) +
                    " positions; the model has max_positions = " + std::to_string(c.max_positions));
    }
    return opt.max_new_tokens;
}

// Activations and caches of B inputs (S source and P prefix tokens, new_tokens
// more), estimated from the shapes (64-bit, checked), within the budget.
void require_generate_fits(Session &m, const GenerateOptions &opt, int64_t B, int64_t S, int64_t P,
                           int64_t new_tokens) {
    const Config &c = m.cfg;
    const int64_t D = std::max(c.d_model, m.desc.attn_width), F = c.d_ff * (m.desc.gated_ffn ? 2 : 1),
                  Ld = c.num_decoder_layers, V = c.tgt_vocab_size;
    const int64_t R = checked_product({B, opt.beam}, "generate"), cap = P + new_tokens;
    const int64_t enc = checked_product({S, B, 6 * D + F}, "generate"),
                  cross = checked_product({Ld, S, B, 2 * D}, "generate"),
                  self = checked_product({Ld, cap, R, 2 * D}, "generate"),
                  acts = checked_product({std::max<int64_t>(P, 1), R, 6 * D + F}, "generate"),
                  head = checked_product({R, V + 64}, "generate");
    m.require_fits(enc + cross + self + acts + head,
                   "generate (" + std::to_string(B) + " inputs x beam " + std::to_string(opt.beam) + ", " +
                       std::to_string(std::max(S, P)) + " input tokens, " + std::to_string(new_tokens) + " new)");
}

// Prompt b's new tokens at most: new_token_limit for its length, or less
// where max_new_tokens_each says so; Error where they do not fit its
// positions.
int prompt_limit(const Config &c, const GenerateOptions &opt, size_t b, int P) {
    if (opt.max_new_tokens_each.empty()) return new_token_limit(c, opt, P);
    const int allowed = c.max_positions - P + 1, each = opt.max_new_tokens_each[b];
    const int n = opt.max_new_tokens == -1 ? std::min(std::min(256, allowed), each) : std::min(opt.max_new_tokens, each);
    if (opt.max_new_tokens != -1 && opt.max_new_tokens < 1) throw Error("generate: max_new_tokens must be >= 1");
    if (n > allowed) {
        throw Error("generate: prompt " + std::to_string(b) + ": " + std::to_string(P) + " tokens + " +
                    std::to_string(n) + " new tokens need " + std::to_string(P + n - 1) +
                    " positions; the model has max_positions = " + std::to_string(c.max_positions));
    }
    return n;
}

// A decoder-only model's prompts run as one batch whatever their lengths
// (each row at its own positions: one kernel call per step for the
// batch), as many at a time as the memory budget holds: in order of
// length, each chunk halved until it fits. Each prompt keeps the seed,
// limit, callbacks and cancellation it has alone.
std::vector<std::vector<Hypothesis>> generate_prompts(Session &m, const std::vector<Sequence> &src,
                                                      const GenerateOptions &opt) {
    std::vector<size_t> order(src.size());
    for (size_t b = 0; b < src.size(); b++) order[b] = b;
    std::stable_sort(order.begin(), order.end(), [&](size_t a, size_t b) { return src[a].size() < src[b].size(); });
    std::vector<int> limit(src.size());
    for (size_t b = 0; b < src.size(); b++) limit[b] = prompt_limit(m.cfg, opt, b, (int)src[b].size());
    std::vector<std::vector<Hypothesis>> out(src.size());
    for (size_t at = 0; at < order.size();) {
        // The chunk order[at, at + n): its longest prompt is its last; the
        // most new tokens any of them may take.
        auto longest_new = [&](size_t n) {
            int most = 0;
            for (size_t i = at; i < at + n; i++) most = std::max(most, limit[order[i]]);
            return most;
        };
        size_t n = order.size() - at;
        while (n > 1) {
            try {
                require_generate_fits(m, opt, (int64_t)n, 0, (int64_t)src[order[at + n - 1]].size(), longest_new(n));
                break;
            } catch (const Error &) {
                n = (n + 1) / 2;
            }
        }
        const std::vector<size_t> idx(order.begin() + (ptrdiff_t)at, order.begin() + (ptrdiff_t)(at + n));
        const int max_new = longest_new(n);
        at += n;
        GenerateOptions o = opt;
        o.seeds.clear();
        o.max_new_tokens_each.clear();
        std::vector<Sequence> prompts;
        for (size_t b : idx) {
            prompts.push_back(src[b]);
            o.seeds.push_back((opt.seeds.empty() ? opt.seed : opt.seeds[b]) * 0x9E3779B97F4A7C15ull +
                              (opt.seeds.empty() ? b : 0));
            o.max_new_tokens_each.push_back(limit[b]);
        }
        if (opt.on_finished) {
            o.on_finished = [&opt, &idx](int i, const std::vector<Hypothesis> &h) {
                opt.on_finished((int)idx[(size_t)i], h);
            };
        }
        if (opt.on_token) o.on_token = [&opt, &idx](int i, int32_t id) { opt.on_token((int)idx[(size_t)i], id); };
        if (opt.cancelled) o.cancelled = [&opt, &idx](int i) { return opt.cancelled((int)idx[(size_t)i]); };
        auto r = m.decode(prompts, nullptr, 0, {}, o, max_new);
        for (size_t i = 0; i < idx.size(); i++) out[idx[i]] = std::move(r[i]);
    }
    return out;
}

}  // namespace

std::vector<std::vector<Hypothesis>> Model::generate(const std::vector<Sequence> &src,
                                                     const GenerateOptions &opt) {
    Lease lease(*pool_, true);
    Session &m = *lease;
    const Config &c = m.cfg;
    check_generate(c, src, opt);
    DeviceScope scope(m.dev.get());
    if (c.architecture == Architecture::EncoderDecoder) {
        m.check_tokens(src, c.src_vocab_size, "source", 0);
        int S = 0;
        for (auto &s : src) S = std::max(S, (int)s.size());
        // The decoder starts from bos and each input's target prefix.
        std::vector<Sequence> prefix(src.size(), Sequence{c.bos_id});
        int P = 1;
        for (size_t b = 0; b < opt.target_prefix.size(); b++) {
            prefix[b].insert(prefix[b].end(), opt.target_prefix[b].begin(), opt.target_prefix[b].end());
            P = std::max(P, (int)prefix[b].size());
        }
        const int new_tokens = new_token_limit(c, opt, P);
        require_generate_fits(m, opt, (int64_t)src.size(), S, P, new_tokens);
        std::vector<int32_t> lens;
        const float *memory = m.encoder(src, S, lens);
        return m.decode(prefix, memory, S, lens, opt, new_tokens);
    }
    m.check_tokens(src, c.tgt_vocab_size, "prompt", 0);
    for (size_t b = 0; b < src.size(); b++) {
        require_generate_fits(m, opt, 1, 0, (int64_t)src[b].size(), prompt_limit(c, opt, b, (int)src[b].size()));
    }
    return generate_prompts(m, src, opt);
}

}  // namespace halformer
