// libFuzzer target: a GGUF model file (llama.cpp's format: header, metadata,
// tensor infos, aligned data). The input is the whole file, parsed in memory.
// Parsing must end in a valid index or a halformer::Error, never a crash, a
// wild read (ASan) or undefined behaviour (UBSan); every tensor the index
// accepts must lie inside the file, and every one of a type the reader
// dequantizes must dequantize. A file with a model's metadata is then read
// as the config.json it stands for (hf::gguf_config_json), and that as a
// Config through its family, as Model::load would.
#include "../../runtime/src/model/hf/hf.h"
#include "halformer/config.h"
#include "halformer/error.h"
#include "halformer/gguf.h"

#include <cstdint>
#include <string>
#include <vector>

namespace {

// Reads every value (arrays nested in arrays included) through the
// accessors as a model loader would, errors included.
void walk(const halformer::Gguf &g) {
    volatile size_t sink = 0;
    for (const auto &key : g.keys()) {
        const halformer::GgufValue *v = g.find(key);
        if (!v) __builtin_trap();  // keys() lists only what find() finds
        try {
            switch (v->type) {
            case halformer::GgufType::STRING: sink = sink + g.string(key).size(); break;
            case halformer::GgufType::BOOL: sink = sink + g.boolean(key); break;
            case halformer::GgufType::FLOAT32:
            case halformer::GgufType::FLOAT64: sink = sink + (size_t)(g.number(key) != 0); break;
            case halformer::GgufType::ARRAY:
                if (v->elem_type == halformer::GgufType::STRING) sink = sink + g.strings(key).size();
                else sink = sink + g.numbers(key).size();  // an Error for arrays of arrays and bools
                break;
            default: sink = sink + (size_t)g.integer(key); break;  // an Error past INT64_MAX
            }
        } catch (const halformer::Error &) {
        }
    }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    try {
        const halformer::Gguf g(data, size, "fuzz.gguf");
        walk(g);
        try {
            (void)halformer::Config::from_json(halformer::hf::gguf_config_json(g), "fuzz.gguf (as config.json)");
        } catch (const halformer::Error &) {
        }
        // At most this many values dequantized an input, to keep each run short.
        int64_t budget = 1 << 20;
        std::vector<float> out;
        volatile float sink = 0;
        for (const auto &t : g.tensors()) {
            if (t.data < data || t.bytes > size || (size_t)(t.data - data) > size - t.bytes) __builtin_trap();
            if (g.find_tensor(t.name) != &t) __builtin_trap();  // the index finds what it lists
            const int64_t n = t.numel();
            if (!halformer::ggml_can_dequantize(t.type) || n > budget) continue;
            budget -= n;
            out.assign((size_t)n, 0.0f);
            halformer::dequantize(t, out.data());
            sink = sink + out[0] + out[(size_t)n - 1];
        }
    } catch (const halformer::Error &) {
        // A clear error is the expected answer to a bad file.
    }
    return 0;
}
