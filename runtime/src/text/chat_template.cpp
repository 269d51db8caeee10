// The Jinja subset of chat templates (halformer/chat.h): a lexer that
// applies jinja2's whitespace rules (trim_blocks, lstrip_blocks, - markers),
// a recursive-descent parser into a small tree, and an evaluator over
// dynamically typed values with Python's semantics where the templates see
// them (truthiness, str(), ==, +, in, slicing).
#include "halformer/chat.h"

#include "halformer/json.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <sstream>

namespace halformer {
namespace {

// ---------------------------------------------------------------- values

struct Value;
using Array = std::vector<Value>;
using Object = std::vector<std::pair<std::string, Value>>;  // in insertion order, as Python's dict
using Builtin = std::function<Value(std::vector<Value> &args, std::vector<std::pair<std::string, Value>> &kwargs)>;

struct Value {
    enum Kind { Undefined, None, Bool, Int, Float, String, List, Dict, Function } kind = Undefined;
    bool b = false;
    int64_t i = 0;
    double f = 0;
    std::string s;
    std::shared_ptr<Array> list;
    std::shared_ptr<Object> dict;
    std::shared_ptr<Builtin> fn;
    bool is_namespace = false;

    static Value none() { Value v; v.kind = None; return v; }
    static Value boolean(bool x) { Value v; v.kind = Bool; v.b = x; return v; }
    static Value integer(int64_t x) { Value v; v.kind = Int; v.i = x; return v; }
    static Value real(double x) { Value v; v.kind = Float; v.f = x; return v; }
    static Value str(std::string x) { Value v; v.kind = String; v.s = std::move(x); return v; }
    static Value array(Array a = {}) { Value v; v.kind = List; v.list = std::make_shared<Array>(std::move(a)); return v; }
    static Value object(Object o = {}) { Value v; v.kind = Dict; v.dict = std::make_shared<Object>(std::move(o)); return v; }
    static Value function(Builtin f) { Value v; v.kind = Function; v.fn = std::make_shared<Builtin>(std::move(f)); return v; }

