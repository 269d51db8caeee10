// WordPiece (wordpiece.h), written from transformers' tokenization_bert.py
// (BasicTokenizer, WordpieceTokenizer) and tokenization_utils.py
// (PreTrainedTokenizer.tokenize and _decode, _is_control, _is_punctuation,
// _is_whitespace).
#include "wordpiece.h"

#include "clean_up.h"
#include "unicode.h"

#include "halformer/error.h"
#include "halformer/files.h"
#include "halformer/json.h"
#include "halformer/tokenizer.h"

#include <algorithm>

namespace halformer::text {

namespace {

using unicode::Category;

// _is_whitespace: ' ', \t, \n, \r or Zs.
bool bert_whitespace(char32_t c) {
    return c == ' ' || c == '\t' || c == '\n' || c == '\r' || unicode::category(c) == Category::Zs;
}
// _is_control: any C* category (Cc, Cf, Cs, Co, Cn) except \t, \n, \r.
bool bert_control(char32_t c) {
    if (c == '\t' || c == '\n' || c == '\r') return false;
    return unicode::is_other(unicode::category(c));
}
// _is_punctuation: every non-letter, non-digit printable ASCII character, and P*.
bool bert_punctuation(char32_t c) {
    if ((c >= 33 && c <= 47) || (c >= 58 && c <= 64) || (c >= 91 && c <= 96) || (c >= 123 && c <= 126)) return true;
    return unicode::is_punctuation(unicode::category(c));
}
// _is_chinese_char: the CJK Unified Ideographs blocks and their extensions
// A-E, and the compatibility ideographs (not Hangul, kana or extension F+).
bool cjk_ideograph(char32_t c) {
    return (c >= 0x4E00 && c <= 0x9FFF) || (c >= 0x3400 && c <= 0x4DBF) || (c >= 0x20000 && c <= 0x2A6DF) ||
           (c >= 0x2A700 && c <= 0x2B73F) || (c >= 0x2B740 && c <= 0x2B81F) || (c >= 0x2B820 && c <= 0x2CEAF) ||
           (c >= 0xF900 && c <= 0xFAFF) || (c >= 0x2F800 && c <= 0x2FA1F);
}

// Python's str.split() with no argument: runs of str.isspace() characters.
std::vector<std::u32string> python_split(const std::u32string &s) {
    std::vector<std::u32string> out;
    size_t i = 0;
    while (i < s.size()) {
        while (i < s.size() && unicode::is_python_space(s[i])) i++;
        size_t j = i;
        while (j < s.size() && !unicode::is_python_space(s[j])) j++;
        if (j > i) out.push_back(s.substr(i, j - i));
        i = j;
    }
    return out;
}

// str.strip().
std::string python_strip(const std::string &utf8) {
    const std::u32string s = utf8_to_u32(utf8);
    size_t a = 0, b = s.size();
    while (a < b && unicode::is_python_space(s[a])) a++;
    while (b > a && unicode::is_python_space(s[b - 1])) b--;
    return u32_to_utf8(s.substr(a, b - a));
}

// str.replace(from, to): every non-overlapping occurrence, left to right.
std::string replace_all(const std::string &s, const std::string &from, const std::string &to) {
    std::string out;
    size_t pos = 0;
    while (true) {
        const size_t hit = s.find(from, pos);
        if (hit == std::string::npos) break;
        out.append(s, pos, hit - pos);
        out += to;
        pos = hit + from.size();
    }
    out.append(s, pos, std::string::npos);
    return out;
}

std::u32string strip_accents(const std::u32string &s) {
    std::u32string out;
    for (char32_t c : unicode::nfd(s)) {
        if (unicode::category(c) != Category::Mn) out += c;
    }
    return out;
}

// ---- tokenizer_config.json ----

void read_bool(const json::Value &obj, const char *key, bool &into, const std::string &path) {
    if (const json::Value *v = member(obj, key)) {
        if (!v->is_bool()) throw Error(path + ": \"" + key + "\" is " + json::kind_name(v->kind) + ", expected true or false");
        into = v->boolean;
    }
}
// A special token: "[UNK]" or {"content": "[UNK]", ...} (AddedToken).
std::string token_text(const json::Value &v, const std::string &what) {
    if (v.is_string()) return v.string;
    if (v.is_object()) {
        const json::Value *c = member(v, "content");
        if (c && c->is_string()) return c->string;
    }
    throw Error(what + " is " + json::kind_name(v.kind) + ", expected a token (a string or {\"content\": ...})");
}

}  // namespace

WordPieceOptions WordPieceOptions::from_config(const std::string &path) {
    if (!files::exists(path)) throw Error(path + ": no such file");
    const json::Value root = json::parse(files::read_text(path), path);
    if (!root.is_object()) throw Error(path + ": expected an object, found " + json::kind_name(root.kind));
    WordPieceOptions o;
    read_bool(root, "do_lower_case", o.do_lower_case, path);
    read_bool(root, "tokenize_chinese_chars", o.tokenize_chinese_chars, path);
    read_bool(root, "do_basic_tokenize", o.do_basic_tokenize, path);
    read_bool(root, "clean_up_tokenization_spaces", o.clean_up_tokenization_spaces, path);
    if (const json::Value *v = member(root, "strip_accents")) {
        if (!v->is_bool()) throw Error(path + ": \"strip_accents\" is " + json::kind_name(v->kind) + ", expected null, true or false");
        o.strip_accents = v->boolean ? 1 : 0;
    }
    auto token_list = [&](const char *key, std::vector<std::string> &into) {
        if (const json::Value *v = member(root, key)) {
            if (!v->is_array()) throw Error(path + ": \"" + key + "\" is " + json::kind_name(v->kind) + ", expected a list");
            for (size_t i = 0; i < v->array.size(); i++) {
                into.push_back(token_text(v->array[i], path + ": " + key + "[" + std::to_string(i) + "]"));
            }
        }
    };
    token_list("never_split", o.never_split);
    token_list("additional_special_tokens", o.additional_special_tokens);
    const std::pair<const char *, std::string *> specials[] = {{"unk_token", &o.unk_token},
                                                               {"sep_token", &o.sep_token},
                                                               {"pad_token", &o.pad_token},
                                                               {"cls_token", &o.cls_token},
                                                               {"mask_token", &o.mask_token}};
    for (const auto &s : specials) {
        if (const json::Value *v = member(root, s.first)) *s.second = token_text(*v, path + ": \"" + s.first + "\"");
    }
    return o;
}

// ---- loading ----

WordPiece WordPiece::load(const std::string &vocab_txt, const std::string &tokenizer_config_json) {
    return load(vocab_txt, WordPieceOptions::from_config(tokenizer_config_json));
}

WordPiece WordPiece::load(const std::string &vocab_txt, const WordPieceOptions &options) {
    if (!files::exists(vocab_txt)) throw Error(vocab_txt + ": no such file");
    std::string text = files::read_text(vocab_txt);
    const int64_t bad = utf8_error_offset(text);
    if (bad >= 0) {
        const auto line = 1 + std::count(text.begin(), text.begin() + bad, '\n');
        throw Error(vocab_txt + ":" + std::to_string(line) + ": not UTF-8 (byte " + std::to_string(bad) + ")");
    }
    if (options.unk_token.empty()) throw Error(vocab_txt + ": the unk_token is empty");
    if (options.strip_accents < -1 || options.strip_accents > 1) {
        throw Error("WordPiece: strip_accents " + std::to_string(options.strip_accents) + " is not -1 (null), 0 or 1");
    }
    if (options.max_input_chars_per_word < 0) {
        throw Error("WordPiece: max_input_chars_per_word " + std::to_string(options.max_input_chars_per_word) + " is negative");
    }

    WordPiece w;
    w.options_ = options;
    w.source_ = vocab_txt;
    // Python reads the file in text mode (\r\n and \r are line ends too);
    // each line less its "\n" is a token, the last one with or without it.
    text = replace_all(replace_all(text, "\r\n", "\n"), "\r", "\n");
    for (size_t pos = 0; pos < text.size();) {
        size_t end = text.find('\n', pos);
        if (end == std::string::npos) end = text.size();
        w.tokens_.push_back(text.substr(pos, end - pos));
        pos = end + 1;
    }
    if (w.tokens_.empty()) throw Error(vocab_txt + ": the vocabulary is empty");
    w.vocab_lines_ = (int32_t)w.tokens_.size();
    w.vocab_.reserve(w.tokens_.size());
    for (size_t i = 0; i < w.tokens_.size(); i++) w.vocab_[w.tokens_[i]] = (int32_t)i;

    // transformers' order of the special tokens: unk, sep, pad, cls, mask,
    // then the additional ones. One the vocabulary lacks is added after it.
    std::vector<std::string> specials = {options.unk_token, options.sep_token, options.pad_token, options.cls_token,
                                         options.mask_token};
    specials.insert(specials.end(), options.additional_special_tokens.begin(), options.additional_special_tokens.end());
    for (const std::string &s : specials) {
        if (s.empty()) continue;
        if (utf8_error_offset(s) >= 0) throw Error(vocab_txt + ": the special token " + json::quote(s) + " is not UTF-8");
        const std::u32string u = utf8_to_u32(s);
        if (std::find(w.specials_.begin(), w.specials_.end(), u) != w.specials_.end()) continue;
        w.specials_.push_back(u);
        w.never_split_all_.insert(u);
        if (!w.vocab_.count(s)) {
            w.vocab_[s] = (int32_t)w.tokens_.size();
            w.tokens_.push_back(s);
        }
    }
    for (const std::string &s : options.additional_special_tokens) {
        if (!s.empty() && w.vocab_.at(s) >= w.vocab_lines_) w.legacy_added_.insert(w.vocab_.at(s));
    }
    for (const std::string &s : options.never_split) {
        if (utf8_error_offset(s) >= 0) throw Error(vocab_txt + ": the never_split token " + json::quote(s) + " is not UTF-8");
        w.never_split_.insert(s);
        w.never_split_all_.insert(utf8_to_u32(s));
    }
    w.unk_id_ = w.vocab_.at(options.unk_token);
    return w;
}

// ---- encoding ----

void WordPiece::basic(const std::u32string &text, std::vector<std::u32string> &out) const {
    // _clean_text, then _tokenize_chinese_chars.
    std::u32string clean;
    clean.reserve(text.size());
    for (char32_t c : text) {
        if (c == 0 || c == 0xFFFD || bert_control(c)) continue;
        if (bert_whitespace(c)) {
            clean += U' ';
        } else if (options_.tokenize_chinese_chars && cjk_ideograph(c)) {
            clean += U' ';
            clean += c;
            clean += U' ';
        } else {
            clean += c;
        }
    }
    const bool lower = options_.do_lower_case;
    const bool strip = options_.strip_accents == 1 || (options_.strip_accents == -1 && lower);
    for (std::u32string word : python_split(unicode::nfc(clean))) {
        const bool keep = never_split_all_.count(word) != 0;
        if (!keep) {
            if (lower) word = unicode::lower(word);
            if (strip) word = strip_accents(word);
        }
        // _run_split_on_punc: each punctuation character on its own.
        if (keep || never_split_all_.count(word)) {
            out.push_back(word);
            continue;
        }
        size_t start = 0;
        for (size_t i = 0; i < word.size(); i++) {
            if (!bert_punctuation(word[i])) continue;
            if (i > start) out.push_back(word.substr(start, i - start));
            out.push_back(word.substr(i, 1));
            start = i + 1;
        }
        if (start < word.size()) out.push_back(word.substr(start));
    }
}

void WordPiece::wordpiece(const std::u32string &word, std::vector<std::string> &out) const {
    if (word.size() > (size_t)options_.max_input_chars_per_word) {
        out.push_back(options_.unk_token);
        return;
    }
    const size_t n = word.size();
    std::string bytes;
    std::vector<size_t> at(n + 1, 0);
    for (size_t i = 0; i < n; i++) {
        at[i] = bytes.size();
        append_utf8(bytes, word[i]);
    }
    at[n] = bytes.size();
    std::vector<std::string> pieces;
    for (size_t start = 0; start < n;) {
        size_t end = n;
        std::string piece;
        for (; end > start; end--) {
            piece = (start > 0 ? "##" : "") + bytes.substr(at[start], at[end] - at[start]);
            if (vocab_.count(piece)) break;
        }
        if (end == start) {  // nothing matches: the whole word is unknown
            out.push_back(options_.unk_token);
            return;
        }
        pieces.push_back(std::move(piece));
        start = end;
    }
    out.insert(out.end(), pieces.begin(), pieces.end());
}

int WordPiece::special_at(const std::u32string &text, size_t i, bool longest) const {
    int best = -1;
    for (size_t k = 0; k < specials_.size(); k++) {
        const std::u32string &s = specials_[k];
        if (s.size() > text.size() - i || text.compare(i, s.size(), s) != 0) continue;
        if (!longest) return (int)k;
        if (best < 0 || s.size() > specials_[best].size()) best = (int)k;
    }
    return best;
}

std::vector<std::string> WordPiece::tokenize(const std::string &utf8) const {
    const int64_t bad = utf8_error_offset(utf8);
    if (bad >= 0) throw Error("text is not UTF-8 (byte " + std::to_string(bad) + ")");
    std::u32string text = utf8_to_u32(utf8);
    if (options_.do_lower_case) {
        // PreTrainedTokenizer.tokenize: re.sub("(special|...)|(.+?)", lower):
        // one character at a time (so no final sigma), the special tokens
        // (the first listed that matches) left as they are.
        std::u32string lowered;
        lowered.reserve(text.size());
        for (size_t i = 0; i < text.size();) {
            const int k = special_at(text, i, false);
            if (k >= 0) {
                lowered += specials_[k];
                i += specials_[k].size();
            } else {
                lowered += unicode::lower(text[i]);
                i++;
            }
        }
        text.swap(lowered);
    }
    std::vector<std::string> out;
    auto segment = [&](size_t a, size_t b) {
        const std::u32string seg = text.substr(a, b - a);
        if (!options_.do_basic_tokenize) {
            for (const std::u32string &word : python_split(seg)) wordpiece(word, out);
            return;
        }
        std::vector<std::u32string> words;
        basic(seg, words);
        for (const std::u32string &word : words) {
            std::string w8 = u32_to_utf8(word);
            if (never_split_.count(w8)) out.push_back(std::move(w8));
            else wordpiece(word, out);
        }
    };
    // The special tokens cut out whole (the added-tokens trie: leftmost, longest).
    size_t done = 0;
    for (size_t i = 0; i < text.size();) {
        const int k = special_at(text, i, true);
        if (k < 0) {
            i++;
            continue;
        }
        if (done < i) segment(done, i);
        out.push_back(u32_to_utf8(specials_[k]));
        i += specials_[k].size();
        done = i;
    }
    if (done < text.size()) segment(done, text.size());
    return out;
}

int32_t WordPiece::token_id(const std::string &token) const {
    auto it = vocab_.find(token);
    return it == vocab_.end() ? unk_id_ : it->second;
}

std::vector<int32_t> WordPiece::encode(const std::string &utf8) const {
    std::vector<int32_t> ids;
    for (const std::string &t : tokenize(utf8)) ids.push_back(token_id(t));
    return ids;
}

std::vector<std::string> WordPiece::pieces(const std::string &utf8) const { return tokenize(utf8); }

int32_t WordPiece::id_of(const std::string &token) const {
    auto it = vocab_.find(token);
    return it == vocab_.end() ? -1 : it->second;
}

std::vector<std::string> WordPiece::basic_tokenize(const std::string &utf8) const {
    const int64_t bad = utf8_error_offset(utf8);
    if (bad >= 0) throw Error("text is not UTF-8 (byte " + std::to_string(bad) + ")");
    std::vector<std::u32string> words;
    basic(utf8_to_u32(utf8), words);
    std::vector<std::string> out;
    for (const auto &w : words) out.push_back(u32_to_utf8(w));
    return out;
}

// ---- decoding ----

std::string WordPiece::decode(const std::vector<int32_t> &ids, bool clean_up) const {
    // _decode: runs of ordinary tokens become text through
    // convert_tokens_to_string (" ".join, " ##" removed, strip); an
    // additional special token past the vocabulary stands apart; the parts
    // are joined with spaces.
    std::vector<std::string> parts;
    std::string run;
    bool have_run = false;
    auto flush = [&] {
        if (have_run) parts.push_back(python_strip(replace_all(run, " ##", "")));
        run.clear();
        have_run = false;
    };
    for (int32_t id : ids) {
        if (id < 0 || id >= vocab_size()) {
            throw Error("token id " + std::to_string(id) + " is outside the vocabulary of " +
                        std::to_string(vocab_size()) + " (" + source_ + ")");
        }
        if (legacy_added_.count(id)) {
            flush();
            parts.push_back(tokens_[id]);
            continue;
        }
        if (have_run) run += ' ';
        run += tokens_[id];
        have_run = true;
    }
    flush();
    std::string text;
    for (size_t i = 0; i < parts.size(); i++) text += (i ? " " : "") + parts[i];
    return clean_up ? clean_up_tokenization(std::move(text)) : text;
}

}  // namespace halformer::text
