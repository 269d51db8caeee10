// halformer::Tokenizer (tokenizer.h) over its backends (text/backend.h):
// Halformer's own SentencePiece model here, Hugging Face checkpoints'
// tokenizers in text/hf_tokenizers.cpp.
#include "halformer/tokenizer.h"
#include "text/backend.h"
#include "text/clean_up.h"

#include "model/hf/hf.h"

#include "halformer/config.h"
#include "halformer/gguf.h"

#include <sentencepiece_processor.h>
#include <sentencepiece_trainer.h>

#include <sys/stat.h>
#include <unistd.h>

#include <cstdio>
#include <cstring>
#include <fstream>
#include <thread>
#include <unordered_map>

namespace halformer {

namespace {
// Fixed special ids: Config's defaults (pad 0, bos 1, eos 2), unk after them.
constexpr int kPad = 0, kBos = 1, kEos = 2, kUnk = 3;

bool file_exists(const std::string &p) {
    struct stat st;
    return stat(p.c_str(), &st) == 0;
}

// A SentencePiece model with the control pieces pad, bos and eos.
struct SentencePieceImpl : Tokenizer::Impl {
    sentencepiece::SentencePieceProcessor sp;
    int size = 0;

    Sequence encode(const std::string &text) const override {
        std::vector<int> ids;
        auto st = sp.Encode(text, &ids);
        if (!st.ok()) throw Error("tokenizer: " + st.ToString());
        return Sequence(ids.begin(), ids.end());
    }
    // Control pieces (pad, bos, eos) dropped, or written as their pieces.
    std::string decode(const Sequence &ids, bool skip_special) const override {
        auto run = [&](const Sequence &part) {
            std::string out;
            auto st = sp.Decode(std::vector<int>(part.begin(), part.end()), &out);
            if (!st.ok()) throw Error("tokenizer: " + st.ToString());
            return out;
        };
        auto control = [&](int32_t id) { return sp.IsControl(id); };
        if (!skip_special) {
            return text::decode_around(ids, control, [&](int32_t id, bool) { return sp.IdToPiece(id); }, run);
        }
        Sequence keep;
        keep.reserve(ids.size());
        for (int32_t id : ids) {
            if (!control(id)) keep.push_back(id);
        }
        return run(keep);
    }
    std::vector<std::string> pieces(const std::string &text) const override {
        std::vector<std::string> p;
        auto st = sp.Encode(text, &p);
        if (!st.ok()) throw Error("tokenizer: " + st.ToString());
        return p;
    }
    int vocab_size() const override { return size; }
};

void check_utf8(const std::string &text) {
    int64_t bad = utf8_error_offset(text);
    if (bad >= 0) throw Error("text is not UTF-8 (byte " + std::to_string(bad) + ")");
}

}  // namespace

Tokenizer::Tokenizer(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}
Tokenizer::Tokenizer(Tokenizer &&) noexcept = default;
Tokenizer &Tokenizer::operator=(Tokenizer &&) noexcept = default;
Tokenizer::~Tokenizer() = default;

Tokenizer Tokenizer::load(const std::string &path) {
    if (!file_exists(path)) throw Error(path + ": no such tokenizer file");
    auto impl = std::make_unique<SentencePieceImpl>();
    auto st = impl->sp.Load(path);
    if (!st.ok()) throw Error(path + ": not a SentencePiece model (" + st.ToString() + ")");
    impl->path = path;
    impl->size = impl->sp.GetPieceSize();
    if (impl->size < 4) throw Error(path + ": a vocabulary of " + std::to_string(impl->size) + " pieces is too small");
    impl->pad = impl->sp.pad_id();
    impl->bos = impl->sp.bos_id();
    impl->eos = impl->sp.eos_id();
    impl->unk = impl->sp.unk_id();
    return Tokenizer(std::move(impl));
}

Tokenizer Tokenizer::load_for(const std::string &path) {
    struct stat st;
    if (stat(path.c_str(), &st) == 0 && S_ISDIR(st.st_mode)) {
        if (!file_exists(path + "/config.json")) {
            if (auto impl = text::load_tokenizer_files(path)) return Tokenizer(std::move(impl));
            if (file_exists(path + "/tokenizer.model")) return load(path + "/tokenizer.model");
            throw Error(path + ": no config.json, and none of the tokenizer files a directory may hold alone "
                               "(tokenizer.json, vocab.json + merges.txt, vocab.txt, tokenizer.model)");
        }
        const Config c = Config::from_file(path + "/config.json");
        if (!c.family.empty()) {
            auto t = load_hf(path, c);
            if (!t) throw Error(path + ": holds none of the tokenizer files of model_type \"" + c.family + "\"");
            return std::move(*t);
        }
        if (c.tokenizer.empty()) throw Error(path + "/config.json names no tokenizer");
        return load(path + "/" + c.tokenizer);
    }
    if (is_gguf_file(path)) {
        const Gguf g(path);
        const Config c = Config::from_json(hf::gguf_config_json(g), path + " (as config.json)");
        auto t = load_gguf(path, c);
        if (!t) throw Error(path + ": holds no tokenizer (tokenizer.ggml.model)");
        return std::move(*t);
    }
    return load(path);
}

std::optional<Tokenizer> Tokenizer::load_gguf(const std::string &path, const Config &config) {
    auto impl = text::load_gguf_tokenizer(path, config);
    if (!impl) return std::nullopt;
    return Tokenizer(std::move(impl));
}

std::optional<Tokenizer> Tokenizer::load_hf(const std::string &dir, const Config &config) {
    auto impl = text::load_hf_tokenizer(dir, config);
    if (!impl) return std::nullopt;
    return Tokenizer(std::move(impl));
}

void Tokenizer::train(const TokenizerTrainOptions &o, const std::string &model_path) {
    if (o.inputs.empty()) throw Error("tokenizer training: no input files");
    for (const std::string &f : o.inputs) {
        std::ifstream in(f);
        if (!in) throw Error(f + ": cannot open");
        if (f.find(',') != std::string::npos) throw Error(f + ": SentencePiece cannot read a path with a comma");
    }
    if (o.type != "bpe" && o.type != "unigram") throw Error("tokenizer type '" + o.type + "': expected bpe or unigram");
    if (o.vocab_size < 8) throw Error("tokenizer vocabulary size " + std::to_string(o.vocab_size) + " is below 8");
    if (file_exists(model_path)) throw Error(model_path + " exists: not replacing it");
    std::string inputs;
    for (const std::string &f : o.inputs) inputs += (inputs.empty() ? "" : ",") + f;
    const int threads = o.threads > 0 ? o.threads : (int)std::max(1u, std::thread::hardware_concurrency());
    // SentencePiece writes PREFIX.model and PREFIX.vocab: train into a
    // temporary prefix next to the target and rename the model into place.
    const std::string prefix = model_path + ".tmp" + std::to_string(getpid());
    std::unordered_map<std::string, std::string> kw = {
        {"input", inputs},
        {"model_prefix", prefix},
        {"vocab_size", std::to_string(o.vocab_size)},
        {"model_type", o.type},
        {"character_coverage", std::to_string(o.character_coverage)},
        {"input_sentence_size", std::to_string(o.max_sentences)},
        {"shuffle_input_sentence", "true"},
        {"num_threads", std::to_string(threads)},
        {"max_sentence_length", std::to_string(o.max_sentence_bytes)},
        {"pad_id", std::to_string(kPad)},
        {"bos_id", std::to_string(kBos)},
        {"eos_id", std::to_string(kEos)},
        {"unk_id", std::to_string(kUnk)},
        // Digits one by one: numbers in UI strings copy through piece by piece.
        {"split_digits", "true"},
        {"byte_fallback", "true"},
        {"minloglevel", "1"},
    };
    // The sentence sample is drawn with SentencePiece's global generator.
    sentencepiece::SetRandomGeneratorSeed((unsigned)(o.seed & 0xFFFFFFFFu));
    auto st = sentencepiece::SentencePieceTrainer::Train(kw);
    std::remove((prefix + ".vocab").c_str());
    if (!st.ok()) {
        std::remove((prefix + ".model").c_str());
        throw Error("tokenizer training failed: " + st.ToString());
    }
    if (std::rename((prefix + ".model").c_str(), model_path.c_str()) != 0) {
        std::remove((prefix + ".model").c_str());
        throw Error(model_path + ": cannot write");
    }
}

Sequence Tokenizer::encode(const std::string &text) const {
    check_utf8(text);
    return impl_->encode(text);
}

Sequence Tokenizer::encode_input(const std::string &text) const {
    Sequence ids = impl_->prefix, body = encode(text);
    ids.insert(ids.end(), body.begin(), body.end());
    ids.insert(ids.end(), impl_->suffix.begin(), impl_->suffix.end());
    return ids;
}

std::string Tokenizer::decode(const Sequence &ids, const DecodeOptions &options) const {
    const int size = impl_->vocab_size();
    for (int32_t id : ids) {
        if (id < 0 || id >= size) {
            throw Error("token id " + std::to_string(id) + " is outside the tokenizer's vocabulary of " +
                        std::to_string(size));
        }
    }
    std::string text = impl_->decode(ids, options.skip_special_tokens);
    if (options.clean_up_tokenization_spaces.value_or(impl_->clean_up_spaces)) {
        text = text::clean_up_tokenization(std::move(text));
    }
    return text;
}

bool Tokenizer::clean_up_tokenization_spaces() const { return impl_->clean_up_spaces; }

std::vector<std::string> Tokenizer::pieces(const std::string &text) const {
    check_utf8(text);
    return impl_->pieces(text);
}

int Tokenizer::vocab_size() const { return impl_->vocab_size(); }
int Tokenizer::pad_id() const { return impl_->pad; }
int Tokenizer::bos_id() const { return impl_->bos; }
int Tokenizer::eos_id() const { return impl_->eos; }
int Tokenizer::unk_id() const { return impl_->unk; }
int Tokenizer::mask_id() const { return impl_->mask; }
const std::string &Tokenizer::path() const { return impl_->path; }

void Tokenizer::check_matches(const Config &c) const {
    const std::string what = impl_->path + ": ";
    auto need_id = [&](const char *name, int mine, int theirs) {
        if (mine != theirs) {
            throw Error(what + "the tokenizer's " + name + " " + std::to_string(mine) + " is not the model's " +
                        std::to_string(theirs));
        }
    };
    need_id("pad id", pad_id(), c.pad_id);
    if (c.has_decoder()) {
        need_id("bos id", bos_id(), c.bos_id);
        if (c.eos_id != -1) need_id("eos id", eos_id(), c.eos_id);
    }
    auto need_size = [&](const char *name, int vocab) {
        if (vocab_size() > vocab) {
            throw Error(what + "the tokenizer's " + std::to_string(vocab_size()) + " pieces do not fit the model's " +
                        name + " of " + std::to_string(vocab));
        }
    };
    if (c.has_encoder()) need_size("src_vocab_size", c.src_vocab_size);
    if (c.has_decoder()) need_size("tgt_vocab_size", c.tgt_vocab_size);
}

}  // namespace halformer
