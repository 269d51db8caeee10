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

// ---- encoding ----

void ByteLevelBpe::encode_word(const std::string &bytes, std::vector<int32_t> &ids) const {
    const size_t n = bytes.size();
    // The word as a linked list of symbols, one a byte to start with.
    std::vector<int32_t> sym(n), prev(n), next(n);
    for (size_t i = 0; i < n; i++) {
        const auto c = (unsigned char)bytes[i];
        sym[i] = byte_id_[c];
        if (sym[i] < 0) {
            char hex[8];
            std::snprintf(hex, sizeof hex, "0x%02X", c);
            throw Error(source_ + ": the text needs byte " + hex + ", which the vocabulary lacks (and there is no unk_token)");
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
    for (const std::string &word : pre_tokenize(segment)) encode_word(word, ids);
}

std::vector<int32_t> ByteLevelBpe::run(const std::string &utf8) const {
    bpe::check_utf8(utf8);
    std::vector<int32_t> ids;
    if (utf8.empty()) return ids;
    std::vector<std::pair<std::string, int32_t>> parts;
    trie_.split(prefix_space_ ? " " + utf8 : utf8, added_, parts);
    for (const auto &p : parts) {
        if (p.second >= 0) ids.push_back(p.second);
        else encode_segment(p.first, ids);
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
