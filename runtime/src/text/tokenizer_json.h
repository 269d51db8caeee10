// A Hugging Face tokenizers-library tokenizer.json of any kind (internal; the
// runtime's tokenizer wraps it), run as that library runs it:
//
//   auto t = text::TokenizerJson::load("llama2/tokenizer.json");
//   std::vector<int32_t> ids = t.encode("Hello world");   // [15043, 3186]: "▁Hello", "▁world"
//   std::string back = t.decode(ids);                      // "Hello world"
//
// encode:
//   1. added tokens whose "normalized" is false are cut out of the text whole
//      (leftmost longest; lstrip / rstrip / single_word as the library has them);
//   2. each stretch between them goes through the normalizer, then the added
//      tokens whose "normalized" is true are cut out of that;
//   3. the pre-tokenizer splits each stretch into words;
//   4. the model turns each word into ids: BPE (merges by rank, byte_fallback,
//      fuse_unk, ignore_merges, continuing_subword_prefix, end_of_word_suffix),
//      Unigram (Viterbi over the vocabulary's scores, byte_fallback),
//      WordPiece (greedy longest match) or WordLevel.
// The post-processor's ids around an input (template_prefix/suffix) are the
// caller's to add.
//
// decode: ids → tokens (special added tokens left out when asked) → the
// decoder chain → text; tokens joined with spaces where there is no decoder.
//
// Components read (anything else is an Error naming it and where it is):
//   normalizers     Sequence, Prepend, Replace, NFC, NFD, NFKC, NFKD,
//                   Lowercase, Strip, StripAccents, BertNormalizer, Precompiled
//   pre-tokenizers  Sequence, Split (String or Regex, every behaviour, invert),
//                   ByteLevel, Metaspace, Digits, Punctuation, Whitespace,
//                   WhitespaceSplit, BertPreTokenizer, CharDelimiterSplit
//   decoders        Sequence, ByteLevel, Metaspace, ByteFallback, Fuse, Strip,
//                   Replace, WordPiece, BPEDecoder
//   post-processors TemplateProcessing, BertProcessing, RobertaProcessing,
//                   ByteLevel, Sequence
//
// Immutable after load: every method may be called from many threads at once.
#pragma once

#include "byte_level_bpe.h"  // AddedToken

#include "halformer/json.h"

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

namespace halformer::text {

class TokenizerJson {
public:
    // Throws Error naming the file and the problem.
    static TokenizerJson load(const std::string &path);
    // The same from parsed text (`what` names it in errors).
    static TokenizerJson from_json(const json::Value &root, const std::string &what);

    // Text → ids (no post-processor). Throws Error when text is not UTF-8.
    std::vector<int32_t> encode(const std::string &utf8) const;
    // ids → text; skip_special drops the special added tokens (as
    // transformers' skip_special_tokens). An id outside the vocabulary is an
    // Error naming it.
    std::string decode(const std::vector<int32_t> &ids, bool skip_special = true) const;
    // The tokens of encode(text), as the vocabulary spells them.
    std::vector<std::string> pieces(const std::string &utf8) const;
    // One past the largest id (model vocabulary and added tokens).
    int vocab_size() const;
    // The id of a token (the model's spelling or an added token's content); -1 when absent.
    int32_t id_of(const std::string &token) const;
    const std::vector<AddedToken> &added_tokens() const;
    // The post-processor's special ids before and after a single input.
    const std::vector<int32_t> &template_prefix() const;
    const std::vector<int32_t> &template_suffix() const;
    // The model's unknown token (unk_token, unk_id); -1 when it has none.
    int32_t unk_id() const;
    // The model's kind: "BPE", "Unigram", "WordPiece" or "WordLevel".
    const std::string &model_type() const;

    struct Impl;

private:
    explicit TokenizerJson(std::shared_ptr<const Impl> impl) : impl_(std::move(impl)) {}
    std::shared_ptr<const Impl> impl_;
};

}  // namespace halformer::text
