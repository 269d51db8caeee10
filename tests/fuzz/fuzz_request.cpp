// libFuzzer target: the body of a `halformer serve` generation request
// (runtime/src/server/request.cpp), as POST /v1/generate and as OpenAI's
// POST /v1/completions (the input's second byte picks). Parsing must end in a Request or a
// RequestError with a 4xx status, never a crash, a hang or undefined
// behaviour; an accepted request must be one generate() can run: ids inside
// the vocabulary, a limit in [1, the server's cap], positions within
// max_positions, consistent options.
#include "../../runtime/src/server/request.h"
#include "halformer/options.h"

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
    try {
        if (openai) {
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
