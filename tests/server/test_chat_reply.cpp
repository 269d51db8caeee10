// A chat reply split into thinking, content and tool calls
// (runtime/src/server/chat_reply.h), in each family's format: whole, and
// streamed in pieces cut at every place (the deltas add up to the whole
// message, the calls are the same), on well-formed and broken replies.
#include "../../runtime/src/server/chat_reply.h"

#include <gtest/gtest.h>

#include <random>
#include <string>

using namespace halformer::serve;
using json = nlohmann::json;

namespace {

ChatReply format(ToolFormat tools, bool thinking = false, bool starts = false) {
    ChatReply f;
    f.tools = tools;
    f.thinking = thinking;
    f.starts_thinking = starts;
    return f;
}

// The message of `text` streamed in pieces at the given cuts.
json streamed(const std::string &text, const ChatReply &f, const std::vector<size_t> &cuts, json &calls) {
    ReplySplitter s(f);
    std::string reasoning, content;
    auto add = [&](const std::vector<ReplyDelta> &ds) {
        for (const ReplyDelta &d : ds) {
            EXPECT_FALSE(d.text.empty());
            if (d.reasoning) {
                EXPECT_TRUE(content.empty()) << "reasoning after content";
                reasoning += d.text;
            } else {
                content += d.text;
            }
        }
    };
    size_t at = 0;
    for (size_t c : cuts) {
        add(s.push(text.substr(at, c - at)));
        at = c;
    }
    add(s.push(text.substr(at)));
    add(s.finish(calls));
    json m = {{"content", content}};
    if (!reasoning.empty()) m["reasoning_content"] = reasoning;
    return m;
}

// The calls without their ids (fresh each time).
json without_ids(json calls) {
    for (auto &c : calls) {
        EXPECT_TRUE(c.contains("id") && c["id"].is_string() && !c["id"].get<std::string>().empty());
        c.erase("id");
    }
    return calls;
}

// Splits `text` whole; checks every streaming of it (one cut anywhere, two
// cuts at random, one byte at a time) gives the same message.
json check(const std::string &text, const ChatReply &f) {
    bool has_calls = false;
    const json whole = split_reply(text, f, has_calls);
    const json calls = whole.contains("tool_calls") ? without_ids(whole["tool_calls"]) : json::array();
    EXPECT_EQ(has_calls, !calls.empty());
    const std::string content = whole["content"].is_null() ? "" : whole["content"].get<std::string>();
    auto same = [&](const std::vector<size_t> &cuts) {
        json got_calls;
        const json m = streamed(text, f, cuts, got_calls);
        EXPECT_EQ(m["content"], content) << text;
        EXPECT_EQ(m.value("reasoning_content", ""), whole.value("reasoning_content", "")) << text;
        EXPECT_EQ(without_ids(got_calls), calls) << text;
    };
    for (size_t c = 0; c <= text.size(); c++) same({c});
    std::mt19937 rng(7);
    for (int k = 0; k < 50 && text.size() > 1; k++) {
        size_t a = rng() % text.size(), b = rng() % text.size();
        if (a > b) std::swap(a, b);
        same({a, b});
    }
    std::vector<size_t> bytes;
    for (size_t c = 1; c < text.size(); c++) bytes.push_back(c);
    same(bytes);
    return whole;
}

std::string args_of(const json &m, size_t k) { return m["tool_calls"][k]["function"]["arguments"]; }
std::string name_of(const json &m, size_t k) { return m["tool_calls"][k]["function"]["name"]; }

}  // namespace

TEST(ChatReply, HermesToolCalls) {
    const ChatReply f = format(ToolFormat::Hermes);
    json m = check("<tool_call>\n{\"name\": \"get_weather\", \"arguments\": {\"city\": \"Paris\", \"n\": 2}}\n</tool_call>", f);
    ASSERT_EQ(m["tool_calls"].size(), 1u);
    EXPECT_TRUE(m["content"].is_null());
    EXPECT_EQ(name_of(m, 0), "get_weather");
    EXPECT_EQ(json::parse(args_of(m, 0)), json::parse(R"({"city": "Paris", "n": 2})"));
    EXPECT_EQ(m["tool_calls"][0]["type"], "function");
    EXPECT_EQ(m["tool_calls"][0]["id"].get<std::string>().rfind("call_", 0), 0u);

    m = check("Let me look that up.\n<tool_call>\n{\"name\": \"a\", \"arguments\": {}}\n</tool_call>\n"
              "<tool_call>\n{\"name\": \"b\", \"arguments\": {\"q\": \"caf\u00e9 \\\"x\\\"\"}}\n</tool_call>", f);
    ASSERT_EQ(m["tool_calls"].size(), 2u);
    EXPECT_EQ(m["content"], "Let me look that up.\n");
    EXPECT_EQ(name_of(m, 1), "b");
    EXPECT_EQ(json::parse(args_of(m, 1))["q"], "caf\u00e9 \"x\"");
    EXPECT_NE(m["tool_calls"][0]["id"], m["tool_calls"][1]["id"]);

    ChatReply one = f;
    one.parallel_tool_calls = false;
    m = check("<tool_call>{\"name\": \"a\", \"arguments\": {}}</tool_call><tool_call>{\"name\": \"b\", \"arguments\": {}}</tool_call>", one);
    ASSERT_EQ(m["tool_calls"].size(), 1u);
    EXPECT_EQ(name_of(m, 0), "a");

    // Not calls: the text stands as the model wrote it.
    for (const std::string bad : {"<tool_call>\n{\"name\": \"a\", \"arguments\": {\"x\": </tool_call>",
                                  "<tool_call>{\"arguments\": {}}</tool_call>", "<tool_call>[1, 2]</tool_call>",
                                  "I would use <tool_ but no.", "<tool_call", "plain text, no call at all"}) {
        m = check(bad, f);
        EXPECT_FALSE(m.contains("tool_calls")) << bad;
        EXPECT_EQ(m["content"], bad);
    }
    // A call cut short by the token limit (no closing tag) whose JSON is whole still counts.
    m = check("<tool_call>\n{\"name\": \"a\", \"arguments\": {}}\n", f);
    EXPECT_EQ(m["tool_calls"].size(), 1u);
}

