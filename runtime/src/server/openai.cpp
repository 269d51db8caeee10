// The OpenAI API's answers (openai.h): error objects, choices, usage and
// the server-sent events of a streamed completion.
#include "openai.h"

namespace halformer::serving {

namespace {

// OpenAI's error object.
json openai_error_json(int status, const std::string &msg, const std::string &param = "",
                       const std::string &code = "") {
    json e = {{"message", msg},
              {"type", status >= 500 ? "server_error" : "invalid_request_error"},
              {"param", param.empty() ? json(nullptr) : json(param)},
              {"code", code.empty() ? json(nullptr) : json(code)}};
    return json{{"error", e}};
}

}  // namespace

std::string openai_error(int status, const std::string &msg, const std::string &param,
                         const std::string &code) {
    return to_body(openai_error_json(status, msg, param, code));
}

std::string sse(const json &j) { return "data: " + to_body(j) + "\n\n"; }

// One choice of a completion, in a streamed chunk or the whole answer.
json completion_choice(size_t index, const std::string &text, const json &finish_reason,
                       const json &logprobs) {
    return {{"text", text}, {"index", index}, {"logprobs", logprobs}, {"finish_reason", finish_reason}};
}

// The usage of a completion's jobs (n per prompt): a prompt counts once.
json completion_usage(const Jobs &jobs, int n) {
    int64_t in = 0, out = 0;
    for (size_t i = 0; i < jobs.size(); i++) {
        if (i % (size_t)n == 0) in += (int64_t)jobs[i]->req.ids.size();
        if (!jobs[i]->hyps.empty()) out += (int64_t)jobs[i]->hyps[0].tokens.size();
    }
    return json{{"prompt_tokens", in}, {"completion_tokens", out}, {"total_tokens", in + out}};
}

// A chat completion's choice: the assistant's message.
json chat_choice(size_t index, const std::string &text, const json &finish_reason, const json &logprobs) {
    return {{"index", index},
            {"message", {{"role", "assistant"}, {"content", text}}},
            {"logprobs", logprobs},
            {"finish_reason", finish_reason}};
}

// A streamed completion (under the waiter's lock): appends a chunk per new
// text piece and one with each choice's finish reason; once every choice is
// done, the usage (when asked) and [DONE], and returns true. finished[i]:
// choice i's last chunk went out. chat: chat.completion.chunk deltas (the
// first of a choice says its role; started[i]: it went out).
bool completion_events(const Jobs &jobs, int n, const json &head, bool include_usage, std::vector<char> &finished,
                       std::string &out, bool chat, std::vector<char> *started) {
    auto chunk = [&](size_t i, const std::string &text, const json &reason) {
        json e = head;
        if (chat) {
            json delta = json::object();
            if (!(*started)[i]) delta["role"] = "assistant";
            (*started)[i] = 1;
            if (!text.empty()) delta["content"] = text;
            e["choices"] = json::array(
                {json{{"index", i}, {"delta", delta}, {"logprobs", nullptr}, {"finish_reason", reason}}});
        } else {
            e["choices"] = json::array({completion_choice(i, text, reason)});
        }
        out += sse(e);
    };
    bool all = true;
    for (size_t i = 0; i < jobs.size(); i++) {
        Job &j = *jobs[i];
        if (finished[i]) continue;
        for (auto &f : j.fresh) {
            if (!f.second.empty()) chunk(i, f.second, nullptr);
        }
        j.fresh.clear();
        if (!j.done) {
            all = false;
            continue;
        }
        finished[i] = 1;
        if (!j.error.empty()) out += sse(openai_error_json(500, j.error));
        else if (!j.cancelled) chunk(i, j.last_piece, j.finish_reason);
    }
    if (!all) return false;
    if (include_usage) {
        json e = head;
        e["choices"] = json::array();
        e["usage"] = completion_usage(jobs, n);
        out += sse(e);
    }
    out += "data: [DONE]\n\n";
    return true;
}

}  // namespace halformer::serving
