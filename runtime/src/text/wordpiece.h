// WordPiece as BERT ships it (internal; the runtime's tokenizer wraps it):
// vocab.txt (one token a line, id = line number) and the options of
// tokenizer_config.json.
//
//   auto wp = text::WordPiece::load("bert/vocab.txt", "bert/tokenizer_config.json");
//   std::vector<int32_t> ids = wp.encode("Unaffable!");   // un ##aff ##able !
//   std::string text = wp.decode(ids);                    // "unaffable!"
//
// encode, as transformers' BertTokenizer does it (tokenize() then _tokenize()):
//   1. with do_lower_case, every character outside the special tokens is
//      lower-cased on its own (PreTrainedTokenizer.tokenize: no final sigma);
//   2. the special tokens ([UNK] [SEP] [PAD] [CLS] [MASK] and
//      additional_special_tokens) are cut out whole, leftmost-longest;
//   3. the rest goes through BasicTokenizer: clean (NUL, U+FFFD and C*
//      characters dropped, whitespace → ' '), a space either side of each CJK
//      ideograph, NFC, split on whitespace; then each word not in
//      never_split is lower-cased, and with strip_accents (null: follow
//      do_lower_case) decomposed (NFD) with its Mn marks dropped; then split
//      around punctuation (ASCII 33-47, 58-64, 91-96, 123-126 and every P*);
//   4. greedy longest-match-first WordPiece, "##" before a piece that does not
//      start its word; a word with no match, or longer than
//      max_input_chars_per_word code points, is [UNK] whole. A never_split
//      word stays whole (its id, or [UNK]'s when the vocabulary lacks it).
// Nothing is added around the text ([CLS] and [SEP]): the caller does that.
//
// decode: tokens joined with spaces, " ##" removed, trimmed, and with
// clean_up_tokenization_spaces " ." " ?" " !" " ," " ' " " n't" " 'm" " 's"
// " 've" " 're" lose their space (transformers' clean_up_tokenization).
//
// Immutable after load: every method may be called from many threads at once.
#pragma once

#include <cstdint>
#include <string>
#include <unordered_map>
#include <unordered_set>
#include <vector>

namespace halformer::text {

struct WordPieceOptions {
    bool do_lower_case = true;
    int strip_accents = -1;  // -1: null (follow do_lower_case), 0: false, 1: true
    bool tokenize_chinese_chars = true;
    bool do_basic_tokenize = true;
    std::vector<std::string> never_split;
    std::string unk_token = "[UNK]";
    std::string sep_token = "[SEP]";
    std::string pad_token = "[PAD]";
    std::string cls_token = "[CLS]";
    std::string mask_token = "[MASK]";
    std::vector<std::string> additional_special_tokens;
    int max_input_chars_per_word = 100;
    bool clean_up_tokenization_spaces = true;

    // The options a tokenizer_config.json sets (do_lower_case, strip_accents,
    // tokenize_chinese_chars, do_basic_tokenize, never_split, the special
    // tokens as strings or {"content": ...} objects, additional_special_tokens,
    // clean_up_tokenization_spaces); BertTokenizer's defaults for the rest.
    // Throws Error naming the file and the field.
    static WordPieceOptions from_config(const std::string &tokenizer_config_json);
};

class WordPiece {
public:
    // Throws Error naming the file: missing, empty, not UTF-8 (with the line).
    // A special token the vocabulary lacks gets the next id after it, as
    // transformers adds it; a token listed twice answers id_of() with its
    // last line (Python's dict), each line keeping its own id for decode.
    static WordPiece load(const std::string &vocab_txt, const WordPieceOptions &options = {});
    static WordPiece load(const std::string &vocab_txt, const std::string &tokenizer_config_json);

    // Text → ids. Throws Error when text is not UTF-8 (naming the byte).
    std::vector<int32_t> encode(const std::string &utf8) const;
    // ids → text. An id outside the vocabulary is an Error naming it.
    std::string decode(const std::vector<int32_t> &ids) const { return decode(ids, options_.clean_up_tokenization_spaces); }
    // decode() with the clean-up of spaces on or off.
    std::string decode(const std::vector<int32_t> &ids, bool clean_up) const;
    bool clean_up_tokenization_spaces() const { return options_.clean_up_tokenization_spaces; }
    // The tokens of encode(text) ("un", "##aff", "[UNK]").
    std::vector<std::string> pieces(const std::string &utf8) const;
    int vocab_size() const { return (int)tokens_.size(); }
    // -1 when absent.
    int32_t id_of(const std::string &token) const;
    int32_t unk_id() const { return unk_id_; }
    int32_t sep_id() const { return id_of(options_.sep_token); }
    int32_t pad_id() const { return id_of(options_.pad_token); }
    int32_t cls_id() const { return id_of(options_.cls_token); }
    int32_t mask_id() const { return id_of(options_.mask_token); }
    const WordPieceOptions &options() const { return options_; }

    // BasicTokenizer alone (no special-token handling, str.lower() of whole
    // words), for tests and inspection. Throws Error when text is not UTF-8.
    std::vector<std::string> basic_tokenize(const std::string &utf8) const;

private:
    WordPiece() = default;
    void basic(const std::u32string &text, std::vector<std::u32string> &out) const;
    void wordpiece(const std::u32string &word, std::vector<std::string> &out) const;
    std::vector<std::string> tokenize(const std::string &utf8) const;
    // The special token at text[i]: the first listed, or the longest; -1 if none.
    int special_at(const std::u32string &text, size_t i, bool longest) const;
    int32_t token_id(const std::string &token) const;  // unk's id when absent

    WordPieceOptions options_;
    std::string source_;
    std::vector<std::string> tokens_;                  // id → token
    std::unordered_map<std::string, int32_t> vocab_;   // token → id (last line wins)
    std::vector<std::u32string> specials_;             // matched whole, in transformers' order
    std::unordered_set<std::string> never_split_;      // options_.never_split
    std::unordered_set<std::u32string> never_split_all_;  // never_split + the special tokens
    std::unordered_set<int32_t> legacy_added_;          // decoded apart: additional specials past the vocabulary
    int32_t unk_id_ = -1;
    int32_t vocab_lines_ = 0;
};

}  // namespace halformer::text
