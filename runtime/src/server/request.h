// Internal: the JSON request body of `halformer serve`'s POST /v1/generate,
// parsed and checked against the model before it may join a batch (a bad
// request must never fail the batch it would have joined).
//
//   {"ids": [5, 6, 7]}                or   {"text": "Open the file."}
//   optional: "beam" (1..7), "n_best", "length_penalty", "max_new_tokens",
//             "sample", "temperature", "top_k", "top_p", "seed", "stream",
//             "stop", "stop_ids", "return_logprobs", "target_prefix" (ids;
//             encoder-decoder models), "repetition_penalty",
//             "no_repeat_ngram_size", "min_length"
//
// ids: the source (encoder-decoder) or the prompt (decoder-only); text needs
// a model with a tokenizer. Unknown fields, wrong types, out-of-range values
// and inputs the model cannot take are a RequestError with the HTTP status
// to answer (400, or 413 for an input past the token limit).
#pragma once

#include "halformer/config.h"
#include "halformer/model.h"

#include "chat_reply.h"

#include <functional>
#include <stdexcept>
#include <string>
#include <vector>

namespace halformer::serve {

struct RequestError : std::runtime_error {
    int status;
    std::string param, code;  // OpenAI's error fields (the argument at fault, a code); "" when none
    RequestError(int status_, const std::string &msg, std::string param_ = "", std::string code_ = "")
        : std::runtime_error(msg), status(status_), param(std::move(param_)), code(std::move(code_)) {}
};

struct Limits {
    int max_input_tokens = 0;  // 0: the model's max_positions
    int max_new_tokens = 256;  // cap on what one request may ask for
};

struct Request {
    Sequence ids;
    bool is_text = false;
    std::string text;
    GenerateOptions options;  // max_new_tokens: this request's own limit (always set)
    uint64_t seed = 0;
    bool stream = false;             // answer with server-sent events
    std::vector<std::string> stop;   // the output ends before the first of these (text models)
    Sequence target_prefix;          // the output continues these ids (encoder-decoder)
};



// The request parser's own helpers (request.cpp, chat_request.cpp): a 400
// with the message; a JSON value's kind for messages.
[[noreturn]] void bad(const std::string &msg);
const char *type_of(const nlohmann::json &v);
// A chat request's messages, checked, as the template reads them: `ordered`
// is the same list parsed in its key order (nlohmann's json sorts keys; the
// template's tojson prints them as the client sent them); text parts are
// joined into one string, null content is "", a tool call's arguments
// (JSON text) become the object they hold (chat_request.cpp).
nlohmann::ordered_json chat_messages(const nlohmann::json &m, const nlohmann::ordered_json &ordered);
// The tools of a chat request (OpenAI's function tools), checked.
void check_tools(const nlohmann::json &t);

// Text to ids (the model's tokenizer; throws Error), or null without one.
using Encoder = std::function<Sequence(const std::string &)>;

// Parses and checks one body.
Request parse_request(const std::string &body, const Config &cfg, const Encoder &encode, const Limits &limits);

// OpenAI's POST /v1/completions body: one Request per choice (prompt i's
// k-th sample is choices[i·n + k], seeded seed + k).
//   model (required: this server's model name, else 404), prompt (a string,
//   a list of strings, a list of ids or a list of lists of ids), max_tokens
//   (16), temperature (1; 0 is greedy), top_p, n (1..16), stream,
//   stream_options.include_usage, seed (random when absent), stop (a string
//   or up to 4), user (ignored), vLLM's repetition_penalty, min_tokens and
//   stop_token_ids, logprobs (0: the chosen tokens' log-
//   probabilities, not streamed; no alternatives); echo, suffix, best_of,
//   penalties and logit_bias only at their defaults (else 400 naming the
//   argument).
struct Completion {
    std::vector<Request> choices;
    int prompts = 0, n = 1;
    bool stream = false, include_usage = false, logprobs = false;
    std::string model;
    ChatReply reply;  // chat: how the reply splits into thinking, content and tool calls
};

Completion parse_completion(const std::string &body, const Config &cfg, const Encoder &encode, const Limits &limits,
                            const std::string &model_name);

// A conversation → its prompt text (the model's chat template; the JSON of
// Model::chat_prompt_json: "messages" and the template's other variables
// such as "tools"); null without one.
using ChatRenderer = std::function<std::string(const std::string &conversation_json)>;
// OpenAI's POST /v1/chat/completions body: as a completion's, with
// "messages" instead of "prompt": a list of {role, content, [name]} where
// content is a string, a list of {"type": "text", "text"} parts (joined) or
// null; an assistant's "tool_calls" ([{id, type: "function", function:
// {name, arguments}}], arguments JSON text, given to the template as the
// object it holds, as vLLM does) and "reasoning_content"; a tool message's
// "tool_call_id". "tools" ([{type: "function", function: {name,
// description, parameters}}]) go to the template unless tool_choice is
// "none"; tool_choice "auto" or "none" ("required" and a named function
// would need constrained decoding: 400); parallel_tool_calls;
// chat_template_kwargs (vLLM's: more variables for the template, e.g.
// enable_thinking). The conversation is rendered with the generation
// prompt and tokenized without special tokens (the template writes them);
// max_completion_tokens as max_tokens. template_source: the chat template
// (which tool-call and thinking formats the reply is split by: c.reply).
Completion parse_chat_completion(const std::string &body, const Config &cfg, const Encoder &encode,
                                 const Limits &limits, const std::string &model_name, const ChatRenderer &render,
                                 const std::string &template_source = "");

}  // namespace halformer::serve
