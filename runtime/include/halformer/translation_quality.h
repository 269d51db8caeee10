// Translation quality, as sacreBLEU defines it (and reports it, 0-100):
//
//   BLEU  corpus level, one reference, the "13a" tokenization (mteval-v13a),
//         n-grams 1-4, clipped counts summed over the corpus, brevity penalty
//         exp(1 - r/c) when c < r, "exp" smoothing of zero-match orders
//         (0 when no n-gram of any order matches).
//   chrF  character 6-grams with whitespace removed, statistics summed over
//         the corpus, precision and recall each averaged over the orders
//         both sides have, then their F-β score (β = 2): sacreBLEU's default.
//
//   auto b = halformer::corpus_bleu(hyps, refs);   // b.score, b.precisions, b.bp
//   double c = halformer::corpus_chrf(hyps, refs);
//
// Hypotheses and references pair up line by line; a count mismatch is an Error.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace halformer {

// The 13a tokenization of one line (sacreBLEU's Tokenizer13a).
std::string tokenize_13a(const std::string &line);

struct BleuScore {
    double score = 0;             // 0-100
    double precisions[4] = {};    // 0-100, after smoothing
    double bp = 1;                // brevity penalty
    int64_t hyp_len = 0, ref_len = 0;
    int64_t correct[4] = {}, total[4] = {};
};

BleuScore corpus_bleu(const std::vector<std::string> &hyps, const std::vector<std::string> &refs);

// 0-100.
double corpus_chrf(const std::vector<std::string> &hyps, const std::vector<std::string> &refs, int char_order = 6,
                   double beta = 2.0);

}  // namespace halformer
