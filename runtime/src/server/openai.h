// Internal: the OpenAI API's answers of `halformer serve` (POST
// /v1/completions and /v1/chat/completions): error objects, server-sent
// events, a completion's choices and usage, and the events of a streamed
// completion.
#pragma once

#include "chat_reply.h"
#include "server_impl.h"

#include <cstddef>
#include <string>
#include <vector>

namespace halformer::serving {

std::string openai_error(int status, const std::string &msg, const std::string &param = "",
                         const std::string &code = "");
std::string sse(const json &j);
json completion_choice(size_t index, const std::string &text, const json &finish_reason,
                       const json &logprobs = nullptr);
json completion_usage(const Jobs &jobs, int n);
json chat_choice(size_t index, const std::string &text, const json &finish_reason, const json &logprobs,
                 const serve::ChatReply &reply);
bool completion_events(const Jobs &jobs, int n, const json &head, bool include_usage, std::vector<char> &finished,
                       std::string &out, bool chat = false, std::vector<char> *started = nullptr,
                       std::vector<serve::ReplySplitter> *split = nullptr);

}  // namespace halformer::serving
