// The Unicode character data the Hugging Face tokenizers need (internal):
// general categories, the White_Space property, Python's str.isspace(),
// lower-casing and NFD/NFC. The tables are ICU's (Debian libicu-dev, ICU 72:
// Unicode 15.0); unicode.cpp is the only file that calls ICU, so swapping
// the library means rewriting that one file. The UTF-8 helpers here use no
// tables.
//
// Text is handled as code points (std::u32string) between the UTF-8 at the
// edges: the tokenizers' rules are stated per character, as in Python.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "utf8.h"

namespace halformer::text {

// ---- UTF-8 (no tables) ----

// Decodes valid UTF-8 (check it first with halformer::utf8_error_offset).
std::u32string utf8_to_u32(const std::string &utf8);
std::string u32_to_utf8(const std::u32string &cps);

// Replaces every ill-formed sequence in bytes by U+FFFD, one per maximal
// subpart (Unicode's recommended practice, which Python's
// bytes.decode("utf-8", errors="replace") and Rust's from_utf8_lossy follow):
// "\xE2\x82" → one U+FFFD, "\xFF\xFE" → two.
std::string utf8_replace_invalid(const std::string &bytes);

namespace unicode {

// General_Category, as Python's unicodedata.category() names them.
enum class Category : uint8_t {
    Lu, Ll, Lt, Lm, Lo,  // letters
    Mn, Mc, Me,          // marks
    Nd, Nl, No,          // numbers
    Pc, Pd, Ps, Pe, Pi, Pf, Po,  // punctuation
    Sm, Sc, Sk, So,      // symbols
    Zs, Zl, Zp,          // separators
    Cc, Cf, Cs, Co, Cn,  // other (Cn: unassigned)
};
Category category(char32_t c);
const char *category_name(Category c);  // "Lu", "Mn", ...

inline bool is_letter(Category c) { return c <= Category::Lo; }                                  // \p{L}
inline bool is_number(Category c) { return c >= Category::Nd && c <= Category::No; }             // \p{N}
inline bool is_punctuation(Category c) { return c >= Category::Pc && c <= Category::Po; }        // P*
inline bool is_other(Category c) { return c >= Category::Cc; }                                   // C*

// The White_Space property: what \s matches in Python's regex module (and in
// Rust's regex and Oniguruma): 25 characters, U+001C..U+001F not among them.
bool is_white_space(char32_t c);
// Python's str.isspace() (and so str.split() and str.strip()): bidirectional
// class WS, B or S, or category Zs. White_Space plus U+001C..U+001F.
bool is_python_space(char32_t c);
// \w of Rust's regex crate: Alphabetic, M*, Nd, Pc or Join_Control.
bool is_word_char(char32_t c);

// The full lower-case mapping of one character, without context (Python's
// chr(c).lower(): U+0130 → "i\u0307"; a lone U+03A3 → σ, never final ς).
std::u32string lower(char32_t c);
// Python's str.lower() of a whole string: the same mappings, and a capital
// sigma at the end of a word becomes final ς (Unicode's Final_Sigma).
std::u32string lower(const std::u32string &s);
// Canonical decomposition and composition.
std::u32string nfd(const std::u32string &s);
std::u32string nfc(const std::u32string &s);
// Compatibility decomposition and composition (NFKD, NFKC).
std::u32string nfkd(const std::u32string &s);
std::u32string nfkc(const std::u32string &s);
// The byte offsets at which valid UTF-8 text's extended grapheme clusters
// (UAX #29) start, and text.size() last.
std::vector<size_t> grapheme_starts(const std::string &utf8);

// A regular expression as the tokenizers library's Split runs it, on ICU's
// engine (\p{..} classes, lookahead, (?i:...) groups, counted repeats):
// compiled once, matched from many threads at once.
class Regex {
public:
    // Throws Error naming the pattern, where it fails and ICU's reason.
    explicit Regex(const std::string &pattern);
    ~Regex();
    Regex(const Regex &) = delete;
    Regex &operator=(const Regex &) = delete;
    // The pieces of valid UTF-8 text: each match and each stretch between
    // matches, in order (Split's "Isolated" behaviour), as UTF-8.
    std::vector<std::string> split_isolated(const std::string &utf8) const;
    // Every match in valid UTF-8 text, left to right, as byte offsets
    // [begin, end) (empty matches included, as Rust's find_iter gives them).
    std::vector<std::pair<size_t, size_t>> find_all(const std::string &utf8) const;

private:
    struct Impl;
    std::unique_ptr<Impl> impl_;
};

}  // namespace unicode
}  // namespace halformer::text
