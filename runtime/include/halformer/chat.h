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

    ChatTemplate(ChatTemplate &&) noexcept;
    ChatTemplate &operator=(ChatTemplate &&) noexcept;
    ~ChatTemplate();
    struct Impl;

private:
    explicit ChatTemplate(std::unique_ptr<Impl> impl);
    std::unique_ptr<Impl> impl_;
};

}  // namespace halformer
