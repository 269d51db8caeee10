// The evaluator's filters (trim, length, default, join, tojson, ...), tests
// (defined, none, string, ...) and the methods of strings, lists and dicts.
#include "eval.h"

#include <cctype>
#include <cstdlib>
#include <optional>
#include <sstream>

namespace halformer::jinja {

// Methods of strings, lists and dicts the templates call.
Value Eval::method(const Value &self, const std::string &name) {
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

std::string Eval::replace_all(std::string s, const std::string &from, const std::string &to) {
    if (from.empty()) return s;
    for (size_t k = s.find(from); k != std::string::npos; k = s.find(from, k + to.size())) s.replace(k, from.size(), to);
    return s;
}

// ASCII case changes (the templates' role names and tags); other
// characters are left as they are.
std::string Eval::recase(const std::string &s, const std::string &how) {
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

// The filters of one string or scalar (trim, length, case, default,
// string, int, replace); nothing when f is none of them.
std::optional<Value> Eval::text_filter(const std::string &f, const Value &v, const std::vector<Value> &a) {
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
    if (f == "replace") {
        if (a.size() < 2) fail(at_, "replace takes two strings");
        return Value::str(replace_all(to_str(v), to_str(a[0]), to_str(a[1])));
    }
    return std::nullopt;
}

// The filters of a sequence, a list or a string's characters (first, last,
// join, list, reverse); nothing when f is none of them.
std::optional<Value> Eval::sequence_filter(const std::string &f, const Value &v, const std::vector<Value> &a) {
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
        if (v.kind == Value::List) return Value::array(Array(v.list->rbegin(), v.list->rend()));
        if (v.kind == Value::String) {
            auto cs = utf8_chars(v.s);
            std::string out;
            for (auto it = cs.rbegin(); it != cs.rend(); ++it) out += *it;
            return Value::str(out);
        }
        fail(at_, std::string("reverse of a ") + kind_name(v));
    }
    return std::nullopt;
}

Value Eval::filter(const Node &n) {
    const Value v = eval(*n.kids[0]);
    std::vector<Value> a;
    for (size_t k = 1; k < n.kids.size(); k++) a.push_back(eval(*n.kids[k]));
    const std::string &f = n.name;
    if (auto r = text_filter(f, v, a)) return *r;
    if (auto r = sequence_filter(f, v, a)) return *r;
    if (f == "tojson") {
        int indent = -1;
        for (auto &[key, e] : n.kwargs) {
            if (key != "indent") continue;
            const Value ind = eval(*e);
            if (ind.kind == Value::Int) indent = (int)ind.i;
            break;
        }
        if (!a.empty() && a[0].kind == Value::Int) indent = (int)a[0].i;
        std::string out;
        tojson(v, out, indent, 0);
        return Value::str(out);
    }
    fail(at_, "the filter '" + f + "' is not supported by Halformer's chat templates");
}

bool Eval::test(const Node &n) {
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

}  // namespace halformer::jinja
