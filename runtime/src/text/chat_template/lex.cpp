// The lexer, which cuts a template into pieces with jinja2's whitespace
// rules, and the tokenizer of the expressions inside its tags.
#include "lex.h"

#include "halformer/error.h"

#include <algorithm>
#include <cctype>
#include <cstdlib>
#include <cstring>

namespace halformer::jinja {

namespace {

Where where_of(const std::string &src, size_t pos) {
    Where w;
    for (size_t k = 0; k < pos && k < src.size(); k++) {
        if (src[k] == '\n') {
            w.line++;
            w.col = 1;
        } else {
            w.col++;
        }
    }
    return w;
}

// Where the next tag ({{, {% or {#) at or after pos starts; npos if none.
size_t next_tag(const std::string &src, size_t pos) {
    for (size_t k = src.find('{', pos); k != std::string::npos && k + 1 < src.size(); k = src.find('{', k + 1)) {
        const char c = src[k + 1];
        if (c == '{' || c == '%' || c == '#') return k;
    }
    return std::string::npos;
}

// Where the tag whose body starts at `body` closes (`close`: "}}", "%}" or
// "#}"); npos if it never does. Outside a comment, a closing mark inside a
// string literal does not end the tag (unless the literal is never closed:
// then the first mark does, and the tokenizer names the literal).
size_t tag_end(const std::string &src, size_t body, const std::string &close, bool comment) {
    if (comment) return src.find(close, body);
    char quote = 0;
    for (size_t k = body; k + 1 < src.size(); k++) {
        const char c = src[k];
        if (quote) {
            if (c == '\\') k++;
            else if (c == quote) quote = 0;
        } else if (c == '\'' || c == '"') {
            quote = c;
        } else if (src.compare(k, 2, close) == 0) {
            return k;
        }
    }
    return src.find(close, body);
}

}  // namespace

// The template's pieces with jinja2's whitespace rules as transformers
// sets them: trim_blocks (the first newline after a block tag or comment
// is dropped), lstrip_blocks (spaces and tabs from the start of a line to a
// block tag or comment are dropped, unless {%+), and the - markers.
std::vector<Piece> lex(const std::string &src) {
    std::vector<Piece> out;
    size_t pos = 0;
    bool trim_next = false;  // a -%} / -}}: strip all whitespace at the start of the next text
    bool newline_next = false;  // trim_blocks after a block tag
    std::string text;
    auto flush_text = [&](Where at) {
        if (!text.empty()) out.push_back({Piece::Text, text, at});
        text.clear();
    };
    while (pos <= src.size()) {
        const size_t tag = next_tag(src, pos);
        size_t start = pos;  // the text's first character in src
        if (newline_next && src.compare(start, 1, "\n") == 0) start += 1;
        else if (newline_next && src.compare(start, 2, "\r\n") == 0) start += 2;
        newline_next = false;
        if (tag != std::string::npos && start > tag) start = tag;
        std::string chunk = src.substr(start, tag == std::string::npos ? std::string::npos : tag - start);
        const bool line_starting = start == 0 || src[start - 1] == '\n';
        if (trim_next) {
            const size_t k = chunk.find_first_not_of(" \t\r\n\f\v");
            chunk.erase(0, k == std::string::npos ? chunk.size() : k);
            trim_next = false;
        }
        if (tag == std::string::npos) {
            text += chunk;
            flush_text(where_of(src, pos));
            break;
        }
        const char kind = src[tag + 1];
        const bool minus_left = tag + 2 < src.size() && src[tag + 2] == '-';
        const bool plus_left = tag + 2 < src.size() && src[tag + 2] == '+';
        if (minus_left) {
            const size_t k = chunk.find_last_not_of(" \t\r\n\f\v");
            chunk.erase(k == std::string::npos ? 0 : k + 1);
        } else if ((kind == '%' || kind == '#') && !plus_left) {
            // lstrip_blocks: the spaces and tabs between a line's start and the tag.
            const size_t nl = chunk.find_last_of('\n');
            const size_t from = nl == std::string::npos ? 0 : nl + 1;
            if ((nl != std::string::npos || line_starting) && chunk.find_first_not_of(" \t", from) == std::string::npos) {
                chunk.erase(from);
            }
        }
        text += chunk;
        const Where at = where_of(src, tag);
        const std::string close = kind == '{' ? "}}" : kind == '%' ? "%}" : "#}";
        const size_t body = tag + 2 + (minus_left || plus_left ? 1 : 0);
        const size_t end = tag_end(src, body, close, kind == '#');
        if (end == std::string::npos) {
            throw Error("chat template: " + at.str() + ": the tag opened here is never closed (no \"" + close + "\")");
        }
        bool minus_right = end > body && src[end - 1] == '-';
        bool plus_right = end > body && src[end - 1] == '+' && kind == '%';
        std::string inside = src.substr(body, end - body - (minus_right || plus_right ? 1 : 0));
        if (kind != '#') {
            flush_text(at);
            out.push_back({kind == '{' ? Piece::Expr : Piece::Stmt, inside, at});
        }
        pos = end + 2;
        if (minus_right) trim_next = true;
        else if ((kind == '%' || kind == '#') && !plus_right) newline_next = true;
    }
    return out;
}

std::vector<Tok> tokenize(const std::string &s, const Where &at) {
    std::vector<Tok> out;
    auto fail = [&](const std::string &msg) -> void { throw Error("chat template: " + at.str() + ": " + msg); };
    size_t k = 0;
    while (k < s.size()) {
        const char c = s[k];
        if (std::isspace((unsigned char)c)) {
            k++;
            continue;
        }
        if (std::isalpha((unsigned char)c) || c == '_') {
            size_t e = k;
            while (e < s.size() && (std::isalnum((unsigned char)s[e]) || s[e] == '_')) e++;
            out.push_back({Tok::Name, s.substr(k, e - k)});
            k = e;
            continue;
        }
        if (std::isdigit((unsigned char)c)) {
            size_t e = k;
            while (e < s.size() && (std::isdigit((unsigned char)s[e]) || s[e] == '_')) e++;
            bool real = false;
            if (e + 1 < s.size() && s[e] == '.' && std::isdigit((unsigned char)s[e + 1])) {
                real = true;
                e++;
                while (e < s.size() && (std::isdigit((unsigned char)s[e]) || s[e] == '_')) e++;
            }
            // An exponent: 1e3, 2.5E-2 (a float, as jinja2's).
            if (e < s.size() && (s[e] == 'e' || s[e] == 'E')) {
                size_t x = e + 1;
                if (x < s.size() && (s[x] == '+' || s[x] == '-')) x++;
                if (x < s.size() && std::isdigit((unsigned char)s[x])) {
                    real = true;
                    e = x;
                    while (e < s.size() && (std::isdigit((unsigned char)s[e]) || s[e] == '_')) e++;
                }
            }
            std::string num = s.substr(k, e - k);
            num.erase(std::remove(num.begin(), num.end(), '_'), num.end());
            Tok t{real ? Tok::Float : Tok::Int, num};
            if (real) t.f = std::strtod(num.c_str(), nullptr);
            else t.i = std::strtoll(num.c_str(), nullptr, 10);
            out.push_back(t);
            k = e;
            continue;
        }
        if (c == '\'' || c == '"') {
            std::string v;
            size_t e = k + 1;
            for (; e < s.size() && s[e] != c; e++) {
                if (s[e] == '\\' && e + 1 < s.size()) {
                    const char n = s[++e];
                    switch (n) {
                    case 'n': v += '\n'; break;
                    case 't': v += '\t'; break;
                    case 'r': v += '\r'; break;
                    case '\\': v += '\\'; break;
                    case '\'': v += '\''; break;
                    case '"': v += '"'; break;
                    default: v += '\\'; v += n;
                    }
                } else {
                    v += s[e];
                }
            }
            if (e >= s.size()) fail("a string literal is not closed");
            out.push_back({Tok::Str, v});
            k = e + 1;
            continue;
        }
        static const char *ops[] = {"//", "**", "==", "!=", "<=", ">=", "(", ")", "[", "]", "{", "}", ",", ".", ":",
                                    "|", "+", "-", "*", "/", "%", "~", "<", ">", "="};
        bool hit = false;
        for (const char *op : ops) {
            const size_t n = std::strlen(op);
            if (s.compare(k, n, op) == 0) {
                out.push_back({Tok::Op, op});
                k += n;
                hit = true;
                break;
            }
        }
        if (!hit) fail(std::string("unexpected character '") + c + "'");
    }
    out.push_back({Tok::End, ""});
    return out;
}

}  // namespace halformer::jinja
