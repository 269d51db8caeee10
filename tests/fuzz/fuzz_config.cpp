// libFuzzer target: a model's config.json. Parsing and validation must end
// in a Config or a halformer::Error naming the problem, never a crash or
// undefined behaviour; an accepted Config in Halformer's own format must
// survive its own round trip (to_json, then from_json again, equal text).
// A Hugging Face config.json (with "model_type") goes through its family's
// reader (hf/families/); to_json of what it gives is a summary for `info`,
// not a file to read back (rotary scaling, biases, relative buckets and the
// rest live only in the family's own config.json).
#include "halformer/config.h"
#include "halformer/error.h"

#include <cstdint>
#include <string>

extern "C" int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    const std::string text(reinterpret_cast<const char *>(data), size);
    halformer::Config c;
    try {
        c = halformer::Config::from_json(text, "fuzz config.json");
        c.validate();
    } catch (const halformer::Error &) {
        return 0;
    }
    const std::string once = c.to_json();
    if (!c.family.empty()) return 0;
    halformer::Config again;
    try {
        again = halformer::Config::from_json(once, "round trip");
    } catch (const halformer::Error &) {
        __builtin_trap();  // what we wrote, we must read back
    }
    if (again.to_json() != once) __builtin_trap();
    return 0;
}
