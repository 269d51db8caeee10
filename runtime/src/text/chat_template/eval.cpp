// The evaluator: statements (if, for with loop.*, set), and expressions:
// names, attributes, items, slices, calls of range(), namespace() and
// raise_exception(), and the operators.
#include "eval.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <ctime>

namespace halformer::jinja {

Value Eval::lookup(const std::string &name) const {
    for (auto f = frames_.rbegin(); f != frames_.rend(); ++f) {
        auto it = f->find(name);
        if (it != f->end()) return it->second;
    }
    // The global functions are defined too: `strftime_now is defined`
    // (Llama 3.2's test before it asks for the date) is true, and they can
    // be passed around as values.
    for (const char *b : {"range", "namespace", "raise_exception", "strftime_now"}) {
        if (name == b) {
            Eval *self = const_cast<Eval *>(this);
            return Value::function([self, name](std::vector<Value> &args, std::vector<std::pair<std::string, Value>> &kwargs) {
                return self->builtin(name, args, kwargs);
            });
        }
    }
    return Value{};
}

void Eval::exec(const Stmt &s) {
    at_ = s.at;
    step(s.at);
    switch (s.kind) {
    case Stmt::Text: *out_ += s.text; break;
    case Stmt::Output: {
        const Value v = eval(*s.expr);
        *out_ += to_str(v);
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
        if (!s.block) {
            assign(s, eval(*s.expr));
            break;
        }
        Value v = Value::str(capture(s.body));
        if (s.filter) {
            frames_.emplace_back();
            frames_.back()[kBlockName] = v;
            v = eval(*s.filter);
            frames_.pop_back();
        }
        assign(s, std::move(v));
        break;
    }
    case Stmt::FilterBlock: {
        const Value v = Value::str(capture(s.body));
        frames_.emplace_back();
        frames_.back()[kBlockName] = v;
        const Value r = eval(*s.filter);
        frames_.pop_back();
        *out_ += to_str(r);
        break;
    }
    case Stmt::Macro: {
        const Stmt *sp = &s;
        frames_.back()[s.targets[0]] = Value::function([this, sp](std::vector<Value> &a, Kwargs &kw) {
            return call_macro(*sp, a, kw, Value{});
        });
        break;
    }
    case Stmt::CallBlock: {
        // caller(): the body, run where the {% call %} is.
        const Stmt *sp = &s;
        auto scope = std::make_shared<std::vector<std::map<std::string, Value>>>(frames_);
        const Value caller = Value::function([this, sp, scope](std::vector<Value> &, Kwargs &) {
            std::swap(frames_, *scope);
            struct Back {
                Eval &e;
                std::vector<std::map<std::string, Value>> &sc;
                ~Back() { std::swap(e.frames_, sc); }
            } back{*this, *scope};
            return Value::str(capture(sp->body));
        });
        const Node &c = *s.expr;
        const Value m = eval(*c.kids[0]);
        std::vector<Value> args;
        for (size_t k = 1; k < c.kids.size(); k++) args.push_back(eval(*c.kids[k]));
        Kwargs kwargs;
        for (auto &[key, e] : c.kwargs) kwargs.emplace_back(key, eval(*e));
        if (m.kind != Value::Function) fail(s.at, std::string("{% call %} of a ") + kind_name(m) + ", not a macro");
        kwargs.emplace_back("caller", caller);
        *out_ += to_str((*m.fn)(args, kwargs));
        break;
    }
    case Stmt::For: loop(s); break;
    case Stmt::Break: throw Break{};
    case Stmt::Continue: throw Continue{};
    }
}

void Eval::assign(const Stmt &s, Value v) {
    {
        if (s.targets.size() == 2) {
            Value ns = lookup(s.targets[0]);
            if (ns.kind != Value::Dict || !ns.is_namespace) {
                fail(s.at, "cannot set an attribute of " + s.targets[0] + " (" + kind_name(ns) + "): only of a namespace()");
            }
            ns.put(s.targets[1], std::move(v));
        } else {
            frames_.back()[s.targets[0]] = std::move(v);
        }
    }
}

std::string Eval::capture(const Body &body) {
    std::string buf;
    std::string *const saved = out_;
    out_ = &buf;
    struct Back {
        std::string *&o, *s;
        ~Back() { o = s; }
    } back{out_, saved};
    run(body);
    return buf;
}

// A macro's call: its parameters from the arguments (the rest their
// defaults, or undefined), its body run in a scope of its own over the
// template's top level; the output is the value.
Value Eval::call_macro(const Stmt &s, std::vector<Value> &args, Kwargs &kwargs, const Value &caller) {
    const Where at = at_;
    const std::string &name = s.targets[0];
    const size_t np = s.targets.size() - 1;
    if (args.size() > np) {
        fail(at, "macro '" + name + "' takes not more than " + std::to_string(np) + " argument(s)");
    }
    std::map<std::string, Value> frame;
    std::vector<bool> given(np, false);
    for (size_t k = 0; k < args.size(); k++) frame[s.targets[k + 1]] = args[k], given[k] = true;
    Value call = caller;
    for (auto &[key, v] : kwargs) {
        if (key == "caller") {
            call = v;
            continue;
        }
        const auto it = std::find(s.targets.begin() + 1, s.targets.end(), key);
        if (it == s.targets.end()) fail(at, "macro '" + name + "' takes no keyword argument '" + key + "'");
        const size_t k = (size_t)(it - s.targets.begin()) - 1;
        if (given[k]) fail(at, "macro '" + name + "' got multiple values for argument '" + key + "'");
        frame[key] = v;
        given[k] = true;
    }
    if (++call_depth_ > 100) {
        call_depth_--;
        fail(at, "macro calls nested more than 100 deep");
    }
    auto saved = std::make_shared<std::vector<std::map<std::string, Value>>>();
    std::swap(*saved, frames_);
    struct Back {
        Eval &e;
        std::vector<std::map<std::string, Value>> &sv;
        Where at;
        ~Back() {
            std::swap(e.frames_, sv);
            e.call_depth_--;
            e.at_ = at;
        }
    } back{*this, *saved, at};
    frames_.push_back(saved->front());
    frames_.push_back(std::move(frame));
    for (size_t k = 0; k < np; k++) {
        if (given[k]) continue;
        frames_.back()[s.targets[k + 1]] = s.defaults[k] ? eval(*s.defaults[k]) : Value{};
    }
    if (call.kind != Value::Undefined) frames_.back()["caller"] = call;
    try {
        return Value::str(capture(s.body));
    } catch (const Break &) {
        fail(at, "{% break %} outside a loop");
    } catch (const Continue &) {
        fail(at, "{% continue %} outside a loop");
    }
}

// strftime_now(fmt): transformers' datetime.now().strftime(fmt), in local
// time; HALFORMER_CHAT_NOW ("YYYY-MM-DD HH:MM:SS") fixes the time (tests).
Value Eval::strftime_now(const std::vector<Value> &args) {
    if (args.size() != 1 || args[0].kind != Value::String) fail(at_, "strftime_now() takes one string");
    std::tm tm{};
    const char *fixed = std::getenv("HALFORMER_CHAT_NOW");
    if (fixed && *fixed) {
        int Y, M, D, h, m, sec;
        if (std::sscanf(fixed, "%d-%d-%d %d:%d:%d", &Y, &M, &D, &h, &m, &sec) != 6) {
            fail(at_, "HALFORMER_CHAT_NOW is not \"YYYY-MM-DD HH:MM:SS\"");
        }
        tm.tm_year = Y - 1900, tm.tm_mon = M - 1, tm.tm_mday = D, tm.tm_hour = h, tm.tm_min = m, tm.tm_sec = sec;
        tm.tm_isdst = -1;
        std::mktime(&tm);  // the weekday and day of the year
    } else {
        const std::time_t now = std::time(nullptr);
        localtime_r(&now, &tm);
    }
    std::string buf(256 + args[0].s.size() * 8, '\0');
    const size_t n = args[0].s.empty() ? 0 : std::strftime(buf.data(), buf.size(), args[0].s.c_str(), &tm);
    buf.resize(n);
    return Value::str(buf);
}

void Eval::loop(const Stmt &s) {
    const Value seq = eval(*s.expr);
    Array items;
    if (seq.kind == Value::List) items = *seq.list;
    else if (seq.kind == Value::Dict && !seq.is_namespace) for (auto &kv : *seq.dict) items.push_back(Value::str(kv.first));
    else if (seq.kind == Value::String) for (const std::string &c : utf8_chars(seq.s)) items.push_back(Value::str(c));
    else if (seq.kind != Value::Undefined) fail(s.at, std::string("cannot loop over ") + kind_name(seq));
    // The filter ("for x in xs if c") picks the items first: loop.* counts those.
    Array picked;
    for (const Value &item : items) {
        step(s.at);
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
        step(s.at);
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

void Eval::bind(const Stmt &s, const Value &item) {
    if (s.targets.size() == 1) {
        frames_.back()[s.targets[0]] = item;
        return;
    }
    if (item.kind != Value::List || item.list->size() != s.targets.size()) {
        fail(s.at, "cannot unpack " + repr(item) + " into " + std::to_string(s.targets.size()) + " names");
    }
    for (size_t k = 0; k < s.targets.size(); k++) frames_.back()[s.targets[k]] = (*item.list)[k];
}

std::vector<std::string> Eval::utf8_chars(const std::string &s) {
    std::vector<std::string> out;
    for (size_t k = 0; k < s.size();) {
        const unsigned char c = (unsigned char)s[k];
        const size_t n = c < 0x80 ? 1 : c < 0xE0 ? 2 : c < 0xF0 ? 3 : 4;
        out.push_back(s.substr(k, n));
        k += n;
    }
    return out;
}

Value Eval::eval(const Node &n) {
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
        return n.name == "tuple" ? Value::tuple(std::move(a)) : Value::array(std::move(a));
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

Value Eval::attribute(const Value &v, const std::string &name) {
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

Value Eval::item(const Value &v, const Value &key) {
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

Value Eval::slice(const Node &n) {
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

Value Eval::builtin(const std::string &name, std::vector<Value> &args,
                    std::vector<std::pair<std::string, Value>> &kwargs) {
    if (name == "raise_exception") {
        throw Error("chat template: " + (args.empty() ? std::string("raise_exception()") : to_str(args[0])));
    }
    if (name == "strftime_now") return strftime_now(args);
    if (name == "namespace") {
        Value ns = Value::object();
        ns.is_namespace = true;
        for (auto &[k, v] : kwargs) ns.put(k, v);
        return ns;
    }
    if (name == "range") {
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
    fail(at_, "'" + name + "' is not a function here");
}

Value Eval::call(const Node &n) {
    const Node &callee = *n.kids[0];
    std::vector<Value> args;
    for (size_t k = 1; k < n.kids.size(); k++) args.push_back(eval(*n.kids[k]));
    std::vector<std::pair<std::string, Value>> kwargs;
    for (auto &[key, e] : n.kwargs) kwargs.emplace_back(key, eval(*e));
    if (callee.kind == Node::Name) {
        const Value f = lookup(callee.name);
        if (f.kind == Value::Function) return (*f.fn)(args, kwargs);
        return builtin(callee.name, args, kwargs);
    }
    const Value f = eval(callee);
    if (f.kind != Value::Function) fail(at_, std::string("a ") + kind_name(f) + " is not callable");
    return (*f.fn)(args, kwargs);
}

Value Eval::binary(const Node &n) {
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

}  // namespace halformer::jinja
