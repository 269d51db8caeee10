// Byte-level BPE's loading (byte_level_bpe.h): vocab.json and merges.txt, or
// a tokenizer.json with its model, pre-tokenizer, normalizer, decoder,
// post-processor and added tokens checked; finish() then indexes the byte
// characters and the added tokens.
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

bool get_bool(const json::Value &obj, const char *key, bool fallback, const std::string &what) {
    const json::Value *v = member(obj, key);
    if (!v) return fallback;
    if (!v->is_bool()) {
        throw Error(what + ": \"" + key + "\" is " + json::kind_name(v->kind) + ", expected true or false");
    }
    return v->boolean;
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
        b.merges_[bpe::pair_key(l, r)] = Merge{(int32_t)rank++, id(left + right, "makes")};
    }

    b.added_ = options.added_tokens;
    bool has_eot = false;
    for (const AddedToken &t : b.added_) has_eot = has_eot || t.content == "<|endoftext|>";
    if (!has_eot && b.vocab_.count("<|endoftext|>")) b.added_.push_back(AddedToken{"<|endoftext|>"});
    for (AddedToken &t : b.added_) t.normalized = false;  // one trie, on the raw text (transformers)
    b.prefix_ = options.add_prefix_space ? PrefixSpace::Text : PrefixSpace::None;
    b.finish(vocab_json);
    return b;
}