    bool number() const { return kind == Int || kind == Float || kind == Bool; }
    double as_double() const { return kind == Float ? f : kind == Int ? (double)i : (double)b; }
    const Value *find(const std::string &key) const {
        if (kind != Dict) return nullptr;
        for (auto &kv : *dict)
            if (kv.first == key) return &kv.second;
        return nullptr;
    }
    void put(const std::string &key, Value v) {
        for (auto &kv : *dict) {
            if (kv.first == key) {
                kv.second = std::move(v);
                return;
            }
        }
        dict->emplace_back(key, std::move(v));
    }
};

const char *kind_name(const Value &v) {
    switch (v.kind) {
    case Value::Undefined: return "undefined";
    case Value::None: return "none";
    case Value::Bool: return "bool";
    case Value::Int: return "int";
    case Value::Float: return "float";
    case Value::String: return "str";
    case Value::List: return "list";
    case Value::Dict: return v.is_namespace ? "namespace" : "dict";
    case Value::Function: return "function";
    }
    return "?";
}

bool truthy(const Value &v) {
    switch (v.kind) {
    case Value::Undefined:
    case Value::None: return false;
    case Value::Bool: return v.b;
    case Value::Int: return v.i != 0;
    case Value::Float: return v.f != 0;
    case Value::String: return !v.s.empty();
    case Value::List: return !v.list->empty();
    case Value::Dict: return v.is_namespace || !v.dict->empty();
    case Value::Function: return true;
    }
    return false;
}

std::string float_repr(double x) {
    if (std::isinf(x)) return x > 0 ? "inf" : "-inf";
    if (std::isnan(x)) return "nan";
    char buf[64];
    for (int prec = 1; prec <= 17; prec++) {  // Python's repr: the shortest that reads back
        std::snprintf(buf, sizeof buf, "%.*g", prec, x);
        if (std::strtod(buf, nullptr) == x) break;
    }
    std::string s = buf;
    if (s.find_first_of(".en") == std::string::npos) s += ".0";
    return s;
}

std::string py_quote(const std::string &s) {
    // Python's repr of a str: single quotes unless the text has one and no double quote.
    const bool dq = s.find('\'') != std::string::npos && s.find('"') == std::string::npos;
    const char q = dq ? '"' : '\'';
    std::string out(1, q);
    for (char c : s) {
        if (c == q || c == '\\') out += '\\';
        if (c == '\n') out += "\\n";
        else if (c == '\t') out += "\\t";
        else if (c == '\r') out += "\\r";
        else out += c;
    }
    return out + q;
}

std::string repr(const Value &v);
std::string to_str(const Value &v) {
    switch (v.kind) {
    case Value::Undefined: return "";
    case Value::None: return "None";
    case Value::Bool: return v.b ? "True" : "False";
    case Value::Int: return std::to_string(v.i);
    case Value::Float: return float_repr(v.f);
    case Value::String: return v.s;
    default: return repr(v);
    }
}
std::string repr(const Value &v) {
    switch (v.kind) {
    case Value::String: return py_quote(v.s);
    case Value::List: {
        std::string out = "[";
        for (size_t k = 0; k < v.list->size(); k++) out += (k ? ", " : "") + repr((*v.list)[k]);
        return out + "]";
    }
    case Value::Dict: {
        if (v.is_namespace) return "<Namespace>";
        std::string out = "{";
        bool first = true;
        for (auto &kv : *v.dict) {
            out += (first ? "" : ", ") + py_quote(kv.first) + ": " + repr(kv.second);
            first = false;
        }
        return out + "}";
    }
    case Value::Function: return "<function>";
    default: return to_str(v);
    }
}

bool equal(const Value &a, const Value &b) {
    if (a.number() && b.number()) return a.as_double() == b.as_double();
    if (a.kind != b.kind) return (a.kind == Value::Undefined || a.kind == Value::None) && a.kind == b.kind;
    switch (a.kind) {
    case Value::String: return a.s == b.s;
    case Value::List:
        if (a.list->size() != b.list->size()) return false;
        for (size_t k = 0; k < a.list->size(); k++)
            if (!equal((*a.list)[k], (*b.list)[k])) return false;
        return true;
    case Value::Dict: {
        if (a.dict->size() != b.dict->size()) return false;
        for (auto &kv : *a.dict) {
            const Value *o = b.find(kv.first);
            if (!o || !equal(kv.second, *o)) return false;
        }
        return true;
    }
    case Value::Undefined:
    case Value::None: return true;
    default: return a.fn == b.fn;
    }
}

// tojson as transformers' filter: json.dumps(x, ensure_ascii=False) with
// its default separators (", " and ": "), or indent.
void tojson(const Value &v, std::string &out, int indent, int depth) {
    auto nl = [&](int d) {
        if (indent < 0) return;
        out += '\n';
        out.append((size_t)(indent * d), ' ');
    };
    switch (v.kind) {
    case Value::Undefined:
    case Value::None: out += "null"; break;
    case Value::Bool: out += v.b ? "true" : "false"; break;
    case Value::Int: out += std::to_string(v.i); break;
    case Value::Float: out += std::isfinite(v.f) ? float_repr(v.f) : (std::isnan(v.f) ? "NaN" : v.f > 0 ? "Infinity" : "-Infinity"); break;
    case Value::String: out += json::quote(v.s); break;
    case Value::List:
        out += '[';
        for (size_t k = 0; k < v.list->size(); k++) {
            if (k) out += indent < 0 ? ", " : ",";
            nl(depth + 1);
            tojson((*v.list)[k], out, indent, depth + 1);
        }
        if (!v.list->empty()) nl(depth);
        out += ']';
        break;
    case Value::Dict: {
        out += '{';
        bool first = true;
        for (auto &kv : *v.dict) {
            if (!first) out += indent < 0 ? ", " : ",";
            nl(depth + 1);
            out += json::quote(kv.first) + ": ";
            tojson(kv.second, out, indent, depth + 1);
            first = false;
        }
        if (!v.dict->empty()) nl(depth);
        out += '}';
        break;
    }
    case Value::Function: throw Error("tojson: a function is not JSON");
    }
}

// ----------------------------------------------------------------- lexer

struct Where {
    int line = 1, col = 1;
    std::string str() const { return "line " + std::to_string(line) + ", column " + std::to_string(col); }
};

struct Piece {
    enum Kind { Text, Expr, Stmt } kind;
    std::string text;  // Text: the text; Expr / Stmt: the tag's inside
    Where at;
};

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
        size_t tag = std::string::npos;
        for (size_t k = src.find('{', pos); k != std::string::npos && k + 1 < src.size(); k = src.find('{', k + 1)) {
            const char c = src[k + 1];
            if (c == '{' || c == '%' || c == '#') {
                tag = k;
                break;
            }
        }
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
        size_t end = src.find(close, body);
        if (kind != '#') {
            // (A closing mark inside a string literal does not end the tag.)
            char quote = 0;
            for (size_t k = body; k + 1 < src.size(); k++) {
                const char c = src[k];
                if (quote) {
                    if (c == '\\') k++;
                    else if (c == quote) quote = 0;
                } else if (c == '\'' || c == '"') {
                    quote = c;
                } else if (src.compare(k, 2, close) == 0) {
                    end = k;
                    break;
                }
            }
        }
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

// --------------------------------------------------------- expressions

struct Tok {
    enum Kind { Name, Str, Int, Float, Op, End } kind;
    std::string text;
    int64_t i = 0;
    double f = 0;
};

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
                while (e < s.size() && std::isdigit((unsigned char)s[e])) e++;
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

struct Node;
using NodeP = std::shared_ptr<Node>;
struct Node {
    enum Kind { Lit, Name, Attr, Item, Slice, Call, Filter, Test, Not, Neg, Bin, And, Or, Cond, ListLit, DictLit } kind;
    Value lit;
    std::string name;  // Name, Attr, Filter, Test, Bin's operator
    std::vector<NodeP> kids;  // operands; Call: callee then args; Filter/Test: operand then args
    std::vector<std::pair<std::string, NodeP>> kwargs;
    bool negated = false;  // Test: "is not"
};

class ExprParser {
public:
    ExprParser(std::vector<Tok> t, Where at) : t_(std::move(t)), at_(at) {}
    NodeP expression() { return conditional(); }
    // A for loop's iterable: no conditional (its "if" filters the loop).
    NodeP expression_no_cond() { return or_expr(); }
    bool at_end() const { return t_[k_].kind == Tok::End; }
    const Tok &peek(size_t ahead = 0) const { return t_[std::min(k_ + ahead, t_.size() - 1)]; }
    bool accept(const std::string &op) {
        if ((peek().kind == Tok::Op || peek().kind == Tok::Name) && peek().text == op) {
            k_++;
            return true;
        }
        return false;
    }
    void expect(const std::string &op) {
        if (!accept(op)) fail("expected '" + op + "', found " + describe(peek()));
    }
    std::string name() {
        if (peek().kind != Tok::Name) fail("expected a name, found " + describe(peek()));
        return t_[k_++].text;
    }
    [[noreturn]] void fail(const std::string &msg) const { throw Error("chat template: " + at_.str() + ": " + msg); }
    static std::string describe(const Tok &t) { return t.kind == Tok::End ? "the end of the tag" : "'" + t.text + "'"; }

private:
    static NodeP make(Node::Kind k) {
        auto n = std::make_shared<Node>();
        n->kind = k;
        return n;
    }
    // Nesting is bounded (a template of 100,000 parentheses is an Error, not
    // a stack overflow).
    struct Depth {
        ExprParser &p;
        explicit Depth(ExprParser &q) : p(q) {
            if (++p.depth_ > 200) p.fail("expressions nested more than 200 deep");
        }
        ~Depth() { p.depth_--; }
    };
    int depth_ = 0;
    NodeP conditional() {
        Depth guard(*this);
        NodeP a = or_expr();
        if (peek().kind == Tok::Name && peek().text == "if") {
            k_++;
            NodeP c = or_expr();
            NodeP b;
            if (accept("else")) b = conditional();
            auto n = make(Node::Cond);
            n->kids = {c, a, b};
            return n;
        }
        return a;
    }
    NodeP or_expr() {
        NodeP a = and_expr();
        while (accept("or")) {
            auto n = make(Node::Or);
            n->kids = {a, and_expr()};
            a = n;
        }
        return a;
    }
    NodeP and_expr() {
        NodeP a = not_expr();
        while (accept("and")) {
            auto n = make(Node::And);
            n->kids = {a, not_expr()};
            a = n;
        }
        return a;
    }
    NodeP not_expr() {
        if (accept("not")) {
            auto n = make(Node::Not);
            n->kids = {not_expr()};
            return n;
        }
        return comparison();
    }
    NodeP comparison() {
        NodeP a = concat();
        for (;;) {
            std::string op;
            if (peek().kind == Tok::Op && (peek().text == "==" || peek().text == "!=" || peek().text == "<" ||
                                           peek().text == ">" || peek().text == "<=" || peek().text == ">=")) {
                op = t_[k_++].text;
            } else if (peek().kind == Tok::Name && peek().text == "in") {
                k_++;
                op = "in";
            } else if (peek().kind == Tok::Name && peek().text == "not" && peek(1).kind == Tok::Name &&
                       peek(1).text == "in") {
                k_ += 2;
                op = "not in";
            } else if (peek().kind == Tok::Name && peek().text == "is") {
                k_++;
                auto n = make(Node::Test);
                n->negated = accept("not");
                n->name = name();
                n->kids = {a};
                if (peek().kind == Tok::Op && peek().text == "(") {
                    k_++;
                    args(n);
                } else if (peek().kind == Tok::Str || peek().kind == Tok::Int || peek().kind == Tok::Float ||
                           (peek().kind == Tok::Name && peek().text != "and" && peek().text != "or" &&
                            peek().text != "else" && peek().text != "if")) {
                    n->kids.push_back(primary());  // "is divisibleby 3", "is sameas x"
                }
                a = n;
                continue;
            } else {
                return a;
            }
            auto n = make(Node::Bin);
            n->name = op;
            n->kids = {a, concat()};
            a = n;
        }
    }
    NodeP concat() {
        NodeP a = additive();
        while (accept("~")) {
            auto n = make(Node::Bin);
            n->name = "~";
            n->kids = {a, additive()};
            a = n;
        }
        return a;
    }
    NodeP additive() {
        NodeP a = multiplicative();
        while (peek().kind == Tok::Op && (peek().text == "+" || peek().text == "-")) {
            auto n = make(Node::Bin);
            n->name = t_[k_++].text;
            n->kids = {a, multiplicative()};
            a = n;
        }
        return a;
    }
    NodeP multiplicative() {
        NodeP a = unary();
        while (peek().kind == Tok::Op &&
               (peek().text == "*" || peek().text == "/" || peek().text == "//" || peek().text == "%")) {
            auto n = make(Node::Bin);
            n->name = t_[k_++].text;
            n->kids = {a, unary()};
            a = n;
        }
        return a;
    }
    NodeP unary() {
        Depth guard(*this);
        if (peek().kind == Tok::Op && peek().text == "-") {
            k_++;
            auto n = make(Node::Neg);
            n->kids = {unary()};
            return n;
        }
        if (peek().kind == Tok::Op && peek().text == "+") {
            k_++;
            return unary();
        }
        return postfix(primary());
    }
    void args(const NodeP &n) {
        if (accept(")")) return;
        for (;;) {
            if (peek().kind == Tok::Name && peek(1).kind == Tok::Op && peek(1).text == "=") {
                std::string key = name();
                k_++;
                n->kwargs.emplace_back(key, expression());
            } else {
                n->kids.push_back(expression());
            }
            if (accept(")")) return;
            expect(",");
        }
    }
    NodeP postfix(NodeP a) {
        for (;;) {
            if (accept(".")) {
                auto n = make(Node::Attr);
                n->name = name();
                n->kids = {a};
                a = n;
            } else if (accept("[")) {
                NodeP lo, hi, step;
                bool slice = false;
                if (!(peek().kind == Tok::Op && peek().text == ":")) lo = expression();
                if (accept(":")) {
                    slice = true;
                    if (!(peek().kind == Tok::Op && (peek().text == "]" || peek().text == ":"))) hi = expression();
                    if (accept(":") && !(peek().kind == Tok::Op && peek().text == "]")) step = expression();
                }
                expect("]");
                auto n = make(slice ? Node::Slice : Node::Item);
                n->kids = {a, lo, hi, step};
                a = n;
            } else if (peek().kind == Tok::Op && peek().text == "(") {
                k_++;
                auto n = make(Node::Call);
                n->kids = {a};
                args(n);
                a = n;
            } else if (peek().kind == Tok::Op && peek().text == "|") {
                k_++;
                auto n = make(Node::Filter);
                n->name = name();
                n->kids = {a};
                if (accept("(")) args(n);
                a = n;
            } else {
                return a;
            }
        }
    }
    NodeP primary() {
        const Tok &t = peek();
        if (t.kind == Tok::Str) {
            k_++;
            std::string s = t.text;
            while (peek().kind == Tok::Str) s += t_[k_++].text;  // adjacent literals join
            auto n = make(Node::Lit);
            n->lit = Value::str(s);
            return n;
        }
        if (t.kind == Tok::Int || t.kind == Tok::Float) {
            k_++;
            auto n = make(Node::Lit);
            n->lit = t.kind == Tok::Int ? Value::integer(t.i) : Value::real(t.f);
            return n;
        }
        if (t.kind == Tok::Name) {
            k_++;
            auto n = make(Node::Lit);
            if (t.text == "true" || t.text == "True") n->lit = Value::boolean(true);
            else if (t.text == "false" || t.text == "False") n->lit = Value::boolean(false);
            else if (t.text == "none" || t.text == "None") n->lit = Value::none();
            else {
                n->kind = Node::Name;
                n->name = t.text;
            }
            return n;
        }
        if (accept("(")) {
            NodeP e = expression();
            if (accept(",")) {  // a tuple: a list here
                auto n = make(Node::ListLit);
                n->kids = {e};
                while (!accept(")")) {
                    n->kids.push_back(expression());
                    if (!accept(",")) {
                        expect(")");
                        break;
                    }
                }
                return n;
            }
            expect(")");
            return e;
        }
        if (accept("[")) {
            auto n = make(Node::ListLit);
            while (!accept("]")) {
                n->kids.push_back(expression());
                if (!accept(",")) {
                    expect("]");
                    break;
                }
            }
            return n;
        }
        if (accept("{")) {
            auto n = make(Node::DictLit);
            while (!accept("}")) {
                n->kids.push_back(expression());
                expect(":");
                n->kids.push_back(expression());
                if (!accept(",")) {
                    expect("}");
                    break;
                }
            }
            return n;
        }
        fail("unexpected " + describe(t));
    }

