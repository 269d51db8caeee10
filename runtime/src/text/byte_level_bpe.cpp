// Byte-level BPE (byte_level_bpe.h), written from transformers'
// tokenization_gpt2.py and the tokenizers library's ByteLevel pre-tokenizer,
// BPE model and added vocabulary.
#include "byte_level_bpe.h"

#include <cctype>

#include "unicode.h"

#include "halformer/error.h"
#include "halformer/files.h"
#include "halformer/json.h"
#include "halformer/tokenizer.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <queue>

namespace halformer::text {

namespace {

// Ids past this are a broken file, not a vocabulary (GPT-2 has 50257, the
// largest in use about 256K): refused before anything that large is allocated.
constexpr int64_t kMaxId = 1 << 24;

// GPT-2's bytes_to_unicode(): the printable bytes of Latin-1 ('!'..'~',
// '¡'..'¬', '®'..'ÿ') stand for themselves; the other 68 bytes, in order,
// become U+0100, U+0101, ... (' ' is byte 32, the 33rd of them: U+0120 'Ġ').
struct ByteMap {
    char32_t to_char[256];
    int16_t to_byte[0x144];  // character → byte, -1 where none (the map's range ends at U+0143)
    ByteMap() {
        std::fill(std::begin(to_byte), std::end(to_byte), int16_t(-1));
        int n = 0;
        for (int b = 0; b < 256; b++) {
            const bool printable = (b >= '!' && b <= '~') || (b >= 0xA1 && b <= 0xAC) || (b >= 0xAE && b <= 0xFF);
            to_char[b] = printable ? char32_t(b) : char32_t(256 + n++);
            to_byte[to_char[b]] = int16_t(b);
        }
    }
};
const ByteMap &byte_map() {
    static const ByteMap m;
    return m;
}

// GPT-2's pattern sorts each character into one of four classes.
enum class Kind : uint8_t { Letter, Number, Space, Other };
Kind kind_of(char32_t c) {
    if (c < 0x80) {
        if ((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z')) return Kind::Letter;
        if (c >= '0' && c <= '9') return Kind::Number;
        if (c == ' ' || (c >= '\t' && c <= '\r')) return Kind::Space;
        return Kind::Other;
    }
    if (unicode::is_white_space(c)) return Kind::Space;
    const unicode::Category cat = unicode::category(c);
    if (unicode::is_letter(cat)) return Kind::Letter;
    if (unicode::is_number(cat)) return Kind::Number;
    return Kind::Other;
}

// The code point at text[pos] and its length in bytes (valid UTF-8).
char32_t cp_at(const std::string &text, size_t pos, size_t *len) {
    const auto c = (unsigned char)text[pos];
    *len = c < 0x80 ? 1 : c < 0xE0 ? 2 : c < 0xF0 ? 3 : 4;
    return utf8_to_u32(text.substr(pos, *len))[0];
}
// The code point that ends just before text[pos] and where it starts.
char32_t cp_before(const std::string &text, size_t pos, size_t *start) {
    size_t s = pos - 1;
    while (s > 0 && ((unsigned char)text[s] & 0xC0) == 0x80) s--;
    *start = s;
    size_t len;
    return cp_at(text, s, &len);
}

void check_utf8(const std::string &text) {
    const int64_t bad = utf8_error_offset(text);
    if (bad >= 0) throw Error("text is not UTF-8 (byte " + std::to_string(bad) + ")");
}

// A text (checked to be UTF-8) as code points, each one's class and byte
// offset: what the pre-tokenizers walk.
struct CodePoints {
    const std::string &utf8;
    std::u32string s;
    std::vector<size_t> at;  // code point → byte offset (n + 1 entries)
    std::vector<Kind> kind;
    explicit CodePoints(const std::string &text) : utf8(text) {
        check_utf8(text);
        s = utf8_to_u32(text);
        const size_t n = s.size();
        at.assign(n + 1, 0);
        kind.resize(n);
        for (size_t i = 0, b = 0; i < n; i++) {
            at[i] = b;
            const char32_t c = s[i];
            b += c < 0x80 ? 1 : c < 0x800 ? 2 : c < 0x10000 ? 3 : 4;
            at[i + 1] = b;
            kind[i] = kind_of(c);
        }
    }
    // Code points [a, e) as UTF-8.
    std::string piece(size_t a, size_t e) const { return utf8.substr(at[a], at[e] - at[a]); }
};

json::Value parse_file(const std::string &path) {
    if (!files::exists(path)) throw Error(path + ": no such file");
    return json::parse(files::read_text(path), path);
}

const json::Value *member(const json::Value &obj, const char *key) {
    const json::Value *v = obj.find(key);
    return v && v->kind != json::Value::Kind::Null ? v : nullptr;
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

uint64_t pair_key(int32_t a, int32_t b) { return (uint64_t(uint32_t(a)) << 32) | uint32_t(b); }

}  // namespace

// ---- the added tokens' trie ----

void ByteLevelBpe::Trie::insert(const std::string &s, int32_t token) {
    int32_t node = 0;
    for (unsigned char c : s) {
        auto &next = nodes[node].next;
        auto it = std::lower_bound(next.begin(), next.end(), std::make_pair(c, int32_t(-1)));
        if (it != next.end() && it->first == c) {
            node = it->second;
        } else {
            const auto child = (int32_t)nodes.size();
            next.insert(it, {c, child});
            nodes.emplace_back();  // invalidates `next`: not used after this
            node = child;
        }
    }
    nodes[node].token = token;
}

int32_t ByteLevelBpe::Trie::longest(const std::string &text, size_t pos, size_t *len) const {
    int32_t node = 0, best = -1;
    for (size_t i = pos; i < text.size(); i++) {
        const auto &next = nodes[node].next;
        const auto c = (unsigned char)text[i];
        auto it = std::lower_bound(next.begin(), next.end(), std::make_pair(c, int32_t(-1)));
        if (it == next.end() || it->first != c) break;
        node = it->second;
        if (nodes[node].token >= 0) {
            best = nodes[node].token;
            *len = i + 1 - pos;
        }
    }
    return best;
}

// ---- loading ----

namespace {

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
        b.merges_[pair_key(l, r)] = Merge{(int32_t)rank++, id(left + right, "makes")};
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
// Llama 3's or Qwen2's pattern (split_digits 3 or 1, ByteLevel without its
// regex); the normalizer: none, or NFC; the decoder ByteLevel.
const json::Value &byte_level_pre_tokenizer(const json::Value &root, const std::string &path, int *split_digits,
                                            bool *nfc) {
    *split_digits = 0;
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
                throw Error(path + ": pre_tokenizer Split pattern " + json::quote(regex->string) +
                            " is not supported (Llama 3's and Qwen2's are)");
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
    if (*split_digits == 0 && !get_bool(*byte_level, "use_regex", true, path + ": pre_tokenizer")) {
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
    const json::Value root = parse_file(path);
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
            b.merges_[pair_key(l, r)] = Merge{(int32_t)i, id(left + right, "makes")};
        }
    }

    const json::Value &byte_level = byte_level_pre_tokenizer(root, path, &b.split_digits_, &b.nfc_);
    b.prefix_ = get_bool(byte_level, "add_prefix_space", true, path + ": pre_tokenizer") ? PrefixSpace::EachSegment
                                                                                        : PrefixSpace::None;
    template_ids(root, path, b.template_prefix_, b.template_suffix_);
    b.added_ = read_added_tokens(root, path);
    b.finish(path);
    return b;
}

void ByteLevelBpe::finish(const std::string &what) {
    const ByteMap &bm = byte_map();
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

// ---- encoding ----

std::vector<std::string> ByteLevelBpe::pre_tokenize(const std::string &utf8) {
    // The pattern's alternatives, tried in order at each position (findall):
    //   's|'t|'re|'ve|'m|'ll|'d     contractions, lower case only
    //   ' ?\p{L}+', ' ?\p{N}+', ' ?[^\s\p{L}\p{N}]+'
    //                               a run of one class, with at most one
    //                               space (U+0020 only) in front
    //   \s+(?!\S)                   whitespace up to the end, or all but the
    //                               last one before a non-space (backtracking)
    //   \s+                         a single whitespace before a non-space
    const CodePoints cp(utf8);
    std::vector<std::string> out;
    const std::u32string &s = cp.s;
    const std::vector<Kind> &kind = cp.kind;
    const size_t n = s.size();
    auto emit = [&](size_t a, size_t e) { out.push_back(cp.piece(a, e)); };
    for (size_t i = 0; i < n;) {
        const char32_t c = s[i];
        if (c == '\'' && i + 1 < n) {
            const char32_t d = s[i + 1];
            if (d == 's' || d == 't' || d == 'm' || d == 'd') {
                emit(i, i + 2);
                i += 2;
                continue;
            }
            if (i + 2 < n && ((d == 'r' && s[i + 2] == 'e') || (d == 'v' && s[i + 2] == 'e') ||
                              (d == 'l' && s[i + 2] == 'l'))) {
                emit(i, i + 3);
                i += 3;
                continue;
            }
        }
        size_t j = i;
        if (c == ' ' && i + 1 < n && kind[i + 1] != Kind::Space) j = i + 1;  // the optional space
        if (kind[j] != Kind::Space) {
            const Kind k = kind[j];
            size_t e = j + 1;
            while (e < n && kind[e] == k) e++;
            emit(i, e);
            i = e;
            continue;
        }
        size_t e = i + 1;
        while (e < n && kind[e] == Kind::Space) e++;
        if (e < n && e - i >= 2) e--;  // leave the last one to the word after it
        emit(i, e);
        i = e;
    }
    return out;
}

std::vector<std::string> ByteLevelBpe::pre_tokenize_split(const std::string &utf8, int max_digits) {
    // The pattern's alternatives, tried in order at each position:
    //   (?i:'s|'t|'re|'ve|'m|'ll|'d)     contractions, any case
    //   [^\r\n\p{L}\p{N}]?\p{L}+        a run of letters, with one character
    //                                    before it that is neither a newline,
    //                                    a letter nor a number (a space, a tab,
    //                                    punctuation)
    //   \p{N}{1,3}                       up to 3 digits (Qwen2: one)
    //    ?[^\s\p{L}\p{N}]+[\r\n]*        punctuation and symbols, an optional
    //                                    U+0020 before, newlines after
    //   \s*[\r\n]+                       whitespace up to its last newline
    //   \s+(?!\S)|\s+                    as GPT-2's
    const CodePoints cp(utf8);
    std::vector<std::string> out;
    const std::u32string &s = cp.s;
    const std::vector<Kind> &kind = cp.kind;
    const size_t n = s.size();
    auto emit = [&](size_t a, size_t e) { out.push_back(cp.piece(a, e)); };
    auto newline = [&](size_t k) { return s[k] == '\r' || s[k] == '\n'; };
    // (Case-insensitive: ASCII either case, and U+017F, which folds to s.)
    auto lower = [&](size_t k) -> char32_t { return s[k] == 0x17F ? 's' : s[k] < 0x80 ? (char32_t)std::tolower((int)s[k]) : s[k]; };
    for (size_t i = 0; i < n;) {
        if (s[i] == '\'' && i + 1 < n) {
            const char32_t d = lower(i + 1);
            if (d == 's' || d == 't' || d == 'm' || d == 'd') {
                emit(i, i + 2);
                i += 2;
                continue;
            }
            if (i + 2 < n) {
                const char32_t e = lower(i + 2);
                if ((d == 'r' && e == 'e') || (d == 'v' && e == 'e') || (d == 'l' && e == 'l')) {
                    emit(i, i + 3);
                    i += 3;
                    continue;
                }
            }
        }
        size_t j = i;
        if (kind[i] != Kind::Letter && kind[i] != Kind::Number && !newline(i) && i + 1 < n && kind[i + 1] == Kind::Letter) {
            j = i + 1;
        }
        if (kind[j] == Kind::Letter) {
            size_t e = j;
            while (e < n && kind[e] == Kind::Letter) e++;
            emit(i, e);
            i = e;
            continue;
        }
        if (kind[i] == Kind::Number) {
            size_t e = i;
            while (e < n && e - i < (size_t)max_digits && kind[e] == Kind::Number) e++;
            emit(i, e);
            i = e;
            continue;
        }
        j = i;
        if (s[i] == ' ' && i + 1 < n && kind[i + 1] == Kind::Other) j = i + 1;
        if (kind[j] == Kind::Other) {
            size_t e = j;
            while (e < n && kind[e] == Kind::Other) e++;
            while (e < n && newline(e)) e++;
            emit(i, e);
            i = e;
            continue;
        }
        // Whitespace from i (a lone U+0020 before a letter, a number or a
        // symbol went with it above).
        size_t e = i;
        while (e < n && kind[e] == Kind::Space) e++;
        size_t last = n;
        for (size_t k = i; k < e; k++) {
            if (newline(k)) last = k;
        }
        if (last < n) {
            emit(i, last + 1);
            i = last + 1;
            continue;
        }
        if (e < n && e - i >= 2) e--;
        emit(i, e);
        i = e;
    }
    return out;
}

void ByteLevelBpe::encode_word(const std::string &bytes, std::vector<int32_t> &ids) const {
    const size_t n = bytes.size();
    if (ignore_merges_) {
        std::string mapped;
        for (unsigned char c : bytes) append_utf8(mapped, byte_map().to_char[c]);
        auto it = vocab_.find(mapped);
        if (it != vocab_.end()) {
            ids.push_back(it->second);
            return;
        }
    }
    // The word as a linked list of symbols, one a byte to start with.
    std::vector<int32_t> sym(n), prev(n), next(n);
    for (size_t i = 0; i < n; i++) {
        const auto c = (unsigned char)bytes[i];
        sym[i] = byte_id_[c];
        if (sym[i] < 0) {
            if (unk_id_ < 0) {
                char hex[8];
                std::snprintf(hex, sizeof hex, "0x%02X", c);
                throw Error(source_ + ": the text needs byte " + hex + ", which the vocabulary lacks (and there is no unk_token)");
            }
            sym[i] = unk_id_;
        }
        prev[i] = (int32_t)i - 1;
        next[i] = i + 1 < n ? (int32_t)i + 1 : -1;
    }
    // Merges by rank, as GPT2Tokenizer.bpe(): the pair of lowest rank is
    // merged at every place it occurs, left to right, before any other pair
    // is looked at. Candidates wait in a heap ordered by (rank, position);
    // pairs that a merge creates wait until every merge of the current rank
    // is done, so that one of lower rank cannot jump ahead of them (the
    // tokenizers library lets it; with merges learned in order, as every
    // trained file's are, the results agree). O(n log n): a 100 KB word is fine.
    struct Cand {
        int32_t rank, pos, left, right, id;
        bool operator>(const Cand &o) const { return rank != o.rank ? rank > o.rank : pos > o.pos; }
    };
    std::priority_queue<Cand, std::vector<Cand>, std::greater<Cand>> heap;
    std::vector<Cand> pending;
    auto candidate = [&](int32_t pos, std::vector<Cand> *into) {
        const int32_t nx = next[pos];
        if (nx < 0) return;
        auto it = merges_.find(pair_key(sym[pos], sym[nx]));
        if (it == merges_.end()) return;
        const Cand c{it->second.rank, pos, sym[pos], sym[nx], it->second.id};
        if (into) into->push_back(c);
        else heap.push(c);
    };
    for (size_t i = 0; i + 1 < n; i++) candidate((int32_t)i, nullptr);
    int32_t round = -1;
    std::vector<char> alive(n, 1);
    while (true) {
        if (heap.empty() || heap.top().rank != round) {
            for (const Cand &c : pending) heap.push(c);
            pending.clear();
            if (heap.empty()) break;
            round = heap.top().rank;
        }
        const Cand c = heap.top();
        heap.pop();
        // Stale: the left symbol was absorbed or changed, or its neighbour did.
        if (!alive[c.pos] || sym[c.pos] != c.left) continue;
        const int32_t nx = next[c.pos];
        if (nx < 0 || sym[nx] != c.right) continue;
        sym[c.pos] = c.id;
        alive[nx] = 0;
        next[c.pos] = next[nx];
        if (next[nx] >= 0) prev[next[nx]] = c.pos;
        if (prev[c.pos] >= 0) candidate(prev[c.pos], &pending);
        candidate(c.pos, &pending);
    }
    for (int32_t i = 0; i >= 0; i = next[i]) ids.push_back(sym[i]);
}

void ByteLevelBpe::encode_segment(const std::string &segment, std::vector<int32_t> &ids) const {
    const auto words = split_digits_ ? pre_tokenize_split(segment, split_digits_) : pre_tokenize(segment);
    for (const std::string &word : words) encode_word(word, ids);
}

void ByteLevelBpe::split_added(const std::string &text, const Trie &trie,
                               std::vector<std::pair<std::string, int32_t>> &out) const {
    // As the tokenizers library's AddedVocabulary::find_matches: leftmost
    // longest matches; lstrip / rstrip widen a match over whitespace (never
    // back into the previous match); single_word drops a match that a word
    // character touches.
    const size_t n = text.size();
    size_t done = 0, pos = 0;
    while (pos < n) {
        size_t len = 0;
        const int32_t t = trie.nodes.size() > 1 ? trie.longest(text, pos, &len) : -1;
        if (t < 0) {
            pos++;
            continue;
        }
        const AddedToken &tok = added_[t];
        size_t start = pos, stop = pos + len;
        if (tok.single_word) {
            size_t q, l;
            const bool left_ok = start == 0 || !unicode::is_word_char(cp_before(text, start, &q));
            const bool right_ok = stop == n || !unicode::is_word_char(cp_at(text, stop, &l));
            if (!left_ok || !right_ok) {
                pos = stop;
                continue;
            }
        }
        if (tok.lstrip) {
            while (start > done) {
                size_t q;
                if (!unicode::is_white_space(cp_before(text, start, &q))) break;
                start = q;
            }
        }
        if (tok.rstrip) {
            while (stop < n) {
                size_t l;
                if (!unicode::is_white_space(cp_at(text, stop, &l))) break;
                stop += l;
            }
        }
        if (done < start) out.emplace_back(text.substr(done, start - done), -1);
        out.emplace_back(std::string(), tok.id);
        done = pos = stop;
    }
    if (done < n) out.emplace_back(text.substr(done), -1);
}

std::vector<int32_t> ByteLevelBpe::run(const std::string &utf8) const {
    check_utf8(utf8);
    std::vector<int32_t> ids;
    if (utf8.empty()) return ids;
    const std::string text = prefix_ == PrefixSpace::Text ? " " + utf8 : utf8;
    std::vector<std::pair<std::string, int32_t>> raw, parts;
    split_added(text, trie_raw_, raw);
    for (auto &r : raw) {
        if (r.second >= 0) parts.push_back(std::move(r));
        else split_added(nfc_ ? u32_to_utf8(unicode::nfc(utf8_to_u32(r.first))) : r.first, trie_normalized_, parts);
    }
    for (const auto &p : parts) {
        if (p.second >= 0) {
            ids.push_back(p.second);
        } else if (prefix_ == PrefixSpace::EachSegment && p.first[0] != ' ') {
            encode_segment(" " + p.first, ids);
        } else {
            encode_segment(p.first, ids);
        }
    }
    return ids;
}

std::vector<int32_t> ByteLevelBpe::encode(const std::string &utf8) const { return run(utf8); }

std::vector<std::string> ByteLevelBpe::pieces(const std::string &utf8) const {
    std::vector<std::string> out;
    for (int32_t id : run(utf8)) out.push_back(tokens_[id]);
    return out;
}

int32_t ByteLevelBpe::id_of(const std::string &token) const {
    auto a = added_ids_.find(token);
    if (a != added_ids_.end()) return a->second;
    auto v = vocab_.find(token);
    return v == vocab_.end() ? -1 : v->second;
}

// ---- decoding ----

std::string ByteLevelBpe::decode(const std::vector<int32_t> &ids) const {
    const ByteMap &bm = byte_map();
    std::string bytes;
    for (int32_t id : ids) {
        if (id < 0 || id >= vocab_size() || kind_[id] == 0) {
            throw Error("token id " + std::to_string(id) + (id < 0 || id >= vocab_size() ? " is outside" : " has no token in") +
                        " the vocabulary of " + std::to_string(vocab_size()) + " (" + source_ + ")");
        }
        const std::string &tok = tokens_[id];
        if (kind_[id] == 2) {
            bytes += tok;
            continue;
        }
        // A token all of GPT-2's byte characters becomes those bytes; one with
        // any other character stays as it is (the tokenizers library's
        // ByteLevel decoder).
        const std::u32string cps = utf8_to_u32(tok);
        std::string b;
        bool all = true;
        for (char32_t c : cps) {
            if (c >= 0x144 || bm.to_byte[c] < 0) {
                all = false;
                break;
            }
            b += char(bm.to_byte[c]);
        }
        bytes += all ? b : tok;
    }
    return utf8_replace_invalid(bytes);
}

}  // namespace halformer::text
