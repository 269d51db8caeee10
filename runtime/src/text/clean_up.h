// Internal: transformers' clean_up_tokenization, which a decode applies when
// the tokenizer's clean_up_tokenization_spaces is set (tokenizer_config.json;
// BERT's default): a space before . ? ! , and English contractions goes.
//   clean_up_tokenization("do n't stop , please .") == "don't stop, please."
// A streaming decoder holds back clean_up_pending(text) bytes: an end that a
// later token may turn into one of these patterns.
#pragma once

#include <array>
#include <string>

namespace halformer {
namespace text {

// The patterns in transformers' order (each replaced in the whole text before the next).
struct CleanUpRule {
    const char *from, *to;
};
inline const std::array<CleanUpRule, 10> &clean_up_rules() {
    static const std::array<CleanUpRule, 10> rules{{
        {" .", "."}, {" ?", "?"}, {" !", "!"}, {" ,", ","}, {" ' ", "'"},
        {" n't", "n't"}, {" 'm", "'m"}, {" 's", "'s"}, {" 've", "'ve"}, {" 're", "'re"}}};
    return rules;
}

inline std::string clean_up_tokenization(std::string s) {
    for (const auto &rule : clean_up_rules()) {
        const std::string from = rule.from, to = rule.to;
        std::string out;
        size_t at = 0;
        for (size_t hit; (hit = s.find(from, at)) != std::string::npos; at = hit + from.size()) {
            out.append(s, at, hit - at);
            out += to;
        }
        out.append(s, at, std::string::npos);
        s = std::move(out);
    }
    return s;
}

// The length of the longest end of `text` that is a proper start of a
// pattern (" n", " n'", " '", " 'v", …): text a later token may clean up.
inline size_t clean_up_pending(const std::string &text) {
    size_t longest = 0;
    for (const auto &rule : clean_up_rules()) {
        const std::string from = rule.from;
        for (size_t k = from.size() - 1; k > longest; k--) {
            if (k <= text.size() && text.compare(text.size() - k, k, from, 0, k) == 0) {
                longest = k;
                break;
            }
        }
    }
    return longest;
}

}  // namespace text
}  // namespace halformer