    std::vector<Tok> t_;
    size_t k_ = 0;
    Where at_;
};

// ------------------------------------------------------------ statements

struct Stmt;
using StmtP = std::shared_ptr<Stmt>;
using Body = std::vector<StmtP>;
struct Stmt {
    enum Kind { Text, Output, If, For, Set, Break, Continue } kind;
    std::string text;
    NodeP expr;                                 // Output, Set's value, For's iterable
    std::vector<std::pair<NodeP, Body>> branches;  // If: (condition, body); the else: condition null
    std::vector<std::string> targets;           // For: loop variables; Set: name (or namespace, attribute)
    NodeP filter;                               // For: "if" condition
    Body body, else_body;                       // For
    Where at;
};

class Parser {
public:
    explicit Parser(std::vector<Piece> p) : p_(std::move(p)) {}
    Body parse() {
        Body b = block({});
        if (k_ < p_.size()) fail(p_[k_].at, "unexpected {% " + head(p_[k_]) + " %}");
        return b;
    }

private:
    [[noreturn]] static void fail(const Where &at, const std::string &msg) {
        throw Error("chat template: " + at.str() + ": " + msg);
    }
    static std::string head(const Piece &p) {
        std::istringstream in(p.text);
        std::string w;
        in >> w;
        return w;
    }
    // Statements up to one whose keyword is in `ends` (left unconsumed).
    int depth_ = 0;
    Body block(const std::vector<std::string> &ends) {
        if (++depth_ > 200) fail(k_ < p_.size() ? p_[k_].at : Where{}, "blocks nested more than 200 deep");
        struct Leave {
            int &d;
            ~Leave() { d--; }
        } leave{depth_};
        Body out;
        while (k_ < p_.size()) {
            const Piece &p = p_[k_];
            if (p.kind == Piece::Text) {
                auto s = std::make_shared<Stmt>();
                s->kind = Stmt::Text;
                s->text = p.text;
                out.push_back(s);
                k_++;
                continue;
            }
            if (p.kind == Piece::Expr) {
                ExprParser e(tokenize(p.text, p.at), p.at);
                auto s = std::make_shared<Stmt>();
                s->kind = Stmt::Output;
                s->expr = e.expression();
                if (!e.at_end()) e.fail("unexpected " + ExprParser::describe(e.peek()) + " in {{ }}");
                s->at = p.at;
                out.push_back(s);
                k_++;
                continue;
            }
            const std::string kw = head(p);
            if (std::find(ends.begin(), ends.end(), kw) != ends.end()) return out;
            out.push_back(statement(kw));
        }
        if (!ends.empty()) {
            fail(p_.empty() ? Where{} : p_.back().at, "the template ends inside a block: expected {% " + ends.back() + " %}");
        }
        return out;
    }
    StmtP statement(const std::string &kw) {
        const Piece &p = p_[k_];
        ExprParser e(tokenize(p.text, p.at), p.at);
        e.name();  // the keyword
        auto s = std::make_shared<Stmt>();
        s->at = p.at;
        k_++;
        if (kw == "if") {
            s->kind = Stmt::If;
            NodeP cond = e.expression();
            end_of_tag(e);
            for (;;) {
                Body b = block({"elif", "else", "endif"});
                s->branches.emplace_back(cond, std::move(b));
                if (k_ >= p_.size()) fail(s->at, "{% if %} without {% endif %}");
                const std::string next = head(p_[k_]);
                ExprParser n(tokenize(p_[k_].text, p_[k_].at), p_[k_].at);
                n.name();
                k_++;
                if (next == "elif") {
                    cond = n.expression();
                    end_of_tag(n);
                } else if (next == "else") {
                    end_of_tag(n);
                    Body eb = block({"endif"});
                    s->branches.emplace_back(nullptr, std::move(eb));
                    ExprParser x(tokenize(p_[k_].text, p_[k_].at), p_[k_].at);
                    x.name();
                    end_of_tag(x);
                    k_++;
                    return s;
                } else {
                    end_of_tag(n);
                    return s;
                }
            }
        }
        if (kw == "for") {
            s->kind = Stmt::For;
            s->targets.push_back(e.name());
            while (e.accept(",")) s->targets.push_back(e.name());
            e.expect("in");
            s->expr = e.expression_no_cond();
            if (e.accept("if")) s->filter = e.expression();
            if (e.accept("recursive")) e.fail("recursive loops are not supported");
            end_of_tag(e);
            s->body = block({"else", "endfor"});
            if (k_ < p_.size() && head(p_[k_]) == "else") {
                k_++;
                s->else_body = block({"endfor"});
            }
            k_++;
            return s;
        }
        if (kw == "set") {
            s->kind = Stmt::Set;
            s->targets.push_back(e.name());
            if (e.accept(".")) s->targets.push_back(e.name());
            if (!e.accept("=")) e.fail("{% set %} blocks ({% set x %}...{% endset %}) are not supported");
            s->expr = e.expression();
            end_of_tag(e);
            return s;
        }
        if (kw == "break" || kw == "continue") {
            s->kind = kw == "break" ? Stmt::Break : Stmt::Continue;
            end_of_tag(e);
            return s;
        }
        if (kw == "endfor" || kw == "endif" || kw == "elif" || kw == "else" || kw == "endset" || kw == "endmacro") {
            fail(p.at, "unexpected {% " + kw + " %}");
        }
        if (kw == "generation" || kw == "endgeneration") {  // transformers' AssistantTracker: markers only
            s->kind = Stmt::Text;
            return s;
        }
        fail(p.at, "{% " + kw + " %} is not supported by Halformer's chat templates");
    }
    static void end_of_tag(ExprParser &e) {
        if (!e.at_end()) e.fail("unexpected " + ExprParser::describe(e.peek()));
    }

