// Decoding controls (GenerateOptions: return_logprobs, stop_ids,
// target_prefix), each against a reference decoder built from teacher-forced
// logits (Model::logits: the whole sequence at once, no cache) and double-
// precision log-softmax loops.
#include "halformer/device.h"
#include "halformer/model.h"
#include "test_files.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <random>

using namespace halformer;

namespace {

using test_files::test_device;

Config small(Architecture a) {
    Config c;
    c.architecture = a;
    c.d_model = 64;
    c.num_heads = 4;
    c.d_ff = 128;
    c.num_encoder_layers = a == Architecture::Decoder ? 0 : 2;
    c.num_decoder_layers = 2;
    c.src_vocab_size = a == Architecture::Decoder ? 0 : 90;
    c.tgt_vocab_size = 80;
    c.max_positions = 64;
    c.eos_id = 2;
    return c;
}

std::vector<Sequence> inputs(Architecture a, int n, uint32_t seed) {
    std::mt19937 rng(seed);
    std::vector<Sequence> out((size_t)n);
    const int vocab = a == Architecture::Decoder ? 80 : 90;
    for (auto &s : out) {
        s.resize(2 + rng() % 9);
        for (auto &t : s) t = 3 + (int32_t)(rng() % (uint32_t)(vocab - 3));
    }
    return out;
}

// The reference: log p(tokens[i] | src, prefix, tokens[<i]) for i ≥ 0 of
// `out`, from the teacher-forced logits of the whole sequence, log-softmax in
// double. Encoder-decoder: the decoder reads bos + prefix + out[<i];
// decoder-only: the prompt src + out[<i].
std::vector<double> reference_logprobs(Model &m, const Sequence &src, const Sequence &prefix, const Sequence &out) {
    const bool dec = m.config().architecture == Architecture::Decoder;
    Sequence fed = dec ? src : Sequence{m.config().bos_id};
    fed.insert(fed.end(), prefix.begin(), prefix.end());
    const size_t first = fed.size() - 1;  // the row that predicts out[0]
    fed.insert(fed.end(), out.begin(), out.end());
    fed.pop_back();
    const Tensor t = dec ? m.logits({fed})[0] : m.logits({src}, {fed})[0];
    const int64_t V = t.shape[1];
    std::vector<double> lp;
    for (size_t i = 0; i < out.size(); i++) {
        const float *row = &t.data[(first + i) * (size_t)V];
        double mx = -INFINITY, sum = 0;
        for (int64_t v = 0; v < V; v++) mx = std::max(mx, (double)row[v]);
        for (int64_t v = 0; v < V; v++) sum += std::exp((double)row[v] - mx);
        lp.push_back((double)row[out[i]] - mx - std::log(sum));
    }
    return lp;
}

// Whether `id` is the argmax of the reference row (ties: the lowest id).
bool is_argmax(Model &m, const Sequence &src, const Sequence &prefix, const Sequence &out, size_t i) {
    Sequence head(out.begin(), out.begin() + (ptrdiff_t)i + 1);
    const bool dec = m.config().architecture == Architecture::Decoder;
    Sequence fed = dec ? src : Sequence{m.config().bos_id};
    fed.insert(fed.end(), prefix.begin(), prefix.end());
    fed.insert(fed.end(), out.begin(), out.begin() + (ptrdiff_t)i);
    const Tensor t = dec ? m.logits({fed})[0] : m.logits({src}, {fed})[0];
    const int64_t V = t.shape[1];
    const float *row = &t.data[(fed.size() - 1) * (size_t)V];
    return std::max_element(row, row + V) - row == out[i];
}

const char *arch_name(Architecture a) { return a == Architecture::Decoder ? "decoder" : "encoder-decoder"; }

}  // namespace

