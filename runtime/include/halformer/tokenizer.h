// Text to token ids and back: a SentencePiece model (Debian's
// libsentencepiece), stored as tokenizer.model inside a model directory and
// named by config.json's "tokenizer" field. The paper shares one source-target
// vocabulary; Tokenizer::train makes such a joint model from several files.
//
//   halformer::Tokenizer::train({{"train.en", "train.de"}, 8000, "bpe"}, "dir/tokenizer.model");
//   auto tok = halformer::Tokenizer::load("dir/tokenizer.model");
//   halformer::Sequence ids = tok.encode("Open file");   // no bos/eos
//   std::string text = tok.decode(ids);                  // "Open file"
//
// The special ids of Halformer's own models are fixed so that they match
// Config's defaults: pad 0, bos 1, eos 2, unk 3. A Hugging Face directory's
// tokenizer (Tokenizer::load_hf) takes them from the checkpoint. Text must be UTF-8; anything else is an Error
// naming the byte. A Tokenizer is immutable after load: encode and decode
// may be called from many threads at once. Tokenizer::train sets
// SentencePiece's process-wide state (its log level and random seed): do not
// train two at once.
#pragma once

#include "halformer/error.h"

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

namespace halformer {

struct Config;
using Sequence = std::vector<int32_t>;

struct TokenizerTrainOptions {
    std::vector<std::string> inputs;  // text files, one sentence a line (all sides: a joint vocabulary)
    int vocab_size = 8000;
    std::string type = "bpe";         // "bpe" or "unigram"
    double character_coverage = 1.0;  // 1.0: every character seen (fine for European languages)
    int64_t max_sentences = 2000000;  // sampled when the inputs hold more
    int threads = 0;                  // 0: the machine's cores
    uint64_t seed = 1;
    int max_sentence_bytes = 4192;    // longer lines are skipped by the trainer
};

// How Tokenizer::decode writes text (transformers' decode arguments).
struct DecodeOptions {
    bool skip_special_tokens = true;
    // Unset: the tokenizer's own (clean_up_tokenization_spaces()).
    std::optional<bool> clean_up_tokenization_spaces;
};

class Tokenizer {
public:
    // Loads a SentencePiece model; throws Error naming the file.
    static Tokenizer load(const std::string &path);
    // The tokenizer a Hugging Face model directory ships, by its config's
    // family: GPT-2's vocab.json + merges.txt (or tokenizer.json), Marian's
    // source.spm / target.spm + vocab.json, BERT's vocab.txt (with
    // tokenizer_config.json's options). Special ids from the config.
    // Nothing when the directory holds none of its family's files; a file
    // that is there but bad is an Error naming it.
    static std::optional<Tokenizer> load_hf(const std::string &dir, const Config &config);
    // The tokenizer of a GGUF file (llama.cpp's format): its vocabulary,
    // merges and special tokens (tokenizer.ggml.*), byte-level BPE as GPT-2,
    // Llama 3 and Qwen2 ship it (tokenizer.ggml.model "gpt2"; the split by
    // tokenizer.ggml.pre). Nothing when the file holds no tokenizer; another
    // kind is an Error naming it.
    static std::optional<Tokenizer> load_gguf(const std::string &path, const Config &config);
    // Whichever of these `path` is: a SentencePiece model file; a model
    // directory (Halformer's, whose config.json names its tokenizer, or a
    // Hugging Face checkpoint's: config.json and its family's tokenizer
    // files; no weights needed); a GGUF file. An Error names what is missing.
    static Tokenizer load_for(const std::string &path);
    // Trains a model on opts.inputs and writes it to model_path (never over
    // an existing file). Throws Error with SentencePiece's message.
    static void train(const TokenizerTrainOptions &opts, const std::string &model_path);

    Tokenizer(Tokenizer &&) noexcept;
    Tokenizer &operator=(Tokenizer &&) noexcept;
    ~Tokenizer();

    // Text → ids (no bos or eos). Throws Error when text is not UTF-8.
    Sequence encode(const std::string &text) const;
    // The ids a model reads for text: encode() plus what the checkpoint's
    // own tokenizer adds (Marian's eos after a source, BERT's [CLS] … [SEP]);
    // encode() itself for Halformer's tokenizers and GPT-2's.
    Sequence encode_input(const std::string &text) const;
    // ids → text. Special tokens (pad, bos, eos, a tokenizer.json's special
    // added tokens) are dropped unless options say to keep them; spaces are
    // cleaned up (" ." → ".", " n't" → "n't": transformers'
    // clean_up_tokenization) where the tokenizer's
    // clean_up_tokenization_spaces() is set, or options say. An id outside
    // the vocabulary is an Error naming it.
    std::string decode(const Sequence &ids, const DecodeOptions &options = {}) const;
    // tokenizer_config.json's clean_up_tokenization_spaces (where it does
    // not say: true for BERT's WordPiece, false for the rest).
    bool clean_up_tokenization_spaces() const;
    // The pieces of an encoding (for inspection: `halformer tokenizer encode --pieces`).
    std::vector<std::string> pieces(const std::string &text) const;

    int vocab_size() const;
    int pad_id() const;
    int bos_id() const;
    int eos_id() const;
    int unk_id() const;
    // BERT's [MASK] (-1: the tokenizer has none).
    int mask_id() const;
    const std::string &path() const;

    // Throws Error when this tokenizer cannot feed a model of `config`: a
    // vocabulary larger than the model's, or special ids that differ.
    void check_matches(const Config &config) const;

    // The runtime's own: the backend of each kind of tokenizer file
    // (runtime/src/text/backend.h).
    struct Impl;

private:
    explicit Tokenizer(std::unique_ptr<Impl> impl);
    std::unique_ptr<Impl> impl_;
};

// The byte offset of the first invalid UTF-8 sequence in text, or -1 when it
// is valid (overlong forms, surrogates and code points past U+10FFFF are invalid).
int64_t utf8_error_offset(const std::string &text);

}  // namespace halformer
