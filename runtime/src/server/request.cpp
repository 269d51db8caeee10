#include "request.h"

#include "halformer/tokenizer.h"

#include <nlohmann/json.hpp>

#include <algorithm>
#include <cfloat>
#include <cmath>
#include <sstream>

namespace halformer::serve {

namespace {

using json = nlohmann::json;

[[noreturn]] void bad(const std::string &msg) { throw RequestError(400, msg); }

const char *type_of(const json &v) { return v.type_name(); }

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

std::vector<int32_t> token_ids(const json &v, int vocab) {
    if (!v.is_array()) bad(std::string("'ids' must be an array of token ids, not ") + type_of(v));
    std::vector<int32_t> ids;
    ids.reserve(std::min<size_t>(v.size(), 1 << 16));
    for (size_t i = 0; i < v.size(); i++) {
        if (!v[i].is_number_integer()) bad("'ids'[" + std::to_string(i) + "] must be an integer, not " + type_of(v[i]));
        const bool ok = v[i].is_number_unsigned() ? v[i].get<uint64_t>() < (uint64_t)vocab
                                                   : v[i].get<int64_t>() >= 0 && v[i].get<int64_t>() < vocab;
        if (!ok) {
            bad("'ids'[" + std::to_string(i) + "] = " + v[i].dump() + " is outside the vocabulary [0, " +
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

// One decoding field into the options; false for a name that is none.
bool decoding_field(const std::string &k, const json &v, const Limits &limits, Request &r, int &max_new) {
    GenerateOptions &o = r.options;
    if (k == "beam") {
        o.beam = integer(v, "beam", 1, 7);
    } else if (k == "n_best") {
        o.n_best = integer(v, "n_best", 1, 7);
    } else if (k == "length_penalty") {
        o.length_penalty = float32(v, "length_penalty");
    } else if (k == "max_new_tokens") {
        max_new = integer(v, "max_new_tokens", 1, limits.max_new_tokens);
    } else if (k == "sample") {
        o.sample = boolean(v, "sample");
    } else if (k == "temperature") {
        o.temperature = float32(v, "temperature");
        if (!(o.temperature > 0)) bad("'temperature' must be positive");
    } else if (k == "top_k") {
        o.top_k = integer(v, "top_k", 0, 1 << 20);
    } else if (k == "top_p") {
        o.top_p = float32(v, "top_p");
        if (!(o.top_p > 0 && o.top_p <= 1)) bad("'top_p' must be in (0, 1]");
    } else if (k == "seed") {
        if (!v.is_number_unsigned() && !(v.is_number_integer() && v.get<int64_t>() >= 0)) {
            bad(std::string("'seed' must be a non-negative integer, not ") + v.dump());
        }
        r.seed = v.get<uint64_t>();
    } else {
        return false;
    }
    return true;
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
    if (max_new == -1) {
        // A translation is rarely more than twice its source.
        return ed ? std::min({2 * P + 10, limits.max_new_tokens, allowed}) : std::min(limits.max_new_tokens, allowed);
    }
    if (max_new > allowed) {
        throw RequestError(413, std::to_string(P) + " input tokens + " + std::to_string(max_new) +
                                    " new tokens are past the model's max_positions = " +
                                    std::to_string(cfg.max_positions));
    }
    return max_new;
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
        } else if (!decoding_field(k, it.value(), limits, r, max_new)) {
            bad("unknown field '" + k +
                "' (expected ids or text, and beam, n_best, length_penalty, max_new_tokens, sample, temperature, "
                "top_k, top_p, seed)");
        }
    }
    const GenerateOptions &o = r.options;
    if (!have_input) bad("the request needs 'ids' or 'text'");
    if (j.contains("ids") && j.contains("text")) bad("give 'ids' or 'text', not both");
    if (r.ids.empty()) bad("'ids' is empty");
    if (o.n_best > o.beam) bad("'n_best' (" + std::to_string(o.n_best) + ") must be at most 'beam' (" +
                               std::to_string(o.beam) + ")");
    if (o.sample && o.beam > 1) bad("'sample' and 'beam' > 1 are exclusive");
    r.options.max_new_tokens = new_tokens(cfg, limits, (int)r.ids.size(), max_new);
    return r;
}

std::string batch_key(const GenerateOptions &o) {
    std::ostringstream k;
    k << o.beam << '/' << o.n_best << '/' << o.length_penalty << '/' << o.sample << '/' << o.temperature << '/'
      << o.top_k << '/' << o.top_p << '/' << o.stop_at_eos;
    return k.str();
}

}  // namespace halformer::serve
