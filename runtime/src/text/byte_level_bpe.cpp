// Byte-level BPE (byte_level_bpe.h), written from transformers'
// tokenization_gpt2.py and the tokenizers library's ByteLevel pre-tokenizer,
// BPE model and added vocabulary. This file holds the added tokens' trie and
// their matching, the merges by rank, encode and decode;
// byte_level_bpe_load.cpp reads the files and byte_level_bpe_pre_tokenize.cpp
// splits the text into words.
#include "byte_level_bpe.h"

#include "byte_level_bpe_internal.h"
#include "unicode.h"

#include "halformer/error.h"
#include "halformer/tokenizer.h"

#include <algorithm>
#include <cstdio>
#include <queue>

namespace halformer::text {

namespace bpe {

const ByteMap &byte_map() {
    static const ByteMap m;
    return m;
}

void check_utf8(const std::string &text) {
    const int64_t bad = utf8_error_offset(text);
    if (bad >= 0) throw Error("text is not UTF-8 (byte " + std::to_string(bad) + ")");
}

}  // namespace bpe

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

// ---- the added tokens' trie ----

void ByteLevelBpe::Trie::insert(const std::string &s, int32_t token) {
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

int32_t ByteLevelBpe::Trie::longest(const std::string &text, size_t pos, size_t *len) const {
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

// ---- encoding ----

void ByteLevelBpe::encode_word(const std::string &bytes, std::vector<int32_t> &ids) const {
    const size_t n = bytes.size();
    if (ignore_merges_) {
        std::string mapped;
        for (unsigned char c : bytes) append_utf8(mapped, bpe::byte_map().to_char[c]);
        auto it = vocab_.find(mapped);
        if (it != vocab_.end()) {
            ids.push_back(it->second);
            return;
        }
    }
    // The word as a linked list of symbols, one a byte to start with.
    std::vector<int32_t> sym(n), prev(n), next(n);
    for (size_t i = 0; i < n; i++) {
        const auto c = (unsigned char)bytes[i];
        sym[i] = byte_id_[c];
        if (sym[i] < 0) {
            if (unk_id_ < 0) {
                char hex[8];
                std::snprintf(hex, sizeof hex, "0x%02X", c);
                throw Error(source_ + ": the text needs byte " + hex + ", which the vocabulary lacks (and there is no unk_token)");
            }
            sym[i] = unk_id_;
        }
        prev[i] = (int32_t)i - 1;
        next[i] = i + 1 < n ? (int32_t)i + 1 : -1;
    }
    // Merges by rank, as GPT2Tokenizer.bpe(): the pair of lowest rank is
    // merged at every place it occurs, left to right, before any other pair
    // is looked at. Candidates wait in a heap ordered by (rank, position);
    // pairs that a merge creates wait until every merge of the current rank
    // is done, so that one of lower rank cannot jump ahead of them (the
    // tokenizers library lets it; with merges learned in order, as every
    // trained file's are, the results agree). O(n log n): a 100 KB word is fine.
    struct Cand {
        int32_t rank, pos, left, right, id;
        bool operator>(const Cand &o) const { return rank != o.rank ? rank > o.rank : pos > o.pos; }
    };
    std::priority_queue<Cand, std::vector<Cand>, std::greater<Cand>> heap;
    std::vector<Cand> pending;
    auto candidate = [&](int32_t pos, std::vector<Cand> *into) {
        const int32_t nx = next[pos];
        if (nx < 0) return;
        auto it = merges_.find(bpe::pair_key(sym[pos], sym[nx]));
        if (it == merges_.end()) return;
        const Cand c{it->second.rank, pos, sym[pos], sym[nx], it->second.id};
        if (into) into->push_back(c);
        else heap.push(c);
    };
    for (size_t i = 0; i + 1 < n; i++) candidate((int32_t)i, nullptr);
    int32_t round = -1;
    std::vector<char> alive(n, 1);
    while (true) {
        if (heap.empty() || heap.top().rank != round) {
            for (const Cand &c : pending) heap.push(c);
            pending.clear();
            if (heap.empty()) break;
            round = heap.top().rank;
        }
        const Cand c = heap.top();
        heap.pop();
        // Stale: the left symbol was absorbed or changed, or its neighbour did.
        if (!alive[c.pos] || sym[c.pos] != c.left) continue;
        const int32_t nx = next[c.pos];
        if (nx < 0 || sym[nx] != c.right) continue;
        sym[c.pos] = c.id;
        alive[nx] = 0;
        next[c.pos] = next[nx];
        if (next[nx] >= 0) prev[next[nx]] = c.pos;
        if (prev[c.pos] >= 0) candidate(prev[c.pos], &pending);
        candidate(c.pos, &pending);
    }
    for (int32_t i = 0; i >= 0; i = next[i]) ids.push_back(sym[i]);
}

void ByteLevelBpe::encode_segment(const std::string &segment, std::vector<int32_t> &ids) const {
    const auto words = split_regex_   ? split_regex_->split_isolated(segment)
                       : split_digits_ ? pre_tokenize_split(segment, split_digits_)
                                       : pre_tokenize(segment);
    for (const std::string &word : words) encode_word(word, ids);
}

void ByteLevelBpe::split_added(const std::string &text, const Trie &trie,
                               std::vector<std::pair<std::string, int32_t>> &out) const {
    // As the tokenizers library's AddedVocabulary::find_matches: leftmost
    // longest matches; lstrip / rstrip widen a match over whitespace (never
    // back into the previous match); single_word drops a match that a word
    // character touches.
    const size_t n = text.size();
    size_t done = 0, pos = 0;
    while (pos < n) {
        size_t len = 0;
        const int32_t t = trie.nodes.size() > 1 ? trie.longest(text, pos, &len) : -1;
        if (t < 0) {
            pos++;
            continue;
        }
        const AddedToken &tok = added_[t];
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

std::vector<int32_t> ByteLevelBpe::run(const std::string &utf8) const {
    bpe::check_utf8(utf8);
    std::vector<int32_t> ids;
    if (utf8.empty()) return ids;
    const std::string text = prefix_ == PrefixSpace::Text ? " " + utf8 : utf8;
    std::vector<std::pair<std::string, int32_t>> raw, parts;
    split_added(text, trie_raw_, raw);
    for (auto &r : raw) {
        if (r.second >= 0) parts.push_back(std::move(r));
        else split_added(nfc_ ? u32_to_utf8(unicode::nfc(utf8_to_u32(r.first))) : r.first, trie_normalized_, parts);
    }
    for (const auto &p : parts) {
        if (p.second >= 0) {
            ids.push_back(p.second);
        } else if (prefix_ == PrefixSpace::EachSegment && p.first[0] != ' ') {
            encode_segment(" " + p.first, ids);
        } else {
            encode_segment(p.first, ids);
        }
    }
    return ids;
}

std::vector<int32_t> ByteLevelBpe::encode(const std::string &utf8) const { return run(utf8); }

std::vector<std::string> ByteLevelBpe::pieces(const std::string &utf8) const {
    std::vector<std::string> out;
    for (int32_t id : run(utf8)) out.push_back(tokens_[id]);
    return out;
}

int32_t ByteLevelBpe::id_of(const std::string &token) const {
    auto a = added_ids_.find(token);
    if (a != added_ids_.end()) return a->second;
    auto v = vocab_.find(token);
    return v == vocab_.end() ? -1 : v->second;
}

// ---- decoding ----

std::string ByteLevelBpe::decode(const std::vector<int32_t> &ids) const {
    const bpe::ByteMap &bm = bpe::byte_map();
    std::string bytes;
    for (int32_t id : ids) {
        if (id < 0 || id >= vocab_size() || kind_[id] == 0) {
            throw Error("token id " + std::to_string(id) + (id < 0 || id >= vocab_size() ? " is outside" : " has no token in") +
                        " the vocabulary of " + std::to_string(vocab_size()) + " (" + source_ + ")");
        }
        const std::string &tok = tokens_[id];
        if (kind_[id] == 2) {
            bytes += tok;
            continue;
        }
        // A token all of GPT-2's byte characters becomes those bytes; one with
        // any other character stays as it is (the tokenizers library's
        // ByteLevel decoder).
        const std::u32string cps = utf8_to_u32(tok);
        std::string b;
        bool all = true;
        for (char32_t c : cps) {
            if (c >= 0x144 || bm.to_byte[c] < 0) {
                all = false;
                break;
            }
            b += char(bm.to_byte[c]);
        }
        bytes += all ? b : tok;
    }
    return utf8_replace_invalid(bytes);
}

}  // namespace halformer::text
