// The evaluator's methods of strings, lists and dicts (strip, startswith,
// split, replace, items, keys, get, append, ...), as Python's; the filters
// and tests are eval_filters.cpp's.
#include "eval.h"

#include <algorithm>
#include <cctype>
#include <cstdlib>
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
                    if (name == "items") out.push_back(Value::tuple({Value::str(kv.first), kv.second}));
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

}  // namespace halformer::jinja
