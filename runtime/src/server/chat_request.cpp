// The messages and tools of OpenAI's POST /v1/chat/completions, checked
// (request.h): the conversation as the chat template reads it.
#include "request.h"

#include <nlohmann/json.hpp>

#include <string>

namespace halformer::serve {

namespace {

using json = nlohmann::json;

// One of an assistant message's tool_calls.
void check_tool_call(const json &c, const std::string &at) {
    if (!c.is_object()) bad(at + " must be an object, not " + type_of(c));
    for (auto it = c.begin(); it != c.end(); ++it) {
        if (it.key() != "id" && it.key() != "type" && it.key() != "function" && it.key() != "index") {
            bad(at + ": '" + it.key() + "' is not a field of a tool call (id, type, function)");
        }
    }
    if (c.contains("type") && c["type"] != "function") bad(at + ".type must be \"function\"");
    if (c.contains("id") && !c["id"].is_string()) bad(at + ".id must be a string");
    if (!c.contains("function") || !c["function"].is_object()) bad(at + ".function must be an object");
    const json &f = c["function"];
    if (!f.contains("name") || !f["name"].is_string()) bad(at + ".function.name must be a string");
    if (f.contains("arguments")) {
        const json &args = f["arguments"];
        if (args.is_string()) {
            const json parsed = json::parse(args.get<std::string>(), nullptr, false);
            if (parsed.is_discarded() || !parsed.is_object()) bad(at + ".function.arguments is not a JSON object's text");
        } else if (!args.is_object()) {
            bad(at + ".function.arguments must be a string of JSON, not " + type_of(args));
        }
    }
}

}  // namespace

nlohmann::ordered_json chat_messages(const nlohmann::json &m, const nlohmann::ordered_json &ordered) {
    if (!m.is_array()) bad(std::string("'messages' must be a list, not ") + type_of(m));
    if (m.empty()) bad("'messages' is an empty list");
    if (m.size() > 1024) bad("'messages' has " + std::to_string(m.size()) + " messages; at most 1024");
    nlohmann::ordered_json out = ordered;
    for (size_t i = 0; i < m.size(); i++) {
        const json &x = m[i];
        const std::string at = "'messages'[" + std::to_string(i) + "]";
        if (!x.is_object()) bad(at + " must be an object, not " + type_of(x));
        if (!x.contains("role")) bad(at + " has no role");
        if (!x["role"].is_string()) bad(at + ".role must be a string");
        const std::string role = x["role"].get<std::string>();
        if (role.empty()) bad(at + " has no role");
        nlohmann::ordered_json &msg = out[i];
        for (auto it = x.begin(); it != x.end(); ++it) {
            const std::string &k = it.key();
            const json &v = it.value();
            if (k == "role") continue;
            if (k == "content") {
                if (v.is_array()) {
                    std::string text;
                    for (const json &part : v) {
                        if (!part.is_object() || part.value("type", "") != "text" || !part.contains("text") ||
                            !part["text"].is_string()) {
                            throw RequestError(400, at + ".content: only text parts ({\"type\": \"text\", \"text\": ...}) "
                                                    "are supported by this server", "messages", "unsupported_argument");
                        }
                        text += part["text"].get<std::string>();
                    }
                    msg["content"] = text;
                } else if (v.is_null()) {
                    msg["content"] = "";  // (an assistant's tool calls without text: templates test `in content`)
                } else if (!v.is_string()) {
                    bad(at + ".content must be a string, a list of text parts or null, not " + type_of(v));
                }
            } else if (k == "name" || k == "reasoning_content" || (k == "tool_call_id" && role == "tool")) {
                if (!v.is_string() && !(k == "reasoning_content" && v.is_null())) bad(at + "." + k + " must be a string");
            } else if (k == "tool_calls" && role == "assistant") {
                if (!v.is_array() && !v.is_null()) bad(at + ".tool_calls must be a list, not " + type_of(v));
                for (size_t c = 0; v.is_array() && c < v.size(); c++) {
                    check_tool_call(v[c], at + ".tool_calls[" + std::to_string(c) + "]");
                }
            } else {
                throw RequestError(400, at + ": '" + k + "' is not supported by this server in a " + role +
                                            " message (role, content, name; an assistant's tool_calls and "
                                            "reasoning_content; a tool's tool_call_id)",
                                   "messages", "unsupported_argument");
            }
        }
        // Each call's arguments as the object they hold.
        if (msg.contains("tool_calls") && msg["tool_calls"].is_array()) {
            for (auto &call : msg["tool_calls"]) {
                auto &fn = call["function"];
                if (fn.contains("arguments") && fn["arguments"].is_string()) {
                    fn["arguments"] = nlohmann::ordered_json::parse(fn["arguments"].get<std::string>());
                }
            }
        }
    }
    return out;
}

void check_tools(const nlohmann::json &t) {
    if (!t.is_array()) bad(std::string("'tools' must be a list, not ") + type_of(t));
    if (t.size() > 128) bad("'tools' has " + std::to_string(t.size()) + " tools; at most 128");
    for (size_t i = 0; i < t.size(); i++) {
        const std::string at = "'tools'[" + std::to_string(i) + "]";
        const json &x = t[i];
        if (!x.is_object()) bad(at + " must be an object, not " + type_of(x));
        if (!x.contains("type") || x["type"] != "function") {
            throw RequestError(400, at + ".type must be \"function\" (the only kind of tool this server knows)", "tools",
                               "unsupported_argument");
        }
        if (!x.contains("function") || !x["function"].is_object()) bad(at + ".function must be an object");
        const json &f = x["function"];
        if (!f.contains("name") || !f["name"].is_string() || f["name"].get<std::string>().empty()) {
            bad(at + ".function.name must be a non-empty string");
        }
        if (f.contains("description") && !f["description"].is_string()) bad(at + ".function.description must be a string");
        if (f.contains("parameters") && !f["parameters"].is_object()) bad(at + ".function.parameters must be an object");
    }
}

}  // namespace halformer::serve
