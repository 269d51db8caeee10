// The evaluator's filters (trim, length, default, join, tojson, map,
// selectattr, format, ...) and tests (defined, none, string, ...); the
// methods of strings, lists and dicts are eval_methods.cpp's.
#include "eval.h"

#include <algorithm>
#include <cctype>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <optional>
#include <sstream>

namespace halformer::jinja {


std::string Eval::replace_all(std::string s, const std::string &from, const std::string &to) {
    if (from.empty()) return s;
    for (size_t k = s.find(from); k != std::string::npos; k = s.find(from, k + to.size())) s.replace(k, from.size(), to);
    return s;
}

namespace {

// UTF-8 to code points and back.
std::vector<uint32_t> decode(const std::string &s) {
    std::vector<uint32_t> out;
    for (size_t k = 0; k < s.size();) {
        const unsigned char c = (unsigned char)s[k];
        const size_t n = c < 0x80 ? 1 : c < 0xE0 ? 2 : c < 0xF0 ? 3 : 4;
        uint32_t cp = n == 1 ? c : n == 2 ? (c & 0x1F) : n == 3 ? (c & 0x0F) : (c & 0x07);
        for (size_t j = 1; j < n && k + j < s.size(); j++) cp = (cp << 6) | ((unsigned char)s[k + j] & 0x3F);
        out.push_back(cp);
        k += n;
    }
    return out;
}
void encode(uint32_t cp, std::string &out) {
    if (cp < 0x80) {
        out += (char)cp;
    } else if (cp < 0x800) {
        out += (char)(0xC0 | (cp >> 6));
        out += (char)(0x80 | (cp & 0x3F));
    } else if (cp < 0x10000) {
        out += (char)(0xE0 | (cp >> 12));
        out += (char)(0x80 | ((cp >> 6) & 0x3F));
        out += (char)(0x80 | (cp & 0x3F));
    } else {
        out += (char)(0xF0 | (cp >> 18));
        out += (char)(0x80 | ((cp >> 12) & 0x3F));
        out += (char)(0x80 | ((cp >> 6) & 0x3F));
        out += (char)(0x80 | (cp & 0x3F));
    }
}

// Case of ASCII, Latin-1, Latin Extended-A, Greek and Cyrillic letters
// (other scripts are left as they are).
uint32_t upper_cp(uint32_t c) {
    if (c >= 'a' && c <= 'z') return c - 32;
    if (c < 0x80) return c;
    if (c >= 0xE0 && c <= 0xFE && c != 0xF7) return c - 32;
    if (c == 0xFF) return 0x178;
    if (c == 0xB5) return 0x39C;
    if ((c >= 0x100 && c <= 0x137) || (c >= 0x14A && c <= 0x177)) return c & ~1u;
    if ((c >= 0x139 && c <= 0x148) || (c >= 0x179 && c <= 0x17E)) return (c % 2 == 0) ? c - 1 : c;
    if (c == 0x3C2) return 0x3A3;
    if (c >= 0x3B1 && c <= 0x3C9) return c - 32;
    if (c >= 0x430 && c <= 0x44F) return c - 32;
    if (c >= 0x450 && c <= 0x45F) return c - 80;
    return c;
}
uint32_t lower_cp(uint32_t c) {
    if (c >= 'A' && c <= 'Z') return c + 32;
    if (c < 0x80) return c;
    if (c >= 0xC0 && c <= 0xDE && c != 0xD7) return c + 32;
    if (c == 0x178) return 0xFF;
    if ((c >= 0x100 && c <= 0x137) || (c >= 0x14A && c <= 0x177)) return c | 1u;
    if ((c >= 0x139 && c <= 0x148) || (c >= 0x179 && c <= 0x17E)) return (c % 2 == 1) ? c + 1 : c;
    if (c >= 0x391 && c <= 0x3A9 && c != 0x3A2) return c + 32;
    if (c >= 0x410 && c <= 0x42F) return c + 32;
    if (c >= 0x400 && c <= 0x40F) return c + 80;
    return c;
}
bool cased_letter(uint32_t c) { return upper_cp(c) != c || lower_cp(c) != c || c == 0xDF; }
void put_upper(uint32_t c, std::string &out) {
    if (c == 0xDF) out += "SS";  // Python: 'ß'.upper() == 'SS'
    else encode(upper_cp(c), out);
}
// Python's \w, roughly: letters and digits of any script, and _ (not
// punctuation, symbols or emoji).
bool word_cp(uint32_t c) {
    if (c < 0x80) return std::isalnum((int)c) || c == '_';
    if (c >= 0xA0 && c <= 0xBF) return c == 0xAA || c == 0xB2 || c == 0xB3 || c == 0xB5 || c == 0xB9 || c == 0xBA || (c >= 0xBC && c <= 0xBE);
    if (c == 0xD7 || c == 0xF7) return false;
    if ((c >= 0x2000 && c <= 0x2BFF) || (c >= 0x3000 && c <= 0x303F) || (c >= 0xFE30 && c <= 0xFE4F) ||
        (c >= 0xFF00 && c <= 0xFF0F) || (c >= 0x1F000 && c <= 0x1FFFF) || (c >= 0xE000 && c <= 0xF8FF)) {
        return false;
    }
    return true;
}
bool space_cp(uint32_t c) { return c == ' ' || (c >= 9 && c <= 13) || c == 0x1C || c == 0x1D || c == 0x1E || c == 0x1F || c == 0x85 || c == 0xA0 || c == 0x3000 || (c >= 0x2000 && c <= 0x200A) || c == 0x2028 || c == 0x2029; }

int64_t py_floordiv(int64_t a, int64_t b) {
    int64_t d = a / b;
    if ((a % b != 0) && ((a < 0) != (b < 0))) d--;
    return d;
}

}  // namespace

// Case changes as Python's str methods (upper, lower, capitalize, title).
std::string Eval::recase(const std::string &s, const std::string &how) {
    std::string out;
    bool start = true;
    size_t k = 0;
    for (uint32_t c : decode(s)) {
        if (how == "upper") put_upper(c, out);
        else if (how == "lower") encode(lower_cp(c), out);
        else if (how == "capitalize") k == 0 ? put_upper(c, out) : encode(lower_cp(c), out);
        else {  // title: a cased letter after an uncased character starts a word
            const bool cased = cased_letter(c);
            if (cased && start) put_upper(c, out);
            else encode(lower_cp(c), out);
            start = !cased;
        }
        k++;
    }
    return out;
}

// What a filter iterates over: a list's items, a dict's keys, a string's
// characters; undefined is empty (jinja2's Undefined), anything else an error.
Array Eval::iterate(const Value &v, const std::string &what) {
    Array out;
    if (v.kind == Value::List) return *v.list;
    if (v.kind == Value::Dict && !v.is_namespace) {
        for (auto &kv : *v.dict) out.push_back(Value::str(kv.first));
    } else if (v.kind == Value::String) {
        for (auto &c : utf8_chars(v.s)) out.push_back(Value::str(c));
    } else if (v.kind != Value::Undefined) {
        fail(at_, what + ": '" + kind_name(v) + "' object is not iterable");
    }
    return out;
}

// jinja2's attribute getter: "a.b.0", each part an item or attribute, digits an index.
Value Eval::attr_path(const Value &v, const std::string &path) {
    Value cur = v;
    size_t b = 0;
    for (;;) {
        const size_t e = path.find('.', b);
        const std::string part = path.substr(b, e == std::string::npos ? std::string::npos : e - b);
        const bool digits = !part.empty() && std::all_of(part.begin(), part.end(), [](char c) { return std::isdigit((unsigned char)c); });
        cur = digits ? item(cur, Value::integer(std::strtoll(part.c_str(), nullptr, 10))) : item(cur, Value::str(part));
        if (e == std::string::npos) return cur;
        b = e + 1;
    }
}

namespace {

// Python's str % args for one conversion: flags, width, precision, type.
std::string pad_to(const std::string &s, int width, bool left, char fill, size_t len) {
    if (width <= 0 || (size_t)width <= len) return s;
    const std::string p((size_t)width - len, fill);
    return left ? s + p : p + s;
}

}  // namespace

Value Eval::apply_filter(const std::string &f, const Value &v, const std::vector<Value> &a, const Kwargs &kw) {
    auto arg = [&](size_t pos, const char *name) -> const Value * {
        for (auto &[k, x] : kw)
            if (k == name) return &x;
        return pos < a.size() ? &a[pos] : nullptr;
    };
    auto arg_or = [&](size_t pos, const char *name, Value dflt) -> Value {
        const Value *x = arg(pos, name);
        return x ? *x : dflt;
    };
    auto int_arg = [&](size_t pos, const char *name, int64_t dflt) -> int64_t {
        const Value *x = arg(pos, name);
        if (!x) return dflt;
        if (x->kind == Value::Int) return x->i;
        if (x->kind == Value::Bool) return x->b;
        fail(at_, f + ": '" + name + "' must be an integer, not " + kind_name(*x));
    };
    auto str_of = [&](const Value &x) -> std::string {
        if (x.kind == Value::Undefined) return "";
        return to_str(x);
    };
    auto ci_key = [&](const Value &x, bool case_sensitive) -> Value {
        return !case_sensitive && x.kind == Value::String ? Value::str(recase(x.s, "lower")) : x;
    };
    auto less = [&](const Value &x, const Value &y) -> bool {
        if (x.number() && y.number()) return x.as_double() < y.as_double();
        if (x.kind == Value::String && y.kind == Value::String) return x.s < y.s;
        if (x.kind == Value::List && y.kind == Value::List) {  // tuples and lists, item by item
            for (size_t k = 0; k < x.list->size() && k < y.list->size(); k++) {
                if (!equal((*x.list)[k], (*y.list)[k])) {
                    const Value &p = (*x.list)[k], &q = (*y.list)[k];
                    if (p.number() && q.number()) return p.as_double() < q.as_double();
                    if (p.kind == Value::String && q.kind == Value::String) return p.s < q.s;
                    fail(at_, std::string("'<' not supported between ") + kind_name(p) + " and " + kind_name(q));
                }
            }
            return x.list->size() < y.list->size();
        }
        fail(at_, f + ": '<' not supported between " + kind_name(x) + " and " + kind_name(y));
    };

    // ------------------------------------------------------- strings
    if (f == "trim") {
        const std::string s = str_of(v);
        const Value *chars = arg(0, "chars");
        const std::string cs = chars && chars->kind != Value::None ? str_of(*chars) : std::string(" \t\n\r\f\v");
        const size_t b = s.find_first_not_of(cs);
        if (b == std::string::npos) return Value::str("");
        return Value::str(s.substr(b, s.find_last_not_of(cs) - b + 1));
    }
    if (f == "upper" || f == "lower" || f == "capitalize") return Value::str(recase(str_of(v), f));
    if (f == "title") {
        // jinja2's: a word starts after spaces, '-', and opening brackets.
        std::string out;
        bool start = true;
        for (uint32_t c : decode(str_of(v))) {
            const bool sep = space_cp(c) || c == '-' || c == '(' || c == '{' || c == '[' || c == '<';
            if (sep) encode(c, out);
            else if (start) put_upper(c, out);
            else encode(lower_cp(c), out);
            start = sep;
        }
        return Value::str(out);
    }
    if (f == "replace") {
        if (a.size() < 2) fail(at_, "replace takes two strings");
        const std::string s = str_of(v), from = str_of(a[0]), to = str_of(a[1]);
        const int64_t count = int_arg(2, "count", -1);
        if (count < 0) {
            if (!from.empty()) return Value::str(replace_all(s, from, to));
        }
        std::string out;
        int64_t done = 0;
        if (from.empty()) {  // Python: between each character
            const auto cs = utf8_chars(s);
            for (size_t k = 0; k <= cs.size(); k++) {
                if (count < 0 || done < count) out += to, done++;
                if (k < cs.size()) out += cs[k];
            }
            return Value::str(out);
        }
        size_t b = 0;
        for (size_t k; done < count && (k = s.find(from, b)) != std::string::npos; b = k + from.size(), done++) {
            out += s.substr(b, k - b) + to;
        }
        return Value::str(out + s.substr(b));
    }
    if (f == "string") return Value::str(str_of(v));
    if (f == "wordcount") {
        int64_t n = 0;
        bool in = false;
        for (uint32_t c : decode(str_of(v))) {
            const bool w = word_cp(c);
            if (w && !in) n++;
            in = w;
        }
        return Value::integer(n);
    }
    if (f == "center") {
        const std::string s = str_of(v);
        const int64_t width = int_arg(0, "width", 80), len = utf8_length(s);
        if (width <= len) return Value::str(s);
        const int64_t marg = width - len, left = marg / 2 + (marg & width & 1);
        return Value::str(std::string((size_t)left, ' ') + s + std::string((size_t)(marg - left), ' '));
    }
    if (f == "indent") {
        const Value w = arg_or(0, "width", Value::integer(4));
        std::string ind;
        if (w.kind == Value::String) ind = w.s;
        else if (w.kind == Value::Int) ind = std::string((size_t)std::max<int64_t>(0, w.i), ' ');
        else fail(at_, "indent: the width must be an integer or a string");
        const bool first = truthy(arg_or(1, "first", Value::boolean(false)));
        const bool blank = truthy(arg_or(2, "blank", Value::boolean(false)));
        // Python's splitlines of the text plus "\n".
        const std::string s = str_of(v) + "\n";
        std::vector<std::string> lines;
        std::string cur;
        for (size_t k = 0; k < s.size(); k++) {
            if (s[k] == '\n' || s[k] == '\r') {
                if (s[k] == '\r' && k + 1 < s.size() && s[k + 1] == '\n') k++;
                lines.push_back(cur);
                cur.clear();
            } else {
                cur += s[k];
            }
        }
        if (!cur.empty()) lines.push_back(cur);
        std::string rv;
        if (blank) {
            for (size_t k = 0; k < lines.size(); k++) rv += (k ? "\n" + ind : "") + lines[k];
        } else {
            rv = lines.empty() ? "" : lines[0];
            for (size_t k = 1; k < lines.size(); k++) rv += "\n" + (lines[k].empty() ? "" : ind + lines[k]);
        }
        return Value::str(first ? ind + rv : rv);
    }
    if (f == "format") {
        if (v.kind != Value::String) fail(at_, std::string("format of a ") + kind_name(v));
        if (!kw.empty() && !a.empty()) fail(at_, "format: positional and keyword arguments together");
        if (!kw.empty()) fail(at_, "format: %(name)s keyword formatting is not supported");
        const std::string &fmt = v.s;
        std::string out;
        size_t next = 0;
        for (size_t k = 0; k < fmt.size(); k++) {
            if (fmt[k] != '%') {
                out += fmt[k];
                continue;
            }
            if (++k >= fmt.size()) fail(at_, "format: incomplete format");
            if (fmt[k] == '%') {
                out += '%';
                continue;
            }
            bool left = false, zero = false, plus = false, space = false, alt = false;
            for (; k < fmt.size() && std::strchr("-0+ #", fmt[k]); k++) {
                left |= fmt[k] == '-', zero |= fmt[k] == '0', plus |= fmt[k] == '+', space |= fmt[k] == ' ', alt |= fmt[k] == '#';
            }
            int width = 0, prec = -1;
            while (k < fmt.size() && std::isdigit((unsigned char)fmt[k])) width = width * 10 + (fmt[k++] - '0');
            if (k < fmt.size() && fmt[k] == '.') {
                prec = 0;
                for (k++; k < fmt.size() && std::isdigit((unsigned char)fmt[k]);) prec = prec * 10 + (fmt[k++] - '0');
            }
            if (k >= fmt.size()) fail(at_, "format: incomplete format");
            const char t = fmt[k];
            if (next >= a.size()) fail(at_, "format: not enough arguments for format string");
            const Value &x = a[next++];
            std::string body;
            if (t == 's' || t == 'r' || t == 'a') {
                body = t == 's' ? to_str(x) : repr(x);
                if (prec >= 0) {
                    auto cs = utf8_chars(body);
                    if ((size_t)prec < cs.size()) {
                        body.clear();
                        for (int j = 0; j < prec; j++) body += cs[(size_t)j];
                    }
                }
                out += pad_to(body, width, left, ' ', (size_t)utf8_length(body));
                continue;
            }
            if (!x.number()) fail(at_, std::string("format: %") + t + " format: a real number is required, not " + kind_name(x));
            std::string spec = "%";
            if (left) spec += '-';
            if (zero && !left) spec += '0';
            if (plus) spec += '+';
            if (space) spec += ' ';
            if (alt) spec += '#';
            if (width) spec += std::to_string(width);
            char buf[512];
            if (t == 'd' || t == 'i' || t == 'u' || t == 'x' || t == 'X' || t == 'o') {
                const long long iv = x.kind == Value::Float ? (long long)std::trunc(x.f) : x.kind == Value::Int ? x.i : x.b;
                if (prec >= 0) spec += "." + std::to_string(prec);
                spec += "ll";
                spec += t == 'i' || t == 'u' ? 'd' : t;
                std::snprintf(buf, sizeof buf, spec.c_str(), iv);
            } else if (std::strchr("fFeEgG", t)) {
                spec += "." + std::to_string(prec < 0 ? 6 : prec) + t;
                std::snprintf(buf, sizeof buf, spec.c_str(), x.as_double());
            } else {
                fail(at_, std::string("format: unsupported format character '") + t + "'");
            }
            out += buf;
        }
        if (next < a.size()) fail(at_, "format: not all arguments converted during string formatting");
        return Value::str(out);
    }

    // ------------------------------------------------------- numbers
    if (f == "int") {
        const int64_t dflt = int_arg(0, "default", 0), base = int_arg(1, "base", 10);
        if (v.kind == Value::Int) return v;
        if (v.kind == Value::Float) return std::isfinite(v.f) ? Value::integer((int64_t)std::trunc(v.f)) : Value::integer(dflt);
        if (v.kind == Value::Bool) return Value::integer(v.b);
        if (v.kind == Value::String) {
            std::string t = v.s;
            t.erase(0, t.find_first_not_of(" \t\n\r\f\v"));
            t.erase(t.find_last_not_of(" \t\n\r\f\v") + 1);
            t.erase(std::remove(t.begin(), t.end(), '_'), t.end());
            if (!t.empty()) {
                char *end = nullptr;
                const long long x = std::strtoll(t.c_str(), &end, (int)base);
                if (*end == 0) return Value::integer(x);
                const double d = std::strtod(t.c_str(), &end);
                if (*end == 0 && std::isfinite(d)) return Value::integer((int64_t)std::trunc(d));
            }
        }
        return Value::integer(dflt);
    }
    if (f == "float") {
        const Value dflt = arg_or(0, "default", Value::real(0.0));
        if (v.kind == Value::Float) return v;
        if (v.kind == Value::Int || v.kind == Value::Bool) return Value::real(v.as_double());
        if (v.kind == Value::String) {
            std::string t = v.s;
            t.erase(0, t.find_first_not_of(" \t\n\r\f\v"));
            t.erase(t.find_last_not_of(" \t\n\r\f\v") + 1);
            char *end = nullptr;
            const double d = std::strtod(t.c_str(), &end);
            if (!t.empty() && *end == 0 && t.find_first_of("xX") == std::string::npos) return Value::real(d);
        }
        return dflt;
    }
    if (f == "abs") {
        if (v.kind == Value::Int) return Value::integer(v.i < 0 ? -v.i : v.i);
        if (v.kind == Value::Bool) return Value::integer(v.b);
        if (v.kind == Value::Float) return Value::real(std::fabs(v.f));
        fail(at_, std::string("bad operand type for abs(): '") + kind_name(v) + "'");
    }
    if (f == "round") {
        const int64_t prec = int_arg(0, "precision", 0);
        const Value m = arg_or(1, "method", Value::str("common"));
        const std::string method = m.kind == Value::String ? m.s : "";
        if (method != "common" && method != "floor" && method != "ceil") {
            fail(at_, "round: method must be common, ceil or floor");
        }
        if (!v.number()) fail(at_, std::string("round of a ") + kind_name(v));
        if (method == "common") {
            if (v.kind != Value::Float) {  // Python's round() of an int is an int
                if (prec >= 0) return Value::integer(v.kind == Value::Int ? v.i : v.b);
                int64_t p = 1;
                for (int64_t k = 0; k < -prec && p < (int64_t)1e17; k++) p *= 10;
                const int64_t x = v.kind == Value::Int ? v.i : v.b;
                int64_t q = py_floordiv(x, p), r = x - q * p;
                if (2 * r > p || (2 * r == p && q % 2 != 0)) q++;
                return Value::integer(q * p);
            }
            if (!std::isfinite(v.f)) return v;
            if (prec >= 0 && prec < 300) {  // correctly rounded, half to even, as Python's
                char buf[400];
                std::snprintf(buf, sizeof buf, "%.*f", (int)prec, v.f);
                return Value::real(std::strtod(buf, nullptr));
            }
            const double p = std::pow(10.0, (double)-prec);
            return Value::real(std::nearbyint(v.f / p) * p);
        }
        const double p = std::pow(10.0, (double)prec);
        const double x = v.as_double() * p;
        return Value::real((method == "floor" ? std::floor(x) : std::ceil(x)) / p);
    }

    // ------------------------------------------------------- values
    if (f == "default" || f == "d") {
        const bool boolean = truthy(arg_or(1, "boolean", Value::boolean(false)));
        const bool use = v.kind == Value::Undefined || (boolean && !truthy(v));
        return use ? arg_or(0, "default_value", Value::str("")) : v;
    }
    if (f == "length" || f == "count") {
        if (v.kind == Value::String) return Value::integer(utf8_length(v.s));
        if (v.kind == Value::List) return Value::integer((int64_t)v.list->size());
        if (v.kind == Value::Dict) return Value::integer((int64_t)v.dict->size());
        if (v.kind == Value::Undefined) return Value::integer(0);
        fail(at_, std::string("object of type '") + kind_name(v) + "' has no len()");
    }
    if (f == "attr") {
        if (a.empty() || a[0].kind != Value::String) fail(at_, "attr takes a name");
        return attribute(v, a[0].s);
    }
    if (f == "tojson") {
        const int64_t indent = int_arg(0, "indent", -1);
        std::string out;
        tojson(v, out, indent < 0 ? -1 : (int)indent, 0);
        return Value::str(out);
    }
    if (f == "items") {
        if (v.kind == Value::Undefined) return Value::array();
        if (v.kind != Value::Dict || v.is_namespace) fail(at_, "items: can only get item pairs from a mapping");
        Array out;
        for (auto &kv : *v.dict) out.push_back(Value::tuple({Value::str(kv.first), kv.second}));
        return Value::array(std::move(out));
    }
    if (f == "dictsort") {
        if (v.kind != Value::Dict || v.is_namespace) fail(at_, std::string("dictsort of a ") + kind_name(v) + ", not a dict");
        const bool cs = truthy(arg_or(0, "case_sensitive", Value::boolean(false)));
        const Value by = arg_or(1, "by", Value::str("key"));
        const bool rev = truthy(arg_or(2, "reverse", Value::boolean(false)));
        if (by.kind != Value::String || (by.s != "key" && by.s != "value")) fail(at_, "dictsort: by must be 'key' or 'value'");
        const size_t pos = by.s == "key" ? 0 : 1;
        Array out;
        for (auto &kv : *v.dict) out.push_back(Value::tuple({Value::str(kv.first), kv.second}));
        std::stable_sort(out.begin(), out.end(), [&](const Value &x, const Value &y) {
            const Value p = ci_key((*x.list)[pos], cs), q = ci_key((*y.list)[pos], cs);
            return rev ? less(q, p) : less(p, q);
        });
        return Value::array(std::move(out));
    }

    // ------------------------------------------------------- sequences
    if (f == "first" || f == "last") {
        const Array items = iterate(v, f);
        if (items.empty()) return Value{};
        return f == "first" ? items.front() : items.back();
    }
    if (f == "join") {
        const std::string sep = str_of(arg_or(0, "d", Value::str("")));
        const Value *attr = arg(1, "attribute");
        const Array items = iterate(v, "join");
        std::string out;
        for (size_t k = 0; k < items.size(); k++) {
            out += (k ? sep : "") + str_of(attr && attr->kind != Value::None ? attr_path(items[k], to_str(*attr)) : items[k]);
        }
        return Value::str(out);
    }
    if (f == "list") {
        if (v.kind == Value::List) return Value::array(*v.list);
        return Value::array(iterate(v, "list"));
    }
    if (f == "reverse") {
        if (v.kind == Value::String) {
            auto cs = utf8_chars(v.s);
            std::string out;
            for (auto it = cs.rbegin(); it != cs.rend(); ++it) out += *it;
            return Value::str(out);
        }
        const Array items = iterate(v, "reverse");
        return Value::array(Array(items.rbegin(), items.rend()));
    }
    if (f == "batch") {
        const int64_t n = int_arg(0, "linecount", 0);
        if (n <= 0) fail(at_, "batch: the line count must be positive");
        const Value *fill = arg(1, "fill_with");
        Array out, cur;
        for (const Value &x : iterate(v, "batch")) {
            cur.push_back(x);
            if ((int64_t)cur.size() == n) out.push_back(Value::array(std::move(cur))), cur.clear();
        }
        if (!cur.empty()) {
            if (fill && fill->kind != Value::None)
                while ((int64_t)cur.size() < n) cur.push_back(*fill);
            out.push_back(Value::array(std::move(cur)));
        }
        return Value::array(std::move(out));
    }
    if (f == "select" || f == "reject" || f == "selectattr" || f == "rejectattr") {
        const bool attr = f == "selectattr" || f == "rejectattr", keep = f == "select" || f == "selectattr";
        if (attr && (a.empty() || a[0].kind != Value::String)) fail(at_, f + " takes an attribute name");
        const size_t t0 = attr ? 1 : 0;
        if (a.size() > t0 && a[t0].kind != Value::String) fail(at_, f + ": the test must be named by a string");
        const std::vector<Value> targs(a.begin() + (long)std::min(a.size(), t0 + 1), a.end());
        Array out;
        for (const Value &x : iterate(v, f)) {
            const Value y = attr ? attr_path(x, a[0].s) : x;
            const bool r = a.size() > t0 ? apply_test(a[t0].s, y, targs) : truthy(y);
            if (r == keep) out.push_back(x);
        }
        return Value::array(std::move(out));
    }
    if (f == "map") {
        Array out;
        if (const Value *attr = arg(99, "attribute")) {
            const Value *dflt = arg(99, "default");
            for (const Value &x : iterate(v, "map")) {
                Value y = attr_path(x, to_str(*attr));
                if (y.kind == Value::Undefined && dflt) y = *dflt;
                out.push_back(y);
            }
            return Value::array(std::move(out));
        }
        if (a.empty() || a[0].kind != Value::String) fail(at_, "map takes a filter name or attribute=");
        const std::vector<Value> fargs(a.begin() + 1, a.end());
        for (const Value &x : iterate(v, "map")) out.push_back(apply_filter(a[0].s, x, fargs, kw));
        return Value::array(std::move(out));
    }
    if (f == "unique") {
        const bool cs = truthy(arg_or(0, "case_sensitive", Value::boolean(false)));
        const Value *attr = arg(1, "attribute");
        Array out, seen;
        for (const Value &x : iterate(v, "unique")) {
            const Value key = ci_key(attr && attr->kind != Value::None ? attr_path(x, to_str(*attr)) : x, cs);
            if (std::none_of(seen.begin(), seen.end(), [&](const Value &s) { return equal(s, key); })) {
                seen.push_back(key);
                out.push_back(x);
            }
        }
        return Value::array(std::move(out));
    }
    if (f == "sum") {
        const Value *attr = arg(0, "attribute");
        Value acc = arg_or(1, "start", Value::integer(0));
        for (const Value &x0 : iterate(v, "sum")) {
            const Value x = attr && attr->kind != Value::None ? attr_path(x0, to_str(*attr)) : x0;
            if (acc.number() && x.number()) {
                if (acc.kind != Value::Float && x.kind != Value::Float) acc = Value::integer((acc.kind == Value::Int ? acc.i : acc.b) + (x.kind == Value::Int ? x.i : x.b));
                else acc = Value::real(acc.as_double() + x.as_double());
            } else if (acc.kind == Value::List && x.kind == Value::List) {
                Array l = *acc.list;
                l.insert(l.end(), x.list->begin(), x.list->end());
                acc = Value::array(std::move(l));
            } else {
                fail(at_, std::string("sum: unsupported operand types for +: ") + kind_name(acc) + " and " + kind_name(x));
            }
        }
        return acc;
    }
    if (f == "min" || f == "max") {
        const bool cs = truthy(arg_or(0, "case_sensitive", Value::boolean(false)));
        const Value *attr = arg(1, "attribute");
        const Array items = iterate(v, f);
        if (items.empty()) return Value{};
        auto key = [&](const Value &x) { return ci_key(attr && attr->kind != Value::None ? attr_path(x, to_str(*attr)) : x, cs); };
        size_t best = 0;
        for (size_t k = 1; k < items.size(); k++) {
            const bool better = f == "min" ? less(key(items[k]), key(items[best])) : less(key(items[best]), key(items[k]));
            if (better) best = k;
        }
        return items[best];
    }
    fail(at_, "the filter '" + f + "' is not supported by Halformer's chat templates");
}

Value Eval::filter(const Node &n) {
    const Value v = eval(*n.kids[0]);
    std::vector<Value> a;
    for (size_t k = 1; k < n.kids.size(); k++) a.push_back(eval(*n.kids[k]));
    Kwargs kw;
    for (auto &[key, e] : n.kwargs) kw.emplace_back(key, eval(*e));
    return apply_filter(n.name, v, a, kw);
}

bool Eval::test(const Node &n) {
    const Value v = eval(*n.kids[0]);
    std::vector<Value> a;
    for (size_t k = 1; k < n.kids.size(); k++) a.push_back(eval(*n.kids[k]));
    return apply_test(n.name, v, a);
}

bool Eval::apply_test(const std::string &t, const Value &v, const std::vector<Value> &a) {
    auto other = [&]() -> const Value & {
        if (a.empty()) fail(at_, "the test '" + t + "' takes an argument");
        return a[0];
    };
    auto order = [&](const Value &x, const Value &y) -> int {
        if (x.number() && y.number()) return x.as_double() < y.as_double() ? -1 : x.as_double() > y.as_double() ? 1 : 0;
        if (x.kind == Value::String && y.kind == Value::String) return x.s < y.s ? -1 : x.s == y.s ? 0 : 1;
        fail(at_, "'" + t + "' between " + kind_name(x) + " and " + kind_name(y));
    };
    if (t == "defined") return v.kind != Value::Undefined;
    if (t == "undefined") return v.kind == Value::Undefined;
    if (t == "none") return v.kind == Value::None;
    if (t == "string") return v.kind == Value::String;
    if (t == "number") return v.kind == Value::Int || v.kind == Value::Float || v.kind == Value::Bool;
    if (t == "integer") return v.kind == Value::Int;
    if (t == "float") return v.kind == Value::Float;
    if (t == "boolean") return v.kind == Value::Bool;
    if (t == "true") return v.kind == Value::Bool && v.b;
    if (t == "false") return v.kind == Value::Bool && !v.b;
    if (t == "mapping") return v.kind == Value::Dict;
    if (t == "sequence") return v.kind == Value::List || v.kind == Value::String || (v.kind == Value::Dict && !v.is_namespace);
    if (t == "iterable") return v.kind == Value::List || v.kind == Value::String || (v.kind == Value::Dict && !v.is_namespace);
    if (t == "callable") return v.kind == Value::Function;
    if (t == "lower" || t == "upper") {
        const std::string s = to_str(v);
        return recase(s, t) == s && recase(s, t == "lower" ? "upper" : "lower") != s;
    }
    if (t == "odd" || t == "even") {
        if (v.kind != Value::Int) fail(at_, "odd / even of a " + std::string(kind_name(v)));
        return (((v.i % 2) + 2) % 2 == 1) == (t == "odd");
    }
    if (t == "divisibleby") {
        const Value d = a.empty() ? Value{} : a[0];
        if (v.kind != Value::Int || d.kind != Value::Int || d.i == 0) fail(at_, "divisibleby takes integers");
        return v.i % d.i == 0;
    }
    if (t == "equalto" || t == "eq" || t == "==") return equal(v, other());
    if (t == "ne" || t == "!=") return !equal(v, other());
    if (t == "sameas") {
        const Value &o = other();
        if (v.kind != o.kind) return false;
        if (v.kind == Value::List) return v.list == o.list;
        if (v.kind == Value::Dict) return v.dict == o.dict;
        return v.kind == Value::None || v.kind == Value::Undefined || (v.kind == Value::Bool && v.b == o.b) ||
               (v.kind == Value::Int && v.i == o.i);
    }
    if (t == "gt" || t == ">" || t == "greaterthan") return order(v, other()) > 0;
    if (t == "ge" || t == ">=") return order(v, other()) >= 0;
    if (t == "lt" || t == "<" || t == "lessthan") return order(v, other()) < 0;
    if (t == "le" || t == "<=") return order(v, other()) <= 0;
    if (t == "in") {
        const Value &o = other();
        if (o.kind == Value::String) return v.kind == Value::String && o.s.find(v.s) != std::string::npos;
        if (o.kind == Value::List) return std::any_of(o.list->begin(), o.list->end(), [&](const Value &x) { return equal(v, x); });
        if (o.kind == Value::Dict) return v.kind == Value::String && o.find(v.s);
        fail(at_, std::string("'in' a ") + kind_name(o));
    }
    fail(at_, "the test '" + t + "' is not supported by Halformer's chat templates");
}

}  // namespace halformer::jinja