// Per-token log-probabilities of greedy, sampled and beam outputs equal the
// teacher-forced log-softmax; greedy and sampled scores are their sum;
// asking for them changes no token.
TEST(DecodingControls, LogProbsEqualTheTeacherForcedLogSoftmax) {
    for (Architecture a : {Architecture::EncoderDecoder, Architecture::Decoder}) {
        Model m = Model::random(small(a), 51, test_device());
        const auto src = inputs(a, 3, 5);
        for (int mode = 0; mode < 3; mode++) {  // greedy, sampled, beam 3
            SCOPED_TRACE(std::string(arch_name(a)) + (mode == 0 ? " greedy" : mode == 1 ? " sampled" : " beam"));
            GenerateOptions o;
            o.stop_at_eos = false;
            o.max_new_tokens = 9;
            o.sample = mode == 1;
            o.temperature = 0.7f;
            o.top_k = 20;
            o.seed = 3;
            o.beam = mode == 2 ? 3 : 1;
            o.n_best = mode == 2 ? 2 : 1;
            const auto plain = m.generate(src, o);
            o.return_logprobs = true;
            const auto with = m.generate(src, o);
            for (size_t b = 0; b < src.size(); b++) {
                for (size_t h = 0; h < with[b].size(); h++) {
                    const Hypothesis &x = with[b][h];
                    ASSERT_EQ(x.log_probs.size(), x.tokens.size()) << "input " << b;
                    if (mode != 1) EXPECT_EQ(x.tokens, plain[b][h].tokens) << "input " << b;
                    const auto ref = reference_logprobs(m, src[b], {}, x.tokens);
                    double total = 0;
                    for (size_t i = 0; i < ref.size(); i++) {
                        EXPECT_NEAR(x.log_probs[i], ref[i], 2e-4) << "input " << b << " token " << i;
                        total += x.log_probs[i];
                    }
                    if (mode == 2) {
                        const double pen = std::pow((5.0 + (double)x.tokens.size()) / 6.0, 0.6);
                        EXPECT_NEAR(x.score, total / pen, 1e-4) << "beam score: the log-probabilities' sum, penalized";
                    } else {
                        EXPECT_NEAR(x.score, total, 1e-9 * (1 + std::abs(total)));
                        EXPECT_EQ(plain[b][h].score, 0.0) << "not computed unless asked";
                    }
                    if (mode == 0) {
                        for (size_t i = 0; i < x.tokens.size(); i++) {
                            EXPECT_TRUE(is_argmax(m, src[b], {}, x.tokens, i)) << "input " << b << " token " << i;
                        }
                    }
                }
            }
        }
    }
}

// A stop id ends the output where it first appears (kept, as eos is): the
// output is the one without stop ids, cut there.
TEST(DecodingControls, StopIdsCutTheOutputAfterTheirFirstAppearance) {
    for (Architecture a : {Architecture::EncoderDecoder, Architecture::Decoder}) {
        Model m = Model::random(small(a), 52, test_device());
        const auto src = inputs(a, 4, 6);
        for (bool sample : {false, true}) {
            SCOPED_TRACE(std::string(arch_name(a)) + (sample ? " sampled" : " greedy"));
            GenerateOptions o;
            o.stop_at_eos = false;
            o.max_new_tokens = 12;
            o.sample = sample;
            o.seeds = {1, 2, 3, 4};
            const auto full = m.generate(src, o);
            // Each input's 4th token (and an id that may never come) stops it.
            for (size_t b = 0; b < src.size(); b++) {
                GenerateOptions s = o;
                s.stop_ids = {full[b][0].tokens[3], 79};
                const auto cut = m.generate(src, s);
                for (size_t k = 0; k < src.size(); k++) {
                    const auto &f = full[k][0].tokens;
                    size_t end = f.size();
                    for (size_t i = 0; i < f.size(); i++) {
                        if (f[i] == s.stop_ids[0] || f[i] == s.stop_ids[1]) {
                            end = i + 1;
                            break;
                        }
                    }
                    EXPECT_EQ(cut[k][0].tokens, Sequence(f.begin(), f.begin() + (ptrdiff_t)end))
                        << "input " << k << " stopped by " << s.stop_ids[0];
                }
            }
        }
        // Beam search: every hypothesis ends in a stop id or at the limit.
        GenerateOptions o;
        o.stop_at_eos = false;
        o.max_new_tokens = 12;
        o.beam = 4;
        o.n_best = 4;
        o.stop_ids = {5, 6, 7, 8, 9, 10};
        for (auto &hyps : m.generate(src, o)) {
            for (auto &h : hyps) {
                const bool stopped = h.tokens.back() >= 5 && h.tokens.back() <= 10;
                EXPECT_TRUE(stopped || h.tokens.size() == 12u);
                for (size_t i = 0; i + 1 < h.tokens.size(); i++) EXPECT_FALSE(h.tokens[i] >= 5 && h.tokens[i] <= 10);
            }
        }
        GenerateOptions bad;
        bad.stop_ids = {80};
        try {
            m.generate(src, bad);
            ADD_FAILURE() << "no error for a stop id outside the vocabulary";
        } catch (const Error &e) {
            EXPECT_NE(std::string(e.what()).find("stop id 80 is out of range [0, 80)"), std::string::npos) << e.what();
        }
    }
}

