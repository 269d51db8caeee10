// The added tokens' matching (added_tokens.h), as the tokenizers library's
// AddedVocabulary::find_matches.
#include "added_tokens.h"

#include "unicode.h"

#include <algorithm>

namespace halformer::text {

namespace {

// The code point at text[pos] and its length in bytes (valid UTF-8).
char32_t cp_at(const std::string &text, size_t pos, size_t *len) {
    const auto c = (unsigned char)text[pos];
    *len = c < 0x80 ? 1 : c < 0xE0 ? 2 : c < 0xF0 ? 3 : 4;
    return utf8_to_u32(text.substr(pos, *len))[0];
}
// The code point that ends just before text[pos] and where it starts.
char32_t cp_before(const std::string &text, size_t pos, size_t *start) {
    size_t s = pos - 1;
    while (s > 0 && ((unsigned char)text[s] & 0xC0) == 0x80) s--;
    *start = s;
    size_t len;
    return cp_at(text, s, &len);
}

}  // namespace

void AddedTokenMatcher::insert(const std::string &s, int32_t token) {
    int32_t node = 0;
    for (unsigned char c : s) {
        auto &next = nodes[node].next;
        auto it = std::lower_bound(next.begin(), next.end(), std::make_pair(c, int32_t(-1)));
        if (it != next.end() && it->first == c) {
            node = it->second;
        } else {
            const auto child = (int32_t)nodes.size();
            next.insert(it, {c, child});
            nodes.emplace_back();  // invalidates `next`: not used after this
            node = child;
        }
    }
    nodes[node].token = token;
}

int32_t AddedTokenMatcher::longest(const std::string &text, size_t pos, size_t *len) const {
    int32_t node = 0, best = -1;
    for (size_t i = pos; i < text.size(); i++) {
        const auto &next = nodes[node].next;
        const auto c = (unsigned char)text[i];
        auto it = std::lower_bound(next.begin(), next.end(), std::make_pair(c, int32_t(-1)));
        if (it == next.end() || it->first != c) break;
        node = it->second;
        if (nodes[node].token >= 0) {
            best = nodes[node].token;
            *len = i + 1 - pos;
        }
    }
    return best;
}

void AddedTokenMatcher::split(const std::string &text, const std::vector<AddedToken> &tokens,
                              std::vector<std::pair<std::string, int32_t>> &out) const {
    // As the tokenizers library's AddedVocabulary::find_matches: leftmost
    // longest matches; lstrip / rstrip widen a match over whitespace (never
    // back into the previous match); single_word drops a match that a word
    // character touches.
    const size_t n = text.size();
    size_t done = 0, pos = 0;
    while (pos < n) {
        size_t len = 0;
        const int32_t t = nodes.size() > 1 ? longest(text, pos, &len) : -1;
        if (t < 0) {
            pos++;
            continue;
        }
        const AddedToken &tok = tokens[t];
        size_t start = pos, stop = pos + len;
        if (tok.single_word) {
            size_t q, l;
            const bool left_ok = start == 0 || !unicode::is_word_char(cp_before(text, start, &q));
            const bool right_ok = stop == n || !unicode::is_word_char(cp_at(text, stop, &l));
            if (!left_ok || !right_ok) {
                pos = stop;
                continue;
            }
        }
        if (tok.lstrip) {
            while (start > done) {
                size_t q;
                if (!unicode::is_white_space(cp_before(text, start, &q))) break;
                start = q;
            }
        }
        if (tok.rstrip) {
            while (stop < n) {
                size_t l;
                if (!unicode::is_white_space(cp_at(text, stop, &l))) break;
                stop += l;
            }
        }
        if (done < start) out.emplace_back(text.substr(done, start - done), -1);
        out.emplace_back(std::string(), tok.id);
        done = pos = stop;
    }
    if (done < n) out.emplace_back(text.substr(done), -1);
}

}  // namespace halformer::text
