// Chat templates (halformer/chat.h) against jinja2 itself: the real
// chat_template strings of Llama 3, Mistral (v0.1 and v0.3) and Qwen2, and
// two templates of our own over the rest of the subset, rendered by
// Debian's python3-jinja2 in transformers' environment on conversations
// that include template syntax, quotes, non-ASCII text, an empty list and
// roles a template refuses (tests/fixtures/chat/make_expected.py); then
// hostile templates, each an Error naming the problem. strftime_now() reads
// the fixed time HALFORMER_CHAT_NOW, which both sides set to the same value.
#include "halformer/chat.h"
#include "halformer/json.h"

#include <gtest/gtest.h>

#include <cstdlib>
#include <map>
#include <fstream>
#include <sstream>

using namespace halformer;

namespace {

const std::string kChat = std::string(HALFORMER_FIXTURES) + "/chat/";

std::string read(const std::string &path) {
    std::ifstream in(path, std::ios::binary);
    std::stringstream ss;
    ss << in.rdbuf();
    return ss.str();
}

std::string error_of(const ChatTemplate &t, const std::vector<ChatMessage> &m, bool agp) {
    try {
        t.render(m, agp, {{"bos_token", "<s>"}, {"eos_token", "</s>"}});
    } catch (const Error &e) {
        return e.what();
    }
    return "";
}

}  // namespace

TEST(ChatTemplate, RendersAsJinja2Does) {
    // strftime_now() at the fixed time make_expected.py renders with (its NOW).
    setenv("HALFORMER_CHAT_NOW", "2024-07-23 09:05:00", 1);
    const json::Value e = json::parse(read(kChat + "expected.json"), "expected.json");
    std::vector<std::vector<ChatMessage>> convs;
    for (const json::Value &c : e.find("conversations")->array) {
        std::vector<ChatMessage> m;
        for (const json::Value &x : c.array) m.push_back({x.find("role")->string, x.find("content")->string});
        convs.push_back(m);
    }
    int rendered = 0, refused = 0;
    for (const auto &[name, cases] : e.find("templates")->object) {
        SCOPED_TRACE(name);
        const ChatTemplate t = ChatTemplate::parse(read(kChat + name + ".jinja"));
        ASSERT_EQ(cases.array.size(), 2 * convs.size());
        for (size_t k = 0; k < cases.array.size(); k++) {
            const json::Value &c = cases.array[k];
            const auto &m = convs[k / 2];
            const bool agp = c.find("add_generation_prompt")->boolean;
            SCOPED_TRACE("conversation " + std::to_string(k / 2) + (agp ? " + generation prompt" : ""));
            const json::Value *err = c.find("error");
            if (err && err->is_string()) {
                const std::string got = error_of(t, m, agp);
                EXPECT_FALSE(got.empty()) << "rendered where jinja2 failed: " << err->string;
                // raise_exception's message is the template's own: the same words.
                if (c.find("raised")->boolean) EXPECT_NE(got.find(err->string), std::string::npos) << got;
                refused++;
            } else {
                EXPECT_EQ(t.render(m, agp, {{"bos_token", "<s>"}, {"eos_token", "</s>"}}), c.find("text")->string);
                rendered++;
            }
        }
    }
    EXPECT_GE(rendered, 150);
    EXPECT_GE(refused, 27);
}

