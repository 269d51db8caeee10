#include "request.h"

#include "halformer/options.h"

#include "halformer/tokenizer.h"

#include <nlohmann/json.hpp>

#include <algorithm>
#include <cfloat>
#include <cmath>
#include <random>
#include <sstream>

namespace halformer::serve {

void bad(const std::string &msg) { throw RequestError(400, msg); }

const char *type_of(const nlohmann::json &v) { return v.type_name(); }

namespace {

using json = nlohmann::json;

int integer(const json &v, const char *name, int lo, int hi) {
    if (!v.is_number_integer()) bad(std::string("'") + name + "' must be an integer, not " + type_of(v));
    // Compare as 64-bit: a huge value must not wrap into range.
    const bool neg = v.is_number_unsigned() ? false : v.get<int64_t>() < 0;
    const int64_t x = neg ? v.get<int64_t>() : (int64_t)std::min<uint64_t>(v.get<uint64_t>(), (uint64_t)INT64_MAX);
    if (x < lo || x > hi) {
        bad(std::string("'") + name + "' is " + v.dump() + "; it must be in [" + std::to_string(lo) + ", " +
            std::to_string(hi) + "]");
    }
    return (int)x;
}

double number(const json &v, const char *name) {
    if (!v.is_number()) bad(std::string("'") + name + "' must be a number, not " + type_of(v));
    const double x = v.get<double>();
    if (!std::isfinite(x)) bad(std::string("'") + name + "' must be finite");
    return x;
}

// A number the kernels take as float32: finite as a float, not only as a
// double (1e308 would become inf on the way in).
float float32(const json &v, const char *name) {
    const double x = number(v, name);
    if (std::abs(x) > FLT_MAX) {
        bad(std::string("'") + name + "' is " + v.dump() + "; it must be within float32's range (|x| <= 3.4e38)");
    }
    return (float)x;
}

bool boolean(const json &v, const char *name) {
    if (!v.is_boolean()) bad(std::string("'") + name + "' must be true or false, not " + type_of(v));
    return v.get<bool>();
}

// nlohmann's parser nests by recursion in places: bound the depth first
// (a request is at most 2 levels deep).
void check_depth(const std::string &body) {
    int depth = 0;
    bool in_string = false, escaped = false;
    for (char ch : body) {
        if (in_string) {
            if (escaped) escaped = false;
            else if (ch == '\\') escaped = true;
            else if (ch == '"') in_string = false;
        } else if (ch == '"') {
            in_string = true;
        } else if (ch == '[' || ch == '{') {
            if (++depth > 16) bad("the JSON nests deeper than 16 levels");
        } else if (ch == ']' || ch == '}') {
            depth--;
        }
    }
}

// Strict JSON (no comments, no trailing commas), an object, no duplicate keys.
// The body is checked as UTF-8 first, anywhere in it (strings, keys, between
// tokens): the parser's own messages quote the bytes they stopped at, which
// could not be put in a JSON answer, and the answer names only the offset.
json parse_object(const std::string &body) {
    const int64_t bad_byte = utf8_error_offset(body);
    if (bad_byte >= 0) bad("the body is not valid UTF-8 (at byte " + std::to_string(bad_byte) + ")");
    check_depth(body);
    // nlohmann keeps the last of duplicate keys silently: refuse them, as the
    // model-file parser (runtime/src/json.cpp) does.
    std::vector<std::vector<std::string>> keys;
    std::string duplicate;
    auto watch = [&](int, json::parse_event_t event, json &parsed) {
        if (event == json::parse_event_t::object_start) keys.emplace_back();
        if (event == json::parse_event_t::object_end && !keys.empty()) keys.pop_back();
        if (event == json::parse_event_t::key && !keys.empty()) {
            const std::string &k = parsed.get_ref<const std::string &>();
            auto &seen = keys.back();
            if (std::find(seen.begin(), seen.end(), k) != seen.end() && duplicate.empty()) duplicate = k;
            seen.push_back(k);
        }
        return true;
    };
    json j;
    try {
        j = json::parse(body, watch);
    } catch (const json::exception &e) {  // parse_error, and out_of_range for a number like 1e30308
        bad(std::string("malformed JSON: ") + e.what());
    }
    if (!duplicate.empty()) bad("duplicate key '" + duplicate + "'");
    if (!j.is_object()) bad(std::string("the body must be a JSON object, not ") + type_of(j));
    return j;
}

std::vector<int32_t> token_ids(const json &v, int vocab, const std::string &name = "ids") {
    if (!v.is_array()) bad("'" + name + "' must be an array of token ids, not " + type_of(v));
    std::vector<int32_t> ids;
    ids.reserve(std::min<size_t>(v.size(), 1 << 16));
    for (size_t i = 0; i < v.size(); i++) {
        if (!v[i].is_number_integer()) bad("'" + name + "'[" + std::to_string(i) + "] must be an integer, not " + type_of(v[i]));
        const bool ok = v[i].is_number_unsigned() ? v[i].get<uint64_t>() < (uint64_t)vocab
                                                   : v[i].get<int64_t>() >= 0 && v[i].get<int64_t>() < vocab;
        if (!ok) {
            bad("'" + name + "'[" + std::to_string(i) + "] = " + v[i].dump() + " is outside the vocabulary [0, " +
                std::to_string(vocab) + ")");
        }
        ids.push_back((int32_t)v[i].get<int64_t>());
    }
    return ids;
}

void text_input(const json &v, const Encoder &encode, Request &r) {
    if (!v.is_string()) bad(std::string("'text' must be a string, not ") + type_of(v));
    if (!encode) bad("'text' needs a model with a tokenizer (this one works with 'ids' only)");
    r.text = v.get<std::string>();
    r.is_text = true;
    if (r.text.find_first_not_of(" \t\r\n") == std::string::npos) bad("'text' is empty");
    try {
        r.ids = encode(r.text);
    } catch (const Error &e) {
        bad(std::string("'text': ") + e.what());
    }
    if (r.ids.empty()) bad("'text' has no tokens");
}

// One decoding field into the options (halformer/options.h: the fields a
// request may set, their types and ranges); false for a name that is none.
// The server's own limit bounds max_new_tokens and min_length.
bool decoding_field(const std::string &k, const json &v, const Limits &limits, int target_vocab, Request &r,
                    int &max_new) {
    GenerateOptions &o = r.options;
    if (k == "stop_ids") {
        o.stop_ids = token_ids(v, target_vocab, "stop_ids");
        if (o.stop_ids.size() > 64) bad("'stop_ids' takes at most 64 ids");
        return true;
    }
    const OptionSpec *spec = find_generate_option(k);
    if (!spec || !spec->in_requests) return false;
    const char *name = spec->name;
    switch (spec->type) {
    case OptionType::Int: {
        const bool bounded = k == "max_new_tokens" || k == "min_length";
        const int hi = bounded ? std::min<int>((int)spec->hi, limits.max_new_tokens) : (int)spec->hi;
        const int x = integer(v, name, (int)spec->lo, hi);
        if (k == "max_new_tokens") max_new = x;
        else spec->set(o, x);
        break;
    }
    case OptionType::Float: {
        const float x = float32(v, name);
        const std::string why = spec->check(x);
        if (!why.empty()) bad(std::string("'") + name + "' " + why);
        spec->set(o, x);
        break;
    }
    case OptionType::Bool: spec->set(o, boolean(v, name)); break;
    case OptionType::Seed:
        if (!v.is_number_unsigned() && !(v.is_number_integer() && v.get<int64_t>() >= 0)) {
            bad(std::string("'") + name + "' must be a non-negative integer, not " + v.dump());
        }
        r.seed = v.get<uint64_t>();
        break;
    }
    return true;
}

// The fields a /v1/generate request takes, for the message naming an unknown one.
std::string request_fields() {
    std::string names = "ids or text, and";
    for (const OptionSpec &s : generate_option_specs()) {
        if (s.in_requests) names += std::string(" ") + s.name + ",";
    }
    return names + " stop_ids, stream, stop, target_prefix";
}

// Positions: a source takes up to max_positions; a prompt leaves room for
// what it asks to generate. Past the limit: 413.
int new_tokens(const Config &cfg, const Limits &limits, int P, int max_new) {
    const bool ed = cfg.architecture == Architecture::EncoderDecoder;
    const int max_in = limits.max_input_tokens > 0 ? std::min(limits.max_input_tokens, cfg.max_positions)
                                                   : cfg.max_positions;
    if (P > max_in - (ed ? 0 : 1)) {
        throw RequestError(413, "the input is " + std::to_string(P) + " tokens; this server takes at most " +
                                    std::to_string(max_in - (ed ? 0 : 1)));
    }
    const int allowed = ed ? cfg.max_positions : cfg.max_positions - P + 1;
    if (max_new == -1) return std::min(default_new_tokens(cfg, ed ? P : 0, ed ? 1 : P), limits.max_new_tokens);
    if (max_new > allowed) {
        throw RequestError(413, std::to_string(P) + " input tokens + " + std::to_string(max_new) +
                                    " new tokens are past the model's max_positions = " +
                                    std::to_string(cfg.max_positions));
    }
    return max_new;
}

std::vector<std::string> stop_strings(const json &v, const char *name) {
    std::vector<std::string> out;
    if (v.is_null()) return out;
    if (v.is_string()) {
        out.push_back(v.get<std::string>());
    } else if (v.is_array()) {
        if (v.size() > 4) bad(std::string("'") + name + "' takes at most 4 strings, not " + std::to_string(v.size()));
        for (size_t i = 0; i < v.size(); i++) {
            if (!v[i].is_string()) {
                bad(std::string("'") + name + "'[" + std::to_string(i) + "] must be a string, not " + type_of(v[i]));
            }
            out.push_back(v[i].get<std::string>());
        }
    } else {
        bad(std::string("'") + name + "' must be a string or a list of strings, not " + type_of(v));
    }
    for (const std::string &s : out) {
        if (s.empty()) bad(std::string("'") + name + "' has an empty string");
        if (s.size() > 256) bad(std::string("'") + name + "' has a string longer than 256 bytes");
    }
    return out;
}

void check_stop(const Request &r, const Encoder &encode) {
    if (r.stop.empty()) return;
    if (!encode) bad("'stop' needs a model with a tokenizer (the stop strings are matched in the output text)");
    if (r.options.beam > 1) bad("'stop' works with greedy and sampled outputs, not with 'beam' > 1");
}

}  // namespace

Request parse_request(const std::string &body, const Config &cfg, const Encoder &encode, const Limits &limits) {
    const json j = parse_object(body);
    Request r;
    const bool ed = cfg.architecture == Architecture::EncoderDecoder;
    bool have_input = false;
    int max_new = -1;
    for (auto it = j.begin(); it != j.end(); ++it) {
        const std::string &k = it.key();
        if (k == "ids") {
            r.ids = token_ids(it.value(), ed ? cfg.src_vocab_size : cfg.tgt_vocab_size);
            have_input = true;
        } else if (k == "text") {
            text_input(it.value(), encode, r);
            have_input = true;
        } else if (k == "stream") {
            r.stream = boolean(it.value(), "stream");
        } else if (k == "stop") {
            r.stop = stop_strings(it.value(), "stop");
        } else if (k == "target_prefix") {
            if (!ed) bad("'target_prefix' is for encoder-decoder models (a decoder-only model's prompt is its prefix)");
            r.target_prefix = token_ids(it.value(), cfg.tgt_vocab_size, "target_prefix");
        } else if (!decoding_field(k, it.value(), limits, cfg.tgt_vocab_size, r, max_new)) {
            bad("unknown field '" + k + "' (expected " + request_fields() + ")");
        }
    }
    const GenerateOptions &o = r.options;
    if (!have_input) bad("the request needs 'ids' or 'text'");
    if (j.contains("ids") && j.contains("text")) bad("give 'ids' or 'text', not both");
    if (r.ids.empty()) bad("'ids' is empty");
    if (o.n_best > o.beam) bad("'n_best' (" + std::to_string(o.n_best) + ") must be at most 'beam' (" +
                               std::to_string(o.beam) + ")");
    if (o.sample && o.beam > 1) bad("'sample' and 'beam' > 1 are exclusive");
    check_stop(r, encode);
    r.options.max_new_tokens = new_tokens(cfg, limits, (int)r.ids.size(), max_new);
    // The decoder's positions: bos, the prefix and the new tokens.
    const int prefix = (int)r.target_prefix.size();
    if (prefix > 0) {
        if (prefix >= cfg.max_positions) {
            throw RequestError(413, "'target_prefix' is " + std::to_string(prefix) + " tokens; the model has " +
                                        std::to_string(cfg.max_positions) + " positions");
        }
        if (prefix + r.options.max_new_tokens > cfg.max_positions) {
            if (max_new != -1) {
                throw RequestError(413, "'target_prefix' (" + std::to_string(prefix) + " tokens) + " +
                                            std::to_string(max_new) + " new tokens are past the model's "
                                            "max_positions = " + std::to_string(cfg.max_positions));
            }
            r.options.max_new_tokens = cfg.max_positions - prefix;
        }
    }
    return r;
}

namespace {

// An OpenAI argument we take only at its default value (null counts as it).
void only_default(const json &v, const std::string &k) {
    bool is_default = v.is_null();
    if (k == "echo") is_default = is_default || (v.is_boolean() && !v.get<bool>());
    if (k == "suffix") is_default = is_default || (v.is_string() && v.get<std::string>().empty());
    if (k == "presence_penalty" || k == "frequency_penalty") is_default = is_default || (v.is_number() && v.get<double>() == 0);
    if (k == "logit_bias") is_default = is_default || (v.is_object() && v.empty());
    if (!is_default) {
        throw RequestError(400, "'" + k + "' is not supported by this server (only its default)", k,
                           "unsupported_argument");
    }
}

// A prompt: a string, or a list of token ids.
Request prompt_input(const json &p, const Config &cfg, const Encoder &encode, int index) {
    Request r;
    const bool ed = cfg.architecture == Architecture::EncoderDecoder;
    if (p.is_string()) {
        text_input(p, encode, r);
    } else {
        r.ids = token_ids(p, ed ? cfg.src_vocab_size : cfg.tgt_vocab_size);
        if (r.ids.empty()) bad("prompt " + std::to_string(index) + " has no tokens");
    }
    return r;
}

// The prompts: "text", ["a", "b"], [1, 2, 3] or [[1, 2], [3]].
std::vector<Request> prompts(const json &prompt, const Config &cfg, const Encoder &encode) {
    std::vector<Request> inputs;
    if (prompt.is_string() || (prompt.is_array() && !prompt.empty() && prompt[0].is_number())) {
        inputs.push_back(prompt_input(prompt, cfg, encode, 0));
    } else if (prompt.is_array()) {
        if (prompt.empty()) bad("'prompt' is an empty list");
        if (prompt.size() > 64) bad("'prompt' has " + std::to_string(prompt.size()) + " prompts; at most 64");
        for (size_t i = 0; i < prompt.size(); i++) {
            const json &p = prompt[i];
            if (!p.is_string() && !p.is_array()) {
                bad("'prompt'[" + std::to_string(i) + "] must be a string or a list of token ids, not " + type_of(p));
            }
            inputs.push_back(prompt_input(p, cfg, encode, (int)i));
        }
    } else {
        bad(std::string("'prompt' must be a string, a list of strings or a list of token ids, not ") + type_of(prompt));
    }
    return inputs;
}

// A completion request's arguments as given (OpenAI's defaults where not);
// model, stream, stream_options and logprobs go straight into the Completion.
struct CompletionArgs {
    int max_tokens = 16, n = 1;
    double temperature = 1.0, top_p = 1.0;
    bool have_seed = false;
    uint64_t seed = 0;
    std::vector<std::string> stop;
    const json *prompt = nullptr;
    const json *messages = nullptr;  // chat
    const json *tools = nullptr, *kwargs = nullptr;
    std::string tool_choice = "auto";
    bool parallel_tool_calls = true;
    bool have_model = false;
    GenerateOptions extra;  // vLLM's extensions
};

CompletionArgs read_completion_args(const json &j, const Config &cfg, const Limits &limits, Completion &c,
                                    bool chat = false) {
    CompletionArgs a;
    int &max_tokens = a.max_tokens, &n = a.n;
    double &temperature = a.temperature, &top_p = a.top_p;
    bool &have_seed = a.have_seed, &have_model = a.have_model;
    uint64_t &seed = a.seed;
    std::vector<std::string> &stop = a.stop;
    const json *&prompt = a.prompt;
    GenerateOptions &extra = a.extra;
    for (auto it = j.begin(); it != j.end(); ++it) {
        const std::string &k = it.key();
        const json &v = it.value();
        if (k == "model") {
            if (!v.is_string()) bad(std::string("'model' must be a string, not ") + type_of(v));
            c.model = v.get<std::string>();
            have_model = true;
        } else if (k == "prompt" && !chat) {
            prompt = &v;
        } else if (k == "messages" && chat) {
            a.messages = &v;
        } else if (k == "tools" && chat) {
            if (!v.is_null()) a.tools = &v;
        } else if (k == "tool_choice" && chat) {
            if (v.is_string() && (v == "auto" || v == "none")) {
                a.tool_choice = v.get<std::string>();
            } else if (v.is_string() && v != "required") {
                bad("'tool_choice' must be \"auto\", \"none\", \"required\" or a function, not " + v.dump());
            } else if (!v.is_null()) {
                throw RequestError(400, "'tool_choice' " + std::string(v.is_string() ? "\"required\"" : "naming a function") +
                                        " is not supported by this server (it would need decoding constrained to "
                                        "a call): use \"auto\"", k, "unsupported_argument");
            }
        } else if (k == "parallel_tool_calls" && chat) {
            if (!v.is_boolean()) bad(std::string("'parallel_tool_calls' must be true or false, not ") + type_of(v));
            a.parallel_tool_calls = v.get<bool>();
        } else if (k == "chat_template_kwargs" && chat) {
            if (!v.is_null() && !v.is_object()) bad(std::string("'chat_template_kwargs' must be an object, not ") + type_of(v));
            if (v.is_object()) a.kwargs = &v;
        } else if (k == "max_tokens" || (chat && k == "max_completion_tokens")) {
            if (!v.is_null()) max_tokens = integer(v, "max_tokens", 1, limits.max_new_tokens);
        } else if (k == "temperature") {
            if (!v.is_null()) temperature = float32(v, "temperature");
            if (!(temperature >= 0 && temperature <= 2)) bad("'temperature' must be in [0, 2]");
        } else if (k == "top_p") {
            if (!v.is_null()) top_p = float32(v, "top_p");
            if (!(top_p > 0 && top_p <= 1)) bad("'top_p' must be in (0, 1]");
        } else if (k == "n") {
            if (!v.is_null()) n = integer(v, "n", 1, 16);
        } else if (k == "best_of") {
            if (!v.is_null() && integer(v, "best_of", 1, 16) != n) {
                throw RequestError(400, "'best_of' is not supported by this server (only equal to 'n')", k,
                                   "unsupported_argument");
            }
        } else if (k == "stream") {
            if (!v.is_null()) c.stream = boolean(v, "stream");
        } else if (k == "stream_options") {
            if (v.is_null()) continue;
            if (!v.is_object()) bad(std::string("'stream_options' must be an object, not ") + type_of(v));
            for (auto o = v.begin(); o != v.end(); ++o) {
                if (o.key() != "include_usage") bad("unknown field 'stream_options." + o.key() + "'");
                c.include_usage = boolean(o.value(), "stream_options.include_usage");
            }
        } else if (k == "seed") {
            if (v.is_null()) continue;
            if (!v.is_number_integer()) bad(std::string("'seed' must be an integer, not ") + type_of(v));
            // OpenAI takes any 64-bit seed: a negative one is its two's complement.
            seed = v.is_number_unsigned() ? v.get<uint64_t>() : (uint64_t)v.get<int64_t>();
            have_seed = true;
        } else if (k == "stop") {
            stop = stop_strings(v, "stop");
        } else if (k == "repetition_penalty") {  // vLLM's extensions of the API
            if (!v.is_null()) extra.repetition_penalty = float32(v, "repetition_penalty");
            if (!(extra.repetition_penalty > 0)) bad("'repetition_penalty' must be positive");
        } else if (k == "min_tokens") {
            if (!v.is_null()) extra.min_length = integer(v, "min_tokens", 0, limits.max_new_tokens);
        } else if (k == "stop_token_ids") {
            if (!v.is_null()) extra.stop_ids = token_ids(v, cfg.tgt_vocab_size, "stop_token_ids");
        } else if (k == "user") {
            if (!v.is_null() && !v.is_string()) bad(std::string("'user' must be a string, not ") + type_of(v));
        } else if (k == "logprobs") {
            if (v.is_null()) continue;
            if (integer(v, "logprobs", 0, 5) != 0) {
                throw RequestError(400, "'logprobs' > 0 (alternatives per token) is not supported by this server; "
                                        "0 gives the chosen tokens' log-probabilities", k, "unsupported_argument");
            }
            c.logprobs = true;
        } else if (k == "echo" || k == "suffix" || k == "presence_penalty" ||
                   k == "frequency_penalty" || k == "logit_bias") {
            only_default(v, k);
        } else {
            throw RequestError(400, "unrecognized request argument supplied: " + k, k);
        }
    }
    return a;
}

}  // namespace


namespace {

// What a completion and a chat completion share once their inputs are
// made: the model checked, each input's options, n choices each.
void finish_completion(Completion &c, const CompletionArgs &a, std::vector<Request> inputs, const Config &cfg,
                       const Limits &limits, const std::string &model_name);

}  // namespace

Completion parse_chat_completion(const std::string &body, const Config &cfg, const Encoder &encode,
                                 const Limits &limits, const std::string &model_name, const ChatRenderer &render,
                                 const std::string &template_source) {
    const json j = parse_object(body);
    Completion c;
    if (!encode) bad("this model has no tokenizer: /v1/chat/completions answers text");
    CompletionArgs a = read_completion_args(j, cfg, limits, c, true);
    if (!a.have_model) throw RequestError(400, "you must provide a model parameter", "model");
    if (c.model != model_name) {
        throw RequestError(404, "the model '" + c.model + "' does not exist (this server has '" + model_name + "')",
                           "model", "model_not_found");
    }
    if (!a.messages || a.messages->is_null()) throw RequestError(400, "'messages' is required", "messages");
    const nlohmann::ordered_json ordered = nlohmann::ordered_json::parse(body);  // (parse_object took it)
    nlohmann::ordered_json conversation = {{"messages", chat_messages(*a.messages, ordered.at("messages"))}};
    if (a.tools != nullptr) check_tools(*a.tools);
    if (!render) {
        throw RequestError(400, "this model has no chat template (tokenizer_config.json's chat_template): use "
                                "/v1/completions", "messages", "unsupported_argument");
    }
    // The template's other variables: chat_template_kwargs, then the tools.
    if (a.kwargs != nullptr) {
        const nlohmann::ordered_json &kw = ordered.at("chat_template_kwargs");
        for (auto it = kw.begin(); it != kw.end(); ++it) {
            if (it.key() == "messages" || it.key() == "add_generation_prompt" || it.key() == "tools") {
                bad("'chat_template_kwargs' must not set '" + it.key() + "' (the request's own)");
            }
            conversation[it.key()] = it.value();
        }
    }
    const bool use_tools = a.tools != nullptr && !a.tools->empty() && a.tool_choice != "none";
    if (use_tools && tool_format_of(template_source) == ToolFormat::None) {
        throw RequestError(400, "this model's chat template takes no tools", "tools", "unsupported_argument");
    }
    if (use_tools) conversation["tools"] = ordered.at("tools");
    std::string prompt;
    try {
        prompt = render(conversation.dump(-1, ' ', false, nlohmann::ordered_json::error_handler_t::strict));
    } catch (const Error &e) {
        throw RequestError(400, e.what(), "messages");
    }
    c.reply.thinking = template_thinks(template_source);
    c.reply.starts_thinking = c.reply.thinking && prompt_opens_thinking(prompt);
    c.reply.tools = use_tools ? tool_format_of(template_source) : ToolFormat::None;
    c.reply.parallel_tool_calls = a.parallel_tool_calls;
    Request r;
    r.is_text = true;
    r.text = prompt;
    try {
        r.ids = encode(prompt);
    } catch (const Error &e) {
        bad(std::string("'messages': ") + e.what());
    }
    if (r.ids.empty()) bad("the chat template made an empty prompt");
    std::vector<Request> inputs;
    inputs.push_back(std::move(r));
    finish_completion(c, a, std::move(inputs), cfg, limits, model_name);
    return c;
}

Completion parse_completion(const std::string &body, const Config &cfg, const Encoder &encode, const Limits &limits,
                            const std::string &model_name) {
    const json j = parse_object(body);
    Completion c;
    if (!encode) bad("this model has no tokenizer: /v1/completions answers text; use POST /v1/generate with ids");
    CompletionArgs a = read_completion_args(j, cfg, limits, c);
    if (!a.have_model) throw RequestError(400, "you must provide a model parameter", "model");
    if (c.model != model_name) {
        throw RequestError(404, "the model '" + c.model + "' does not exist (this server has '" + model_name + "')",
                           "model", "model_not_found");
    }
    if (a.prompt == nullptr || a.prompt->is_null()) throw RequestError(400, "'prompt' is required", "prompt");
    finish_completion(c, a, prompts(*a.prompt, cfg, encode), cfg, limits, model_name);
    return c;
}

namespace {

void finish_completion(Completion &c, const CompletionArgs &a, std::vector<Request> inputs, const Config &cfg,
                       const Limits &limits, const std::string &model_name) {
    const int max_tokens = a.max_tokens, n = a.n;
    const double temperature = a.temperature, top_p = a.top_p;
    uint64_t seed = a.seed;
    const GenerateOptions &extra = a.extra;
    if (!a.have_model) throw RequestError(400, "you must provide a model parameter", "model");
    if (c.model != model_name) {
        throw RequestError(404, "the model '" + c.model + "' does not exist (this server has '" + model_name + "')",
                           "model", "model_not_found");
    }
    if (c.include_usage && !c.stream) bad("'stream_options' is only allowed with 'stream': true");
    if (c.logprobs && c.stream) {
        throw RequestError(400, "'logprobs' with 'stream' is not supported by this server", "logprobs",
                           "unsupported_argument");
    }
    if (inputs.size() * (size_t)n > 64) bad("'prompt' × 'n' is " + std::to_string(inputs.size() * n) + " choices; at most 64");
    if (!a.have_seed && temperature > 0) seed = std::random_device{}() * 0x9E3779B97F4A7C15ull ^ std::random_device{}();
    c.prompts = (int)inputs.size();
    c.n = n;
    for (Request &in : inputs) {
        in.options.max_new_tokens = new_tokens(cfg, limits, (int)in.ids.size(), max_tokens);
        in.options.sample = temperature > 0;
        if (in.options.sample) {
            in.options.temperature = (float)temperature;
            in.options.top_p = (float)top_p;
        }
        in.stop = a.stop;
        in.stream = c.stream;
        in.options.return_logprobs = c.logprobs;
        in.options.repetition_penalty = extra.repetition_penalty;
        in.options.min_length = extra.min_length;
        in.options.stop_ids = extra.stop_ids;
        for (int k = 0; k < n; k++) {
            Request r = in;
            r.seed = seed + (uint64_t)k;
            c.choices.push_back(std::move(r));
        }
    }
}

}  // namespace

}  // namespace halformer::serve