    std::vector<Piece> p_;
    size_t k_ = 0;
};

// ------------------------------------------------------------ evaluation

struct Break {};
struct Continue {};

class Eval {
public:
    explicit Eval(std::string &out) : out_(out) { frames_.emplace_back(); }
    std::vector<std::map<std::string, Value>> frames_;

    void run(const Body &body) {
        for (const StmtP &s : body) exec(*s);
    }

private:
    [[noreturn]] void fail(const Where &at, const std::string &msg) const {
        throw Error("chat template: " + at.str() + ": " + msg);
    }
    Value lookup(const std::string &name) const {
        for (auto f = frames_.rbegin(); f != frames_.rend(); ++f) {
            auto it = f->find(name);
            if (it != f->end()) return it->second;
        }
        return Value{};
    }
    void exec(const Stmt &s) {
        at_ = s.at;
        switch (s.kind) {
        case Stmt::Text: out_ += s.text; break;
        case Stmt::Output: {
            const Value v = eval(*s.expr);
            out_ += to_str(v);
            break;
        }
        case Stmt::If:
            for (auto &[cond, body] : s.branches) {
                if (!cond || truthy(eval(*cond))) {
                    run(body);
                    break;
                }
            }
            break;
        case Stmt::Set: {
            Value v = eval(*s.expr);
            if (s.targets.size() == 2) {
                Value ns = lookup(s.targets[0]);
                if (ns.kind != Value::Dict || !ns.is_namespace) {
                    fail(s.at, "cannot set an attribute of " + s.targets[0] + " (" + kind_name(ns) + "): only of a namespace()");
                }
                ns.put(s.targets[1], std::move(v));
            } else {
                frames_.back()[s.targets[0]] = std::move(v);
            }
            break;
        }
        case Stmt::For: loop(s); break;
        case Stmt::Break: throw Break{};
        case Stmt::Continue: throw Continue{};
        }
    }
    void loop(const Stmt &s) {
        const Value seq = eval(*s.expr);
        Array items;
        if (seq.kind == Value::List) items = *seq.list;
        else if (seq.kind == Value::Dict && !seq.is_namespace) for (auto &kv : *seq.dict) items.push_back(Value::str(kv.first));
        else if (seq.kind == Value::String) for (const std::string &c : utf8_chars(seq.s)) items.push_back(Value::str(c));
        else if (seq.kind != Value::Undefined) fail(s.at, std::string("cannot loop over ") + kind_name(seq));
        // The filter ("for x in xs if c") picks the items first: loop.* counts those.
        Array picked;
        for (const Value &item : items) {
            if (!s.filter) {
                picked.push_back(item);
                continue;
            }
            frames_.emplace_back();
            bind(s, item);
            const bool keep = truthy(eval(*s.filter));
            frames_.pop_back();
            if (keep) picked.push_back(item);
        }
        const int64_t n = (int64_t)picked.size();
        for (int64_t k = 0; k < n; k++) {
            frames_.emplace_back();
            bind(s, picked[(size_t)k]);
            Value info = Value::object();
            info.put("index0", Value::integer(k));
            info.put("index", Value::integer(k + 1));
            info.put("revindex0", Value::integer(n - 1 - k));
            info.put("revindex", Value::integer(n - k));
            info.put("first", Value::boolean(k == 0));
            info.put("last", Value::boolean(k == n - 1));
            info.put("length", Value::integer(n));
            info.put("previtem", k > 0 ? picked[(size_t)k - 1] : Value{});
            info.put("nextitem", k + 1 < n ? picked[(size_t)k + 1] : Value{});
            frames_.back()["loop"] = info;
            bool stop = false;
            try {
                run(s.body);
            } catch (const Break &) {
                stop = true;
            } catch (const Continue &) {
            }
            frames_.pop_back();
            if (stop) break;
        }
        if (n == 0) run(s.else_body);
    }
    void bind(const Stmt &s, const Value &item) {
        if (s.targets.size() == 1) {
            frames_.back()[s.targets[0]] = item;
            return;
        }
        if (item.kind != Value::List || item.list->size() != s.targets.size()) {
            fail(s.at, "cannot unpack " + repr(item) + " into " + std::to_string(s.targets.size()) + " names");
        }
        for (size_t k = 0; k < s.targets.size(); k++) frames_.back()[s.targets[k]] = (*item.list)[k];
    }
    static std::vector<std::string> utf8_chars(const std::string &s) {
        std::vector<std::string> out;
        for (size_t k = 0; k < s.size();) {
            const unsigned char c = (unsigned char)s[k];
            const size_t n = c < 0x80 ? 1 : c < 0xE0 ? 2 : c < 0xF0 ? 3 : 4;
            out.push_back(s.substr(k, n));
            k += n;
        }
        return out;
    }
    static int64_t utf8_length(const std::string &s) { return (int64_t)utf8_chars(s).size(); }