// A target prefix: the output continues it exactly as the same decoder
// would after generating it (the output without a prefix, whose first
// tokens are given as the prefix, goes on the same), each greedy token is
// the argmax of the teacher-forced logits after bos + prefix, prefixes of
// different lengths run in one batch, and beam search continues a prefix.
TEST(DecodingControls, TargetPrefixContinuesAsTheReferenceDecoder) {
    Model m = Model::random(small(Architecture::EncoderDecoder), 53, test_device());
    const auto src = inputs(Architecture::EncoderDecoder, 4, 7);
    for (int beam : {1, 3}) {
        SCOPED_TRACE("beam " + std::to_string(beam));
        GenerateOptions o;
        o.stop_at_eos = false;
        o.max_new_tokens = 12;
        o.beam = beam;
        o.return_logprobs = true;
        const auto full = m.generate(src, o);
        GenerateOptions p = o;
        p.max_new_tokens = 12 - 4;
        const std::vector<size_t> cut = {0, 1, 4, 2};  // prefixes of 0, 1, 4 and 2 tokens
        for (size_t b = 0; b < src.size(); b++) {
            const auto &f = full[b][0].tokens;
            p.target_prefix.push_back(Sequence(f.begin(), f.begin() + (ptrdiff_t)cut[b]));
        }
        const auto got = m.generate(src, p);
        for (size_t b = 0; b < src.size(); b++) {
            const auto &f = full[b][0].tokens;
            const Sequence rest(f.begin() + (ptrdiff_t)cut[b], f.end());
            const auto &g = got[b][0].tokens;
            if (beam == 1) {
                // Greedy: the rest of the output without a prefix.
                EXPECT_EQ(g, Sequence(rest.begin(), rest.begin() + (ptrdiff_t)std::min(rest.size(), g.size())))
                    << "input " << b;
                for (size_t i = 0; i < g.size(); i++) {
                    EXPECT_TRUE(is_argmax(m, src[b], p.target_prefix[b], g, i)) << "input " << b << " token " << i;
                }
            }
            const auto ref = reference_logprobs(m, src[b], p.target_prefix[b], g);
            for (size_t i = 0; i < g.size(); i++) EXPECT_NEAR(got[b][0].log_probs[i], ref[i], 2e-4) << "input " << b;
        }
    }
    GenerateOptions bad;
    bad.target_prefix = {{5}};
    try {
        m.generate(src, bad);
        ADD_FAILURE() << "no error for 1 prefix and 4 inputs";
    } catch (const Error &e) {
        EXPECT_NE(std::string(e.what()).find("1 target prefixes for 4 inputs"), std::string::npos) << e.what();
    }
    bad.target_prefix = {{5}, {}, {80}, {}};
    try {
        m.generate(src, bad);
        ADD_FAILURE() << "no error for a prefix id outside the vocabulary";
    } catch (const Error &e) {
        EXPECT_NE(std::string(e.what()).find("target prefix token id 80 at position 0 of input 2"), std::string::npos)
            << e.what();
    }
    Model d = Model::random(small(Architecture::Decoder), 54, test_device());
    bad.target_prefix = {{5}};
    EXPECT_THROW(d.generate({{5, 6}}, bad), Error);
}

namespace {

// The reference greedy decoder with the logits controls, from teacher-
// forced logits in double: CTRL's repetition penalty over the prefix (bos
// dropped) and the output, the no-repeat n-gram bans, eos and the stop ids
// banned before min_length; the argmax (lowest id on ties). Also each
// chosen token's log-probability after the changes.
struct RefOut {
    Sequence tokens;
    std::vector<double> logp;
};

RefOut reference_controlled(Model &m, const Sequence &src, const GenerateOptions &o, int max_new) {
    const bool dec = m.config().architecture == Architecture::Decoder;
    const int eos = m.config().eos_id;
    RefOut out;
    for (int step = 0; step < max_new; step++) {
        Sequence fed = dec ? src : Sequence{m.config().bos_id};
        fed.insert(fed.end(), out.tokens.begin(), out.tokens.end());
        const Tensor t = dec ? m.logits({fed})[0] : m.logits({src}, {fed})[0];
        const int64_t V = t.shape[1];
        std::vector<double> row(t.data.begin() + (ptrdiff_t)((fed.size() - 1) * (size_t)V),
                                t.data.begin() + (ptrdiff_t)(fed.size() * (size_t)V));
        Sequence ctx = dec ? src : Sequence{};
        ctx.insert(ctx.end(), out.tokens.begin(), out.tokens.end());
        std::vector<char> seen((size_t)V, 0), banned((size_t)V, 0);
        for (int32_t id : ctx) seen[(size_t)id] = 1;
        for (int64_t v = 0; v < V; v++) {
            if (seen[(size_t)v]) row[(size_t)v] = row[(size_t)v] > 0 ? row[(size_t)v] / o.repetition_penalty
                                                                       : row[(size_t)v] * o.repetition_penalty;
        }
        const int n = o.no_repeat_ngram_size;
        if (n > 0 && ctx.size() + 1 >= (size_t)n) {
            for (size_t i = 0; i + (size_t)n <= ctx.size(); i++) {
                bool same = true;
                for (int k = 0; k < n - 1; k++) same = same && ctx[i + (size_t)k] == ctx[ctx.size() - (size_t)(n - 1) + (size_t)k];
                if (same) banned[(size_t)ctx[i + (size_t)n - 1]] = 1;
            }
        }
        if ((int)out.tokens.size() < o.min_length) {
            if (o.stop_at_eos) banned[(size_t)eos] = 1;
            for (int32_t id : o.stop_ids) banned[(size_t)id] = 1;
        }
        for (int64_t v = 0; v < V; v++) {
            if (banned[(size_t)v]) row[(size_t)v] = -1e30;
        }
        const int64_t best = std::max_element(row.begin(), row.end()) - row.begin();
        double sum = 0;
        for (double x : row) sum += std::exp(x - row[(size_t)best]);
        out.tokens.push_back((int32_t)best);
        out.logp.push_back(-std::log(sum));
        const bool stop = std::find(o.stop_ids.begin(), o.stop_ids.end(), (int32_t)best) != o.stop_ids.end();
        if ((o.stop_at_eos && best == eos) || stop) break;
    }
    return out;
}

}  // namespace

