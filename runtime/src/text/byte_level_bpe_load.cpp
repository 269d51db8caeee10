// Byte-level BPE's loading (byte_level_bpe.h): vocab.json and merges.txt;
// finish() then indexes the byte characters and the added tokens.
#include "byte_level_bpe.h"

#include "byte_level_bpe_internal.h"
#include "utf8.h"

#include "halformer/error.h"
#include "halformer/files.h"
#include "halformer/json.h"
#include "halformer/tokenizer.h"

#include <cmath>

namespace halformer::text {

namespace {

// Ids past this are a broken file, not a vocabulary (GPT-2 has 50257, the
// largest in use about 256K): refused before anything that large is allocated.
constexpr int64_t kMaxId = 1 << 24;

json::Value parse_file(const std::string &path) {
    if (!files::exists(path)) throw Error(path + ": no such file");
    return json::parse(files::read_text(path), path);
}

int32_t get_id(const json::Value &v, const std::string &what) {
    if (!v.is_number() || v.number != std::floor(v.number) || v.number < 0 || v.number >= kMaxId) {
        const std::string shown = v.is_number() ? std::to_string(v.number) : json::kind_name(v.kind);
        throw Error(what + " is " + shown + ", expected an id: an integer from 0 to " + std::to_string(kMaxId - 1));
    }
    return (int32_t)v.number;
}

// vocab.json / model.vocab: token → id; fills tokens (id → token) and vocab.
void read_vocab(const json::Value &v, const std::string &what, std::vector<std::string> &tokens,
                std::vector<uint8_t> &kind, std::unordered_map<std::string, int32_t> &vocab) {
    if (!v.is_object()) {
        throw Error(what + " is " + std::string(json::kind_name(v.kind)) + ", expected an object of token → id");
    }
    vocab.reserve(v.object.size());
    for (const auto &kv : v.object) {
        const int32_t id = get_id(kv.second, what + ": the id of " + json::quote(kv.first));
        if ((size_t)id >= tokens.size()) {
            tokens.resize(id + 1);
            kind.resize(id + 1, 0);
        }
        if (kind[id]) {
            throw Error(what + ": " + json::quote(tokens[id]) + " and " + json::quote(kv.first) + " both have id " +
                        std::to_string(id));
        }
        tokens[id] = kv.first;
        kind[id] = 1;
        vocab.emplace(kv.first, id);
    }
}

}  // namespace

ByteLevelBpe ByteLevelBpe::load(const std::string &vocab_json, const std::string &merges_txt,
                                const ByteLevelBpeOptions &options) {
    ByteLevelBpe b;
    b.source_ = vocab_json;
    read_vocab(parse_file(vocab_json), vocab_json, b.tokens_, b.kind_, b.vocab_);

    if (!files::exists(merges_txt)) throw Error(merges_txt + ": no such file");
    const std::string text = files::read_text(merges_txt);
    size_t line_no = 0, rank = 0;
    for (size_t pos = 0; pos < text.size();) {
        size_t end = text.find('\n', pos);
        if (end == std::string::npos) end = text.size();
        std::string line = text.substr(pos, end - pos);
        pos = end + 1;
        line_no++;
        if (!line.empty() && line.back() == '\r') line.pop_back();
        // GPT-2's files open with "#version: 0.2"; transformers skips the
        // first line whatever it holds, the tokenizers library a "#version" one.
        if (line_no == 1 && line.rfind("#version", 0) == 0) continue;
        if (line.empty()) continue;
        const std::string where = merges_txt + ":" + std::to_string(line_no);
        const size_t sp = line.find(' ');
        if (sp == std::string::npos || sp == 0 || sp + 1 == line.size() || line.find(' ', sp + 1) != std::string::npos) {
            throw Error(where + ": expected a merge \"left right\", found " + json::quote(line));
        }
        const std::string left = line.substr(0, sp), right = line.substr(sp + 1);
        auto id = [&](const std::string &tok, const char *role) {
            auto it = b.vocab_.find(tok);
            if (it == b.vocab_.end()) {
                throw Error(where + ": the merge " + json::quote(line) + " " + role + " " + json::quote(tok) +
                            ", which " + vocab_json + " does not have");
            }
            return it->second;
        };
        const int32_t l = id(left, "names"), r = id(right, "names");
        // A pair listed twice keeps its last rank (Python's dict, and the tokenizers library).
        b.merges_[bpe::pair_key(l, r)] = bpe::Merge{(int32_t)rank++, id(left + right, "makes")};
    }

    b.added_ = options.added_tokens;
    bool has_eot = false;
    for (const AddedToken &t : b.added_) has_eot = has_eot || t.content == "<|endoftext|>";
    if (!has_eot && b.vocab_.count("<|endoftext|>")) b.added_.push_back(AddedToken{"<|endoftext|>"});
    for (AddedToken &t : b.added_) t.normalized = false;  // one trie, on the raw text (transformers)
    b.prefix_space_ = options.add_prefix_space;
    b.finish(vocab_json);
    return b;
}

namespace {

// Llama 3's and Qwen2's Split patterns, as tokenizer.json spells them.
constexpr const char *kLlama3Pattern =
    "(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\\r\\n\\p{L}\\p{N}]?\\p{L}+|\\p{N}{1,3}| ?[^\\s\\p{L}\\p{N}]+[\\r\\n]*|\\s*[\\r\\n]+|"
    "\\s+(?!\\S)|\\s+";
constexpr const char *kQwen2Pattern =
    "(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\\r\\n\\p{L}\\p{N}]?\\p{L}+|\\p{N}| ?[^\\s\\p{L}\\p{N}]+[\\r\\n]*|\\s*[\\r\\n]+|"
    "\\s+(?!\\S)|\\s+";

}  // namespace

const char *ByteLevelBpe::split_pattern(int max_digits) {
    if (max_digits == 3) return kLlama3Pattern;
    if (max_digits == 1) return kQwen2Pattern;
    throw Error("internal: no Split pattern of " + std::to_string(max_digits) + " digits");
}

void ByteLevelBpe::finish(const std::string &what) {
    const bpe::ByteMap &bm = bpe::byte_map();
    for (int c = 0; c < 256; c++) {
        std::string ch;
        append_utf8(ch, bm.to_char[c]);
        auto it = vocab_.find(ch);
        byte_id_[c] = it == vocab_.end() ? -1 : it->second;
    }
    for (size_t i = 0; i < added_.size(); i++) {
        AddedToken &t = added_[i];
        const std::string name = "added token " + json::quote(t.content);
        if (t.content.empty()) throw Error(what + ": an added token is empty");
        if (utf8_error_offset(t.content) >= 0) throw Error(what + ": " + name + " is not UTF-8");
        auto in_vocab = vocab_.find(t.content);
        if (t.id < 0) {
            if (in_vocab == vocab_.end()) throw Error(what + ": " + name + " has no id and is not in the vocabulary");
            t.id = in_vocab->second;
        }
        if (in_vocab != vocab_.end() && in_vocab->second != t.id) {
            throw Error(what + ": " + name + " has id " + std::to_string(t.id) + ", but the vocabulary gives it id " +
                        std::to_string(in_vocab->second));
        }
        if (t.id >= kMaxId) throw Error(what + ": " + name + " has id " + std::to_string(t.id) + ", too large");
        if ((size_t)t.id >= tokens_.size()) {
            tokens_.resize(t.id + 1);
            kind_.resize(t.id + 1, 0);
        }
        if (kind_[t.id] == 2) {
            throw Error(what + ": added tokens " + json::quote(tokens_[t.id]) + " and " + json::quote(t.content) +
                        " both have id " + std::to_string(t.id));
        }
        if (kind_[t.id] == 1 && tokens_[t.id] != t.content) {
            throw Error(what + ": " + name + " has id " + std::to_string(t.id) + ", which the vocabulary gives to " +
                        json::quote(tokens_[t.id]));
        }
        if (!added_ids_.emplace(t.content, t.id).second) throw Error(what + ": " + name + " is listed twice");
        tokens_[t.id] = t.content;
        kind_[t.id] = 2;
        trie_.insert(t.content, (int32_t)i);
    }
    if (tokens_.empty()) throw Error(what + ": the vocabulary is empty");
}

}  // namespace halformer::text
