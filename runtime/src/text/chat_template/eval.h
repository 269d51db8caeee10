// The chat templates' evaluator (internal to chat_template.cpp): runs the
// parse tree's statements over the template's variables and appends the
// output to a string. eval.cpp holds the statements, expressions and
// operators; eval_filters.cpp the filters, tests and methods.
#pragma once

#include "parse.h"

#include "halformer/error.h"

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <vector>

namespace halformer::jinja {

struct Break {};
struct Continue {};

class Eval {
public:
    explicit Eval(std::string &out) : out_(&out) { frames_.emplace_back(); }
    std::vector<std::map<std::string, Value>> frames_;

    void run(const Body &body) {
        for (const StmtP &s : body) exec(*s);
    }

private:
    [[noreturn]] void fail(const Where &at, const std::string &msg) const {
        throw Error("chat template: " + at.str() + ": " + msg);
    }
    Value lookup(const std::string &name) const;
    void exec(const Stmt &s);
    void loop(const Stmt &s);
    void bind(const Stmt &s, const Value &item);
    static std::vector<std::string> utf8_chars(const std::string &s);
    static int64_t utf8_length(const std::string &s) { return (int64_t)utf8_chars(s).size(); }

    Value eval(const Node &n);

    Value attribute(const Value &v, const std::string &name);
    Value item(const Value &v, const Value &key);
    Value slice(const Node &n);
    Value call(const Node &n);
    // A global function of jinja2's (range, namespace) or transformers'
    // (raise_exception, strftime_now) by name; fails for any other name.
    Value builtin(const std::string &name, std::vector<Value> &args,
                  std::vector<std::pair<std::string, Value>> &kwargs);
    Value binary(const Node &n);

    // eval_filters.cpp: the methods, filters and tests.
    Value method(const Value &self, const std::string &name);
    static std::string replace_all(std::string s, const std::string &from, const std::string &to);
    static std::string recase(const std::string &s, const std::string &how);
    Value filter(const Node &n);
    bool test(const Node &n);

    // Macros, {% call %}, block sets and filters: the output of a body.
    std::string capture(const Body &body);
    Value call_macro(const Stmt &s, std::vector<Value> &args, std::vector<std::pair<std::string, Value>> &kwargs,
                     const Value &caller);
    void assign(const Stmt &s, Value v);
    Value strftime_now(const std::vector<Value> &args);

    using Kwargs = std::vector<std::pair<std::string, Value>>;
    Value apply_filter(const std::string &f, const Value &v, const std::vector<Value> &a, const Kwargs &kw);
    bool apply_test(const std::string &t, const Value &v, const std::vector<Value> &a);
    Array iterate(const Value &v, const std::string &what);
    Value attr_path(const Value &v, const std::string &path);

    std::string *out_;
    Where at_;
    int call_depth_ = 0;
    // A hostile template's bounds: statements run and loop turns taken in
    // one rendering, and the output (with the bodies being captured).
    static constexpr int64_t kMaxSteps = 2000000, kMaxOutput = int64_t(64) << 20;
    int64_t steps_ = 0;
    void step(const Where &at) {
        if (++steps_ > kMaxSteps) fail(at, "the template ran more than 2 million statements and loop turns");
        if ((int64_t)out_->size() > kMaxOutput) fail(at, "the rendering passed 64 MiB");
    }
};

}  // namespace halformer::jinja
