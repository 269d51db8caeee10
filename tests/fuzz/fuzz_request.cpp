// libFuzzer target: the body of a `halformer serve` generation request
// (runtime/src/server/request.cpp), as POST /v1/generate, as OpenAI's
// POST /v1/completions or /v1/chat/completions (the input's second byte
// picks; a chat's conversation must reach the template as JSON with its
// messages), and the same bytes as a model's chat reply split into
// thinking, content and tool calls (chat_reply.h): whole and streamed in
// two pieces, the same message. Parsing must end in a Request or a
// RequestError with a 4xx status, never a crash, a hang or undefined
// behaviour; an accepted request must be one generate() can run: ids inside
// the vocabulary, a limit in [1, the server's cap], positions within
// max_positions, consistent options.
#include "../../runtime/src/server/request.h"
#include "halformer/options.h"

#include <nlohmann/json.hpp>

#include <cstdint>
#include <string>

namespace {

halformer::Config model(bool decoder_only) {
    halformer::Config c;
    c.architecture = decoder_only ? halformer::Architecture::Decoder : halformer::Architecture::EncoderDecoder;
    c.num_encoder_layers = decoder_only ? 0 : 1;
    c.src_vocab_size = decoder_only ? 0 : 50;
    c.tgt_vocab_size = 40;
    c.max_positions = 32;
    return c;
}

// A stand-in tokenizer: one id per byte, an Error for a byte >= 0x80.
halformer::Sequence encode(const std::string &text) {
    halformer::Sequence ids;
    for (unsigned char ch : text) {
        if (ch >= 0x80) throw halformer::Error("not ASCII");
        ids.push_back(3 + ch % 30);
    }
    return ids;
}

}  // namespace

void check(const halformer::serve::Request &r, const halformer::Config &c, const halformer::serve::Limits &limits,
           bool dec);

extern "C" int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    const std::string body(reinterpret_cast<const char *>(data), size);
    const bool dec = size > 0 && (data[0] & 1);
    const bool openai = size > 1 && (data[1] & 1);
    const halformer::Config c = model(dec);
    halformer::serve::Limits limits;
    limits.max_new_tokens = 20;
    const halformer::serve::Encoder enc = size % 3 ? encode : halformer::serve::Encoder{};
    // The bytes as a reply, in each format, whole and cut in two.
    {
        using namespace halformer::serve;
        ChatReply f;
        f.tools = (ToolFormat)(size % 4);
        f.thinking = size % 5 < 3;
        f.starts_thinking = f.thinking && size % 7 == 0;
        bool calls = false;
        const nlohmann::json whole = split_reply(body, f, calls);
        ReplySplitter s(f);
        std::string content, reasoning;
        const size_t cut = size ? data[0] % (size + 1) : 0;
        std::vector<ReplyDelta> d = s.push(body.substr(0, cut)), d2 = s.push(body.substr(cut));
        d.insert(d.end(), d2.begin(), d2.end());
        nlohmann::json got;
        d2 = s.finish(got);
        d.insert(d.end(), d2.begin(), d2.end());
        for (const ReplyDelta &x : d) (x.reasoning ? reasoning : content) += x.text;
        if (got.size() != (whole.contains("tool_calls") ? whole["tool_calls"].size() : 0)) __builtin_trap();
        if (content != (whole["content"].is_null() ? std::string() : whole["content"].get<std::string>())) __builtin_trap();
        if (reasoning != whole.value("reasoning_content", std::string())) __builtin_trap();
    }
    const bool chat = size > 1 && (data[1] & 2);
    try {
        if (chat) {
            const halformer::serve::ChatRenderer render = [](const std::string &conversation) {
                const nlohmann::json j = nlohmann::json::parse(conversation);
                if (!j.is_object() || !j.contains("messages") || !j["messages"].is_array()) __builtin_trap();
                return std::string("<rendered>");
            };
            const auto comp = halformer::serve::parse_chat_completion(body, c, enc, limits, "m", render,
                                                                      size % 2 ? "<tool_call></think>" : "tools");
            if (comp.choices.size() != (size_t)comp.n || comp.model != "m") __builtin_trap();
            for (const auto &r : comp.choices) check(r, c, limits, dec);
        } else if (openai) {
            const auto comp = halformer::serve::parse_completion(body, c, enc, limits, "m");
            if (comp.n < 1 || comp.n > 16 || comp.prompts < 1 || comp.choices.size() != (size_t)comp.prompts * comp.n ||
                comp.choices.size() > 64 || comp.model != "m") {
                __builtin_trap();
            }
            for (const auto &r : comp.choices) check(r, c, limits, dec);
        } else {
            check(halformer::serve::parse_request(body, c, enc, limits), c, limits, dec);
        }
    } catch (const halformer::serve::RequestError &e) {
        if (e.status < 400 || e.status > 499) __builtin_trap();
    }
    return 0;
}

void check(const halformer::serve::Request &r, const halformer::Config &c, const halformer::serve::Limits &limits,
           bool dec) {
    const int vocab = dec ? c.tgt_vocab_size : c.src_vocab_size;
    if (r.ids.empty()) __builtin_trap();
    for (int32_t id : r.ids) {
        if (id < 0 || id >= vocab) __builtin_trap();
    }
    const auto &o = r.options;
    if (o.max_new_tokens < 1 || o.max_new_tokens > limits.max_new_tokens) __builtin_trap();
    if ((int)r.ids.size() + (dec ? o.max_new_tokens - 1 : 0) > c.max_positions) __builtin_trap();
    if (o.beam < 1 || o.beam > 7 || o.n_best < 1 || o.n_best > o.beam) __builtin_trap();
    if (o.sample && o.beam > 1) __builtin_trap();
    if (!(o.temperature > 0) || !(o.top_p > 0 && o.top_p <= 1) || o.top_k < 0) __builtin_trap();
    if (r.stop.size() > 4) __builtin_trap();
    for (const std::string &s : r.stop) {
        if (s.empty() || s.size() > 256) __builtin_trap();
    }
    (void)halformer::batch_key(o);
}
