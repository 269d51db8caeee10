// Chat templates: the Jinja templates Hugging Face checkpoints ship in
// tokenizer_config.json ("chat_template"), which turn a conversation into
// the prompt text the model was trained on.
//
//   auto t = halformer::ChatTemplate::parse(source);
//   std::string prompt = t.render({{"user", "Hello"}}, true, {{"bos_token", "<s>"}});
//
// The template language is the subset of Jinja these templates use,
// evaluated as transformers does (jinja2's sandbox with trim_blocks,
// lstrip_blocks and the loop-controls extension): text, {{ expressions }},
// {% if / elif / else %}, {% for x in xs %} (loop.index, index0, first,
// last, length, revindex, previtem, nextitem; else; break, continue),
// {% set %} (also as a block, filtered; namespace() attributes), {% macro %}
// with defaults and keyword arguments, {% call %} with caller(), {% filter
// %} blocks, comments and whitespace control ({%- -%}); literals, lists,
// dicts and tuples, attribute and item access, slices with steps,
// + - * / // % ~, comparisons, in, and / or / not, a if c else b; jinja2's
// filters that chat templates use (selectattr, rejectattr, select, reject,
// map, unique, sum, min, max, format, join, items, dictsort, batch, attr,
// default, trim, length, upper, lower, title, capitalize, replace, string,
// int, float, abs, round, list, reverse, first, last, tojson, wordcount,
// indent, center) and its tests; string, list and dict methods; range,
// namespace, raise_exception and strftime_now (HALFORMER_CHAT_NOW fixes the
// time). docs/huggingface.md lists what is left out. Anything else is an
// Error naming the construct and where it is, never output that differs
// silently.
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
    // The same for a conversation as JSON text, the way transformers'
    // apply_chat_template(messages, tools=..., **kwargs) takes it: a list of
    // message objects, or an object with "messages" and the template's
    // other variables ("tools", "documents", "enable_thinking", ...). Each
    // message goes to the template as it is (content a string, a list of
    // parts or null; an assistant's tool_calls; a tool message's
    // tool_call_id and name; any other key), objects in their order; an
    // integral JSON number is an int to the template, any other a float.
    // Throws Error when the text is not such JSON.
    std::string render_json(const std::string &conversation, bool add_generation_prompt,
                            const std::map<std::string, std::string> &vars = {}) const;
    // The template's source text.
    const std::string &source() const;

    ChatTemplate(ChatTemplate &&) noexcept;
    ChatTemplate &operator=(ChatTemplate &&) noexcept;
    ~ChatTemplate();
    struct Impl;

private:
    explicit ChatTemplate(std::unique_ptr<Impl> impl);
    std::unique_ptr<Impl> impl_;
};

}  // namespace halformer