    Value eval(const Node &n) {
        switch (n.kind) {
        case Node::Lit: return n.lit;
        case Node::Name: return lookup(n.name);
        case Node::Attr: return attribute(eval(*n.kids[0]), n.name);
        case Node::Item: return item(eval(*n.kids[0]), eval(*n.kids[1]));
        case Node::Slice: return slice(n);
        case Node::Call: return call(n);
        case Node::Filter: return filter(n);
        case Node::Test: {
            const bool r = test(n);
            return Value::boolean(n.negated ? !r : r);
        }
        case Node::Not: return Value::boolean(!truthy(eval(*n.kids[0])));
        case Node::Neg: {
            const Value v = eval(*n.kids[0]);
            if (v.kind == Value::Int) return Value::integer(-v.i);
            if (v.kind == Value::Float) return Value::real(-v.f);
            fail(at_, std::string("bad operand for unary -: ") + kind_name(v));
        }
        case Node::And: {
            Value a = eval(*n.kids[0]);
            return truthy(a) ? eval(*n.kids[1]) : a;
        }
        case Node::Or: {
            Value a = eval(*n.kids[0]);
            return truthy(a) ? a : eval(*n.kids[1]);
        }
        case Node::Cond:
            if (truthy(eval(*n.kids[0]))) return eval(*n.kids[1]);
            return n.kids[2] ? eval(*n.kids[2]) : Value{};
        case Node::ListLit: {
            Array a;
            for (auto &k : n.kids) a.push_back(eval(*k));
            return Value::array(std::move(a));
        }
        case Node::DictLit: {
            Value d = Value::object();
            for (size_t k = 0; k + 1 < n.kids.size(); k += 2) {
                const Value key = eval(*n.kids[k]);
                if (key.kind != Value::String) fail(at_, "a dict key must be a string here");
                d.put(key.s, eval(*n.kids[k + 1]));
            }
            return d;
        }
        case Node::Bin: return binary(n);
        }
        return Value{};
    }

