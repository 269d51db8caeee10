// tokenizer.json's normalizers, pre-tokenizers, decoders and post-processors
// (tokenizer_json_internal.h), written from the tokenizers library's
// normalizers/, pre_tokenizers/, decoders/ and processors/: each read from
// its JSON object into a function, every option checked.
#include "tokenizer_json_internal.h"

#include "byte_level_bpe.h"
#include "byte_level_bpe_internal.h"
#include "unicode.h"

#include "halformer/error.h"
#include "halformer/tokenizer.h"

#include <algorithm>
#include <cmath>
#include <cstdio>

namespace halformer::text::tj {

// ---- helpers ----

bool get_bool(const json::Value &obj, const char *key, bool fallback, const std::string &what) {
    const json::Value *v = json::member(obj, key);
    if (!v) return fallback;
    if (!v->is_bool()) throw Error(what + "." + key + " is " + json::kind_name(v->kind) + ", expected true or false");
    return v->boolean;
}

std::string get_string(const json::Value &obj, const char *key, const std::string &fallback, const std::string &what) {
    const json::Value *v = json::member(obj, key);
    if (!v) return fallback;
    if (!v->is_string()) throw Error(what + "." + key + " is " + json::kind_name(v->kind) + ", expected a string");
    return v->string;
}

int64_t get_int(const json::Value &obj, const char *key, int64_t fallback, int64_t lo, int64_t hi,
                const std::string &what) {
    const json::Value *v = json::member(obj, key);
    if (!v) return fallback;
    // (The range first: a double past int64_t's cannot be converted.)
    if (!v->is_number() || !(v->number >= (double)lo && v->number <= (double)hi) || v->number != std::floor(v->number)) {
        throw Error(what + "." + key + " is " + (v->is_number() ? std::to_string(v->number) : json::kind_name(v->kind)) +
                    ", expected an integer from " + std::to_string(lo) + " to " + std::to_string(hi));
    }
    return (int64_t)v->number;
}

std::string type_of(const json::Value &v, const std::string &what) {
    if (!v.is_object()) throw Error(what + " is " + json::kind_name(v.kind) + ", expected an object");
    const json::Value *t = json::member(v, "type");
    if (!t || !t->is_string()) throw Error(what + " has no \"type\"");
    return t->string;
}

void unknown_type(const std::string &what, const std::string &type, const char *known) {
    throw Error(what + ": type " + json::quote(type) + " is not supported (supported: " + known + ")");
}

void only_keys(const json::Value &obj, std::initializer_list<const char *> keys, const std::string &what) {
    for (const auto &kv : obj.object) {
        if (kv.first == "type") continue;
        bool known = false;
        for (const char *k : keys) known = known || kv.first == k;
        if (!known) throw Error(what + ": option " + json::quote(kv.first) + " is not supported");
    }
}

Pattern read_pattern(const json::Value &obj, const std::string &what) {
    const json::Value *p = json::member(obj, "pattern");
    if (!p || !p->is_object() || p->object.size() != 1) {
        throw Error(what + ".pattern is missing or is not {\"String\": ...} or {\"Regex\": ...}");
    }
    const auto &[kind, value] = p->object[0];
    if (!value.is_string()) throw Error(what + ".pattern." + kind + " is " + json::kind_name(value.kind) + ", expected a string");
    Pattern out;
    if (kind == "String") {
        out.literal = value.string;
    } else if (kind == "Regex") {
        try {
            out.regex = std::make_shared<const unicode::Regex>(value.string);
        } catch (const Error &e) {
            throw Error(what + ".pattern: " + e.what());
        }
    } else {
        throw Error(what + ".pattern: " + json::quote(kind) + " is neither \"String\" nor \"Regex\"");
    }
    return out;
}

std::vector<std::pair<size_t, size_t>> Pattern::find_all(const std::string &text) const {
    if (regex) return regex->find_all(text);
    std::vector<std::pair<size_t, size_t>> out;
    if (literal.empty()) return out;
    for (size_t at = text.find(literal); at != std::string::npos; at = text.find(literal, at + literal.size())) {
        out.emplace_back(at, at + literal.size());
    }
    return out;
}

std::string byte_token(unsigned char b) {
    char s[8];
    std::snprintf(s, sizeof s, "<0x%02X>", b);
    return s;
}

namespace {

// ---- normalizers ----

std::string map_chars(const std::string &s, const std::function<void(char32_t, std::u32string &)> &f) {
    std::u32string out;
    for (char32_t c : utf8_to_u32(s)) f(c, out);
    return u32_to_utf8(out);
}

bool is_mark_nonspacing(char32_t c) { return unicode::category(c) == unicode::Category::Mn; }

// BertNormalizer's character classes (normalizers/bert.rs).
bool bert_is_whitespace(char32_t c) { return c == '\t' || c == '\n' || c == '\r' || unicode::is_white_space(c); }
bool bert_is_control(char32_t c) {
    return !(c == '\t' || c == '\n' || c == '\r') && unicode::is_other(unicode::category(c));
}
bool is_chinese_char(char32_t c) {
    return (c >= 0x4E00 && c <= 0x9FFF) || (c >= 0x3400 && c <= 0x4DBF) || (c >= 0x20000 && c <= 0x2A6DF) ||
           (c >= 0x2A700 && c <= 0x2B73F) || (c >= 0x2B740 && c <= 0x2B81F) || (c >= 0x2B920 && c <= 0x2CEAF) ||
           (c >= 0xF900 && c <= 0xFAFF) || (c >= 0x2F800 && c <= 0x2FA1F);
}

std::string strip_accents(const std::string &s) {
    std::u32string out;
    for (char32_t c : unicode::nfd(utf8_to_u32(s))) {
        if (!is_mark_nonspacing(c)) out += c;
    }
    return u32_to_utf8(out);
}

std::string lowercase(const std::string &s) {
    // Character by character, as Rust's char::to_lowercase (no final sigma).
    return map_chars(s, [](char32_t c, std::u32string &out) { out += unicode::lower(c); });
}

std::string replace_all(const std::string &s, const Pattern &p, const std::string &content) {
    std::string out;
    size_t last = 0;
    for (auto [a, b] : p.find_all(s)) {
        out.append(s, last, a - last);
        out += content;
        last = b;
    }
    out.append(s, last, std::string::npos);
    return out;
}

// SentencePiece's precompiled_charsmap: a little-endian u32 trie size in
// bytes, a Darts double array of that many bytes, then the replacement
// strings, each ending in \0. A chunk's replacement is the value of the
// shortest key that is a prefix of it (spm_precompiled's transform).
struct Charsmap {
    std::vector<uint32_t> units;
    std::string normalized;

