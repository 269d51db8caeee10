// The template's values (internal to the chat templates, chat_template.cpp):
// dynamically typed as Python's, with what the templates see of them:
// truthiness, str() and repr(), ==, and the tojson filter's output.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <utility>
#include <vector>

namespace halformer::jinja {

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
    bool is_tuple = false;  // a List that Python would print as a tuple: (a, b)

    static Value none() { Value v; v.kind = None; return v; }
    static Value boolean(bool x) { Value v; v.kind = Bool; v.b = x; return v; }
    static Value integer(int64_t x) { Value v; v.kind = Int; v.i = x; return v; }
    static Value real(double x) { Value v; v.kind = Float; v.f = x; return v; }
    static Value str(std::string x) { Value v; v.kind = String; v.s = std::move(x); return v; }
    static Value array(Array a = {}) { Value v; v.kind = List; v.list = std::make_shared<Array>(std::move(a)); return v; }
    static Value tuple(Array a) { Value v = array(std::move(a)); v.is_tuple = true; return v; }
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

const char *kind_name(const Value &v);
bool truthy(const Value &v);
std::string to_str(const Value &v);
std::string repr(const Value &v);
bool equal(const Value &a, const Value &b);
// tojson as transformers' filter (json.dumps); indent < 0: on one line.
void tojson(const Value &v, std::string &out, int indent, int depth);

}  // namespace halformer::jinja