    Value attribute(const Value &v, const std::string &name) {
        if (v.kind == Value::Undefined) fail(at_, "'" + name + "' of an undefined value");
        if (v.kind == Value::Dict) {
            if (const Value *f = v.find(name)) return *f;
            if (!v.is_namespace) {
                if (name == "items" || name == "keys" || name == "values" || name == "get") return method(v, name);
            }
            return Value{};
        }
        if (v.kind == Value::String || v.kind == Value::List) return method(v, name);
        return Value{};
    }
    Value item(const Value &v, const Value &key) {
        if (v.kind == Value::Dict) {
            if (key.kind == Value::String) {
                const Value *f = v.find(key.s);
                return f ? *f : Value{};
            }
            return Value{};
        }
        if (v.kind == Value::List || v.kind == Value::String) {
            if (key.kind == Value::String) return attribute(v, key.s);
            if (key.kind != Value::Int) fail(at_, std::string("indices must be integers, not ") + kind_name(key));
            const std::vector<std::string> chars = v.kind == Value::String ? utf8_chars(v.s) : std::vector<std::string>{};
            const int64_t n = v.kind == Value::List ? (int64_t)v.list->size() : (int64_t)chars.size();
            int64_t k = key.i < 0 ? key.i + n : key.i;
            if (k < 0 || k >= n) return Value{};  // (jinja2: an undefined value, not an error)
            return v.kind == Value::List ? (*v.list)[(size_t)k] : Value::str(chars[(size_t)k]);
        }
        if (v.kind == Value::Undefined) fail(at_, "an item of an undefined value");
        return Value{};
    }
    Value slice(const Node &n) {
        const Value v = eval(*n.kids[0]);
        auto bound = [&](const NodeP &p, bool &given) -> int64_t {
            given = false;
            if (!p) return 0;
            const Value b = eval(*p);
            if (b.kind == Value::None) return 0;
            if (b.kind != Value::Int) fail(at_, "slice bounds must be integers");
            given = true;
            return b.i;
        };
        bool has_lo, has_hi, has_step;
        const int64_t lo0 = bound(n.kids[1], has_lo), hi0 = bound(n.kids[2], has_hi), step0 = bound(n.kids[3], has_step);
        const int64_t step = has_step ? step0 : 1;
        if (step == 0) fail(at_, "slice step cannot be zero");
        std::vector<Value> items;
        if (v.kind == Value::List) items = *v.list;
        else if (v.kind == Value::String) for (auto &c : utf8_chars(v.s)) items.push_back(Value::str(c));
        else fail(at_, std::string("cannot slice ") + kind_name(v));
        const int64_t len = (int64_t)items.size();
        auto clampi = [&](int64_t x, bool given, int64_t dflt) {
            if (!given) return dflt;
            if (x < 0) x += len;
            if (step > 0) return std::max<int64_t>(0, std::min(x, len));
            return std::max<int64_t>(-1, std::min(x, len - 1));
        };
        const int64_t lo = clampi(lo0, has_lo, step > 0 ? 0 : len - 1), hi = clampi(hi0, has_hi, step > 0 ? len : -1);
        Array out;
        for (int64_t k = lo; step > 0 ? k < hi : k > hi; k += step) out.push_back(items[(size_t)k]);
        if (v.kind == Value::String) {
            std::string s;
            for (auto &c : out) s += c.s;
            return Value::str(s);
        }
        return Value::array(std::move(out));
    }

    // Methods of strings, lists and dicts the templates call.
    Value method(const Value &self, const std::string &name) {
        const Where at = at_;
        Value obj = self;
        auto strip_chars = [](const std::vector<Value> &a) -> std::string {
            return a.empty() || a[0].kind == Value::None ? std::string(" \t\n\r\f\v") : a[0].s;
        };
        if (obj.kind == Value::String) {
            const std::string s = obj.s;
            if (name == "strip" || name == "lstrip" || name == "rstrip") {
                return Value::function([s, name, strip_chars](std::vector<Value> &a, auto &) {
                    const std::string cs = strip_chars(a);
                    size_t b = 0, e = s.size();
                    if (name != "rstrip") b = s.find_first_not_of(cs) == std::string::npos ? s.size() : s.find_first_not_of(cs);
                    if (name != "lstrip") {
                        const size_t k = s.find_last_not_of(cs);
                        e = k == std::string::npos ? 0 : k + 1;
                    }
                    return Value::str(b < e ? s.substr(b, e - b) : "");
                });
            }
            if (name == "startswith" || name == "endswith") {
                return Value::function([s, name, at, this](std::vector<Value> &a, auto &) {
                    if (a.size() != 1 || a[0].kind != Value::String) fail(at, name + "() takes one string");
                    const std::string &x = a[0].s;
                    const bool r = name == "startswith" ? s.compare(0, x.size(), x) == 0
                                                        : s.size() >= x.size() && s.compare(s.size() - x.size(), x.size(), x) == 0;
                    return Value::boolean(r);
                });
            }
            if (name == "upper" || name == "lower" || name == "title" || name == "capitalize") {
                return Value::function([s, name](std::vector<Value> &, auto &) { return Value::str(recase(s, name)); });
            }
            if (name == "split") {
                return Value::function([s](std::vector<Value> &a, auto &) {
                    Array out;
                    if (a.empty() || a[0].kind == Value::None) {
                        std::istringstream in(s);
                        std::string w;
                        while (in >> w) out.push_back(Value::str(w));
                    } else {
                        const std::string sep = a[0].s;
                        size_t b = 0;
                        for (size_t k; !sep.empty() && (k = s.find(sep, b)) != std::string::npos; b = k + sep.size()) {
                            out.push_back(Value::str(s.substr(b, k - b)));
                        }
                        out.push_back(Value::str(s.substr(b)));
                    }
                    return Value::array(std::move(out));
                });
            }
            if (name == "replace") {
                return Value::function([s, at, this](std::vector<Value> &a, auto &) {
                    if (a.size() < 2 || a[0].kind != Value::String || a[1].kind != Value::String) {
                        fail(at, "replace() takes two strings");
                    }
                    return Value::str(replace_all(s, a[0].s, a[1].s));
                });
            }
        }
        if (obj.kind == Value::Dict) {
            if (name == "items" || name == "keys" || name == "values") {
                return Value::function([obj, name](std::vector<Value> &, auto &) {
                    Array out;
                    for (auto &kv : *obj.dict) {
                        if (name == "items") out.push_back(Value::array({Value::str(kv.first), kv.second}));
                        else out.push_back(name == "keys" ? Value::str(kv.first) : kv.second);
                    }
                    return Value::array(std::move(out));
                });
            }
            if (name == "get") {
                return Value::function([obj](std::vector<Value> &a, auto &) {
                    const Value *f = !a.empty() && a[0].kind == Value::String ? obj.find(a[0].s) : nullptr;
                    return f ? *f : a.size() > 1 ? a[1] : Value::none();
                });
            }
        }
        return Value{};
    }
    static std::string replace_all(std::string s, const std::string &from, const std::string &to) {
        if (from.empty()) return s;
        for (size_t k = s.find(from); k != std::string::npos; k = s.find(from, k + to.size())) s.replace(k, from.size(), to);
        return s;
    }
    // ASCII case changes (the templates' role names and tags); other
    // characters are left as they are.
    static std::string recase(const std::string &s, const std::string &how) {
        std::string out = s;
        bool start = true;
        for (size_t k = 0; k < out.size(); k++) {
            const unsigned char c = (unsigned char)out[k];
            const bool alpha = std::isalpha(c);
            if (how == "upper") out[k] = (char)std::toupper(c);
            else if (how == "lower") out[k] = (char)std::tolower(c);
            else if (how == "capitalize") out[k] = (char)(k == 0 ? std::toupper(c) : std::tolower(c));
            else out[k] = (char)(alpha ? (start ? std::toupper(c) : std::tolower(c)) : c);
            start = !alpha;
        }
        return out;
    }