TEST(ChatReply, ThinkingBlocks) {
    const ChatReply f = format(ToolFormat::None, true);
    json m = check("<think>\nTwo and two.\n\nSo four.\n</think>\n\nIt is 4.", f);
    EXPECT_EQ(m["reasoning_content"], "Two and two.\n\nSo four.");
    EXPECT_EQ(m["content"], "It is 4.");
    m = check("<think>\n\n</think>\n\nNo thoughts.", f);
    EXPECT_FALSE(m.contains("reasoning_content"));
    EXPECT_EQ(m["content"], "No thoughts.");
    m = check("<think>cut off by the li", f);
    EXPECT_EQ(m["reasoning_content"], "cut off by the li");
    EXPECT_EQ(m["content"], "");
    m = check("Hello <think>not at the start</think>", f);
    EXPECT_EQ(m["content"], "Hello <think>not at the start</think>");
    m = check("<thin", f);
    EXPECT_EQ(m["content"], "<thin");
    // The prompt opened the block (a template ending with "<think>\n").
    m = check("reasoning here</think>\n\nthe answer", format(ToolFormat::None, true, true));
    EXPECT_EQ(m["reasoning_content"], "reasoning here");
    EXPECT_EQ(m["content"], "the answer");
    // Thinking, then a call.
    m = check("<think>\nI need the weather.\n</think>\n\n<tool_call>\n{\"name\": \"w\", \"arguments\": {\"c\": 1}}\n</tool_call>",
              format(ToolFormat::Hermes, true));
    EXPECT_EQ(m["reasoning_content"], "I need the weather.");
    EXPECT_TRUE(m["content"].is_null());
    EXPECT_EQ(m["tool_calls"].size(), 1u);
    // Without thinking in the template, the tags are text.
    m = check("<think>x</think>y", format(ToolFormat::None));
    EXPECT_EQ(m["content"], "<think>x</think>y");
}

TEST(ChatReply, JsonAndMistralToolCalls) {
    const ChatReply j = format(ToolFormat::Json);
    json m = check("{\"name\": \"get_weather\", \"parameters\": {\"city\": \"Paris\"}}", j);
    ASSERT_EQ(m["tool_calls"].size(), 1u);
    EXPECT_EQ(json::parse(args_of(m, 0)), json::parse(R"({"city": "Paris"})"));
    m = check(" {\"name\": \"a\", \"parameters\": {}}; {\"name\": \"b\", \"arguments\": {\"x\": [1, 2.5]}}", j);
    ASSERT_EQ(m["tool_calls"].size(), 2u);
    EXPECT_EQ(name_of(m, 1), "b");
    for (const std::string text : {"The answer is 4.", "{not json", "{\"title\": \"no name\"}", "[1, 2]", "  "}) {
        m = check(text, j);
        EXPECT_FALSE(m.contains("tool_calls")) << text;
        EXPECT_EQ(m["content"], text);
    }
    const ChatReply mi = format(ToolFormat::Mistral);
    m = check("[{\"name\": \"get_weather\", \"arguments\": {\"city\": \"Paris\"}}, {\"name\": \"b\", \"arguments\": {}}]", mi);
    ASSERT_EQ(m["tool_calls"].size(), 2u);
    const std::string id = m["tool_calls"][0]["id"];
    EXPECT_EQ(id.size(), 9u) << id;  // Mistral's templates refuse other ids
    for (char c : id) EXPECT_TRUE(std::isalnum((unsigned char)c)) << id;
    m = check("[TOOL_CALLS] [{\"name\": \"a\", \"arguments\": {}}]", mi);
    EXPECT_EQ(m["tool_calls"].size(), 1u);
    m = check("[{\"name\": \"a\"}, 3]", mi);
    EXPECT_FALSE(m.contains("tool_calls"));
}

TEST(ChatReply, FormatsFromTheTemplate) {
    EXPECT_EQ(tool_format_of("{{ '<tool_call>' }}{% if tools %}"), ToolFormat::Hermes);
    EXPECT_EQ(tool_format_of("[AVAILABLE_TOOLS] {{ tools }} [TOOL_CALLS]"), ToolFormat::Mistral);
    EXPECT_EQ(tool_format_of("{% if tools is not none %}{{ tools | tojson }}{% endif %}"), ToolFormat::Json);
    EXPECT_EQ(tool_format_of("{{ messages[0].content }}"), ToolFormat::None);
    EXPECT_TRUE(template_thinks("{{ '<think>\\n\\n</think>\\n\\n' }}"));
    EXPECT_FALSE(template_thinks("{{ content }}"));
    EXPECT_TRUE(prompt_opens_thinking("<|im_start|>assistant\n<think>\n"));
    EXPECT_FALSE(prompt_opens_thinking("<|im_start|>assistant\n<think>\n\n</think>\n\n"));
    EXPECT_FALSE(prompt_opens_thinking("<|im_start|>assistant\n"));
}