namespace {

// tokenizer.json's model options that byte-level BPE cannot honour.
void check_model_options(const json::Value &model, const std::string &m) {
    if (const json::Value *d = member(model, "dropout")) {
        if (!d->is_number() || d->number != 0) throw Error(m + "dropout is set: BPE dropout (a training aid) is not supported");
    }
    for (const char *key : {"continuing_subword_prefix", "end_of_word_suffix"}) {
        const json::Value *v = member(model, key);
        if (v && !(v->is_string() && v->string.empty())) {
            throw Error(m + key + " is set: not supported with byte-level BPE");
        }
    }
    if (get_bool(model, "fuse_unk", false, m + "fuse_unk")) throw Error(m + "fuse_unk is true: not supported");
    if (get_bool(model, "byte_fallback", false, m + "byte_fallback")) {
        throw Error(m + "byte_fallback is true: that is a SentencePiece-style BPE, not byte-level BPE");
    }
}

// model.merges as (left, right) pairs: "left right" strings or [left, right].
std::vector<std::pair<std::string, std::string>> merge_pairs(const json::Value &merges, const std::string &m) {
    if (!merges.is_array()) throw Error(m + "merges is " + json::kind_name(merges.kind) + ", expected an array");
    std::vector<std::pair<std::string, std::string>> out;
    for (size_t i = 0; i < merges.array.size(); i++) {
        const json::Value &e = merges.array[i];
        const std::string where = m + "merges[" + std::to_string(i) + "]";
        if (e.is_string()) {
            const size_t sp = e.string.find(' ');
            if (sp == std::string::npos || sp == 0 || sp + 1 == e.string.size() ||
                e.string.find(' ', sp + 1) != std::string::npos) {
                throw Error(where + ": expected \"left right\", found " + json::quote(e.string));
            }
            out.emplace_back(e.string.substr(0, sp), e.string.substr(sp + 1));
        } else if (e.is_array() && e.array.size() == 2 && e.array[0].is_string() && e.array[1].is_string()) {
            out.emplace_back(e.array[0].string, e.array[1].string);
        } else {
            throw Error(where + ": expected \"left right\" or [left, right]");
        }
    }
    return out;
}

// Llama 3's and Qwen2's Split patterns, as tokenizer.json spells them.
constexpr const char *kLlama3Pattern =
    "(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\\r\\n\\p{L}\\p{N}]?\\p{L}+|\\p{N}{1,3}| ?[^\\s\\p{L}\\p{N}]+[\\r\\n]*|\\s*[\\r\\n]+|"
    "\\s+(?!\\S)|\\s+";
constexpr const char *kQwen2Pattern =
    "(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\\r\\n\\p{L}\\p{N}]?\\p{L}+|\\p{N}| ?[^\\s\\p{L}\\p{N}]+[\\r\\n]*|\\s*[\\r\\n]+|"
    "\\s+(?!\\S)|\\s+";

std::string type_of(const json::Value &v) {
    const json::Value *t = v.is_object() ? member(v, "type") : nullptr;
    return t && t->is_string() ? t->string : "";
}

// The pre-tokenizer: ByteLevel alone (or the one entry of a Sequence:
// GPT-2's pattern, split_digits 0), or Sequence [Split, ByteLevel] with
// Llama 3's or Qwen2's pattern (split_digits 3 or 1: hand-written matchers)
// or any other (other_pattern: ICU runs it), ByteLevel without its regex;
// the normalizer: none, or NFC; the decoder ByteLevel.
const json::Value &byte_level_pre_tokenizer(const json::Value &root, const std::string &path, int *split_digits,
                                            bool *nfc, std::string *other_pattern) {
    *split_digits = 0;
    other_pattern->clear();
    *nfc = false;
    if (const json::Value *norm = member(root, "normalizer")) {
        if (type_of(*norm) != "NFC") {
            const std::string t = type_of(*norm);
            throw Error(path + ": normalizer " + (t.empty() ? std::string("(unnamed)") : json::quote(t)) +
                        " is not supported with byte-level BPE (none, or NFC)");
        }
        *nfc = true;
    }
    const json::Value *pre = member(root, "pre_tokenizer");
    const json::Value *byte_level = nullptr;
    if (pre && type_of(*pre) == "ByteLevel") {
        byte_level = pre;
    } else if (pre && type_of(*pre) == "Sequence") {
        const json::Value *list = member(*pre, "pretokenizers");
        if (list && list->is_array() && list->array.size() == 1 && type_of(list->array[0]) == "ByteLevel") {
            byte_level = &list->array[0];
        } else if (list && list->is_array() && list->array.size() == 2 && type_of(list->array[0]) == "Split" &&
                   type_of(list->array[1]) == "ByteLevel") {
            const json::Value &split = list->array[0];
            const json::Value *pattern = member(split, "pattern");
            const json::Value *regex = pattern && pattern->is_object() ? member(*pattern, "Regex") : nullptr;
            const json::Value *behavior = member(split, "behavior");
            if (!regex || !regex->is_string()) throw Error(path + ": pre_tokenizer Split has no \"Regex\" pattern");
            if (regex->string == kLlama3Pattern) {
                *split_digits = 3;
            } else if (regex->string == kQwen2Pattern) {
                *split_digits = 1;
            } else {
                *other_pattern = regex->string;  // (run by ICU's regular expressions)
            }
            if (!behavior || !behavior->is_string() || behavior->string != "Isolated" ||
                get_bool(split, "invert", false, path + ": pre_tokenizer Split")) {
                throw Error(path + ": pre_tokenizer Split must be \"Isolated\" and not inverted");
            }
            byte_level = &list->array[1];
            if (get_bool(*byte_level, "use_regex", true, path + ": pre_tokenizer")) {
                throw Error(path + ": pre_tokenizer ByteLevel after a Split must have use_regex false");
            }
        }
    }
    if (!byte_level) {
        throw Error(path + ": pre_tokenizer is not ByteLevel: this reader takes byte-level BPE only (GPT-2's, "
                           "Llama 3's, Qwen2's)");
    }
    if (*split_digits == 0 && other_pattern->empty() && !get_bool(*byte_level, "use_regex", true, path + ": pre_tokenizer")) {
        throw Error(path + ": pre_tokenizer ByteLevel has use_regex false: not supported (GPT-2's pattern is the one implemented)");
    }
    if (const json::Value *dec = member(root, "decoder")) {
        if (type_of(*dec) != "ByteLevel") {
            const std::string t = type_of(*dec);
            throw Error(path + ": decoder " + (t.empty() ? std::string("(unnamed)") : json::quote(t)) +
                        " is not supported (expected ByteLevel)");
        }
    }
    return *byte_level;
}

// A TemplateProcessing post_processor's special ids before and after the
// single input ("A"); ByteLevel or none: nothing.
void template_ids(const json::Value &root, const std::string &path, std::vector<int32_t> &before,
                  std::vector<int32_t> &after) {
    const json::Value *post = member(root, "post_processor");
    if (!post) return;
    const std::string type = type_of(*post);
    if (type == "ByteLevel") return;
    const json::Value *list = nullptr;
    if (type == "TemplateProcessing") {
        list = member(*post, "single");
    } else if (type == "Sequence") {
        // (Llama 3: [ByteLevel, TemplateProcessing].)
        const json::Value *procs = member(*post, "processors");
        for (size_t k = 0; procs && procs->is_array() && k < procs->array.size(); k++) {
            const std::string t = type_of(procs->array[k]);
            if (t == "TemplateProcessing") list = member(procs->array[k], "single");
            else if (t != "ByteLevel") throw Error(path + ": post_processor " + json::quote(t) + " is not supported");
        }
        if (!list) return;
    } else {
        throw Error(path + ": post_processor " + json::quote(type) + " is not supported (TemplateProcessing, ByteLevel)");
    }
    const json::Value *specials = type == "TemplateProcessing" ? member(*post, "special_tokens") : nullptr;
    if (!specials) {
        const json::Value *procs = member(*post, "processors");
        for (size_t k = 0; procs && procs->is_array() && k < procs->array.size(); k++) {
            if (type_of(procs->array[k]) == "TemplateProcessing") specials = member(procs->array[k], "special_tokens");
        }
    }
    if (!list || !list->is_array()) throw Error(path + ": post_processor TemplateProcessing has no \"single\" list");
    bool seen = false;
    for (const json::Value &item : list->array) {
        if (item.is_object() && member(item, "Sequence")) {
            seen = true;
            continue;
        }
        const json::Value *sp = item.is_object() ? member(item, "SpecialToken") : nullptr;
        const json::Value *id = sp && sp->is_object() ? member(*sp, "id") : nullptr;
        const json::Value *entry = id && id->is_string() && specials && specials->is_object() ? member(*specials, id->string.c_str()) : nullptr;
        const json::Value *ids = entry && entry->is_object() ? member(*entry, "ids") : nullptr;
        if (!ids || !ids->is_array()) throw Error(path + ": post_processor: a special token of \"single\" has no ids");
        for (const json::Value &v : ids->array) (seen ? after : before).push_back(get_id(v, path + ": post_processor"));
    }
}

// tokenizer.json's added_tokens.
std::vector<AddedToken> read_added_tokens(const json::Value &root, const std::string &path) {
    std::vector<AddedToken> out;
    if (const json::Value *added = member(root, "added_tokens")) {
        if (!added->is_array()) throw Error(path + ": added_tokens is " + json::kind_name(added->kind) + ", expected an array");
        for (size_t i = 0; i < added->array.size(); i++) {
            const json::Value &e = added->array[i];
            const std::string where = path + ": added_tokens[" + std::to_string(i) + "]";
            if (!e.is_object()) throw Error(where + " is " + json::kind_name(e.kind) + ", expected an object");
            const json::Value *content = member(e, "content");
            if (!content || !content->is_string()) throw Error(where + ": no \"content\" string");
            const json::Value *id = member(e, "id");
            if (!id) throw Error(where + ": no \"id\"");
            AddedToken t;
            t.content = content->string;
            t.id = get_id(*id, where + ": the id");
            t.special = get_bool(e, "special", false, where);
            t.lstrip = get_bool(e, "lstrip", false, where);
            t.rstrip = get_bool(e, "rstrip", false, where);
            t.single_word = get_bool(e, "single_word", false, where);
            t.normalized = get_bool(e, "normalized", !t.special, where);
            out.push_back(t);
        }
    }
    return out;
}

}  // namespace