    Value call(const Node &n) {
        const Node &callee = *n.kids[0];
        std::vector<Value> args;
        for (size_t k = 1; k < n.kids.size(); k++) args.push_back(eval(*n.kids[k]));
        std::vector<std::pair<std::string, Value>> kwargs;
        for (auto &[key, e] : n.kwargs) kwargs.emplace_back(key, eval(*e));
        if (callee.kind == Node::Name) {
            const Value f = lookup(callee.name);
            if (f.kind == Value::Function) return (*f.fn)(args, kwargs);
            if (callee.name == "raise_exception") {
                throw Error("chat template: " + (args.empty() ? std::string("raise_exception()") : to_str(args[0])));
            }
            if (callee.name == "namespace") {
                Value ns = Value::object();
                ns.is_namespace = true;
                for (auto &[k, v] : kwargs) ns.put(k, v);
                return ns;
            }
            if (callee.name == "range") {
                int64_t a = 0, b = 0, st = 1;
                for (auto &x : args) {
                    if (x.kind != Value::Int) fail(at_, "range() takes integers");
                }
                if (args.size() == 1) b = args[0].i;
                else if (args.size() >= 2) a = args[0].i, b = args[1].i;
                if (args.size() == 3) st = args[2].i;
                if (st == 0 || args.empty() || args.size() > 3) fail(at_, "range(): bad arguments");
                Array out;
                for (int64_t k = a; st > 0 ? k < b : k > b; k += st) {
                    out.push_back(Value::integer(k));
                    if (out.size() > 1000000) fail(at_, "range(): more than a million values");
                }
                return Value::array(std::move(out));
            }
            fail(at_, "'" + callee.name + "' is not a function here");
        }
        const Value f = eval(callee);
        if (f.kind != Value::Function) fail(at_, std::string("a ") + kind_name(f) + " is not callable");
        return (*f.fn)(args, kwargs);
    }

    Value filter(const Node &n) {
        const Value v = eval(*n.kids[0]);
        std::vector<Value> a;
        for (size_t k = 1; k < n.kids.size(); k++) a.push_back(eval(*n.kids[k]));
        auto kw = [&](const char *key) -> const Value * {
            for (auto &[k, e] : n.kwargs)
                if (k == key) return new Value(eval(*e));  // (freed below by the caller's unique_ptr)
            return nullptr;
        };
        const std::string &f = n.name;
        if (f == "trim") {
            const std::string s = to_str(v);
            const size_t b = s.find_first_not_of(" \t\n\r\f\v");
            if (b == std::string::npos) return Value::str("");
            return Value::str(s.substr(b, s.find_last_not_of(" \t\n\r\f\v") - b + 1));
        }
        if (f == "length" || f == "count") {
            if (v.kind == Value::String) return Value::integer(utf8_length(v.s));
            if (v.kind == Value::List) return Value::integer((int64_t)v.list->size());
            if (v.kind == Value::Dict) return Value::integer((int64_t)v.dict->size());
            if (v.kind == Value::Undefined) return Value::integer(0);
            fail(at_, std::string("length of a ") + kind_name(v));
        }
        if (f == "upper" || f == "lower" || f == "title" || f == "capitalize") return Value::str(recase(to_str(v), f));
        if (f == "default" || f == "d") {
            const bool boolean = a.size() > 1 && truthy(a[1]);
            const bool use = v.kind == Value::Undefined || (boolean && !truthy(v));
            return use ? (a.empty() ? Value::str("") : a[0]) : v;
        }
        if (f == "string") return Value::str(to_str(v));
        if (f == "int") {
            if (v.kind == Value::Int) return v;
            if (v.kind == Value::Float) return Value::integer((int64_t)v.f);
            if (v.kind == Value::Bool) return Value::integer(v.b);
            if (v.kind == Value::String) {
                char *end = nullptr;
                const long long x = std::strtoll(v.s.c_str(), &end, 10);
                return Value::integer(end && *end == 0 && !v.s.empty() ? x : 0);
            }
            return Value::integer(0);
        }
        if (f == "first" || f == "last") {
            if (v.kind == Value::List) {
                if (v.list->empty()) return Value{};
                return f == "first" ? v.list->front() : v.list->back();
            }
            if (v.kind == Value::String) {
                auto cs = utf8_chars(v.s);
                if (cs.empty()) return Value{};
                return Value::str(f == "first" ? cs.front() : cs.back());
            }
            fail(at_, f + " of a " + kind_name(v));
        }
        if (f == "join") {
            const std::string sep = a.empty() ? "" : to_str(a[0]);
            if (v.kind != Value::List) fail(at_, std::string("join of a ") + kind_name(v));
            std::string out;
            for (size_t k = 0; k < v.list->size(); k++) out += (k ? sep : "") + to_str((*v.list)[k]);
            return Value::str(out);
        }
        if (f == "list") {
            if (v.kind == Value::List) return v;
            Array out;
            if (v.kind == Value::String) for (auto &c : utf8_chars(v.s)) out.push_back(Value::str(c));
            else if (v.kind == Value::Dict) for (auto &kv : *v.dict) out.push_back(Value::str(kv.first));
            else fail(at_, std::string("list of a ") + kind_name(v));
            return Value::array(std::move(out));
        }
        if (f == "reverse") {
            if (v.kind == Value::List) {
                Array out(v.list->rbegin(), v.list->rend());
                return Value::array(std::move(out));
            }
            if (v.kind == Value::String) {
                auto cs = utf8_chars(v.s);
                std::string out;
                for (auto it = cs.rbegin(); it != cs.rend(); ++it) out += *it;
                return Value::str(out);
            }
            fail(at_, std::string("reverse of a ") + kind_name(v));
        }
        if (f == "replace") {
            if (a.size() < 2) fail(at_, "replace takes two strings");
            return Value::str(replace_all(to_str(v), to_str(a[0]), to_str(a[1])));
        }
        if (f == "tojson") {
            int indent = -1;
            std::unique_ptr<const Value> ind(kw("indent"));
            if (ind && ind->kind == Value::Int) indent = (int)ind->i;
            if (!a.empty() && a[0].kind == Value::Int) indent = (int)a[0].i;
            std::string out;
            tojson(v, out, indent, 0);
            return Value::str(out);
        }
        fail(at_, "the filter '" + f + "' is not supported by Halformer's chat templates");
    }

