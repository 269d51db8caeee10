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

#include <memory>

namespace halformer {

struct ChatTemplate::Impl {
    jinja::Body body;
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
    impl->body = jinja::parse(jinja::lex(src));
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
    try {
        e.run(impl_->body);
    } catch (const jinja::Break &) {
        throw Error("chat template: {% break %} outside a loop");
    } catch (const jinja::Continue &) {
        throw Error("chat template: {% continue %} outside a loop");
    }
    return out;
}

}  // namespace halformer