ByteLevelBpe ByteLevelBpe::load_tokenizer_json(const std::string &path) {
    return from_tokenizer_json(parse_file(path), path);
}

const char *ByteLevelBpe::split_pattern(int max_digits) {
    if (max_digits == 3) return kLlama3Pattern;
    if (max_digits == 1) return kQwen2Pattern;
    throw Error("internal: no Split pattern of " + std::to_string(max_digits) + " digits");
}

ByteLevelBpe ByteLevelBpe::from_tokenizer_json(const json::Value &root, const std::string &path) {
    if (!root.is_object()) throw Error(path + ": expected an object, found " + json::kind_name(root.kind));
    ByteLevelBpe b;
    b.source_ = path;

    const json::Value *model = member(root, "model");
    if (!model || !model->is_object()) throw Error(path + ": no \"model\" object");
    const json::Value *type = member(*model, "type");
    if (!type || !type->is_string()) throw Error(path + ": model.type is missing (expected \"BPE\")");
    if (type->string != "BPE") {
        throw Error(path + ": model.type is " + json::quote(type->string) + "; this reader takes \"BPE\" only");
    }
    const std::string m = path + ": model.";
    check_model_options(*model, m);
    b.ignore_merges_ = get_bool(*model, "ignore_merges", false, m + "ignore_merges");

    const json::Value *vocab = member(*model, "vocab");
    if (!vocab) throw Error(m + "vocab is missing");
    read_vocab(*vocab, m + "vocab", b.tokens_, b.kind_, b.vocab_);

    if (const json::Value *unk = member(*model, "unk_token")) {
        if (!unk->is_string()) throw Error(m + "unk_token is " + json::kind_name(unk->kind) + ", expected a string");
        auto it = b.vocab_.find(unk->string);
        if (it == b.vocab_.end()) throw Error(m + "unk_token " + json::quote(unk->string) + " is not in model.vocab");
        b.unk_id_ = it->second;
    }

    if (const json::Value *merges = member(*model, "merges")) {
        const auto pairs = merge_pairs(*merges, m);
        for (size_t i = 0; i < pairs.size(); i++) {
            const std::string &left = pairs[i].first, &right = pairs[i].second;
            auto id = [&](const std::string &tok, const char *role) {
                auto it = b.vocab_.find(tok);
                if (it == b.vocab_.end()) {
                    throw Error(m + "merges[" + std::to_string(i) + "]: the merge " + json::quote(left + " " + right) +
                                " " + role + " " + json::quote(tok) + ", which model.vocab does not have");
                }
                return it->second;
            };
            const int32_t l = id(left, "names"), r = id(right, "names");
            b.merges_[bpe::pair_key(l, r)] = Merge{(int32_t)i, id(left + right, "makes")};
        }
    }

    std::string other_pattern;
    const json::Value &byte_level = byte_level_pre_tokenizer(root, path, &b.split_digits_, &b.nfc_, &other_pattern);
    if (!other_pattern.empty()) {
        try {
            b.split_regex_ = std::make_shared<const unicode::Regex>(other_pattern);
        } catch (const Error &e) {
            throw Error(path + ": pre_tokenizer Split: " + e.what());
        }
    }
    b.prefix_ = get_bool(byte_level, "add_prefix_space", true, path + ": pre_tokenizer") ? PrefixSpace::EachSegment
                                                                                        : PrefixSpace::None;
    template_ids(root, path, b.template_prefix_, b.template_suffix_);
    b.added_ = read_added_tokens(root, path);
    b.finish(path);
    return b;
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
        (t.normalized ? trie_normalized_ : trie_raw_).insert(t.content, (int32_t)i);
    }
    if (tokens_.empty()) throw Error(what + ": the vocabulary is empty");
}

}  // namespace halformer::text
