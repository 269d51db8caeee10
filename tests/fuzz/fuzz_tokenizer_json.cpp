// libFuzzer target: a tokenizer.json (any kind: text/tokenizer_json.h).
// Loading must end in a TokenizerJson or a halformer::Error naming the
// problem, never a crash or undefined behaviour; a loaded one must encode
// and decode texts (fixed ones, and the input's own last bytes) to ids in
// its vocabulary or to an Error, and its pieces must be as many as its ids.
#include "text/tokenizer_json.h"

#include "halformer/error.h"
#include "halformer/json.h"
#include "halformer/tokenizer.h"

#include <cstdint>
#include <string>
#include <vector>

extern "C" int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    const std::string text(reinterpret_cast<const char *>(data), size);
    std::vector<std::string> inputs = {"Hello world, it's 2024!", "  a\tb\n\nc  ", "caf\xC3\xA9 \xE6\x97\xA5\xE6\x9C\xAC \xF0\x9F\x98\x80",
                                       "<s>x</s> [CLS] <|endoftext|>", std::string(300, 'a'), ""};
    const std::string tail = text.substr(text.size() > 48 ? text.size() - 48 : 0);
    if (halformer::utf8_error_offset(tail) < 0) inputs.push_back(tail);
    try {
        const auto t = halformer::text::TokenizerJson::from_json(halformer::json::parse(text, "fuzz"), "fuzz tokenizer.json");
        const int vocab = t.vocab_size();
        for (const std::string &s : inputs) {
            std::vector<int32_t> ids;
            try {
                ids = t.encode(s);
            } catch (const halformer::Error &) {
                continue;  // e.g. a character with no piece and no unk
            }
            for (int32_t id : ids) {
                if (id < 0 || id >= vocab) __builtin_trap();
            }
            if (t.pieces(s).size() != ids.size()) __builtin_trap();
            t.decode(ids, true);
            t.decode(ids, false);
        }
        try {
            t.decode({0, vocab - 1, vocab});  // past the end: an Error
            __builtin_trap();
        } catch (const halformer::Error &) {
        }
    } catch (const halformer::Error &) {
    }
    return 0;
}
