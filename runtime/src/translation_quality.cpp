// BLEU and chrF as sacreBLEU computes them (halformer/translation_quality.h).
#include "halformer/translation_quality.h"

#include "halformer/error.h"

#include <cmath>
#include <map>
#include <unordered_map>

namespace halformer {

namespace {

void check_pairs(const std::vector<std::string> &hyps, const std::vector<std::string> &refs, const char *what) {
    if (hyps.size() != refs.size()) {
        throw Error(std::string(what) + ": " + std::to_string(hyps.size()) + " hypotheses but " +
                    std::to_string(refs.size()) + " references");
    }
}

void replace_all(std::string &s, const std::string &from, const std::string &to) {
    for (size_t p = s.find(from); p != std::string::npos; p = s.find(from, p + to.size())) s.replace(p, from.size(), to);
}

bool is_digit(unsigned char c) { return c >= '0' && c <= '9'; }

// sacreBLEU's first 13a rule: the punctuation class
// [\{-\~\[-\` -\&\(-\+\:-\@\/] gets a space on each side.
bool is_13a_punct(unsigned char c) {
    return (c >= 0x7B && c <= 0x7E) || (c >= 0x5B && c <= 0x60) || (c >= 0x20 && c <= 0x26) ||
           (c >= 0x28 && c <= 0x2B) || (c >= 0x3A && c <= 0x40) || c == '/';
}

// Python's re.sub for a two-character pattern (a)(b) → repl(a, b): scans
// left to right, never overlapping matches. Works on bytes: the classes
// involved are ASCII, and a UTF-8 continuation byte is never one of them.
template <typename Match, typename Emit>
std::string sub2(const std::string &s, Match match, Emit emit) {
    std::string out;
    out.reserve(s.size() + s.size() / 4);
    size_t i = 0;
    while (i < s.size()) {
        if (i + 1 < s.size() && match((unsigned char)s[i], (unsigned char)s[i + 1])) {
            emit(out, s[i], s[i + 1]);
            i += 2;
        } else {
            out += s[i++];
        }
    }
    return out;
}

// The code point at s[i] and its length in bytes (an invalid byte stands for itself).
char32_t code_point_at(const std::string &s, size_t i, int &len) {
    const unsigned char c = (unsigned char)s[i];
    len = c < 0x80 ? 1 : (c & 0xE0) == 0xC0 ? 2 : (c & 0xF0) == 0xE0 ? 3 : (c & 0xF8) == 0xF0 ? 4 : 1;
    if (i + len > s.size()) len = 1;
    char32_t cp = len == 1 ? c : len == 2 ? (c & 0x1F) : len == 3 ? (c & 0x0F) : (c & 0x07);
    for (int k = 1; k < len; k++) cp = (cp << 6) | ((unsigned char)s[i + k] & 0x3F);
    return cp;
}

// UTF-8 → code points.
std::u32string code_points(const std::string &s) {
    std::u32string out;
    int len = 1;
    for (size_t i = 0; i < s.size(); i += (size_t)len) out += code_point_at(s, i, len);
    return out;
}

// Python's str.isspace / \s.
bool is_space(char32_t c) {
    return (c >= 0x09 && c <= 0x0D) || (c >= 0x1C && c <= 0x20) || c == 0x85 || c == 0xA0 || c == 0x1680 ||
           (c >= 0x2000 && c <= 0x200A) || c == 0x2028 || c == 0x2029 || c == 0x202F || c == 0x205F || c == 0x3000;
}

// Python's str.split(): the words between runs of Unicode whitespace (a
// no-break space separates words too, as in sacreBLEU).
std::vector<std::string> split_ws(const std::string &s) {
    std::vector<std::string> w;
    std::string cur;
    int len = 1;
    for (size_t i = 0; i < s.size(); i += (size_t)len) {
        if (is_space(code_point_at(s, i, len))) {
            if (!cur.empty()) w.push_back(std::move(cur));
            cur.clear();
        } else {
            cur.append(s, i, (size_t)len);
        }
    }
    if (!cur.empty()) w.push_back(std::move(cur));
    return w;
}

}  // namespace

std::string tokenize_13a(const std::string &input) {
    std::string line = input;
    replace_all(line, "<skipped>", "");
    replace_all(line, "-\n", "");
    replace_all(line, "\n", " ");
    if (line.find('&') != std::string::npos) {
        replace_all(line, "&quot;", "\"");
        replace_all(line, "&amp;", "&");
        replace_all(line, "&lt;", "<");
        replace_all(line, "&gt;", ">");
    }
    line = " " + line + " ";
    // 1. punctuation and symbols
    std::string a;
    a.reserve(line.size() * 2);
    for (unsigned char c : line) {
        if (is_13a_punct(c)) {
            a += ' ';
            a += (char)c;
            a += ' ';
        } else {
            a += (char)c;
        }
    }
    // 2. period and comma unless preceded by a digit
    a = sub2(a, [](unsigned char x, unsigned char y) { return !is_digit(x) && (y == '.' || y == ','); },
             [](std::string &o, char x, char y) { o += x, o += ' ', o += y, o += ' '; });
    // 3. period and comma unless followed by a digit
    a = sub2(a, [](unsigned char x, unsigned char y) { return (x == '.' || x == ',') && !is_digit(y); },
             [](std::string &o, char x, char y) { o += ' ', o += x, o += ' ', o += y; });
    // 4. dash preceded by a digit
    a = sub2(a, [](unsigned char x, unsigned char y) { return is_digit(x) && y == '-'; },
             [](std::string &o, char x, char y) { o += x, o += ' ', o += y, o += ' '; });
    std::string out;
    for (const std::string &w : split_ws(a)) out += (out.empty() ? "" : " ") + w;
    return out;
}

BleuScore corpus_bleu(const std::vector<std::string> &hyps, const std::vector<std::string> &refs) {
    check_pairs(hyps, refs, "BLEU");
    BleuScore b;
    for (size_t s = 0; s < hyps.size(); s++) {
        auto h = split_ws(tokenize_13a(hyps[s])), r = split_ws(tokenize_13a(refs[s]));
        b.hyp_len += (int64_t)h.size();
        b.ref_len += (int64_t)r.size();
        for (int n = 1; n <= 4; n++) {
            std::map<std::vector<std::string>, int64_t> rc;
            for (size_t i = 0; i + n <= r.size(); i++) rc[std::vector<std::string>(r.begin() + i, r.begin() + i + n)]++;
            std::map<std::vector<std::string>, int64_t> hc;
            for (size_t i = 0; i + n <= h.size(); i++) hc[std::vector<std::string>(h.begin() + i, h.begin() + i + n)]++;
            for (auto &[g, cnt] : hc) {
                auto it = rc.find(g);
                if (it != rc.end()) b.correct[n - 1] += std::min(cnt, it->second);
                b.total[n - 1] += cnt;
            }
        }
    }
    double smooth = 1, log_sum = 0;
    // No match at any order: 0 (sacreBLEU stops here, before smoothing).
    bool zero = b.correct[0] == 0 && b.correct[1] == 0 && b.correct[2] == 0 && b.correct[3] == 0;
    for (int n = 0; n < 4 && !zero; n++) {
        if (b.total[n] == 0) {  // sacreBLEU stops: the remaining orders score 0
            zero = true;
            break;
        }
        if (b.correct[n] == 0) {
            smooth *= 2;
            b.precisions[n] = 100.0 / (smooth * (double)b.total[n]);
        } else {
            b.precisions[n] = 100.0 * (double)b.correct[n] / (double)b.total[n];
        }
        log_sum += std::log(b.precisions[n]);
    }
    if (b.hyp_len < b.ref_len) b.bp = b.hyp_len > 0 ? std::exp(1.0 - (double)b.ref_len / (double)b.hyp_len) : 0.0;
    b.score = zero || b.bp == 0 ? 0.0 : b.bp * std::exp(log_sum / 4.0);
    return b;
}

double corpus_chrf(const std::vector<std::string> &hyps, const std::vector<std::string> &refs, int char_order,
                   double beta) {
    check_pairs(hyps, refs, "chrF");
    if (char_order < 1) throw Error("chrF: the character order must be >= 1");
    std::vector<int64_t> n_hyp(char_order), n_ref(char_order), n_match(char_order);
    auto strip = [](const std::string &s) {
        std::u32string out;
        for (char32_t c : code_points(s))
            if (!is_space(c)) out += c;
        return out;
    };
    for (size_t s = 0; s < hyps.size(); s++) {
        const std::u32string h = strip(hyps[s]), r = strip(refs[s]);
        for (int n = 1; n <= char_order; n++) {
            std::unordered_map<std::u32string, int64_t> rc, hc;
            for (size_t i = 0; i + n <= r.size(); i++) rc[r.substr(i, n)]++;
            for (size_t i = 0; i + n <= h.size(); i++) hc[h.substr(i, n)]++;
            for (auto &[g, cnt] : hc) {
                auto it = rc.find(g);
                if (it != rc.end()) n_match[n - 1] += std::min(cnt, it->second);
                n_hyp[n - 1] += cnt;
            }
            for (auto &[g, cnt] : rc) n_ref[n - 1] += cnt;
        }
    }
    // sacreBLEU's default (effective order, no eps smoothing): precision and
    // recall averaged over the orders both sides have, then their F-beta.
    const double factor = beta * beta;
    double avg_prec = 0, avg_rec = 0;
    int effective = 0;
    for (int n = 0; n < char_order; n++) {
        if (n_hyp[n] > 0 && n_ref[n] > 0) {
            avg_prec += (double)n_match[n] / (double)n_hyp[n];
            avg_rec += (double)n_match[n] / (double)n_ref[n];
            effective++;
        }
    }
    if (effective == 0) return 0.0;
    avg_prec /= effective;
    avg_rec /= effective;
    if (avg_prec + avg_rec == 0) return 0.0;
    return 100.0 * (1 + factor) * avg_prec * avg_rec / (factor * avg_prec + avg_rec);
}

}  // namespace halformer
