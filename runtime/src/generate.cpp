// Model::generate(): the options' and inputs' checks, each input's new-token
// limit, the memory estimate, and how a call's inputs are batched (a
// decoder-only model's prompts as many at a time as the budget holds, or
// one joining batch); the decoding itself is decoding/scheduler.h's, run by decode.cpp.
#include "decoding/generate.h"
#include "decoding/sampler.h"
#include "model/session.h"

#include "halformer/options.h"

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <sstream>

namespace halformer {
namespace decoding {

void check_sampling(const Sampling &x, const std::string &of) {
    // Each field against its option's range in the schema (halformer/options.h).
    auto check = [&](const char *name, auto v) {  // (v as given: an int prints whole)
        const std::string why = find_generate_option(name)->check((double)v);
        if (!why.empty()) {
            std::ostringstream text;
            text << "generate: " << name << of << " " << why << ", not " << v;
            throw Error(text.str());
        }
    };
    if (x.sample) check("temperature", x.temperature);
    check("top_k", x.top_k);
    check("top_p", x.top_p);
}

void check_tokens(const Config &cfg, const std::vector<Sequence> &seqs, int vocab, const char *what,
                  int extra_positions) {
    if (seqs.empty()) throw Error(std::string(what) + ": empty batch");
    for (size_t b = 0; b < seqs.size(); b++) {
        const auto &s = seqs[b];
        if (s.empty()) throw Error(std::string(what) + " sequence " + std::to_string(b) + " is empty");
        if ((int64_t)s.size() + extra_positions > cfg.max_positions) {
            throw Error(std::string(what) + " sequence " + std::to_string(b) + " needs " +
                        std::to_string(s.size() + extra_positions) + " positions; the model has max_positions = " +
                        std::to_string(cfg.max_positions));
        }
        for (size_t t = 0; t < s.size(); t++) {
            if (s[t] < 0 || s[t] >= vocab) {
                throw Error(std::string(what) + " token id " + std::to_string(s[t]) + " at position " +
                            std::to_string(t) + " of sequence " + std::to_string(b) +
                            " is out of range [0, " + std::to_string(vocab) + ")");
            }
        }
    }
}

int new_token_limit(const Config &c, const GenerateOptions &opt, int S, int P) {
    const int allowed = c.max_positions - P + 1;
    if (opt.max_new_tokens == -1) return default_new_tokens(c, S, P);
    if (opt.max_new_tokens < 1) throw Error("generate: max_new_tokens must be >= 1");
    if (opt.max_new_tokens > allowed) {
        throw Error("generate: " + std::to_string(P) + " prefix tokens + " + std::to_string(opt.max_new_tokens) +
                    " new tokens need " + std::to_string(P + opt.max_new_tokens - 1) +
                    " positions; the model has max_positions = " + std::to_string(c.max_positions));
    }
    return opt.max_new_tokens;
}

}  // namespace decoding

namespace {

using decoding::new_token_limit;
using decoding::prompt_stream;

using decoding::kTopK;

// generate()'s options and inputs, before anything runs.
void check_generate(const Config &c, const std::vector<Sequence> &src, const GenerateOptions &opt) {
    if (c.architecture == Architecture::Encoder) throw Error("generate: an encoder-only model does not generate");
    // Each scalar option against its range (halformer/options.h); -1 is
    // max_new_tokens' "as the positions allow".
    static_assert(kTopK - 1 == 7, "options.cpp: beam's range is the top-k kernel's width - 1");
    for (const OptionSpec &s : generate_option_specs()) {
        const double v = s.get(opt);
        if (s.i == &GenerateOptions::max_new_tokens && v == -1) continue;
        const std::string why = s.check(v);
        if (!why.empty()) {
            std::ostringstream text;
            text << "generate: " << s.name << " = " << v << " " << why;
            throw Error(text.str());
        }
    }
    if (opt.n_best > opt.beam) {
        throw Error("generate: n_best " + std::to_string(opt.n_best) + " must be in [1, beam = " +
                    std::to_string(opt.beam) + "]");
    }
    if (opt.sample && opt.beam > 1) throw Error("generate: sampling and beam search are exclusive");
    if (!opt.sampling_each.empty()) {
        if (opt.beam > 1) throw Error("generate: sampling_each is for beam 1 (greedy or sampling), not beam " +
                                      std::to_string(opt.beam));
        if (opt.sampling_each.size() != src.size()) {
            throw Error("generate: " + std::to_string(opt.sampling_each.size()) + " sampling_each for " +
                        std::to_string(src.size()) + " inputs (give one per input, or none)");
        }
        for (size_t b = 0; b < src.size(); b++) decoding::check_sampling(opt.sampling_each[b], " of input " + std::to_string(b));
    }
    if (!opt.max_new_tokens_each.empty()) {
        if (opt.max_new_tokens_each.size() != src.size()) {
            throw Error("generate: " + std::to_string(opt.max_new_tokens_each.size()) + " max_new_tokens_each for " +
                        std::to_string(src.size()) + " inputs (give one per input, or none)");
        }
        for (int n : opt.max_new_tokens_each) {
            if (n < 1) throw Error("generate: max_new_tokens_each must be >= 1, not " + std::to_string(n));
        }
    }
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

// Activations and caches of B inputs (S source and P prefix tokens, new_tokens
// more) within the budget (Session::require_pass_fits): the prefix run at
// once, the cache holding it and the new tokens, a step's scores.
void require_generate_fits(Session &m, const GenerateOptions &opt, int64_t B, int64_t S, int64_t P,
                           int64_t new_tokens) {
    Session::PassShapes p;
    p.sources = B;
    p.source_len = S;
    p.rows = checked_product({B, opt.beam}, "generate");
    p.positions = std::max<int64_t>(P, 1);
    p.cache = P + new_tokens;
    p.out_rows = p.rows;
    p.width = m.cfg.tgt_vocab_size + 64;
    m.require_pass_fits(p, "generate",
                        "generate (" + std::to_string(B) + " inputs x beam " + std::to_string(opt.beam) + ", " +
                            std::to_string(std::max(S, P)) + " input tokens, " + std::to_string(new_tokens) + " new)");
}

// Prompt b's new tokens at most: new_token_limit for its length, or less
// where max_new_tokens_each says so; Error where they do not fit its
// positions.
int prompt_limit(const Config &c, const GenerateOptions &opt, size_t b, int P) {
    if (opt.max_new_tokens_each.empty()) return new_token_limit(c, opt, 0, P);
    const int allowed = c.max_positions - P + 1, each = opt.max_new_tokens_each[b];
    const int n = opt.max_new_tokens == -1 ? std::min(default_new_tokens(c, 0, P), each)
                                           : std::min(opt.max_new_tokens, each);
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
        at += n;
        GenerateOptions o = opt;
        o.seeds.clear();
        o.max_new_tokens_each.clear();
        o.sampling_each.clear();
        std::vector<Sequence> prompts;
        for (size_t b : idx) {
            prompts.push_back(src[b]);
            o.seeds.push_back(prompt_stream(opt, b));
            o.max_new_tokens_each.push_back(limit[b]);
            if (!opt.sampling_each.empty()) o.sampling_each.push_back(opt.sampling_each[b]);
        }
        if (opt.on_finished) {
            o.on_finished = [&opt, &idx](int i, const std::vector<Hypothesis> &h) {
                opt.on_finished((int)idx[(size_t)i], h);
            };
        }
        if (opt.on_token) o.on_token = [&opt, &idx](int i, int32_t id) { opt.on_token((int)idx[(size_t)i], id); };
        if (opt.cancelled) o.cancelled = [&opt, &idx](int i) { return opt.cancelled((int)idx[(size_t)i]); };
        auto r = m.decode(prompts, o);
        for (size_t i = 0; i < idx.size(); i++) out[idx[i]] = std::move(r[i]);
    }
    return out;
}

// The options the decoder runs a call with, after its checks: each input's
// limit from its own source and prefix (an answer does not depend on what
// else is in its batch), decoder-only prompts' seeds, and the memory
// estimate (`at_once`: every input in one batch; else each prompt alone,
// generate_prompts fitting them in chunks).
GenerateOptions decoder_options(Session &m, const std::vector<Sequence> &src, const GenerateOptions &opt,
                                bool at_once) {
    const Config &c = m.cfg;
    GenerateOptions o = opt;
    if (c.architecture == Architecture::EncoderDecoder) {
        m.check_tokens(src, c.src_vocab_size, "source", 0);
        int S = 0;
        for (auto &s : src) S = std::max(S, (int)s.size());
        // The decoder starts from bos and each input's target prefix.
        int P = 1;
        for (size_t b = 0; b < opt.target_prefix.size(); b++) P = std::max(P, 1 + (int)opt.target_prefix[b].size());
        o.max_new_tokens_each.resize(src.size(), INT32_MAX);
        int new_tokens = 0;
        for (size_t b = 0; b < src.size(); b++) {
            const int p = 1 + (int)(b < opt.target_prefix.size() ? opt.target_prefix[b].size() : 0);
            int &n = o.max_new_tokens_each[b];
            n = std::min(n, new_token_limit(c, opt, (int)src[b].size(), p));
            new_tokens = std::max(new_tokens, n);
        }
        require_generate_fits(m, opt, (int64_t)src.size(), S, P, new_tokens);
        return o;
    }
    m.check_tokens(src, c.tgt_vocab_size, "prompt", 0);
    o.max_new_tokens_each.clear();
    o.seeds.clear();
    int P = 0, new_tokens = 0;
    for (size_t b = 0; b < src.size(); b++) {
        const int n = prompt_limit(c, opt, b, (int)src[b].size());
        require_generate_fits(m, opt, 1, 0, (int64_t)src[b].size(), n);
        o.max_new_tokens_each.push_back(n);
        o.seeds.push_back(prompt_stream(opt, b));
        P = std::max(P, (int)src[b].size());
        new_tokens = std::max(new_tokens, n);
    }
    if (at_once) require_generate_fits(m, opt, (int64_t)src.size(), 0, P, new_tokens);
    return o;
}

}  // namespace

std::vector<std::vector<Hypothesis>> Model::generate(const std::vector<Sequence> &src,
                                                     const GenerateOptions &opt) {
    Lease lease(*pool_, true);
    Session &m = *lease;
    const Config &c = m.cfg;
    check_generate(c, src, opt);
    DeviceScope scope(m.dev.get());
    // A decoder-only model's prompts without joins: as many at a time as
    // the budget holds. Otherwise one batch, the cache's blocks deciding
    // who prefills when.
    if (c.architecture == Architecture::Decoder && !opt.join) {
        decoder_options(m, src, opt, false);  // (the checks)
        return generate_prompts(m, src, opt);
    }
    return m.decode(src, decoder_options(m, src, opt, false));
}

struct Generation::Impl {
    explicit Impl(Model::Pool &pool) : lease(pool, true) {}
    Lease lease;
    std::unique_ptr<Session::Decoding> decoding;
    bool done = false, failed = false;
};

Generation Model::start(const std::vector<Sequence> &src, const GenerateOptions &opt) {
    auto g = std::make_unique<Generation::Impl>(*pool_);
    Session &m = *g->lease;
    check_generate(m.cfg, src, opt);
    DeviceScope scope(m.dev.get());
    g->decoding = m.start_decode(src, decoder_options(m, src, opt, !opt.join));
    return Generation(std::move(g));
}

Generation::Generation(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}
Generation::Generation(Generation &&) noexcept = default;
Generation &Generation::operator=(Generation &&) noexcept = default;
Generation::~Generation() = default;

bool Generation::step() {
    Impl &g = *impl_;
    if (g.failed) throw Error("generation: an earlier step failed; start a new one");
    if (g.done) return false;
    DeviceScope scope((*g.lease).dev.get());
    try {
        g.done = !g.decoding->step();
    } catch (...) {
        g.failed = true;
        throw;
    }
    return !g.done;
}

bool Generation::done() const { return impl_->done; }

std::vector<std::vector<Hypothesis>> Generation::results() {
    Impl &g = *impl_;
    if (g.failed) throw Error("generation: an earlier step failed; start a new one");
    if (!g.done) throw Error("generation: results() before the last step (step() returned true)");
    return g.decoding->results();
}

}  // namespace halformer
