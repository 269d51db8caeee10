// halformer chat DIR [--system TEXT] [--max-new-tokens N] [sampling options]
//
// A conversation through the checkpoint's chat template (tokenizer_config.json's
// chat_template): each line on stdin is the user's turn; the reply streams to
// stdout as its tokens are chosen, then a newline; end of input ends the
// conversation. The whole conversation is rendered each turn (the template
// decides what the model sees), tokenized without adding special tokens (the
// template writes them), and generated until eos or a stop id
// (generation_config.json's eos list included).
//
// --print-prompt: reads a whole conversation from stdin, a JSON array of
// messages or an object with "messages" and the template's other variables
// ("tools", "enable_thinking", ...: transformers' apply_chat_template
// kwargs), prints the prompt the template renders for it (with the
// assistant's turn opened) and exits; nothing is generated.
#include "common.h"

#include "halformer/json.h"

#include "halformer/options.h"

#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <iostream>
#include <iterator>

namespace halformer {

int cmd_chat(int argc, char **argv) {
    CLI::App app{"halformer chat: talk to a chat model through its chat template (a line of stdin a turn)",
                 "halformer chat"};
    std::string dir, system;
    GenerateOptions o;
    MachineOptions mo;
    app.add_option("dir", dir, "model directory (a Hugging Face checkpoint with a chat_template)");
    app.add_option("--system", system, "a system message before the conversation");
    bool print_prompt = false;
    app.add_flag("--print-prompt", print_prompt,
                 "read a conversation from stdin (a JSON list of messages, or {\"messages\": [...], \"tools\": [...], "
                 "...} with the template's other variables), print its rendered prompt and exit");
    add_decoding_options(app, o);
    add_machine_options(app, mo);
    add_precision_option(app, mo);
    if (!parse_command(app, argc, argv)) return 0;
    if (dir.empty()) throw Error("chat: a model directory is required");
    check_decoding_options(o);
    if (o.beam > 1) throw Error("chat: replies stream token by token: --beam is not supported");
    Model m = load_model(dir, mo);
    if (!m.has_tokenizer()) throw Error("chat: " + dir + " has no tokenizer: chat needs text");
    std::vector<ChatMessage> messages;
    if (!system.empty()) messages.push_back({"system", system});
    if (print_prompt) {
        const std::string text((std::istreambuf_iterator<char>(std::cin)), std::istreambuf_iterator<char>());
        // A list of messages, or an object: "messages" and the template's
        // other variables ("tools", "enable_thinking", ...), as
        // transformers' apply_chat_template(messages, **kwargs) takes them.
        json::Value v = json::parse(text, "stdin");
        json::Value *conversation = v.is_object() ? nullptr : &v;
        for (auto &[k, x] : v.object) {
            if (k == "messages") conversation = &x;
        }
        if (conversation == nullptr || !conversation->is_array()) {
            throw Error("chat --print-prompt: stdin is neither a JSON list of messages nor an object with a "
                        "\"messages\" list");
        }
        for (size_t i = 0; i < conversation->array.size(); i++) {
            const json::Value &e = conversation->array[i];
            const json::Value *role = e.is_object() ? e.find("role") : nullptr;
            if (!role || !role->is_string()) {
                throw Error("chat --print-prompt: message " + std::to_string(i) + " is not an object with a string \"role\"");
            }
        }
        if (!system.empty()) {
            json::Value sys, role, content;
            sys.kind = json::Value::Kind::Object;
            role.kind = content.kind = json::Value::Kind::String;
            role.string = "system";
            content.string = system;
            sys.object = {{"role", role}, {"content", content}};
            conversation->array.insert(conversation->array.begin(), sys);
        }
        std::fputs(m.chat_prompt_json(json::dump(v), true).c_str(), stdout);
        return 0;
    }
    if (!m.has_chat_template()) m.chat_prompt(messages, true);  // (throws, naming why)
    const bool tty = isatty(0) != 0;
    const int P = m.config().max_positions;
    std::string line;
    for (;;) {
        if (tty) std::fprintf(stderr, "> ");
        if (!std::getline(std::cin, line)) break;
        if (line.empty()) continue;
        messages.push_back({"user", line});
        const Sequence ids = m.tokenizer().encode(m.chat_prompt(messages, true));
        if ((int)ids.size() >= P) {
            throw Error("chat: the conversation is " + std::to_string(ids.size()) +
                        " tokens, as many as the model's max_positions = " + std::to_string(P));
        }
        GenerateOptions g = o;
        if (g.max_new_tokens == -1) g.max_new_tokens = default_new_tokens(m.config(), 0, (int)ids.size());
        g.max_new_tokens = std::min(g.max_new_tokens, P - (int)ids.size());
        TextStream stream(m);
        g.on_token = [&](int, int32_t token) {
            const std::string piece = stream.push(token);
            std::fputs(piece.c_str(), stdout);
            std::fflush(stdout);
        };
        m.generate({ids}, g);
        std::fputs(stream.finish().c_str(), stdout);
        std::fputs("\n", stdout);
        std::fflush(stdout);
        messages.push_back({"assistant", stream.text()});
    }
    return 0;
}

}  // namespace halformer
