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
    // One symbol a byte to start with, then the merges in GPT2Tokenizer.bpe()'s rounds.
    std::vector<int32_t> sym(bytes.size());
    for (size_t i = 0; i < bytes.size(); i++) {
        const auto c = (unsigned char)bytes[i];
        sym[i] = byte_id_[c];
        if (sym[i] < 0) {
            char hex[8];
            std::snprintf(hex, sizeof hex, "0x%02X", c);
            throw Error(source_ + ": the text needs byte " + hex + ", which the vocabulary lacks (and there is no unk_token)");
        }
    }
    bpe::merge_by_rank(sym, merges_, true);
    ids.insert(ids.end(), sym.begin(), sym.end());
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
