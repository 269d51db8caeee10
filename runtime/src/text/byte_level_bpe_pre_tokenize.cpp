// Byte-level BPE's pre-tokenizers (byte_level_bpe.h): GPT-2's pattern
// (pre_tokenize) and the Split pattern of Llama 3 and Qwen2
// (pre_tokenize_split), which cut the text between added tokens into the
// words that the merges then work on.
#include "byte_level_bpe.h"

#include "byte_level_bpe_internal.h"
#include "unicode.h"

#include <cctype>

namespace halformer::text {

namespace {

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

// A text (checked to be UTF-8) as code points, each one's class and byte
// offset: what the pre-tokenizers walk.
struct CodePoints {
    const std::string &utf8;
    std::u32string s;
    std::vector<size_t> at;  // code point → byte offset (n + 1 entries)
    std::vector<Kind> kind;
    explicit CodePoints(const std::string &text) : utf8(text) {
        bpe::check_utf8(text);
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

// The alternatives of Llama 3's and Qwen2's Split pattern (pre_tokenize_split),
// each giving the end of its match at code point i, or i where it has none.

bool is_newline(char32_t c) { return c == '\r' || c == '\n'; }

// (?i:'s|'t|'re|'ve|'m|'ll|'d): a contraction, any case.
size_t split_contraction_end(const std::u32string &s, size_t i) {
    const size_t n = s.size();
    // (Case-insensitive: ASCII either case, and U+017F, which folds to s.)
    auto lower = [&](size_t k) -> char32_t { return s[k] == 0x17F ? 's' : s[k] < 0x80 ? (char32_t)std::tolower((int)s[k]) : s[k]; };
    if (s[i] == '\'' && i + 1 < n) {
        const char32_t d = lower(i + 1);
        if (d == 's' || d == 't' || d == 'm' || d == 'd') return i + 2;
        if (i + 2 < n) {
            const char32_t e = lower(i + 2);
            if ((d == 'r' && e == 'e') || (d == 'v' && e == 'e') || (d == 'l' && e == 'l')) return i + 3;
        }
    }
    return i;
}

// [^\r\n\p{L}\p{N}]?\p{L}+, \p{N}{1,max_digits} and  ?[^\s\p{L}\p{N}]+[\r\n]*:
// a run of letters, of digits, or of punctuation and symbols.
size_t split_run_end(const CodePoints &cp, size_t i, int max_digits) {
    const std::u32string &s = cp.s;
    const std::vector<Kind> &kind = cp.kind;
    const size_t n = s.size();
    size_t j = i;
    if (kind[i] != Kind::Letter && kind[i] != Kind::Number && !is_newline(s[i]) && i + 1 < n && kind[i + 1] == Kind::Letter) {
        j = i + 1;
    }
    if (kind[j] == Kind::Letter) {
        size_t e = j;
        while (e < n && kind[e] == Kind::Letter) e++;
        return e;
    }
    if (kind[i] == Kind::Number) {
        size_t e = i;
        while (e < n && e - i < (size_t)max_digits && kind[e] == Kind::Number) e++;
        return e;
    }
    j = i;
    if (s[i] == ' ' && i + 1 < n && kind[i + 1] == Kind::Other) j = i + 1;
    if (kind[j] == Kind::Other) {
        size_t e = j;
        while (e < n && kind[e] == Kind::Other) e++;
        while (e < n && is_newline(s[e])) e++;
        return e;
    }
    return i;
}

// \s*[\r\n]+, \s+(?!\S) and \s+: whitespace from i (a lone U+0020 before a
// letter, a number or a symbol went with it in split_run_end).
size_t split_whitespace_end(const CodePoints &cp, size_t i) {
    const size_t n = cp.s.size();
    size_t e = i;
    while (e < n && cp.kind[e] == Kind::Space) e++;
    size_t last = n;
    for (size_t k = i; k < e; k++) {
        if (is_newline(cp.s[k])) last = k;
    }
    if (last < n) return last + 1;
    if (e < n && e - i >= 2) e--;
    return e;
}

}  // namespace

// ---- pre-tokenization ----

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
    const size_t n = cp.s.size();
    for (size_t i = 0; i < n;) {
        size_t e = split_contraction_end(cp.s, i);
        if (e == i) e = split_run_end(cp, i, max_digits);
        if (e == i) e = split_whitespace_end(cp, i);
        out.push_back(cp.piece(i, e));
        i = e;
    }
    return out;
}

}  // namespace halformer::text