    static bool has_leaf(uint32_t u) { return (u >> 8) & 1; }
    static uint32_t value(uint32_t u) { return u & ((1u << 31) - 1); }
    static uint32_t label(uint32_t u) { return u & ((1u << 31) | 0xFF); }
    static uint32_t offset(uint32_t u) { return (u >> 10) << ((u & (1u << 9)) >> 6); }

    // The replacement of chunk, or nullptr.
    const char *transform(const std::string &chunk) const {
        size_t node = 0;
        if (units.empty()) return nullptr;
        node ^= offset(units[0]);
        for (unsigned char c : chunk) {
            if (c == 0) return nullptr;
            node ^= c;
            if (node >= units.size() || label(units[node]) != c) return nullptr;
            const uint32_t u = units[node];
            node ^= offset(u);
            if (has_leaf(u)) {
                if (node >= units.size()) return nullptr;
                const uint32_t at = value(units[node]);
                return at < normalized.size() ? normalized.c_str() + at : nullptr;
            }
        }
        return nullptr;
    }
};

std::string base64_decode(const std::string &in, const std::string &what) {
    std::string out;
    uint32_t acc = 0;
    int bits = 0;
    for (char ch : in) {
        int v;
        if (ch >= 'A' && ch <= 'Z') v = ch - 'A';
        else if (ch >= 'a' && ch <= 'z') v = ch - 'a' + 26;
        else if (ch >= '0' && ch <= '9') v = ch - '0' + 52;
        else if (ch == '+') v = 62;
        else if (ch == '/') v = 63;
        else if (ch == '=') break;
        else throw Error(what + " is not base64 (character " + json::quote(std::string(1, ch)) + ")");
        acc = (acc << 6) | (uint32_t)v;
        bits += 6;
        if (bits >= 8) {
            bits -= 8;
            out += char((acc >> bits) & 0xFF);
        }
    }
    return out;
}

Normalizer precompiled(const json::Value &v, const std::string &what) {
    only_keys(v, {"precompiled_charsmap"}, what);
    const json::Value *m = json::member(v, "precompiled_charsmap");
    // A null charsmap normalizes nothing (the tokenizers library's default).
    if (!m) return {};
    if (!m->is_string()) throw Error(what + ".precompiled_charsmap is not a string");
    const std::string blob = base64_decode(m->string, what + ".precompiled_charsmap");
    if (blob.size() < 4) throw Error(what + ".precompiled_charsmap is too short");
    const uint32_t trie_bytes = uint32_t((unsigned char)blob[0]) | uint32_t((unsigned char)blob[1]) << 8 |
                                uint32_t((unsigned char)blob[2]) << 16 | uint32_t((unsigned char)blob[3]) << 24;
    if (trie_bytes % 4 != 0 || trie_bytes > blob.size() - 4) {
        throw Error(what + ".precompiled_charsmap: its trie size " + std::to_string(trie_bytes) +
                    " does not fit the " + std::to_string(blob.size()) + " bytes");
    }
    auto map = std::make_shared<Charsmap>();
    map->units.resize(trie_bytes / 4);
    for (size_t i = 0; i < map->units.size(); i++) {
        const auto *p = reinterpret_cast<const unsigned char *>(blob.data() + 4 + 4 * i);
        map->units[i] = uint32_t(p[0]) | uint32_t(p[1]) << 8 | uint32_t(p[2]) << 16 | uint32_t(p[3]) << 24;
    }
    map->normalized = blob.substr(4 + trie_bytes);
    if (utf8_error_offset(map->normalized) >= 0) throw Error(what + ".precompiled_charsmap: its replacements are not UTF-8");
    return [map](const std::string &s) {
        // Graphemes shorter than 6 bytes are looked up whole, else (or when
        // absent) each character (normalizers/precompiled.rs).
        std::string out;
        const std::vector<size_t> starts = unicode::grapheme_starts(s);
        for (size_t g = 0; g + 1 < starts.size(); g++) {
            const std::string grapheme = s.substr(starts[g], starts[g + 1] - starts[g]);
            if (grapheme.size() < 6) {
                if (const char *r = map->transform(grapheme)) {
                    out += r;
                    continue;
                }
            }
            for (size_t i = 0; i < grapheme.size();) {
                const auto c = (unsigned char)grapheme[i];
                const size_t len = c < 0x80 ? 1 : c < 0xE0 ? 2 : c < 0xF0 ? 3 : 4;
                const std::string ch = grapheme.substr(i, len);
                const char *r = map->transform(ch);
                out += r ? std::string(r) : ch;
                i += len;
            }
        }
        return out;
    };
}

Normalizer bert_normalizer(const json::Value &v, const std::string &what) {
    only_keys(v, {"clean_text", "handle_chinese_chars", "strip_accents", "lowercase"}, what);
    const bool clean = get_bool(v, "clean_text", true, what), chinese = get_bool(v, "handle_chinese_chars", true, what),
               lower = get_bool(v, "lowercase", true, what), accents = get_bool(v, "strip_accents", lower, what);
    return [=](const std::string &s) {
        std::string t = map_chars(s, [&](char32_t c, std::u32string &out) {
            if (clean && (c == 0 || c == 0xFFFD || bert_is_control(c))) return;
            if (clean && bert_is_whitespace(c)) c = ' ';
            if (chinese && is_chinese_char(c)) {
                out += U' ';
                out += c;
                out += U' ';
            } else {
                out += c;
            }
        });
        if (accents) t = strip_accents(t);
        return lower ? lowercase(t) : t;
    };
}

Normalizer unicode_form(std::u32string (*form)(const std::u32string &)) {
    return [form](const std::string &s) { return u32_to_utf8(form(utf8_to_u32(s))); };
}

}  // namespace

Normalizer read_normalizer(const json::Value &v, const std::string &what) {
    if (v.kind == json::Value::Kind::Null) return {};
    const std::string type = type_of(v, what);
    const std::string at = what + " (" + type + ")";
    if (type == "Sequence") {
        only_keys(v, {"normalizers"}, at);
        const json::Value *list = json::member(v, "normalizers");
        if (!list || !list->is_array()) throw Error(at + ".normalizers is not an array");
        std::vector<Normalizer> steps;
        for (size_t i = 0; i < list->array.size(); i++) {
            if (Normalizer n = read_normalizer(list->array[i], what + ".normalizers[" + std::to_string(i) + "]")) {
                steps.push_back(std::move(n));
            }
        }
        if (steps.empty()) return {};
        return [steps](const std::string &s) {
            std::string t = s;
            for (const Normalizer &n : steps) t = n(t);
            return t;
        };
    }
    if (type == "Prepend") {
        only_keys(v, {"prepend"}, at);
        const std::string p = get_string(v, "prepend", "", at);
        return [p](const std::string &s) { return s.empty() ? s : p + s; };
    }
    if (type == "Replace") {
        only_keys(v, {"pattern", "content"}, at);
        const Pattern p = read_pattern(v, at);
        const std::string content = get_string(v, "content", "", at);
        return [p, content](const std::string &s) { return replace_all(s, p, content); };
    }
    if (type == "NFC") return unicode_form(unicode::nfc);
    if (type == "NFD") return unicode_form(unicode::nfd);
    if (type == "NFKC") return unicode_form(unicode::nfkc);
    if (type == "NFKD") return unicode_form(unicode::nfkd);
    if (type == "Lowercase") return lowercase;
    if (type == "StripAccents") return [](const std::string &s) {
        return map_chars(s, [](char32_t c, std::u32string &out) {
            if (!is_mark_nonspacing(c)) out += c;
        });
    };
    if (type == "Strip") {
        only_keys(v, {"strip_left", "strip_right"}, at);
        const bool left = get_bool(v, "strip_left", true, at), right = get_bool(v, "strip_right", true, at);
        return [left, right](const std::string &s) {
            std::u32string u = utf8_to_u32(s);
            size_t a = 0, b = u.size();
            while (left && a < b && unicode::is_white_space(u[a])) a++;
            while (right && b > a && unicode::is_white_space(u[b - 1])) b--;
            return u32_to_utf8(u.substr(a, b - a));
        };
    }
    if (type == "BertNormalizer") return bert_normalizer(v, at);
    if (type == "Precompiled") return precompiled(v, at);
    unknown_type(what, type, "Sequence, Prepend, Replace, NFC, NFD, NFKC, NFKD, Lowercase, StripAccents, Strip, "
                             "BertNormalizer, Precompiled");
}

// ---- pre-tokenizers ----

namespace {

enum class Behavior { Removed, Isolated, MergedWithPrevious, MergedWithNext, Contiguous };

Behavior read_behavior(const json::Value &v, const std::string &what, Behavior fallback) {
    const json::Value *b = json::member(v, "behavior");
    if (!b) return fallback;
    static const std::pair<const char *, Behavior> names[] = {
        {"Removed", Behavior::Removed}, {"Isolated", Behavior::Isolated},
        {"MergedWithPrevious", Behavior::MergedWithPrevious}, {"MergedWithNext", Behavior::MergedWithNext},
        {"Contiguous", Behavior::Contiguous}};
    if (b->is_string()) {
        for (auto &[name, value] : names) {
            if (b->string == name) return value;
        }
    }
    throw Error(what + ".behavior is " + (b->is_string() ? json::quote(b->string) : json::kind_name(b->kind)) +
                ", expected Removed, Isolated, MergedWithPrevious, MergedWithNext or Contiguous");
}

// NormalizedString::split: the piece cut by its matches (each [a, b) with
// whether it is a delimiter), as the behaviour says; empty pieces dropped.
void split_by(const Piece &p, const std::vector<std::pair<std::pair<size_t, size_t>, bool>> &spans, Behavior how,
              std::vector<Piece> &out) {
    std::vector<std::pair<std::pair<size_t, size_t>, bool>> cut;
    if (how == Behavior::Contiguous) {
        for (const auto &s : spans) {
            if (!cut.empty() && cut.back().second && s.second) cut.back().first.second = s.first.second;
            else cut.push_back(s);
        }
        how = Behavior::Isolated;
    } else if (how == Behavior::MergedWithPrevious) {
        for (const auto &s : spans) {
            if (s.second && !cut.empty() && !cut.back().second) {
                cut.back().first.second = s.first.second;
                cut.back().second = true;  // a closed piece: the next non-match starts anew
            } else {
                cut.push_back(s);
            }
        }
        for (auto &c : cut) c.second = false;
    } else if (how == Behavior::MergedWithNext) {
        for (size_t i = spans.size(); i-- > 0;) {
            const auto &s = spans[i];
            if (s.second && !cut.empty() && !cut.back().second) {
                cut.back().first.first = s.first.first;
                cut.back().second = true;
            } else {
                cut.push_back(s);
            }
        }
        std::reverse(cut.begin(), cut.end());
        for (auto &c : cut) c.second = false;
    } else {
        cut = spans;
    }
    for (const auto &[span, is_match] : cut) {
        if (how == Behavior::Removed && is_match) continue;
        if (span.second <= span.first) continue;
        out.push_back({p.text.substr(span.first, span.second - span.first), p.at_start && span.first == 0});
    }
}

// The spans of a piece: the matches and the stretches between them.
std::vector<std::pair<std::pair<size_t, size_t>, bool>> spans_of(const std::string &text,
                                                                 const std::vector<std::pair<size_t, size_t>> &matches,
                                                                 bool invert) {
    std::vector<std::pair<std::pair<size_t, size_t>, bool>> out;
    size_t last = 0;
    for (auto [a, b] : matches) {
        if (a > last) out.push_back({{last, a}, invert});
        out.push_back({{a, b}, !invert});
        last = b;
    }
    if (last < text.size() || text.empty()) out.push_back({{last, text.size()}, invert});
    return out;
}

// The matches of a per-character predicate: each character apart.
std::vector<std::pair<size_t, size_t>> char_matches(const std::string &text, bool (*pred)(char32_t)) {
    std::vector<std::pair<size_t, size_t>> out;
    for (size_t i = 0; i < text.size();) {
        const auto c = (unsigned char)text[i];
        const size_t len = c < 0x80 ? 1 : c < 0xE0 ? 2 : c < 0xF0 ? 3 : 4;
        if (pred(utf8_to_u32(text.substr(i, len))[0])) out.emplace_back(i, i + len);
        i += len;
    }
    return out;
}

PreTokenizer splitter(std::function<std::vector<std::pair<size_t, size_t>>(const std::string &)> matches,
                      Behavior how, bool invert = false) {
    return [matches, how, invert](std::vector<Piece> &pieces) {
        std::vector<Piece> out;
        for (const Piece &p : pieces) split_by(p, spans_of(p.text, matches(p.text), invert), how, out);
        pieces = std::move(out);
    };
}

bool is_punct(char32_t c) {
    return (c < 0x80 && std::ispunct((int)c)) || unicode::is_punctuation(unicode::category(c));
}
bool is_numeric(char32_t c) { return unicode::is_number(unicode::category(c)); }
bool is_white(char32_t c) { return unicode::is_white_space(c); }

PreTokenizer byte_level(const json::Value &v, const std::string &at) {
    only_keys(v, {"add_prefix_space", "trim_offsets", "use_regex"}, at);
    const bool prefix = get_bool(v, "add_prefix_space", true, at), regex = get_bool(v, "use_regex", true, at);
    return [prefix, regex](std::vector<Piece> &pieces) {
        const bpe::ByteMap &bm = bpe::byte_map();
        std::vector<Piece> out;
        for (const Piece &p : pieces) {
            const std::string text = prefix && p.text[0] != ' ' ? " " + p.text : p.text;
            std::vector<std::string> words = regex ? ByteLevelBpe::pre_tokenize(text) : std::vector<std::string>{text};
            bool first = p.at_start;
            for (const std::string &w : words) {
                std::string mapped;
                for (unsigned char c : w) append_utf8(mapped, bm.to_char[c]);
                out.push_back({std::move(mapped), first});
                first = false;
            }
        }
        pieces = std::move(out);
    };
}

PreTokenizer metaspace(const json::Value &v, const std::string &at) {
    only_keys(v, {"replacement", "prepend_scheme", "split", "add_prefix_space", "str_rep"}, at);
    const std::string rep = get_string(v, "replacement", "\u2581", at);
    if (rep.empty() || utf8_to_u32(rep).size() != 1) throw Error(at + ".replacement is not one character");
    std::string scheme = get_string(v, "prepend_scheme", "", at);
    if (scheme.empty()) scheme = get_bool(v, "add_prefix_space", true, at) ? "always" : "never";
    if (scheme != "always" && scheme != "first" && scheme != "never") {
        throw Error(at + ".prepend_scheme is " + json::quote(scheme) + ", expected always, first or never");
    }
    const bool split = get_bool(v, "split", true, at);
    Pattern space;
    space.literal = " ";
    Pattern marker;
    marker.literal = rep;
    return [=](std::vector<Piece> &pieces) {
        std::vector<Piece> out;
        for (Piece p : pieces) {
            p.text = replace_all(p.text, space, rep);
            const bool starts = p.text.compare(0, rep.size(), rep) == 0;
            if (!starts && (scheme == "always" || (scheme == "first" && p.at_start))) p.text = rep + p.text;
            if (!split) {
                out.push_back(std::move(p));
                continue;
            }
            split_by(p, spans_of(p.text, marker.find_all(p.text), false), Behavior::MergedWithNext, out);
        }
        pieces = std::move(out);
    };
}

}  // namespace

PreTokenizer read_pre_tokenizer(const json::Value &v, const std::string &what) {
    if (v.kind == json::Value::Kind::Null) return {};
    const std::string type = type_of(v, what);
    const std::string at = what + " (" + type + ")";
    if (type == "Sequence") {
        only_keys(v, {"pretokenizers"}, at);
        const json::Value *list = json::member(v, "pretokenizers");
        if (!list || !list->is_array()) throw Error(at + ".pretokenizers is not an array");
        std::vector<PreTokenizer> steps;
        for (size_t i = 0; i < list->array.size(); i++) {
            if (PreTokenizer p = read_pre_tokenizer(list->array[i], what + ".pretokenizers[" + std::to_string(i) + "]")) {
                steps.push_back(std::move(p));
            }
        }
        return [steps](std::vector<Piece> &pieces) {
            for (const PreTokenizer &p : steps) p(pieces);
        };
    }
    if (type == "Split") {
        only_keys(v, {"pattern", "behavior", "invert"}, at);
        const Pattern pattern = read_pattern(v, at);
        const Behavior how = read_behavior(v, at, Behavior::Isolated);
        const bool invert = get_bool(v, "invert", false, at);
        // Llama 3's and Qwen2's patterns by the hand-written matchers (equal
        // to ICU's on every text tested, and faster).
        if (pattern.regex && how == Behavior::Isolated && !invert) {
            const std::string &src = v.find("pattern")->object[0].second.string;
            for (int digits : {3, 1}) {
                if (src == ByteLevelBpe::split_pattern(digits)) {
                    return [digits](std::vector<Piece> &pieces) {
                        std::vector<Piece> out;
                        for (const Piece &p : pieces) {
                            bool first = p.at_start;
                            for (std::string &w : ByteLevelBpe::pre_tokenize_split(p.text, digits)) {
                                out.push_back({std::move(w), first});
                                first = false;
                            }
                        }
                        pieces = std::move(out);
                    };
                }
            }
        }
        return splitter([pattern](const std::string &t) { return pattern.find_all(t); }, how, invert);
    }
    if (type == "ByteLevel") return byte_level(v, at);
    if (type == "Metaspace") return metaspace(v, at);
    if (type == "Digits") {
        only_keys(v, {"individual_digits"}, at);
        const bool each = get_bool(v, "individual_digits", false, at);
        return splitter([](const std::string &t) { return char_matches(t, is_numeric); },
                        each ? Behavior::Isolated : Behavior::Contiguous);
    }
    if (type == "Punctuation") {
        only_keys(v, {"behavior"}, at);
        return splitter([](const std::string &t) { return char_matches(t, is_punct); },
                        read_behavior(v, at, Behavior::Isolated));
    }
    if (type == "Whitespace") {
        only_keys(v, {}, at);
        static const auto word = std::make_shared<const unicode::Regex>("\\w+|[^\\w\\s]+");
        return splitter([](const std::string &t) { return word->find_all(t); }, Behavior::Removed, true);
    }
    if (type == "WhitespaceSplit") {
        only_keys(v, {}, at);
        return splitter([](const std::string &t) { return char_matches(t, is_white); }, Behavior::Removed);
    }
    if (type == "BertPreTokenizer") {
        only_keys(v, {}, at);
        PreTokenizer white = splitter([](const std::string &t) { return char_matches(t, is_white); }, Behavior::Removed);
        PreTokenizer punct = splitter([](const std::string &t) { return char_matches(t, is_punct); }, Behavior::Isolated);
        return [white, punct](std::vector<Piece> &pieces) {
            white(pieces);
            punct(pieces);
        };
    }
    if (type == "CharDelimiterSplit") {
        only_keys(v, {"delimiter"}, at);
        Pattern d;
        d.literal = get_string(v, "delimiter", "", at);
        if (utf8_to_u32(d.literal).size() != 1) throw Error(at + ".delimiter is not one character");
        return splitter([d](const std::string &t) { return d.find_all(t); }, Behavior::Removed);
    }
    unknown_type(what, type, "Sequence, Split, ByteLevel, Metaspace, Digits, Punctuation, Whitespace, "
                             "WhitespaceSplit, BertPreTokenizer, CharDelimiterSplit");
}

// ---- decoders ----

namespace {

// transformers' clean_up_tokenization, as the WordPiece decoder's cleanup.
std::string cleanup(std::string s) {
    static const std::pair<const char *, const char *> rules[] = {
        {" .", "."}, {" ?", "?"}, {" !", "!"}, {" ,", ","}, {" ' ", "'"}, {" n't", "n't"},
        {" 'm", "'m"}, {" do not", " don't"}, {" 's", "'s"}, {" 've", "'ve"}, {" 're", "'re"}};
    for (auto [from, to] : rules) {
        Pattern p;
        p.literal = from;
        s = replace_all(s, p, to);
    }
    return s;
}

Decoder byte_fallback() {
    return [](std::vector<std::string> &tokens) {
        std::vector<std::string> out;
        std::string bytes;
        size_t pending = 0;
        auto flush = [&] {
            if (pending == 0) return;
            if (utf8_error_offset(bytes) < 0) {
                out.push_back(bytes);
            } else {
                for (size_t i = 0; i < pending; i++) out.push_back("\xEF\xBF\xBD");
            }
            bytes.clear();
            pending = 0;
        };
        for (std::string &t : tokens) {
            auto hex = [](char c) { return std::isxdigit((unsigned char)c) != 0; };
            if (t.size() == 6 && t.compare(0, 3, "<0x") == 0 && t[5] == '>' && hex(t[3]) && hex(t[4])) {
                bytes += char(std::stoi(t.substr(3, 2), nullptr, 16));
                pending++;
                continue;
            }
            flush();
            out.push_back(std::move(t));
        }
        flush();
        tokens = std::move(out);
    };
}

Decoder byte_level_decoder() {
    return [](std::vector<std::string> &tokens) {
        const bpe::ByteMap &bm = bpe::byte_map();
        std::string bytes;
        for (const std::string &t : tokens) {
            std::string b;
            bool all = true;
            for (char32_t c : utf8_to_u32(t)) {
                if (c >= 0x144 || bm.to_byte[c] < 0) {
                    all = false;
                    break;
                }
                b += char(bm.to_byte[c]);
            }
            bytes += all ? b : t;
        }
        tokens = {utf8_replace_invalid(bytes)};
    };
}

}  // namespace

Decoder read_decoder(const json::Value &v, const std::string &what) {
    if (v.kind == json::Value::Kind::Null) return {};
    const std::string type = type_of(v, what);
    const std::string at = what + " (" + type + ")";
    if (type == "Sequence") {
        only_keys(v, {"decoders"}, at);
        const json::Value *list = json::member(v, "decoders");
        if (!list || !list->is_array()) throw Error(at + ".decoders is not an array");
        std::vector<Decoder> steps;
        for (size_t i = 0; i < list->array.size(); i++) {
            if (Decoder d = read_decoder(list->array[i], what + ".decoders[" + std::to_string(i) + "]")) {
                steps.push_back(std::move(d));
            }
        }
        return [steps](std::vector<std::string> &tokens) {
            for (const Decoder &d : steps) d(tokens);
        };
    }
    if (type == "ByteLevel") {
        only_keys(v, {"add_prefix_space", "trim_offsets", "use_regex"}, at);
        return byte_level_decoder();
    }
    if (type == "ByteFallback") {
        only_keys(v, {}, at);
        return byte_fallback();
    }
    if (type == "Fuse") {
        only_keys(v, {}, at);
        return [](std::vector<std::string> &tokens) {
            std::string all;
            for (const std::string &t : tokens) all += t;
            tokens = {all};
        };
    }
    if (type == "Strip") {
        only_keys(v, {"content", "start", "stop"}, at);
        const std::string content = get_string(v, "content", " ", at);
        if (utf8_to_u32(content).size() != 1) throw Error(at + ".content is not one character");
        const int64_t start = get_int(v, "start", 0, 0, 1 << 20, at), stop = get_int(v, "stop", 0, 0, 1 << 20, at);
        return [content, start, stop](std::vector<std::string> &tokens) {
            for (std::string &t : tokens) {
                size_t a = 0, b = t.size();
                for (int64_t i = 0; i < start && t.compare(a, content.size(), content) == 0; i++) a += content.size();
                for (int64_t i = 0; i < stop && b >= a + content.size() &&
                                    t.compare(b - content.size(), content.size(), content) == 0;
                     i++) {
                    b -= content.size();
                }
                t = t.substr(a, b - a);
            }
        };
    }
    if (type == "Replace") {
        only_keys(v, {"pattern", "content"}, at);
        const Pattern p = read_pattern(v, at);
        const std::string content = get_string(v, "content", "", at);
        return [p, content](std::vector<std::string> &tokens) {
            for (std::string &t : tokens) t = replace_all(t, p, content);
        };
    }
    if (type == "Metaspace") {
        only_keys(v, {"replacement", "prepend_scheme", "split", "add_prefix_space", "str_rep"}, at);
        const std::string rep = get_string(v, "replacement", "\u2581", at);
        std::string scheme = get_string(v, "prepend_scheme", "", at);
        if (scheme.empty()) scheme = get_bool(v, "add_prefix_space", true, at) ? "always" : "never";
        const bool strip_first = scheme != "never";
        Pattern marker;
        marker.literal = rep;
        return [marker, strip_first](std::vector<std::string> &tokens) {
            for (size_t i = 0; i < tokens.size(); i++) {
                tokens[i] = replace_all(tokens[i], marker, i == 0 && strip_first ? "" : " ");
            }
        };
    }
    if (type == "WordPiece") {
        only_keys(v, {"prefix", "cleanup"}, at);
        const std::string prefix = get_string(v, "prefix", "##", at);
        const bool clean = get_bool(v, "cleanup", true, at);
        return [prefix, clean](std::vector<std::string> &tokens) {
            for (size_t i = 0; i < tokens.size(); i++) {
                std::string &t = tokens[i];
                if (i != 0) t = t.compare(0, prefix.size(), prefix) == 0 ? t.substr(prefix.size()) : " " + t;
                if (clean) t = cleanup(t);
            }
        };
    }
    if (type == "BPEDecoder") {
        only_keys(v, {"suffix"}, at);
        const std::string suffix = get_string(v, "suffix", "</w>", at);
        Pattern p;
        p.literal = suffix;
        return [p](std::vector<std::string> &tokens) {
            for (size_t i = 0; i < tokens.size(); i++) tokens[i] = replace_all(tokens[i], p, i + 1 == tokens.size() ? "" : " ");
        };
    }
    unknown_type(what, type, "Sequence, ByteLevel, ByteFallback, Fuse, Strip, Replace, Metaspace, WordPiece, BPEDecoder");
}

// ---- post-processors ----

void read_post_processor(const json::Value &v, const std::string &what,
                         const std::function<int32_t(const std::string &)> &id_of, std::vector<int32_t> &prefix,
                         std::vector<int32_t> &suffix) {
    if (v.kind == json::Value::Kind::Null) return;
    const std::string type = type_of(v, what);
    const std::string at = what + " (" + type + ")";
    auto named = [&](const char *key, const char *fallback) {
        // BertProcessing/RobertaProcessing: [token, id].
        const json::Value *p = json::member(v, key);
        if (!p) {
            const int32_t id = id_of(fallback);
            if (id < 0) throw Error(at + "." + key + " is missing and " + fallback + " is not in the vocabulary");
            return id;
        }
        if (!p->is_array() || p->array.size() != 2 || !p->array[1].is_number() || p->array[1].number < 0 ||
            p->array[1].number >= kMaxId) {
            throw Error(at + "." + key + " is not [token, id]");
        }
        return (int32_t)p->array[1].number;
    };
    if (type == "Sequence") {
        only_keys(v, {"processors"}, at);
        const json::Value *list = json::member(v, "processors");
        if (!list || !list->is_array()) throw Error(at + ".processors is not an array");
        for (size_t i = 0; i < list->array.size(); i++) {
            std::vector<int32_t> p, s;
            read_post_processor(list->array[i], what + ".processors[" + std::to_string(i) + "]", id_of, p, s);
            prefix.insert(prefix.begin(), p.begin(), p.end());
            suffix.insert(suffix.end(), s.begin(), s.end());
        }
        return;
    }
    if (type == "ByteLevel") {
        only_keys(v, {"add_prefix_space", "trim_offsets", "use_regex"}, at);
        return;
    }
    if (type == "BertProcessing" || type == "RobertaProcessing") {
        only_keys(v, {"sep", "cls", "trim_offsets", "add_prefix_space"}, at);
        const bool bert = type == "BertProcessing";
        prefix = {named("cls", bert ? "[CLS]" : "<s>")};
        suffix = {named("sep", bert ? "[SEP]" : "</s>")};
        return;
    }
    if (type == "TemplateProcessing") {
        only_keys(v, {"single", "pair", "special_tokens"}, at);
        const json::Value *single = json::member(v, "single");
        if (!single || !single->is_array()) throw Error(at + ".single is not an array");
        const json::Value *specials = json::member(v, "special_tokens");
        bool seen_a = false;
        for (size_t i = 0; i < single->array.size(); i++) {
            const json::Value &item = single->array[i];
            const std::string where = at + ".single[" + std::to_string(i) + "]";
            const json::Value *tok = item.is_object() ? json::member(item, "SpecialToken") : nullptr;
            const json::Value *seq = item.is_object() ? json::member(item, "Sequence") : nullptr;
            if (seq) {
                if (seen_a) throw Error(where + ": a second sequence in a single input's template");
                seen_a = true;
                continue;
            }
            if (!tok || !tok->is_object()) throw Error(where + " is neither a SpecialToken nor a Sequence");
            const std::string name = get_string(*tok, "id", "", where + ".SpecialToken");
            // The ids: special_tokens[name].ids, else the token named so.
            std::vector<int32_t> ids;
            const json::Value *entry = specials && specials->is_object() ? json::member(*specials, name.c_str()) : nullptr;
            const json::Value *list = entry && entry->is_object() ? json::member(*entry, "ids") : nullptr;
            if (list && list->is_array()) {
                for (const json::Value &id : list->array) {
                    if (!id.is_number() || id.number < 0 || id.number >= kMaxId) throw Error(where + ": special token " + json::quote(name) + " has a bad id");
                    ids.push_back((int32_t)id.number);
                }
            } else {
                const int32_t id = id_of(name);
                if (id < 0) throw Error(where + ": special token " + json::quote(name) + " is not in the vocabulary");
                ids.push_back(id);
            }
            (seen_a ? suffix : prefix).insert((seen_a ? suffix : prefix).end(), ids.begin(), ids.end());
        }
        if (!seen_a) throw Error(at + ".single has no Sequence");
        return;
    }
    unknown_type(what, type, "TemplateProcessing, BertProcessing, RobertaProcessing, ByteLevel, Sequence");
}

}  // namespace halformer::text::tj
