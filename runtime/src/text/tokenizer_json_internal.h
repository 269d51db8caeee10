// Internal to tokenizer.json (tokenizer_json.h), in namespace
// halformer::text::tj: the pipeline's parts as values built once from the
// file. tokenizer_json_steps.cpp reads the normalizers, pre-tokenizers,
// decoders and post-processors; tokenizer_json_models.cpp the models;
// tokenizer_json.cpp the added tokens and the whole pipeline.
#pragma once

#include "unicode.h"

#include "halformer/json.h"

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <unordered_map>
#include <vector>

namespace halformer::text::tj {

// A stretch of text on its way through the pre-tokenizers. at_start: it
// begins where the input does (Metaspace's prepend_scheme "first").
struct Piece {
    std::string text;
    bool at_start = false;
};

// Each part is a function; an empty one does nothing.
using Normalizer = std::function<std::string(const std::string &)>;
using PreTokenizer = std::function<void(std::vector<Piece> &)>;
using Decoder = std::function<void(std::vector<std::string> &)>;

// `what` is where the part is in the file ("tokenizer.json: normalizer"),
// for errors. A null part gives an empty function.
Normalizer read_normalizer(const json::Value &v, const std::string &what);
PreTokenizer read_pre_tokenizer(const json::Value &v, const std::string &what);
Decoder read_decoder(const json::Value &v, const std::string &what);
// The ids a post-processor puts before and after a single input; special
// tokens named by content are looked up with id_of.
void read_post_processor(const json::Value &v, const std::string &what,
                         const std::function<int32_t(const std::string &)> &id_of, std::vector<int32_t> &prefix,
                         std::vector<int32_t> &suffix);

// A model: words → ids, with its vocabulary.
struct Model {
    virtual ~Model() = default;
    // Appends the ids of one pre-tokenized word (valid UTF-8, not empty).
    virtual void tokenize(const std::string &word, std::vector<int32_t> &ids) const = 0;
    std::string type;                                 // "BPE", ...
    std::string what;                                 // the file, for errors
    std::vector<std::string> tokens;                  // id → token ("" where none)
    std::vector<uint8_t> has;                         // id → 1 where the vocabulary has a token
    std::unordered_map<std::string, int32_t> vocab;   // token → id
    int32_t unk = -1;
    // Adds token → id; throws on two tokens with one id or one token twice.
    void add(const std::string &token, int32_t id);
};
std::unique_ptr<Model> read_model(const json::Value &v, const std::string &what);

// Helpers the readers share: a member that must be of a kind, with its
// fallback when absent or null; errors name what.key.
bool get_bool(const json::Value &obj, const char *key, bool fallback, const std::string &what);
std::string get_string(const json::Value &obj, const char *key, const std::string &fallback, const std::string &what);
int64_t get_int(const json::Value &obj, const char *key, int64_t fallback, int64_t lo, int64_t hi,
                const std::string &what);
// The component's "type", or an Error naming what.
std::string type_of(const json::Value &v, const std::string &what);
// An Error for a type this reader does not have: names it and the ones it has.
[[noreturn]] void unknown_type(const std::string &what, const std::string &type, const char *known);
// Throws unless every member of obj is one of `keys` (a misspelt or newer
// option is never ignored).
void only_keys(const json::Value &obj, std::initializer_list<const char *> keys, const std::string &what);
// A Split/Replace pattern: {"String": s} or {"Regex": r}.
struct Pattern {
    std::string literal;                               // String
    std::shared_ptr<const unicode::Regex> regex;       // Regex
    // Every match in text as [begin, end) byte offsets, left to right.
    std::vector<std::pair<size_t, size_t>> find_all(const std::string &text) const;
};
Pattern read_pattern(const json::Value &obj, const std::string &what);

// The byte-fallback token of a byte, "<0x0A>".
std::string byte_token(unsigned char b);

// Largest id or vocabulary accepted before anything is allocated.
constexpr int64_t kMaxId = 1 << 24;

}  // namespace halformer::text::tj
