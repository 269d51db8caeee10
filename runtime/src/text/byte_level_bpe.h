// Byte-level BPE as GPT-2 ships it (internal; the runtime's tokenizer wraps
// it): vocab.json + merges.txt. (A tokenizer.json of any kind is
// TokenizerJson's, tokenizer_json.h.)
//
//   auto bpe = text::ByteLevelBpe::load("gpt2/vocab.json", "gpt2/merges.txt");
//   std::vector<int32_t> ids = bpe.encode("Hello world");   // [15496, 995] with GPT-2's files
//   std::string back = bpe.decode(ids);                      // "Hello world"
//
// encode, as transformers' GPT2Tokenizer does it:
//   1. added tokens (<|endoftext|>, the options' added tokens) are cut
//      out of the text whole, leftmost-longest, before anything else;
//   2. the text between them is split with GPT-2's pattern
//        's|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+
//      (pre_tokenize(); a run of whitespace before a word gives all but its
//      last character, which joins the word: "a   b" → "a", "  ", " b");
//   3. each piece's UTF-8 bytes become GPT-2's byte characters (bytes_to_unicode:
//      printable Latin-1 bytes are themselves, the rest U+0100 onwards: ' ' → 'Ġ');
//   4. merges by rank: the pair of lowest rank is merged everywhere in the
//      piece, left to right, then the next (GPT2Tokenizer.bpe()).
// Nothing is added around the text (no bos or eos): the caller does that.
//
// decode: ids → tokens → bytes (an added token is its own text) → UTF-8,
// a sequence cut short (a token holding half a character) becoming U+FFFD,
// as bytes.decode("utf-8", errors="replace") does. No clean-up of spaces.
//
// Immutable after load: every method may be called from many threads at once.
#pragma once

#include "added_tokens.h"
#include "byte_level_bpe_internal.h"
#include "unicode.h"

#include "halformer/json.h"

#include <cstdint>
#include <string>
#include <unordered_map>
#include <vector>

namespace halformer::text {

struct ByteLevelBpeOptions {
    // The added tokens (tokenizer_config.json's special tokens, added_tokens.json).
    // <|endoftext|> is added too when vocab.json has it (GPT2Tokenizer's default).
    std::vector<AddedToken> added_tokens;
    // GPT2Tokenizer's add_prefix_space: one space before the whole text.
    bool add_prefix_space = false;
};

class ByteLevelBpe {
public:
    // vocab.json (token → id) and merges.txt (an optional "#version" line,
    // then one "a b" merge a line, rank by line). Throws Error naming the file
    // and the problem: a missing file, bad JSON, an id that is not a
    // non-negative integer, two tokens with one id, a merge naming a token the
    // vocabulary lacks (or whose result it lacks), a malformed merge line.
    static ByteLevelBpe load(const std::string &vocab_json, const std::string &merges_txt,
                             const ByteLevelBpeOptions &options = {});
    // Llama 3's (max_digits 3) and Qwen2's (1) Split pattern as
    // tokenizer.json spells it.
    static const char *split_pattern(int max_digits);

    // Text → ids. Throws Error when text is not UTF-8 (naming the byte), or
    // when it needs a byte the vocabulary lacks and there is no unk_token.
    std::vector<int32_t> encode(const std::string &utf8) const;
    // ids → text. An id outside the vocabulary is an Error naming it.
    std::string decode(const std::vector<int32_t> &ids) const;
    // The tokens of encode(text), as the vocabulary spells them ("Ġworld").
    std::vector<std::string> pieces(const std::string &utf8) const;
    // One past the largest id (vocabulary and added tokens).
    int vocab_size() const { return (int)tokens_.size(); }
    // The id of a token as the vocabulary spells it, or an added token's
    // content; -1 when absent.
    int32_t id_of(const std::string &token) const;
    const std::vector<AddedToken> &added_tokens() const { return added_; }

    // GPT-2's pre-tokenization alone: the pieces of text, as UTF-8. Throws
    // Error when text is not UTF-8.
    static std::vector<std::string> pre_tokenize(const std::string &utf8);
    // The Split pre-tokenizer of Llama 3 (max_digits 3) and Qwen2 (1), whose
    // tokenizer.json gives the pattern
    //   (?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}|
    //    ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+
    // (Qwen2: \p{N} alone), the pieces as UTF-8.
    static std::vector<std::string> pre_tokenize_split(const std::string &utf8, int max_digits);

private:
    ByteLevelBpe() = default;
    void finish(const std::string &what);  // checks and indexes added tokens
    void encode_segment(const std::string &segment, std::vector<int32_t> &ids) const;
    void encode_word(const std::string &bytes, std::vector<int32_t> &ids) const;
    std::vector<int32_t> run(const std::string &utf8) const;

    std::string source_;                                // the file(s), for messages
    std::vector<std::string> tokens_;                   // id → token ("" where no token)
    std::vector<uint8_t> kind_;                         // id → 0 none, 1 vocabulary, 2 added
    std::unordered_map<std::string, int32_t> vocab_;    // byte-level token → id
    std::unordered_map<uint64_t, bpe::Merge> merges_;   // (left id, right id) → rank, result
    int32_t byte_id_[256] = {};                         // byte → id of its character, -1 if none
    std::vector<AddedToken> added_;
    std::unordered_map<std::string, int32_t> added_ids_;  // content → id
    AddedTokenMatcher trie_;   // the added tokens, matched on the raw text
    bool prefix_space_ = false;  // a space before the whole text
};

}  // namespace halformer::text