// The templates of tool-calling and thinking models (Qwen2.5, Qwen3, Llama
// 3.2, Mistral Nemo) on requests with tools, tool calls, tool results,
// enable_thinking and reasoning in the history, as JSON
// (ChatTemplate::render_json), against jinja2's renderings.
TEST(ChatTemplate, ToolTemplatesRenderAsJinja2Does) {
    setenv("HALFORMER_CHAT_NOW", "2024-07-23 09:05:00", 1);
    const json::Value e = json::parse(read(kChat + "expected.json"), "expected.json");
    const std::map<std::string, std::string> vars = {{"bos_token", "<s>"}, {"eos_token", "</s>"}};
    std::vector<std::string> requests;  // each case as the JSON render_json takes
    for (const json::Value &c : e.find("tool_cases")->array) {
        json::Value r;
        r.kind = json::Value::Kind::Object;
        r.object.emplace_back("messages", *c.find("messages"));
        if (const json::Value *t = c.find("tools")) r.object.emplace_back("tools", *t);
        if (const json::Value *k = c.find("kwargs")) {
            for (const auto &[name, v] : k->object) r.object.emplace_back(name, v);
        }
        requests.push_back(json::dump(r));
    }
    int rendered = 0, refused = 0;
    for (const auto &[name, cases] : e.find("tool_templates")->object) {
        SCOPED_TRACE(name);
        const ChatTemplate t = ChatTemplate::parse(read(kChat + name + ".jinja"));
        ASSERT_EQ(cases.array.size(), 2 * requests.size());
        for (size_t k = 0; k < cases.array.size(); k++) {
            const json::Value &c = cases.array[k];
            const bool agp = c.find("add_generation_prompt")->boolean;
            SCOPED_TRACE("request " + std::to_string(k / 2) + (agp ? " + generation prompt" : ""));
            const json::Value *err = c.find("error");
            if (err && err->is_string()) {
                std::string got;
                try {
                    t.render_json(requests[k / 2], agp, vars);
                } catch (const Error &x) {
                    got = x.what();
                }
                EXPECT_FALSE(got.empty()) << "rendered where jinja2 failed: " << err->string;
                if (c.find("raised")->boolean) EXPECT_NE(got.find(err->string), std::string::npos) << got;
                refused++;
            } else {
                EXPECT_EQ(t.render_json(requests[k / 2], agp, vars), c.find("text")->string);
                rendered++;
            }
        }
    }
    EXPECT_GE(rendered, 90);
    EXPECT_GE(refused, 6);
}

// render_json's input: a list of messages or an object with "messages";
// anything else an Error naming it.
TEST(ChatTemplate, RenderJsonTakesAListOrAnObject) {
    const ChatTemplate t = ChatTemplate::parse(
        "{% for m in messages %}[{{ m.role }}:{{ m.content }}]{% endfor %}{{ tools | length if tools is defined }}"
        "{{ flag }}");
    EXPECT_EQ(t.render_json(R"([{"role": "user", "content": "hi"}])", false), "[user:hi]");
    EXPECT_EQ(t.render_json(R"({"messages": [{"role": "user", "content": 5}], "tools": [1, 2], "flag": true})", false),
              "[user:5]2True");
    for (const char *bad : {"{}", "[1]", "\"text\"", "{\"messages\": {}}", "[", "{\"messages\": [], \"add_generation_prompt\": 1}"}) {
        EXPECT_THROW(t.render_json(bad, false), Error) << bad;
    }
}

