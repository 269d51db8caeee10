// Every ICU call of the runtime (unicode.h): ICU's C API from Debian's
// libicu-dev, library icuuc only.
#include "unicode.h"

#include "halformer/error.h"

#include <unicode/brkiter.h>
#include <unicode/regex.h>
#include <unicode/uchar.h>
#include <unicode/unistr.h>
#include <unicode/unorm2.h>
#include <unicode/ustring.h>
#include <unicode/utext.h>

#include <vector>

namespace halformer::text {

// ---- UTF-8 ----

std::u32string utf8_to_u32(const std::string &utf8) {
    std::u32string out;
    out.reserve(utf8.size());
    const auto *s = reinterpret_cast<const unsigned char *>(utf8.data());
    const size_t n = utf8.size();
    for (size_t i = 0; i < n;) {
        const unsigned char c = s[i];
        // (Callers pass checked UTF-8; a sequence cut short by the end of
        // the text, which a hostile file's strings may hold, is U+FFFD,
        // never a read past it.)
        const size_t len = c < 0x80 ? 1 : c < 0xE0 ? 2 : c < 0xF0 ? 3 : 4;
        if (i + len > n) {
            out += char32_t(0xFFFD);
            break;
        }
        if (c < 0x80) {
            out += char32_t(c);
            i += 1;
        } else if (c < 0xE0) {
            out += char32_t(((c & 0x1F) << 6) | (s[i + 1] & 0x3F));
            i += 2;
        } else if (c < 0xF0) {
            out += char32_t(((c & 0x0F) << 12) | ((s[i + 1] & 0x3F) << 6) | (s[i + 2] & 0x3F));
            i += 3;
        } else {
            out += char32_t(((c & 0x07) << 18) | ((s[i + 1] & 0x3F) << 12) | ((s[i + 2] & 0x3F) << 6) |
                            (s[i + 3] & 0x3F));
            i += 4;
        }
    }
    return out;
}

std::string u32_to_utf8(const std::u32string &cps) {
    std::string out;
    out.reserve(cps.size());
    for (char32_t c : cps) append_utf8(out, c);
    return out;
}

std::string utf8_replace_invalid(const std::string &bytes) {
    static const char kReplacement[] = "\xEF\xBF\xBD";
    const auto *s = reinterpret_cast<const unsigned char *>(bytes.data());
    const size_t n = bytes.size();
    std::string out;
    out.reserve(n);
    size_t i = 0;
    while (i < n) {
        const unsigned char c = s[i];
        if (c < 0x80) {
            out += char(c);
            i++;
            continue;
        }
        // The sequence's length and the range its second byte must fall in
        // (Unicode table 3-7, "well-formed UTF-8 byte sequences").
        int len = 0;
        unsigned char lo = 0x80, hi = 0xBF;
        if (c >= 0xC2 && c <= 0xDF) len = 2;
        else if (c == 0xE0) len = 3, lo = 0xA0;
        else if (c >= 0xE1 && c <= 0xEC) len = 3;
        else if (c == 0xED) len = 3, hi = 0x9F;
        else if (c >= 0xEE && c <= 0xEF) len = 3;
        else if (c == 0xF0) len = 4, lo = 0x90;
        else if (c >= 0xF1 && c <= 0xF3) len = 4;
        else if (c == 0xF4) len = 4, hi = 0x8F;
        if (len == 0) {  // 0x80..0xC1, 0xF5..0xFF: never valid
            out += kReplacement;
            i++;
            continue;
        }
        // The longest valid prefix (the "maximal subpart").
        size_t k = 1;
        while (k < (size_t)len && i + k < n) {
            const unsigned char b = s[i + k];
            const bool ok = k == 1 ? (b >= lo && b <= hi) : (b >= 0x80 && b <= 0xBF);
            if (!ok) break;
            k++;
        }
        if (k == (size_t)len) {
            out.append(bytes, i, len);
        } else {
            out += kReplacement;
        }
        i += k;
    }
    return out;
}

namespace unicode {

namespace {

[[noreturn]] void icu_failed(const char *what, UErrorCode status) {
    throw Error(std::string("ICU ") + what + ": " + u_errorName(status));
}

std::vector<UChar> to_utf16(const std::u32string &s) {
    std::vector<UChar> out(s.size() * 2 + 1);
    int32_t len = 0;
    UErrorCode status = U_ZERO_ERROR;
    u_strFromUTF32(out.data(), (int32_t)out.size(), &len, reinterpret_cast<const UChar32 *>(s.data()),
                   (int32_t)s.size(), &status);
    if (U_FAILURE(status)) icu_failed("u_strFromUTF32", status);
    out.resize(len);
    return out;
}

std::u32string from_utf16(const UChar *s, int32_t len) {
    std::u32string out(len + 1, U'\0');  // UTF-32 is never longer than UTF-16, + the NUL ICU writes
    int32_t n = 0;
    UErrorCode status = U_ZERO_ERROR;
    u_strToUTF32(reinterpret_cast<UChar32 *>(&out[0]), (int32_t)out.size(), &n, s, len, &status);
    if (U_FAILURE(status)) icu_failed("u_strToUTF32", status);
    out.resize(n);
    return out;
}

std::u32string normalize(const UNormalizer2 *(*instance)(UErrorCode *), const char *name, const std::u32string &s) {
    // Everything below U+00C0 is unchanged by NFD and NFC.
    bool plain = true;
    for (char32_t c : s) plain = plain && c < 0xC0;
    if (plain) return s;
    UErrorCode status = U_ZERO_ERROR;
    const UNormalizer2 *norm = instance(&status);
    if (U_FAILURE(status)) icu_failed(name, status);
    std::vector<UChar> in = to_utf16(s);
    // NFD grows a string at most 4× in UTF-16 code units (U+1F84 → 4); NFC
    // can grow it too (U+0958 → 2), never past that.
    std::vector<UChar> out(in.size() * 4 + 4);
    int32_t len = unorm2_normalize(norm, in.data(), (int32_t)in.size(), out.data(), (int32_t)out.size(), &status);
    if (status == U_BUFFER_OVERFLOW_ERROR) {
        out.resize(len + 1);
        status = U_ZERO_ERROR;
        len = unorm2_normalize(norm, in.data(), (int32_t)in.size(), out.data(), (int32_t)out.size(), &status);
    }
    if (U_FAILURE(status)) icu_failed(name, status);
    return from_utf16(out.data(), len);
}

}  // namespace

Category category(char32_t c) {
    switch ((UCharCategory)u_charType((UChar32)c)) {
    case U_UPPERCASE_LETTER: return Category::Lu;
    case U_LOWERCASE_LETTER: return Category::Ll;
    case U_TITLECASE_LETTER: return Category::Lt;
    case U_MODIFIER_LETTER: return Category::Lm;
    case U_OTHER_LETTER: return Category::Lo;
    case U_NON_SPACING_MARK: return Category::Mn;
    case U_COMBINING_SPACING_MARK: return Category::Mc;
    case U_ENCLOSING_MARK: return Category::Me;
    case U_DECIMAL_DIGIT_NUMBER: return Category::Nd;
    case U_LETTER_NUMBER: return Category::Nl;
    case U_OTHER_NUMBER: return Category::No;
    case U_CONNECTOR_PUNCTUATION: return Category::Pc;
    case U_DASH_PUNCTUATION: return Category::Pd;
    case U_START_PUNCTUATION: return Category::Ps;
    case U_END_PUNCTUATION: return Category::Pe;
    case U_INITIAL_PUNCTUATION: return Category::Pi;
    case U_FINAL_PUNCTUATION: return Category::Pf;
    case U_OTHER_PUNCTUATION: return Category::Po;
    case U_MATH_SYMBOL: return Category::Sm;
    case U_CURRENCY_SYMBOL: return Category::Sc;
    case U_MODIFIER_SYMBOL: return Category::Sk;
    case U_OTHER_SYMBOL: return Category::So;
    case U_SPACE_SEPARATOR: return Category::Zs;
    case U_LINE_SEPARATOR: return Category::Zl;
    case U_PARAGRAPH_SEPARATOR: return Category::Zp;
    case U_CONTROL_CHAR: return Category::Cc;
    case U_FORMAT_CHAR: return Category::Cf;
    case U_SURROGATE: return Category::Cs;
    case U_PRIVATE_USE_CHAR: return Category::Co;
    default: return Category::Cn;
    }
}

const char *category_name(Category c) {
    static const char *const names[] = {"Lu", "Ll", "Lt", "Lm", "Lo", "Mn", "Mc", "Me", "Nd", "Nl",
                                        "No", "Pc", "Pd", "Ps", "Pe", "Pi", "Pf", "Po", "Sm", "Sc",
                                        "Sk", "So", "Zs", "Zl", "Zp", "Cc", "Cf", "Cs", "Co", "Cn"};
    return names[(int)c];
}

bool is_white_space(char32_t c) { return u_isUWhiteSpace((UChar32)c); }

bool is_python_space(char32_t c) {
    switch (u_charDirection((UChar32)c)) {
    case U_WHITE_SPACE_NEUTRAL:
    case U_BLOCK_SEPARATOR:
    case U_SEGMENT_SEPARATOR: return true;
    default: return u_charType((UChar32)c) == U_SPACE_SEPARATOR;
    }
}

bool is_word_char(char32_t c) {
    const UChar32 u = (UChar32)c;
    if (u_hasBinaryProperty(u, UCHAR_ALPHABETIC) || u_hasBinaryProperty(u, UCHAR_JOIN_CONTROL)) return true;
    const int mask = U_GET_GC_MASK(u);
    return (mask & (U_GC_M_MASK | U_GC_ND_MASK | U_GC_PC_MASK)) != 0;
}

std::u32string lower(char32_t c) {
    if (c < 0x80) return std::u32string(1, (c >= 'A' && c <= 'Z') ? c + 32 : c);
    const std::vector<UChar> in = to_utf16(std::u32string(1, c));
    UChar out[16];
    UErrorCode status = U_ZERO_ERROR;
    // The root locale ("") : no Turkish or Lithuanian rules, as in Python.
    const int32_t len = u_strToLower(out, 16, in.data(), (int32_t)in.size(), "", &status);
    if (U_FAILURE(status)) icu_failed("u_strToLower", status);
    return from_utf16(out, len);
}

std::u32string lower(const std::u32string &s) {
    bool ascii = true;
    for (char32_t c : s) ascii = ascii && c < 0x80;
    if (ascii) {
        std::u32string out = s;
        for (char32_t &c : out) c = (c >= 'A' && c <= 'Z') ? c + 32 : c;
        return out;
    }
    const std::vector<UChar> in = to_utf16(s);
    // Lower-casing grows UTF-16 at most 3× (U+0130 → 2 units is the usual case).
    std::vector<UChar> out(in.size() * 3 + 4);
    UErrorCode status = U_ZERO_ERROR;
    int32_t len = u_strToLower(out.data(), (int32_t)out.size(), in.data(), (int32_t)in.size(), "", &status);
    if (status == U_BUFFER_OVERFLOW_ERROR) {
        out.resize(len + 1);
        status = U_ZERO_ERROR;
        len = u_strToLower(out.data(), (int32_t)out.size(), in.data(), (int32_t)in.size(), "", &status);
    }
    if (U_FAILURE(status)) icu_failed("u_strToLower", status);
    return from_utf16(out.data(), len);
}

std::u32string nfd(const std::u32string &s) { return normalize(unorm2_getNFDInstance, "NFD", s); }
std::u32string nfc(const std::u32string &s) { return normalize(unorm2_getNFCInstance, "NFC", s); }
std::u32string nfkd(const std::u32string &s) { return normalize(unorm2_getNFKDInstance, "NFKD", s); }
std::u32string nfkc(const std::u32string &s) { return normalize(unorm2_getNFKCInstance, "NFKC", s); }

std::vector<size_t> grapheme_starts(const std::string &utf8) {
    std::vector<size_t> out;
    UErrorCode status = U_ZERO_ERROR;
    UText *text = utext_openUTF8(nullptr, utf8.data(), (int64_t)utf8.size(), &status);
    std::unique_ptr<icu::BreakIterator> it(icu::BreakIterator::createCharacterInstance(icu::Locale::getRoot(), status));
    if (U_SUCCESS(status)) it->setText(text, status);
    if (U_FAILURE(status)) {
        utext_close(text);
        throw Error(std::string("grapheme clusters: ") + u_errorName(status));
    }
    // With UTF-8 text, ICU's indices are byte offsets.
    for (int32_t at = it->first(); at != icu::BreakIterator::DONE; at = it->next()) out.push_back((size_t)at);
    utext_close(text);
    if (out.empty() || out.back() != utf8.size()) out.push_back(utf8.size());
    return out;
}

struct Regex::Impl {
    std::unique_ptr<icu::RegexPattern> pattern;
};

Regex::Regex(const std::string &pattern) : impl_(std::make_unique<Impl>()) {
    UParseError where{};
    UErrorCode status = U_ZERO_ERROR;
    impl_->pattern.reset(icu::RegexPattern::compile(icu::UnicodeString::fromUTF8(pattern), 0, where, status));
    if (U_FAILURE(status) || !impl_->pattern) {
        throw Error("the regular expression " + pattern + " does not compile (at character " +
                    std::to_string(where.offset) + "): " + u_errorName(status));
    }
}

Regex::~Regex() = default;

std::vector<std::pair<size_t, size_t>> Regex::find_all(const std::string &utf8) const {
    // Matched over the UTF-8 itself (a UText): start64/end64 are byte offsets.
    UErrorCode status = U_ZERO_ERROR;
    UText *text = utext_openUTF8(nullptr, utf8.data(), (int64_t)utf8.size(), &status);
    std::unique_ptr<icu::RegexMatcher> m(impl_->pattern->matcher(status));
    if (U_SUCCESS(status)) m->reset(text);
    std::vector<std::pair<size_t, size_t>> out;
    while (U_SUCCESS(status) && m->find(status) && U_SUCCESS(status)) {
        out.emplace_back((size_t)m->start64(status), (size_t)m->end64(status));
    }
    m.reset();
    utext_close(text);
    if (U_FAILURE(status)) throw Error(std::string("regular expression: ") + u_errorName(status));
    return out;
}

std::vector<std::string> Regex::split_isolated(const std::string &utf8) const {
    std::vector<std::string> out;
    size_t last = 0;
    for (auto [a, b] : find_all(utf8)) {
        if (a > last) out.push_back(utf8.substr(last, a - last));
        if (b > a) out.push_back(utf8.substr(a, b - a));
        last = b;
    }
    if (last < utf8.size()) out.push_back(utf8.substr(last));
    return out;
}

}  // namespace unicode
}  // namespace halformer::text
