// Added tokens (internal): tokens a tokenizer matches whole in the text
// before anything else (<|endoftext|>, tokenizer.json's added_tokens), and
// the byte trie that finds them, leftmost longest, as the tokenizers
// library's AddedVocabulary does.
#pragma once

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

namespace halformer::text {

// A token matched whole in the text before pre-tokenization.
struct AddedToken {
    std::string content;
    int32_t id = -1;           // -1: the vocabulary's id for content
    bool special = true;
    bool lstrip = false;       // also takes the whitespace on its left
    bool rstrip = false;       // and on its right
    bool single_word = false;  // only where no word character (\w) touches it
    bool normalized = false;   // tokenizer.json: matched after the non-normalized ones
};

class AddedTokenMatcher {
public:
    // Adds tokens[index]'s content (see split).
    void insert(const std::string &content, int32_t index);
    // Cuts text at the tokens inserted: the stretches between them as
    // (text, -1), each token as ("", its id); lstrip / rstrip widen a match
    // over whitespace (never back into the previous match); single_word drops
    // a match that a word character touches. tokens: what insert's indices
    // name. Valid UTF-8 text.
    void split(const std::string &text, const std::vector<AddedToken> &tokens,
               std::vector<std::pair<std::string, int32_t>> &out) const;

private:
    struct Node {
        std::vector<std::pair<unsigned char, int32_t>> next;  // sorted by byte
        int32_t token = -1;                                   // an index of insert
    };
    // The index of the longest token starting at text[pos], or -1.
    int32_t longest(const std::string &text, size_t pos, size_t *len) const;
    std::vector<Node> nodes{Node{}};
};

}  // namespace halformer::text