    bool test(const Node &n) {
        const Value v = eval(*n.kids[0]);
        const std::string &t = n.name;
        if (t == "defined") return v.kind != Value::Undefined;
        if (t == "undefined") return v.kind == Value::Undefined;
        if (t == "none") return v.kind == Value::None;
        if (t == "string") return v.kind == Value::String;
        if (t == "number") return v.kind == Value::Int || v.kind == Value::Float;
        if (t == "integer") return v.kind == Value::Int;
        if (t == "float") return v.kind == Value::Float;
        if (t == "boolean") return v.kind == Value::Bool;
        if (t == "true") return v.kind == Value::Bool && v.b;
        if (t == "false") return v.kind == Value::Bool && !v.b;
        if (t == "mapping") return v.kind == Value::Dict;
        if (t == "sequence") return v.kind == Value::List || v.kind == Value::String || v.kind == Value::Dict;
        if (t == "iterable") return v.kind == Value::List || v.kind == Value::String || v.kind == Value::Dict;
        if (t == "callable") return v.kind == Value::Function;
        if (t == "odd" || t == "even") {
            if (v.kind != Value::Int) fail(at_, "odd / even of a " + std::string(kind_name(v)));
            return (((v.i % 2) + 2) % 2 == 1) == (t == "odd");
        }
        if (t == "divisibleby") {
            const Value d = n.kids.size() > 1 ? eval(*n.kids[1]) : Value{};
            if (v.kind != Value::Int || d.kind != Value::Int || d.i == 0) fail(at_, "divisibleby takes integers");
            return v.i % d.i == 0;
        }
        if (t == "equalto" || t == "eq" || t == "sameas") return n.kids.size() > 1 && equal(v, eval(*n.kids[1]));
        fail(at_, "the test '" + t + "' is not supported by Halformer's chat templates");
    }

    Value binary(const Node &n) {
        const std::string &op = n.name;
        const Value a = eval(*n.kids[0]), b = eval(*n.kids[1]);
        if (op == "==") return Value::boolean(equal(a, b));
        if (op == "!=") return Value::boolean(!equal(a, b));
        if (op == "~") return Value::str(to_str(a) + to_str(b));
        if (op == "in" || op == "not in") {
            bool r = false;
            if (b.kind == Value::String) {
                if (a.kind != Value::String) fail(at_, "'in <string>' requires a string on the left");
                r = b.s.find(a.s) != std::string::npos;
            } else if (b.kind == Value::List) {
                for (auto &x : *b.list) r = r || equal(a, x);
            } else if (b.kind == Value::Dict) {
                r = a.kind == Value::String && b.find(a.s) != nullptr;
            } else if (b.kind != Value::Undefined) {
                fail(at_, std::string("'in' a ") + kind_name(b));
            }
            return Value::boolean(op == "in" ? r : !r);
        }
        if (op == "<" || op == ">" || op == "<=" || op == ">=") {
            int c;
            if (a.number() && b.number()) c = a.as_double() < b.as_double() ? -1 : a.as_double() > b.as_double() ? 1 : 0;
            else if (a.kind == Value::String && b.kind == Value::String) c = a.s.compare(b.s) < 0 ? -1 : a.s == b.s ? 0 : 1;
            else fail(at_, std::string("'") + op + "' between " + kind_name(a) + " and " + kind_name(b));
            return Value::boolean(op == "<" ? c < 0 : op == ">" ? c > 0 : op == "<=" ? c <= 0 : c >= 0);
        }
        if (op == "+") {
            if (a.kind == Value::String && b.kind == Value::String) return Value::str(a.s + b.s);
            if (a.kind == Value::List && b.kind == Value::List) {
                Array out = *a.list;
                out.insert(out.end(), b.list->begin(), b.list->end());
                return Value::array(std::move(out));
            }
        }
        if (a.number() && b.number() && a.kind != Value::Undefined) {
            const bool ints = a.kind != Value::Float && b.kind != Value::Float;
            const double x = a.as_double(), y = b.as_double();
            const int64_t p = a.kind == Value::Float ? 0 : (a.kind == Value::Int ? a.i : a.b),
                          q = b.kind == Value::Float ? 0 : (b.kind == Value::Int ? b.i : b.b);
            if (op == "+") return ints ? Value::integer(p + q) : Value::real(x + y);
            if (op == "-") return ints ? Value::integer(p - q) : Value::real(x - y);
            if (op == "*") return ints ? Value::integer(p * q) : Value::real(x * y);
            if (op == "/") {
                if (y == 0) fail(at_, "division by zero");
                return Value::real(x / y);
            }
            if (op == "//" || op == "%") {
                if (y == 0) fail(at_, "division by zero");
                if (ints) {
                    int64_t d = p / q, m = p % q;
                    if (m != 0 && ((m < 0) != (q < 0))) {
                        d -= 1;
                        m += q;
                    }
                    return Value::integer(op == "//" ? d : m);
                }
                const double d = std::floor(x / y);
                return op == "//" ? Value::real(d) : Value::real(x - d * y);
            }
        }
        if (op == "*" && a.kind == Value::String && b.kind == Value::Int) {
            if (b.i > 0 && (double)a.s.size() * (double)b.i > (double)(1u << 26)) {
                fail(at_, "a string repeated past 64 MiB");
            }
            std::string out;
            for (int64_t k = 0; k < b.i; k++) out += a.s;
            return Value::str(out);
        }
        fail(at_, "unsupported operand types for " + op + ": " + kind_name(a) + " and " + kind_name(b));
    }

    std::string &out_;
    Where at_;
};

}  // namespace

struct ChatTemplate::Impl {
    Body body;
};

ChatTemplate::ChatTemplate(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}
ChatTemplate::ChatTemplate(ChatTemplate &&) noexcept = default;
ChatTemplate &ChatTemplate::operator=(ChatTemplate &&) noexcept = default;
ChatTemplate::~ChatTemplate() = default;

ChatTemplate ChatTemplate::parse(const std::string &source) {
    auto impl = std::make_unique<Impl>();
    // (jinja2's keep_trailing_newline false: one newline at the end of the source is dropped.)
    std::string src = source;
    if (src.size() >= 2 && src.compare(src.size() - 2, 2, "\r\n") == 0) src.resize(src.size() - 2);
    else if (!src.empty() && src.back() == '\n') src.pop_back();
    impl->body = Parser(lex(src)).parse();
    return ChatTemplate(std::move(impl));
}

std::string ChatTemplate::render(const std::vector<ChatMessage> &messages, bool add_generation_prompt,
                                 const std::map<std::string, std::string> &vars) const {
    std::string out;
    Eval e(out);
    auto &globals = e.frames_.front();
    for (auto &[k, v] : vars) globals[k] = Value::str(v);
    Array list;
    for (const ChatMessage &m : messages) {
        Value msg = Value::object();
        msg.put("role", Value::str(m.role));
        msg.put("content", Value::str(m.content));
        list.push_back(msg);
    }
    globals["messages"] = Value::array(std::move(list));
    globals["add_generation_prompt"] = Value::boolean(add_generation_prompt);
    try {
        e.run(impl_->body);
    } catch (const Break &) {
        throw Error("chat template: {% break %} outside a loop");
    } catch (const Continue &) {
        throw Error("chat template: {% continue %} outside a loop");
    }
    return out;
}

}  // namespace halformer
