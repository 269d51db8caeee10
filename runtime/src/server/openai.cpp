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

// A chat completion's choice: the assistant's message, split into its
// thinking, content and tool calls as `reply` says (chat_reply.h).
json chat_choice(size_t index, const std::string &text, const json &finish_reason, const json &logprobs,
                 const serve::ChatReply &reply) {
    bool calls = false;
    json message = serve::split_reply(text, reply, calls);
    return {{"index", index},
            {"message", std::move(message)},
            {"logprobs", logprobs},
            {"finish_reason", calls && finish_reason == "stop" ? json("tool_calls") : finish_reason}};
}

// A streamed completion (under the waiter's lock): appends a chunk per new
// text piece and one with each choice's finish reason; once every choice is
// done, the usage (when asked) and [DONE], and returns true. finished[i]:
// choice i's last chunk went out. chat: chat.completion.chunk deltas (the
// first of a choice says its role; started[i]: it went out), the text split
// by split[i] into reasoning_content and content deltas, and the tool calls
// it made in one delta at the end.
bool completion_events(const Jobs &jobs, int n, const json &head, bool include_usage, std::vector<char> &finished,
                       std::string &out, bool chat, std::vector<char> *started,
                       std::vector<serve::ReplySplitter> *split) {
    auto send_delta = [&](size_t i, json delta, const json &reason) {
        json e = head;
        if (!(*started)[i]) {
            json d = {{"role", "assistant"}};
            for (auto it = delta.begin(); it != delta.end(); ++it) d[it.key()] = it.value();
            delta = std::move(d);
        }
        (*started)[i] = 1;
        e["choices"] = json::array({json{{"index", i}, {"delta", delta}, {"logprobs", nullptr}, {"finish_reason", reason}}});
        out += sse(e);
    };
    auto send_pieces = [&](size_t i, const std::vector<serve::ReplyDelta> &pieces) {
        for (const serve::ReplyDelta &d : pieces) {
            send_delta(i, json{{d.reasoning ? "reasoning_content" : "content", d.text}}, nullptr);
        }
    };
    auto chunk = [&](size_t i, const std::string &text, const json &reason) {
        if (chat) {
            send_pieces(i, (*split)[i].push(text));
            if (reason.is_null()) return;
            json calls;
            send_pieces(i, (*split)[i].finish(calls));
            json r = reason;
            if (!calls.empty()) {
                json list = json::array();
                for (size_t k = 0; k < calls.size(); k++) {
                    json c = calls[k];
                    c["index"] = k;
                    list.push_back(std::move(c));
                }
                send_delta(i, json{{"tool_calls", list}}, nullptr);
                if (r == "stop") r = "tool_calls";
            }
            send_delta(i, json::object(), r);
        } else {
            json e = head;
            e["choices"] = json::array({completion_choice(i, text, reason)});
            out += sse(e);
        }
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
