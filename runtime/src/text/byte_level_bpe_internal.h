// Internal to byte-level BPE (byte_level_bpe.h): what its files share, in
// namespace halformer::text::bpe. byte_level_bpe.cpp holds the added tokens'
// trie, the merges by rank, encoding and decoding; byte_level_bpe_load.cpp
// reads vocab.json and merges.txt;
// byte_level_bpe_pre_tokenize.cpp holds the pre-tokenizers (GPT-2's pattern,
// Llama 3's and Qwen2's Split).
#pragma once

#include <algorithm>
#include <cstdint>
#include <functional>
#include <iterator>
#include <queue>
#include <string>
#include <unordered_map>
#include <vector>

namespace halformer::text::bpe {

// GPT-2's bytes_to_unicode(): the printable bytes of Latin-1 ('!'..'~',
// '¡'..'¬', '®'..'ÿ') stand for themselves; the other 68 bytes, in order,
// become U+0100, U+0101, ... (' ' is byte 32, the 33rd of them: U+0120 'Ġ').
struct ByteMap {
    char32_t to_char[256];
    int16_t to_byte[0x144];  // character → byte, -1 where none (the map's range ends at U+0143)
    ByteMap() {
        std::fill(std::begin(to_byte), std::end(to_byte), int16_t(-1));
        int n = 0;
        for (int b = 0; b < 256; b++) {
            const bool printable = (b >= '!' && b <= '~') || (b >= 0xA1 && b <= 0xAC) || (b >= 0xAE && b <= 0xFF);
            to_char[b] = printable ? char32_t(b) : char32_t(256 + n++);
            to_byte[to_char[b]] = int16_t(b);
        }
    }
};

// The one ByteMap, built on first use.
const ByteMap &byte_map();

// Throws Error when text is not UTF-8, naming the byte.
void check_utf8(const std::string &text);

// A merge's key: its left and right ids as one number.
inline uint64_t pair_key(int32_t a, int32_t b) { return (uint64_t(uint32_t(a)) << 32) | uint32_t(b); }

// A merge: its rank (lower first) and the id it makes.
struct Merge {
    int32_t rank;
    int32_t id;
};
using Merges = std::unordered_map<uint64_t, Merge>;  // by pair_key(left, right)

// Merges the symbols of a word (their ids, in place) by rank: the pair of
// lowest rank, leftmost among equals, again and again. Candidates wait in a
// heap ordered by (rank, position): O(n log n), a 100 KB word is fine. In
// rounds (GPT2Tokenizer.bpe()) a pair a merge makes waits until every merge
// of the current rank is done, so one of lower rank cannot jump ahead of it;
// otherwise (the tokenizers library's word.rs merge_all) it joins the heap
// at once. With merges learned in order, as every trained file's are, the
// two agree ("cd c" ranked before "c d" is where they part: cdcd → cd cd in
// rounds, cdc d at once).
inline void merge_by_rank(std::vector<int32_t> &sym, const Merges &merges, bool rounds) {
    const size_t n = sym.size();
    if (n < 2) return;
    std::vector<int32_t> prev(n), next(n);
    std::vector<char> alive(n, 1);
    for (size_t i = 0; i < n; i++) {
        prev[i] = (int32_t)i - 1;
        next[i] = i + 1 < n ? (int32_t)i + 1 : -1;
    }
    struct Cand {
        int32_t rank, pos, left, right, id;
        bool operator>(const Cand &o) const { return rank != o.rank ? rank > o.rank : pos > o.pos; }
    };
    std::priority_queue<Cand, std::vector<Cand>, std::greater<Cand>> heap;
    std::vector<Cand> pending;
    auto candidate = [&](int32_t pos, bool wait) {
        const int32_t nx = next[pos];
        if (nx < 0) return;
        auto it = merges.find(pair_key(sym[pos], sym[nx]));
        if (it == merges.end()) return;
        const Cand c{it->second.rank, pos, sym[pos], sym[nx], it->second.id};
        if (wait) pending.push_back(c);
        else heap.push(c);
    };
    for (size_t i = 0; i + 1 < n; i++) candidate((int32_t)i, false);
    int32_t round = -1;
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
        if (prev[c.pos] >= 0) candidate(prev[c.pos], rounds);
        candidate(c.pos, rounds);
    }
    std::vector<int32_t> out;
    for (int32_t i = 0; i >= 0; i = next[i]) out.push_back(sym[i]);
    sym = std::move(out);
}

}  // namespace halformer::text::bpe
