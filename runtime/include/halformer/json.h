// A small JSON reader/writer for config.json and safetensors headers
// (RFC 8259: objects, arrays, strings with escapes, numbers, true/false/null).
// Parse errors name the byte offset and what was expected.
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <vector>

namespace halformer {
namespace json {

struct Value {
    enum class Kind { Null, Bool, Number, String, Array, Object } kind = Kind::Null;
    bool boolean = false;
    double number = 0;
    std::string string;
    std::vector<Value> array;
    // Insertion order kept (safetensors headers list tensors in file order).
    std::vector<std::pair<std::string, Value>> object;

    bool is_object() const { return kind == Kind::Object; }
    bool is_array() const { return kind == Kind::Array; }
    bool is_string() const { return kind == Kind::String; }
    bool is_number() const { return kind == Kind::Number; }
    bool is_bool() const { return kind == Kind::Bool; }
    // nullptr if absent (objects only).
    const Value *find(const std::string &key) const;
};

// An object's member, or nullptr if it is absent or null (tokenizer files
// write null for "not set").
inline const Value *member(const Value &obj, const char *key) {
    const Value *v = obj.find(key);
    return v && v->kind != Value::Kind::Null ? v : nullptr;
}

// Throws halformer::Error("<what>: invalid JSON at byte N: ...").
Value parse(const std::string &text, const std::string &what);

// Kind names for messages ("a number", "an object", ...).
const char *kind_name(Value::Kind k);

// Writes a string with JSON escapes (quotes included).
std::string quote(const std::string &s);
// A value as compact JSON text, objects in their order (an integral number
// within 2^53 without a fraction, any other with 17 significant digits).
std::string dump(const Value &v);

}  // namespace json
}  // namespace halformer
