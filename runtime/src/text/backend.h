// Internal: what halformer::Tokenizer wraps. One backend per kind of
// tokenizer file: Halformer's own SentencePiece model (tokenizer.cpp), and
// the tokenizers Hugging Face checkpoints ship (hf_tokenizers.cpp: GPT-2's
// byte-level BPE, BERT's WordPiece, Marian's two SentencePiece models with
// vocab.json, T5's spiece.model).
#pragma once

#include "halformer/tokenizer.h"

#include <string>
#include <vector>

namespace halformer {

struct Tokenizer::Impl {
    virtual ~Impl() = default;
    // Text → ids with no special tokens (the caller checked UTF-8).
    virtual Sequence encode(const std::string &text) const = 0;
    // ids → text, special tokens dropped; the caller checked the ids' range.
    virtual std::string decode(const Sequence &ids) const = 0;
    virtual std::vector<std::string> pieces(const std::string &text) const = 0;
    virtual int vocab_size() const = 0;

    std::string path;  // the file (or directory) it was loaded from
    int pad = -1, bos = -1, eos = -1, unk = -1, mask = -1;  // mask: BERT's [MASK]
    // What the checkpoint's tokenizer adds around a model input
    // (add_special_tokens): BERT's [CLS] … [SEP], Marian's and T5's eos.
    Sequence prefix, suffix;
};

namespace text {
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
