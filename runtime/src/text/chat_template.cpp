// The Jinja subset of chat templates (halformer/chat.h): a lexer that
// applies jinja2's whitespace rules (trim_blocks, lstrip_blocks, - markers),
// a recursive-descent parser into a small tree, and an evaluator over
// dynamically typed values with Python's semantics where the templates see
// them (truthiness, str(), ==, +, in, slicing). They are in chat_template/
// (namespace halformer::jinja): value.h (the values), lex.h (the lexer and
// tokenizer), parse.h (the tree and its parser) and eval.h (the evaluator);
// this file holds ChatTemplate, which joins them.
#include "halformer/chat.h"

#include "chat_template/eval.h"

#include "halformer/json.h"

#include <cmath>
#include <memory>

namespace halformer {

struct ChatTemplate::Impl {
    jinja::Body body;
    std::string source;
};

namespace {

// A JSON value as the template sees it: Python's dict, list, str, int,
// float, bool and None (an integral number within 2^53 is an int).
jinja::Value template_value(const json::Value &v) {
    using K = json::Value::Kind;
    switch (v.kind) {
    case K::Null: return jinja::Value::none();
    case K::Bool: return jinja::Value::boolean(v.boolean);
    case K::Number:
        if (std::floor(v.number) == v.number && std::fabs(v.number) <= 9007199254740992.0) {
            return jinja::Value::integer((int64_t)v.number);
        }
        return jinja::Value::real(v.number);
    case K::String: return jinja::Value::str(v.string);
    case K::Array: {
        jinja::Array a;
        a.reserve(v.array.size());
        for (const json::Value &x : v.array) a.push_back(template_value(x));
        return jinja::Value::array(std::move(a));
    }
    case K::Object: {
        jinja::Value o = jinja::Value::object();
        for (const auto &[k, x] : v.object) o.put(k, template_value(x));
        return o;
    }
    }
    return jinja::Value::none();
}

// Runs the template on its globals.
std::string run_template(const jinja::Body &body, jinja::Eval &e, std::string &out) {
    try {
        e.run(body);
    } catch (const jinja::Break &) {
        throw Error("chat template: {% break %} outside a loop");
    } catch (const jinja::Continue &) {
        throw Error("chat template: {% continue %} outside a loop");
    }
    return out;
}

}  // namespace

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
    impl->body = jinja::parse(jinja::lex(src));
    impl->source = source;
    return ChatTemplate(std::move(impl));
}

std::string ChatTemplate::render(const std::vector<ChatMessage> &messages, bool add_generation_prompt,
                                 const std::map<std::string, std::string> &vars) const {
    std::string out;
    jinja::Eval e(out);
    auto &globals = e.frames_.front();
    for (auto &[k, v] : vars) globals[k] = jinja::Value::str(v);
    jinja::Array list;
    for (const ChatMessage &m : messages) {
        jinja::Value msg = jinja::Value::object();
        msg.put("role", jinja::Value::str(m.role));
        msg.put("content", jinja::Value::str(m.content));
        list.push_back(msg);
    }
    globals["messages"] = jinja::Value::array(std::move(list));
    globals["add_generation_prompt"] = jinja::Value::boolean(add_generation_prompt);
    return run_template(impl_->body, e, out);
}

std::string ChatTemplate::render_json(const std::string &conversation, bool add_generation_prompt,
                                      const std::map<std::string, std::string> &vars) const {
    const json::Value v = json::parse(conversation, "chat: the conversation");
    const json::Value *messages = &v;
    if (v.is_object()) {
        messages = v.find("messages");
        if (messages == nullptr) throw Error("chat: the conversation's object has no \"messages\"");
    }
    if (!messages->is_array()) {
        throw Error(std::string("chat: the messages must be a list, not ") + json::kind_name(messages->kind));
    }
    for (size_t i = 0; i < messages->array.size(); i++) {
        if (!messages->array[i].is_object()) {
            throw Error("chat: messages[" + std::to_string(i) + "] must be an object, not " +
                        json::kind_name(messages->array[i].kind));
        }
    }
    std::string out;
    jinja::Eval e(out);
    auto &globals = e.frames_.front();
    for (auto &[k, x] : vars) globals[k] = jinja::Value::str(x);
    if (v.is_object()) {
        for (const auto &[k, x] : v.object) {
            if (k == "add_generation_prompt") throw Error("chat: 'add_generation_prompt' is the caller's, not a variable to set");
            if (k != "messages") globals[k] = template_value(x);
        }
    }
    globals["messages"] = template_value(*messages);
    globals["add_generation_prompt"] = jinja::Value::boolean(add_generation_prompt);
    return run_template(impl_->body, e, out);
}

const std::string &ChatTemplate::source() const { return impl_->source; }

}  // namespace halformer