// Repetition penalty, no-repeat n-grams and a minimum length: greedy
// outputs equal the reference decoder's (tokens and log-probabilities), for
// both architectures and each control alone and together; beam search and
// sampling never repeat a banned n-gram; bad values are errors.
TEST(DecodingControls, PenaltiesAndBansFollowTheReferenceDecoder) {
    for (Architecture a : {Architecture::EncoderDecoder, Architecture::Decoder}) {
        Model m = Model::random(small(a), 55, test_device());
        const auto src = inputs(a, 3, 8);
        GenerateOptions plain;
        plain.max_new_tokens = 14;
        plain.stop_at_eos = false;
        const auto free = m.generate(src, plain);
        for (int mode = 0; mode < 4; mode++) {
            GenerateOptions o = plain;
            o.return_logprobs = true;
            if (mode == 0 || mode == 3) o.repetition_penalty = mode == 0 ? 1.8f : 1.3f;
            if (mode == 1 || mode == 3) o.no_repeat_ngram_size = mode == 1 ? 2 : 1;
            if (mode == 2 || mode == 3) {
                // The first free token of input 0 is a stop id, banned for 5 tokens.
                o.min_length = 5;
                o.stop_ids = {free[0][0].tokens[0]};
            }
            SCOPED_TRACE(std::string(arch_name(a)) + " mode " + std::to_string(mode));
            const auto got = m.generate(src, o);
            for (size_t b = 0; b < src.size(); b++) {
                const RefOut ref = reference_controlled(m, src[b], o, 14);
                EXPECT_EQ(got[b][0].tokens, ref.tokens) << "input " << b;
                for (size_t i = 0; i < std::min(ref.logp.size(), got[b][0].log_probs.size()); i++) {
                    EXPECT_NEAR(got[b][0].log_probs[i], ref.logp[i], 2e-4) << "input " << b << " token " << i;
                }
            }
            if (mode == 0) {
                bool changed = false;
                for (size_t b = 0; b < src.size(); b++) changed = changed || got[b][0].tokens != free[b][0].tokens;
                EXPECT_TRUE(changed) << "a penalty of 1.8 changed nothing";
            }
        }
        // Beam search and sampling: no token twice with no_repeat_ngram_size 1
        // (decoder-only: nor a token of the prompt).
        for (bool sample : {false, true}) {
            GenerateOptions o = plain;
            o.no_repeat_ngram_size = 1;
            o.sample = sample;
            o.beam = sample ? 1 : 3;
            o.n_best = sample ? 1 : 3;
            o.seed = 9;
            const auto got = m.generate(src, o);
            for (size_t b = 0; b < src.size(); b++) {
                for (const Hypothesis &h : got[b]) {
                    Sequence all = a == Architecture::Decoder ? src[b] : Sequence{};
                    all.insert(all.end(), h.tokens.begin(), h.tokens.end());
                    Sequence sorted = all;
                    std::sort(sorted.begin(), sorted.end());
                    EXPECT_EQ(std::adjacent_find(sorted.begin(), sorted.end()), sorted.end())
                        << (sample ? "sampled" : "beam") << " input " << b << " repeats a token";
                }
            }
        }
        for (auto bad : {std::make_pair(0.0f, 0), std::make_pair(-1.0f, 0), std::make_pair(1.0f, -1)}) {
            GenerateOptions o;
            o.repetition_penalty = bad.first;
            o.no_repeat_ngram_size = bad.second;
            EXPECT_THROW(m.generate(src, o), Error);
        }
    }
}
