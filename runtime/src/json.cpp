#include "halformer/json.h"
#include "halformer/error.h"
#include "text/utf8.h"

#include <cmath>
#include <cstdlib>
#include <cstdio>
#include <cstring>
#include <unordered_set>

namespace halformer {
namespace json {
namespace {

struct Parser {
    const std::string &s;
    const std::string &what;
    size_t i = 0;
    int depth = 0;

    [[noreturn]] void fail(const std::string &msg) const {
        throw Error(what + ": invalid JSON at byte " + std::to_string(i) + ": " + msg);
    }
    void ws() {
        while (i < s.size() && (s[i] == ' ' || s[i] == '\t' || s[i] == '\n' || s[i] == '\r')) i++;
    }
    bool lit(const char *word) {
        size_t n = std::strlen(word);
        if (s.compare(i, n, word) == 0) {
            i += n;
            return true;
        }
        return false;
    }
    uint32_t hex4() {
        if (i + 4 > s.size()) fail("truncated \\u escape");
        uint32_t v = 0;
        for (int k = 0; k < 4; k++) {
            char c = s[i++];
            v <<= 4;
            if (c >= '0' && c <= '9') v |= c - '0';
            else if (c >= 'a' && c <= 'f') v |= c - 'a' + 10;
            else if (c >= 'A' && c <= 'F') v |= c - 'A' + 10;
            else fail("bad hex digit in \\u escape");
        }
        return v;
    }
    std::string str() {
        if (i >= s.size() || s[i] != '"') fail("expected a string");
        i++;
        std::string out;
        while (true) {
            if (i >= s.size()) fail("unterminated string");
            char c = s[i++];
            if (c == '"') break;
            if ((unsigned char)c < 0x20) fail("control character in string");
            if (c != '\\') {
                out += c;
                continue;
            }
            if (i >= s.size()) fail("unterminated escape");
            char e = s[i++];
            switch (e) {
            case '"': out += '"'; break;
            case '\\': out += '\\'; break;
            case '/': out += '/'; break;
            case 'b': out += '\b'; break;
            case 'f': out += '\f'; break;
            case 'n': out += '\n'; break;
            case 'r': out += '\r'; break;
            case 't': out += '\t'; break;
            case 'u': {
                uint32_t cp = hex4();
                if (cp >= 0xD800 && cp < 0xDC00 && lit("\\u")) {
                    uint32_t lo = hex4();
                    if (lo < 0xDC00 || lo >= 0xE000) fail("bad surrogate pair");
                    cp = 0x10000 + ((cp - 0xD800) << 10) + (lo - 0xDC00);
                }
                text::append_utf8(out, cp);
                break;
            }
            default: fail(std::string("bad escape \\") + e);
            }
        }
        return out;
    }
    double num() {
        size_t start = i;
        if (i < s.size() && s[i] == '-') i++;
        if (i >= s.size() || !(s[i] >= '0' && s[i] <= '9')) fail("expected a value");
        while (i < s.size() && ((s[i] >= '0' && s[i] <= '9') || s[i] == '.' || s[i] == 'e' ||
                                s[i] == 'E' || s[i] == '+' || s[i] == '-')) {
            i++;
        }
        std::string tok = s.substr(start, i - start);
        char *end = nullptr;
        double v = std::strtod(tok.c_str(), &end);
        if (end != tok.c_str() + tok.size()) {
            i = start;
            fail("bad number '" + tok + "'");
        }
        return v;
    }
    Value value() {
        if (++depth > 256) fail("nesting deeper than 256");
        ws();
        if (i >= s.size()) fail("unexpected end of input");
        Value v;
        char c = s[i];
        if (c == '{') {
            v.kind = Value::Kind::Object;
            i++;
            ws();
            std::unordered_set<std::string> keys;  // a vocab.json has 50,000
            if (i < s.size() && s[i] == '}') {
                i++;
            } else {
                while (true) {
                    ws();
                    std::string key = str();
                    ws();
                    if (i >= s.size() || s[i] != ':') fail("expected ':'");
                    i++;
                    if (!keys.insert(key).second) fail("duplicate key \"" + key + "\"");
                    v.object.emplace_back(key, value());
                    ws();
                    if (i < s.size() && s[i] == ',') { i++; continue; }
                    if (i < s.size() && s[i] == '}') { i++; break; }
                    fail("expected ',' or '}'");
                }
            }
        } else if (c == '[') {
            v.kind = Value::Kind::Array;
            i++;
            ws();
            if (i < s.size() && s[i] == ']') {
                i++;
            } else {
                while (true) {
                    v.array.push_back(value());
                    ws();
                    if (i < s.size() && s[i] == ',') { i++; continue; }
                    if (i < s.size() && s[i] == ']') { i++; break; }
                    fail("expected ',' or ']'");
                }
            }
        } else if (c == '"') {
            v.kind = Value::Kind::String;
            v.string = str();
        } else if (lit("true")) {
            v.kind = Value::Kind::Bool;
            v.boolean = true;
        } else if (lit("false")) {
            v.kind = Value::Kind::Bool;
        } else if (lit("null")) {
            v.kind = Value::Kind::Null;
        } else {
            v.kind = Value::Kind::Number;
            v.number = num();
        }
        depth--;
        return v;
    }
};

}  // namespace

const Value *Value::find(const std::string &key) const {
    for (auto &kv : object) {
        if (kv.first == key) return &kv.second;
    }
    return nullptr;
}

Value parse(const std::string &text, const std::string &what) {
    Parser p{text, what};
    Value v = p.value();
    p.ws();
    if (p.i != text.size()) p.fail("unexpected text after the value");
    return v;
}

const char *kind_name(Value::Kind k) {
    switch (k) {
    case Value::Kind::Null: return "null";
    case Value::Kind::Bool: return "a boolean";
    case Value::Kind::Number: return "a number";
    case Value::Kind::String: return "a string";
    case Value::Kind::Array: return "an array";
    case Value::Kind::Object: return "an object";
    }
    return "?";
}

std::string quote(const std::string &s) {
    std::string out = "\"";
    for (char c : s) {
        switch (c) {
        case '"': out += "\\\""; break;
        case '\\': out += "\\\\"; break;
        case '\n': out += "\\n"; break;
        case '\t': out += "\\t"; break;
        case '\r': out += "\\r"; break;
        default:
            if ((unsigned char)c < 0x20) {
                char buf[8];
                std::snprintf(buf, sizeof buf, "\\u%04x", c);
                out += buf;
            } else {
                out += c;
            }
        }
    }
    return out + "\"";
}

std::string dump(const Value &v) {
    switch (v.kind) {
    case Value::Kind::Null: return "null";
    case Value::Kind::Bool: return v.boolean ? "true" : "false";
    case Value::Kind::Number: {
        if (!std::isfinite(v.number)) return "null";
        char buf[32];
        if (std::floor(v.number) == v.number && std::fabs(v.number) <= 9007199254740992.0) {
            std::snprintf(buf, sizeof buf, "%.0f", v.number);
        } else {
            std::snprintf(buf, sizeof buf, "%.17g", v.number);
        }
        return buf;
    }
    case Value::Kind::String: return quote(v.string);
    case Value::Kind::Array: {
        std::string out = "[";
        for (size_t i = 0; i < v.array.size(); i++) out += (i ? "," : "") + dump(v.array[i]);
        return out + "]";
    }
    case Value::Kind::Object: {
        std::string out = "{";
        for (size_t i = 0; i < v.object.size(); i++) {
            out += (i ? "," : "") + quote(v.object[i].first) + ":" + dump(v.object[i].second);
        }
        return out + "}";
    }
    }
    return "null";
}

}  // namespace json
}  // namespace halformer
