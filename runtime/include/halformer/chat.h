// Chat templates: the Jinja templates Hugging Face checkpoints ship in
// tokenizer_config.json ("chat_template"), which turn a conversation into
// the prompt text the model was trained on.
//
//   auto t = halformer::ChatTemplate::parse(source);
//   std::string prompt = t.render({{"user", "Hello"}}, true, {{"bos_token", "<s>"}});
//
// The template language is the subset of Jinja these templates use,
// evaluated as transformers does (jinja2's sandbox with trim_blocks and
// lstrip_blocks): text, {{ expressions }}, {% if / elif / else %},
// {% for x in xs %} (loop.index, index0, first, last, length, revindex;
// else; break, continue), {% set %} (namespace() attributes too), comments
// and whitespace control ({%- -%}); literals, lists and dicts, attribute
// and item access, slices, + - * / // % ~, comparisons, in, and / or /
// not, a if c else b; the filters trim, length, count, upper, lower,
// title, capitalize, default, string, int, first, last, join, list,
// reverse, replace, tojson; the tests defined, undefined, none, string,
// number, integer, mapping, sequence, iterable, boolean, true, false,
// odd, even; string methods strip, lstrip, rstrip, startswith, endswith,
// split, upper, lower, title, replace; dict items / keys / values / get;
// range, namespace and raise_exception. Anything else is an Error naming
// the construct and where it is, never output that differs silently.
#pragma once

#include "halformer/error.h"

#include <map>
#include <memory>
#include <string>
#include <vector>

namespace halformer {

struct ChatMessage {
    std::string role;     // "system", "user", "assistant", ...
    std::string content;
};

class ChatTemplate {
public:
    // Throws Error naming the line and column of what it cannot parse.
    static ChatTemplate parse(const std::string &source);
    // The prompt for `messages` (add_generation_prompt: end with the
    // assistant's header, as generation needs); `vars`: the other strings
    // the template reads (bos_token, eos_token, ...). A raise_exception()
    // of the template is an Error with its message, as is any error of
    // evaluation (naming the line).
    std::string render(const std::vector<ChatMessage> &messages, bool add_generation_prompt,
                       const std::map<std::string, std::string> &vars = {}) const;

    ChatTemplate(ChatTemplate &&) noexcept;
    ChatTemplate &operator=(ChatTemplate &&) noexcept;
    ~ChatTemplate();
    struct Impl;

private:
    explicit ChatTemplate(std::unique_ptr<Impl> impl);
    std::unique_ptr<Impl> impl_;
};

}  // namespace halformer
