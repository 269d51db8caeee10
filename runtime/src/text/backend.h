// Internal: what halformer::Tokenizer wraps. One backend per kind of
// tokenizer file: Halformer's own SentencePiece model (tokenizer.cpp), and
// the tokenizers Hugging Face checkpoints ship (hf_tokenizers.cpp: GPT-2's
// byte-level BPE, BERT's WordPiece, Marian's two SentencePiece models with
// vocab.json, T5's spiece.model).
#pragma once

#include "halformer/tokenizer.h"

#include <functional>
#include <string>
#include <vector>

namespace halformer {

struct Tokenizer::Impl {
    virtual ~Impl() = default;
    // Text → ids with no special tokens (the caller checked UTF-8).
    virtual Sequence encode(const std::string &text) const = 0;
    // ids → text; special tokens (pad, bos, eos, a tokenizer.json's special
    // added tokens) dropped when skip_special, written as their text when
    // not. No clean-up of spaces (Tokenizer::decode does that). The caller
    // checked the ids' range.
    virtual std::string decode(const Sequence &ids, bool skip_special) const = 0;
    virtual std::vector<std::string> pieces(const std::string &text) const = 0;
    virtual int vocab_size() const = 0;

    std::string path;  // the file (or directory) it was loaded from
    int pad = -1, bos = -1, eos = -1, unk = -1, mask = -1;  // mask: BERT's [MASK]
    // What the checkpoint's tokenizer adds around a model input
    // (add_special_tokens): BERT's [CLS] … [SEP], Marian's and T5's eos.
    Sequence prefix, suffix;
    // tokenizer_config.json's clean_up_tokenization_spaces (BERT's default
    // true; false elsewhere): what Tokenizer::decode does unless told.
    bool clean_up_spaces = false;
};

namespace text {
// ids → text where the ids `special` names are written as `text_of` gives
// them (told whether ordinary ids came just before) and the runs between
// them decoded by `run` (the SentencePiece backends with skip_special
// false, as transformers' slow tokenizers write them).
std::string decode_around(const Sequence &ids, const std::function<bool(int32_t)> &special,
                          const std::function<std::string(int32_t, bool)> &text_of,
                          const std::function<std::string(const Sequence &)> &run);
// tokenizer_config.json's clean_up_tokenization_spaces in `dir`, or
// `fallback` where there is no such file or key; another kind of value is
// an Error naming the file.
bool read_clean_up_spaces(const std::string &dir, bool fallback);
// The tokenizer of a Hugging Face directory of config.family, from the files
// its family ships; nullptr when the directory has none. Errors name the file.
std::unique_ptr<Tokenizer::Impl> load_hf_tokenizer(const std::string &dir, const Config &c);
// A directory of tokenizer files without config.json: tokenizer.json
// (byte-level BPE), vocab.json + merges.txt (GPT-2's) or vocab.txt
// (WordPiece), special tokens from tokenizer_config.json; nullptr when it
// holds none of them.
std::unique_ptr<Tokenizer::Impl> load_tokenizer_files(const std::string &dir);
// The tokenizer a GGUF file holds (tokenizer.ggml.*); nullptr when it holds
// none. Errors name the file and the key.
std::unique_ptr<Tokenizer::Impl> load_gguf_tokenizer(const std::string &path, const Config &c);
}  // namespace text

}  // namespace halformer