TEST(ChatTemplate, HostileTemplatesAreNamedErrors) {
    auto parse_error = [](const std::string &src) {
        try {
            ChatTemplate::parse(src);
        } catch (const Error &e) {
            return std::string(e.what());
        }
        return std::string();
    };
    auto render_error = [](const std::string &src) {
        try {
            ChatTemplate::parse(src).render({{"user", "hi"}}, true);
        } catch (const Error &e) {
            return std::string(e.what());
        }
        return std::string();
    };
    EXPECT_NE(parse_error("ok {% if %}x{% endif %}").find("line 1, column 4"), std::string::npos);
    EXPECT_NE(parse_error("a\n{{ x ").find("line 2, column 1: the tag opened here is never closed"), std::string::npos);
    EXPECT_NE(parse_error("{% for x in xs %}x").find("ends inside a block"), std::string::npos);
    EXPECT_NE(parse_error("{% endfor %}").find("unexpected {% endfor %}"), std::string::npos);
    EXPECT_NE(parse_error("{% macro m(a) %}\n{{ a }}").find("line 2, column 1: the template ends inside a block: expected {% endmacro %}"),
              std::string::npos);
    EXPECT_NE(parse_error("{% macro m(a=1, b) %}{% endmacro %}").find("line 1, column 1"), std::string::npos);
    EXPECT_NE(parse_error("{% filter upper %}x").find("expected {% endfilter %}"), std::string::npos);
    EXPECT_NE(parse_error("{% set x %}x{% endfor %}").find("unexpected {% endfor %}"), std::string::npos);
    EXPECT_NE(parse_error("{% call(x) m() %}{% endcall %}").find("not supported"), std::string::npos);
    EXPECT_NE(parse_error("{{ 'unclosed }}").find("a string literal is not closed"), std::string::npos);
    EXPECT_NE(parse_error("{{ a $ b }}").find("unexpected character '$'"), std::string::npos);
    EXPECT_NE(parse_error("{{ " + std::string(100000, '(') + "1" + std::string(100000, ')') + " }}").find("nested"),
              std::string::npos);
    std::string deep;
    for (int k = 0; k < 1000; k++) deep += "{% if true %}";
    EXPECT_NE(parse_error(deep).find("nested"), std::string::npos);
    EXPECT_NE(render_error("{{ messages | nosuchfilter }}").find("'nosuchfilter' is not supported"), std::string::npos);
    EXPECT_NE(render_error("x\n  {{ messages | nosuchfilter }}").find("line 2, column 3"), std::string::npos);
    EXPECT_NE(render_error("{% macro m(a) %}{{ a }}{% endmacro %}\n{{ m(1, 2) }}")
                  .find("line 2, column 1: macro 'm' takes not more than 1 argument(s)"),
              std::string::npos);
    EXPECT_NE(render_error("{% macro m(a) %}{% endmacro %}{{ m(b=2) }}").find("no keyword argument 'b'"), std::string::npos);
    EXPECT_NE(render_error("{% macro m() %}{{ m() }}{% endmacro %}{{ m() }}").find("nested more than 100"), std::string::npos);
    EXPECT_NE(render_error("{{ 5 | join(',') }}").find("line 1, column 1: join: 'int' object is not iterable"),
              std::string::npos);
    EXPECT_NE(render_error("{{ 5 | selectattr('x') | list }}").find("not iterable"), std::string::npos);
    EXPECT_NE(render_error("{{ 5 | map('upper') | list }}").find("not iterable"), std::string::npos);
    EXPECT_NE(render_error("{{ 3 | dictsort }}").find("not a dict"), std::string::npos);
    EXPECT_NE(render_error("{{ '%d' | format('x') }}").find("real number is required"), std::string::npos);
    EXPECT_NE(render_error("{{ '%s %s' | format('x') }}").find("not enough arguments"), std::string::npos);
    EXPECT_NE(render_error("{{ [1] | select('nosuchtest') | list }}").find("'nosuchtest' is not supported"), std::string::npos);
    EXPECT_NE(render_error("{{ 1.5 | round(0, 'up') }}").find("common, ceil or floor"), std::string::npos);
    EXPECT_NE(render_error("{{ 'a' + 1 }}").find("unsupported operand types for +: str and int"), std::string::npos);
    EXPECT_NE(render_error("{{ undefined_thing.attr }}").find("undefined"), std::string::npos);
    EXPECT_NE(render_error("{{ range(10000000) | length }}").find("more than a million"), std::string::npos);
    EXPECT_NE(render_error("{{ 'ab' * 100000000 }}").find("64 MiB"), std::string::npos);
    // Loops without end in effect, and output without end: bounded, named.
    EXPECT_NE(render_error("{% for i in range(1000000) %}{% for j in range(1000000) %}{% endfor %}{% endfor %}")
                  .find("more than 2 million statements and loop turns"),
              std::string::npos);
    EXPECT_NE(render_error("{% for i in range(1000000) %}{{ 'x' * 1000 }}{% endfor %}").find("passed 64 MiB"),
              std::string::npos);
    EXPECT_NE(render_error("{{ raise_exception('no system role here') }}").find("no system role here"),
              std::string::npos);
    EXPECT_NE(render_error("{% set x.y = 1 %}").find("only of a namespace()"), std::string::npos);
    // A closing mark inside a string literal does not end its tag.
    EXPECT_EQ(ChatTemplate::parse("{{ '}}' ~ \"%}\" }}|{% if '%}' %}y{% endif %}").render({{"user", "hi"}}, false),
              "}}%}|y");
    // Message contents are data: template syntax in them is printed as it is.
    EXPECT_EQ(ChatTemplate::parse("{{ messages[0].content }}").render({{"user", "{{ 1 + 1 }}{% if %}"}}, false),
              "{{ 1 + 1 }}{% if %}");
}
