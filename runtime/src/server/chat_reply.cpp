#include "chat_reply.h"

#include <algorithm>
#include <atomic>
#include <chrono>

namespace halformer::serve {

namespace {

using json = nlohmann::json;

const std::string kThinkOpen = "<think>", kThinkClose = "</think>";
const std::string kCallOpen = "<tool_call>", kCallClose = "</tool_call>";

bool is_space(char c) { return c == ' ' || c == '\n' || c == '\r' || c == '\t'; }

std::string trim(const std::string &s) {
    size_t a = 0, b = s.size();
    while (a < b && is_space(s[a])) a++;
    while (b > a && is_space(s[b - 1])) b--;
    return s.substr(a, b - a);
}

// The length of the longest end of `s` that begins `tag` (a tag that may be
// arriving): held back until the next text says.
size_t partial_tag(const std::string &s, const std::string &tag) {
    for (size_t n = std::min(s.size(), tag.size() - 1); n > 0; n--) {
        if (s.compare(s.size() - n, n, tag, 0, n) == 0) return n;
    }
    return 0;
}

// A tool call id: the prefix and alphanumerics, unique in this process
// (a counter) and across restarts (the clock).
std::string call_id(const std::string &prefix, size_t length) {
    static std::atomic<uint64_t> counter{0};
    static const char digits[] = "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789";
    uint64_t x = (uint64_t)std::chrono::system_clock::now().time_since_epoch().count() * 0x9E3779B97F4A7C15ull +
                 counter.fetch_add(1) * 0xBF58476D1CE4E5B9ull;
    std::string id = prefix;
    for (size_t i = 0; i < length; i++) {
        x ^= x >> 31;
        x *= 0x94D049BB133111EBull;
        x ^= x >> 29;
        id += digits[x % 62];
    }
    return id;
}

// One call of the model's JSON ({"name", "arguments" or "parameters"}) in
// OpenAI's shape; null when it is not one.
json openai_call(const json &c, const ChatReply &f) {
    if (!c.is_object() || !c.contains("name") || !c["name"].is_string()) return nullptr;
    const json *args = nullptr;
    for (const char *k : {"arguments", "parameters"}) {
        if (c.contains(k)) args = &c[k];
    }
    std::string arguments = "{}";
    if (args != nullptr) {
        if (args->is_string()) arguments = args->get<std::string>();
        else if (args->is_object()) arguments = args->dump(-1, ' ', false, json::error_handler_t::replace);
        else return nullptr;
    }
    const bool mistral = f.tools == ToolFormat::Mistral;
    return json{{"id", call_id(mistral ? "" : f.id_prefix, mistral ? 9 : 24)},
                {"type", "function"},
                {"function", {{"name", c["name"]}, {"arguments", arguments}}}};
}

json parse_or_null(const std::string &text) {
    json j = json::parse(text, nullptr, false);
    return j.is_discarded() ? json(nullptr) : j;
}

// The calls of a held reply, by format: true when `held` was calls (the
// text around them, if any, in `rest`); false: it is content as it stands.
bool parse_calls(const std::string &held, const ChatReply &f, json &calls, std::string &rest) {
    calls = json::array();
    if (f.tools == ToolFormat::Hermes) {
        size_t at = 0;
        bool any = false;
        while (at < held.size()) {
            const size_t open = held.find(kCallOpen, at);
            if (open == std::string::npos) {
                rest += held.substr(at);
                break;
            }
            rest += held.substr(at, open - at);
            const size_t body = open + kCallOpen.size();
            size_t close = held.find(kCallClose, body);
            const size_t end = close == std::string::npos ? held.size() : close + kCallClose.size();
            const json c = openai_call(parse_or_null(trim(held.substr(body, (close == std::string::npos ? held.size() : close) - body))), f);
            if (c.is_null()) {
                rest += held.substr(open, end - open);  // not a call: the model's text as it wrote it
            } else {
                calls.push_back(c);
                any = true;
            }
            at = end;
        }
        if (!any) return false;
        if (trim(rest).empty()) rest.clear();
        return true;
    }
    std::string text = trim(held);
    if (f.tools == ToolFormat::Mistral) {
        if (text.rfind("[TOOL_CALLS]", 0) == 0) text = trim(text.substr(12));
        const json list = parse_or_null(text);
        if (!list.is_array() || list.empty()) return false;
        for (const json &x : list) {
            const json c = openai_call(x, f);
            if (c.is_null()) return false;
            calls.push_back(c);
        }
        return true;
    }
    // Json: one object, or several joined by ";".
    std::vector<std::string> parts;
    if (!parse_or_null(text).is_null()) {
        parts.push_back(text);
    } else {
        size_t at = 0;
        for (size_t semi; (semi = text.find(';', at)) != std::string::npos; at = semi + 1) {
            parts.push_back(text.substr(at, semi - at));
        }
        parts.push_back(text.substr(at));
    }
    for (const std::string &p : parts) {
        if (trim(p).empty()) continue;
        const json c = openai_call(parse_or_null(trim(p)), f);
        if (c.is_null()) return false;
        calls.push_back(c);
    }
    return !calls.empty();
}

}  // namespace

ToolFormat tool_format_of(const std::string &s) {
    if (s.find("<tool_call>") != std::string::npos) return ToolFormat::Hermes;
    if (s.find("[TOOL_CALLS]") != std::string::npos) return ToolFormat::Mistral;
    if (s.find("tools") != std::string::npos) return ToolFormat::Json;
    return ToolFormat::None;
}

bool template_thinks(const std::string &s) { return s.find(kThinkClose) != std::string::npos; }

bool prompt_opens_thinking(const std::string &prompt) {
    const std::string t = trim(prompt);
    const size_t open = t.rfind(kThinkOpen);
    return open != std::string::npos && open + kThinkOpen.size() == t.size();
}

ReplySplitter::ReplySplitter(const ChatReply &format) : f_(format) {
    state_ = f_.starts_thinking ? State::Thinking : f_.thinking ? State::Start : State::Content;
    content_started_ = !f_.starts_thinking;
}

std::vector<ReplyDelta> ReplySplitter::push(const std::string &text) {
    pending_ += text;
    return drain(false, nullptr);
}

std::vector<ReplyDelta> ReplySplitter::finish(json &tool_calls) {
    tool_calls = json::array();
    return drain(true, &tool_calls);
}

void ReplySplitter::content(std::string text, std::vector<ReplyDelta> &out) {
    if (!content_started_) {
        size_t a = 0;
        while (a < text.size() && is_space(text[a])) a++;
        text.erase(0, a);
        if (text.empty()) return;
        content_started_ = true;
    }
    if (text.empty()) return;
    if (!out.empty() && !out.back().reasoning) out.back().text += text;
    else out.push_back({false, std::move(text)});
}

std::vector<ReplyDelta> ReplySplitter::drain(bool at_end, json *calls) {
    std::vector<ReplyDelta> out;
    auto reasoning = [&](const std::string &t) {
        if (t.empty()) return;
        if (!out.empty() && out.back().reasoning) out.back().text += t;
        else out.push_back({true, t});
    };
    for (;;) {
        if (state_ == State::Start) {
            size_t a = 0;
            while (a < pending_.size() && is_space(pending_[a])) a++;
            const std::string head = pending_.substr(a);
            if (head.compare(0, kThinkOpen.size(), kThinkOpen) == 0) {
                pending_ = head.substr(kThinkOpen.size());
                state_ = State::Thinking;
                content_started_ = false;
                continue;
            }
            if (!at_end && kThinkOpen.compare(0, head.size(), head) == 0) return out;  // "<thi": wait
            state_ = State::Content;
            continue;
        }
        if (state_ == State::Thinking) {
            // The reasoning without the whitespace that opens and closes it.
            if (!content_started_) {
                size_t a = 0;
                while (a < pending_.size() && is_space(pending_[a])) a++;
                pending_.erase(0, a);
                if (!pending_.empty()) content_started_ = true;
            }
            const size_t close = pending_.find(kThinkClose);
            if (close != std::string::npos) {
                reasoning(trim(pending_.substr(0, close)).empty() ? "" : pending_.substr(0, close));
                if (!out.empty() && out.back().reasoning) {
                    std::string &r = out.back().text;
                    while (!r.empty() && is_space(r.back())) r.pop_back();
                    if (r.empty()) out.pop_back();
                }
                pending_ = pending_.substr(close + kThinkClose.size());
                state_ = State::Content;
                content_started_ = false;
                continue;
            }
            if (at_end) {
                std::string r = pending_;
                while (!r.empty() && is_space(r.back())) r.pop_back();
                reasoning(r);
                pending_.clear();
                return out;
            }
            // Hold a tag's start and the trailing whitespace (it may be the
            // last before </think>).
            size_t keep = partial_tag(pending_, kThinkClose);
            size_t cut = pending_.size() - keep;
            while (cut > 0 && is_space(pending_[cut - 1])) cut--;
            reasoning(pending_.substr(0, cut));
            pending_.erase(0, cut);
            return out;
        }
        // Content.
        if (f_.tools == ToolFormat::None) {
            content(pending_, out);
            pending_.clear();
            return out;
        }
        if (!holding_call_) {
            if (f_.tools == ToolFormat::Hermes) {
                const size_t open = pending_.find(kCallOpen);
                if (open != std::string::npos) {
                    content(pending_.substr(0, open), out);
                    pending_.erase(0, open);
                    holding_call_ = true;
                } else {
                    const size_t keep = at_end ? 0 : partial_tag(pending_, kCallOpen);
                    content(pending_.substr(0, pending_.size() - keep), out);
                    pending_.erase(0, pending_.size() - keep);
                    return out;
                }
            } else {
                // A JSON reply: its first character says.
                size_t a = 0;
                while (a < pending_.size() && is_space(pending_[a])) a++;
                if (a == pending_.size() && !at_end) return out;
                const char c = a < pending_.size() ? pending_[a] : 0;
                if (c == '{' || c == '[') {
                    holding_call_ = true;
                } else {
                    f_.tools = ToolFormat::None;  // plain text: streamed as it comes
                    continue;
                }
            }
        }
        if (!at_end) return out;
        std::string rest;
        json found;
        if (parse_calls(pending_, f_, found, rest)) {
            if (!f_.parallel_tool_calls && found.size() > 1) found.erase(found.begin() + 1, found.end());
            if (calls != nullptr) *calls = std::move(found);
            content(rest, out);
        } else {
            content(pending_, out);
        }
        pending_.clear();
        return out;
    }
}

json split_reply(const std::string &text, const ChatReply &format, bool &has_calls) {
    ReplySplitter s(format);
    std::vector<ReplyDelta> all = s.push(text);
    json calls;
    for (ReplyDelta &d : s.finish(calls)) all.push_back(std::move(d));
    std::string reasoning, content;
    for (const ReplyDelta &d : all) (d.reasoning ? reasoning : content) += d.text;
    has_calls = !calls.empty();
    json m = {{"role", "assistant"}, {"content", has_calls && content.empty() ? json(nullptr) : json(content)}};
    if (!reasoning.empty()) m["reasoning_content"] = reasoning;
    if (has_calls) m["tool_calls"] = calls;
    return m;
}

}  // namespace halformer::serve
