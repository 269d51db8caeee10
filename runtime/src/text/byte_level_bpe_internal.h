// Internal to byte-level BPE (byte_level_bpe.h): what its files share, in
// namespace halformer::text::bpe. byte_level_bpe.cpp holds the added tokens'
// trie, the merges by rank, encoding and decoding; byte_level_bpe_load.cpp
// reads vocab.json and merges.txt or a tokenizer.json;
// byte_level_bpe_pre_tokenize.cpp holds the pre-tokenizers (GPT-2's pattern,
// Llama 3's and Qwen2's Split).
#pragma once

#include <algorithm>
#include <cstdint>
#include <iterator>
#include <string>

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

}  // namespace halformer::text::bpe
