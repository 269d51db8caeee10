// The template's values: their kind names, truthiness, str() and repr() as
// Python writes them, equality, and tojson.
#include "value.h"

#include "halformer/error.h"
#include "halformer/json.h"

#include <cctype>
#include <cmath>
#include <cstdio>
#include <cstdlib>

namespace halformer::jinja {

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

namespace {

std::string float_repr(double x) {
    if (std::isinf(x)) return x > 0 ? "inf" : "-inf";
    if (std::isnan(x)) return "nan";
    if (x == 0) return std::signbit(x) ? "-0.0" : "0.0";
    // Python's repr: the shortest digits that read back, in fixed notation
    // for exponents -4 to 15, else as d.ddde+XX.
    char buf[64];
    for (int prec = 0; prec <= 16; prec++) {
        std::snprintf(buf, sizeof buf, "%.*e", prec, x);
        if (std::strtod(buf, nullptr) == x) break;
    }
    std::string m = buf;
    const size_t e = m.find('e');
    const int exp = std::atoi(m.c_str() + e + 1);
    std::string digits;
    for (size_t k = 0; k < e; k++)
        if (std::isdigit((unsigned char)m[k])) digits += m[k];
    const std::string sign = x < 0 ? "-" : "";
    if (exp < -4 || exp >= 16) {
        std::string out = sign + digits.substr(0, 1);
        if (digits.size() > 1) out += "." + digits.substr(1);
        char eb[16];
        std::snprintf(eb, sizeof eb, "e%c%02d", exp < 0 ? '-' : '+', exp < 0 ? -exp : exp);
        return out + eb;
    }
    if (exp < 0) return sign + "0." + std::string((size_t)(-exp - 1), '0') + digits;
    if ((size_t)exp + 1 >= digits.size()) return sign + digits + std::string((size_t)exp + 1 - digits.size(), '0') + ".0";
    return sign + digits.substr(0, (size_t)exp + 1) + "." + digits.substr((size_t)exp + 1);
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

}  // namespace

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
        std::string out = v.is_tuple ? "(" : "[";
        for (size_t k = 0; k < v.list->size(); k++) out += (k ? ", " : "") + repr((*v.list)[k]);
        if (v.is_tuple) return out + (v.list->size() == 1 ? ",)" : ")");
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

}  // namespace halformer::jinja
