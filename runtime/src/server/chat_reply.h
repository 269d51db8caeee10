// Internal: a chat reply as OpenAI's API returns it: the model's text split
// into its thinking (`reasoning_content`), its answer (`content`) and the
// tool calls it made (`tool_calls`), in the formats the families' chat
// templates teach:
//   * thinking: <think> … </think> (Qwen3, DeepSeek-R1, SmolLM3); the
//     block may open in the prompt (a template that ends its generation
//     prompt with "<think>"), then the reply starts inside it;
//   * tool calls, by the template's own format:
//       hermes:  <tool_call>{"name": …, "arguments": {…}}</tool_call> (Qwen2.5,
//                Qwen3, Hermes, SmolLM3), any number, text around them;
//       json:    the whole reply one JSON object {"name", "parameters" or
//                "arguments"}, or several joined by ";" (Llama 3.1-3.3,
//                whose <|python_tag|> is a special token decoding drops);
//       mistral: [TOOL_CALLS] then a JSON list of {"name", "arguments"}
//                (the marker is a special token: the reply is the list).
// A call whose JSON does not parse is left in the content, as text (the
// client sees what the model wrote); a reply cut by the token limit while a
// call is open is content too.
//
// ReplySplitter works on the reply as it streams: it says at once what is
// thinking and what is content, holding back only what might still become a
// tag or a tool call, and gives the calls at the end; splitting a whole
// reply (split_reply) is the same machine fed once, so a streamed reply's
// deltas add up to the unstreamed message.
#pragma once

#include <nlohmann/json.hpp>

#include <cstdint>
#include <string>
#include <vector>

namespace halformer::serve {

enum class ToolFormat { None, Hermes, Json, Mistral };

// What to look for in a reply of this chat request.
struct ChatReply {
    bool thinking = false;          // the template knows <think>
    bool starts_thinking = false;   // the rendered prompt ends inside <think>
    ToolFormat tools = ToolFormat::None;  // the request gave tools (and tool_choice is not "none")
    bool parallel_tool_calls = true;      // false: the first call only
    std::string id_prefix = "call_";      // tool call ids: prefix + a counter (Mistral: 9 characters)
};

// The formats a chat template teaches, from its source.
ToolFormat tool_format_of(const std::string &template_source);
bool template_thinks(const std::string &template_source);
// Whether a rendered prompt leaves the reply inside a <think> block.
bool prompt_opens_thinking(const std::string &prompt);

// A piece of a reply: thinking or content.
struct ReplyDelta {
    bool reasoning = false;
    std::string text;
};

class ReplySplitter {
public:
    explicit ReplySplitter(const ChatReply &format);
    // The next text of the reply → what can be said of it now.
    std::vector<ReplyDelta> push(const std::string &text);
    // The reply is over: the rest, and the tool calls it made (OpenAI's
    // [{"id", "type": "function", "function": {"name", "arguments": "<JSON text>"}}]).
    std::vector<ReplyDelta> finish(nlohmann::json &tool_calls);

private:
    void content(std::string text, std::vector<ReplyDelta> &out);
    std::vector<ReplyDelta> drain(bool at_end, nlohmann::json *calls);

    ChatReply f_;
    enum class State { Start, Thinking, Content } state_;
    std::string pending_;   // text not yet classified (a tag's start, a call's body)
    bool content_started_ = false;  // leading whitespace of the content is dropped (after </think>)
    bool holding_call_ = false;     // pending_ holds a tool call (or a JSON reply) until the end
};

// A whole reply at once: {"role": "assistant", "content", ["reasoning_content"], ["tool_calls"]};
// has_calls: it made tool calls (its finish reason is then "tool_calls").
nlohmann::json split_reply(const std::string &text, const ChatReply &format, bool &has_calls);

}  // namespace halformer::serve
