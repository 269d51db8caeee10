// The GGUF reader against tests/fixtures/gguf (made by
// tests/make_gguf_fixtures.py with tests/gguf_writer.py, numpy only):
// types.gguf parses to the metadata and tensors the script wrote; every
// tensor dequantizes to the same floats as the script's numpy dequantizers
// (written separately from the block layouts); and copies of its bytes,
// broken one field at a time, are each refused with an Error naming the
// file and the field.
#include "halformer/error.h"
#include "halformer/gguf.h"
#include "halformer/json.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <initializer_list>
#include <limits>
#include <sstream>
#include <stdexcept>
#include <string>
#include <vector>

#include <unistd.h>

using halformer::Error;
using halformer::GgmlType;
using halformer::Gguf;
using halformer::GgufTensor;
using halformer::GgufType;
using halformer::GgufValue;

namespace {

std::string fixture(const std::string &name) { return std::string(HALFORMER_FIXTURES) + "/gguf/" + name; }

std::string read_bytes(const std::string &path) {
    std::ifstream in(path, std::ios::binary);
    if (!in) throw std::runtime_error("cannot read " + path);
    std::stringstream ss;
    ss << in.rdbuf();
    return ss.str();
}

halformer::json::Value layout() {
    return halformer::json::parse(read_bytes(fixture("types.expected.json")), "types.expected.json");
}

std::string le(uint64_t v, int bytes) {
    std::string s;
    for (int k = 0; k < bytes; k++) s += char(v >> (8 * k) & 0xFF);
    return s;
}
void put(std::string &f, size_t at, uint64_t v, int bytes) { f.replace(at, bytes, le(v, bytes)); }
uint64_t get(const std::string &f, size_t at, int bytes) {
    uint64_t v = 0;
    for (int k = bytes; k-- > 0;) v = v << 8 | (uint8_t)f[at + k];
    return v;
}

// Where the field after the length-prefixed string `s` starts in the file
// (a metadata key's value type, a tensor name's n_dims).
size_t after(const std::string &f, const std::string &s) {
    const std::string needle = le(s.size(), 8) + s;
    const size_t k = f.find(needle);
    if (k == std::string::npos) throw std::runtime_error("no string '" + s + "' in the fixture");
    return k + needle.size();
}

// Parsing `bytes` must throw an Error naming the file and containing every piece.
void expect_error(const std::string &bytes, std::initializer_list<std::string> pieces) {
    try {
        Gguf g((const uint8_t *)bytes.data(), bytes.size(), "types.gguf");
        ADD_FAILURE() << "parsed without an error";
    } catch (const Error &e) {
        const std::string msg = e.what();
        EXPECT_EQ(msg.rfind("types.gguf: ", 0), 0u) << msg;
        for (const auto &p : pieces) EXPECT_NE(msg.find(p), std::string::npos) << "no '" << p << "' in: " << msg;
    }
}

template <typename F>
void expect_call_error(F f, std::initializer_list<std::string> pieces) {
    try {
        f();
        ADD_FAILURE() << "no error";
    } catch (const Error &e) {
        const std::string msg = e.what();
        for (const auto &p : pieces) EXPECT_NE(msg.find(p), std::string::npos) << "no '" << p << "' in: " << msg;
    }
}

uint32_t float_bits(float f) {
    uint32_t b;
    std::memcpy(&b, &f, 4);
    return b;
}

class GgufFixture : public testing::Test {
protected:
    void SetUp() override { bytes = read_bytes(fixture("types.gguf")); }
    std::string bytes;
};

}  // namespace

TEST(Gguf, TypeTable) {
    EXPECT_STREQ(halformer::ggml_type_name(GgmlType::Q4_K), "Q4_K");
    EXPECT_STREQ(halformer::ggml_type_name(GgmlType::BF16), "BF16");
    EXPECT_STREQ(halformer::ggml_type_name((GgmlType)4), "unknown");  // Q4_2, removed
    EXPECT_EQ(halformer::ggml_block_size(GgmlType::Q8_0), 32);
    EXPECT_EQ(halformer::ggml_type_size(GgmlType::Q8_0), 34u);
    EXPECT_EQ(halformer::ggml_block_size(GgmlType::Q4_K), 256);
    EXPECT_EQ(halformer::ggml_type_size(GgmlType::Q4_K), 144u);
    EXPECT_EQ(halformer::ggml_type_size(GgmlType::Q5_K), 176u);
    EXPECT_EQ(halformer::ggml_type_size(GgmlType::Q6_K), 210u);
    EXPECT_EQ(halformer::ggml_type_size(GgmlType::Q2_K), 84u);
    EXPECT_EQ(halformer::ggml_type_size(GgmlType::Q3_K), 110u);
    EXPECT_EQ(halformer::ggml_type_size(GgmlType::Q4_1), 20u);
    EXPECT_EQ(halformer::ggml_type_size(GgmlType::Q5_0), 22u);
    EXPECT_EQ(halformer::ggml_type_size(GgmlType::Q5_1), 24u);
    EXPECT_TRUE(halformer::ggml_type_known(30));
    EXPECT_FALSE(halformer::ggml_type_known(31));
    EXPECT_FALSE(halformer::ggml_type_known(77));
    EXPECT_TRUE(halformer::ggml_can_dequantize(GgmlType::Q6_K));
    EXPECT_FALSE(halformer::ggml_can_dequantize(GgmlType::Q2_K));
}

TEST(Gguf, HalfConversionIsExact) {
    using halformer::fp16_to_fp32;
    EXPECT_EQ(fp16_to_fp32(0x3C00), 1.0f);
    EXPECT_EQ(fp16_to_fp32(0xC000), -2.0f);
    EXPECT_EQ(fp16_to_fp32(0x7BFF), 65504.0f);
    EXPECT_EQ(fp16_to_fp32(0x0400), std::ldexp(1.0f, -14));     // smallest normal
    EXPECT_EQ(fp16_to_fp32(0x0001), std::ldexp(1.0f, -24));     // smallest subnormal
    EXPECT_EQ(fp16_to_fp32(0x03FF), std::ldexp(1023.0f, -24));  // largest subnormal
    EXPECT_EQ(fp16_to_fp32(0x8003), -std::ldexp(3.0f, -24));
    EXPECT_EQ(float_bits(fp16_to_fp32(0x8000)), 0x80000000u);  // -0
    EXPECT_EQ(fp16_to_fp32(0x7C00), std::numeric_limits<float>::infinity());
    EXPECT_EQ(fp16_to_fp32(0xFC00), -std::numeric_limits<float>::infinity());
    EXPECT_EQ(float_bits(fp16_to_fp32(0x7E00)), 0x7FC00000u);  // quiet NaN
    EXPECT_EQ(float_bits(fp16_to_fp32(0x7C01)), 0x7F802000u);  // NaN payload kept
    // Every finite half against its definition: (-1)^s 2^(e-15) (1 + m/1024), or m 2^-24 for e = 0.
    for (uint32_t h = 0; h < 0x10000; h++) {
        const uint32_t e = (h >> 10) & 0x1F, m = h & 0x3FF;
        if (e == 0x1F) continue;
        float want = e == 0 ? std::ldexp((float)m, -24) : std::ldexp((float)(1024 + m), (int)e - 25);
        if (h & 0x8000) want = -want;
        ASSERT_EQ(float_bits(fp16_to_fp32((uint16_t)h)), float_bits(want)) << std::hex << h;
    }
    EXPECT_EQ(halformer::bf16_to_fp32(0x3F80), 1.0f);
    EXPECT_EQ(float_bits(halformer::bf16_to_fp32(0xFF81)), 0xFF810000u);
}

TEST(Gguf, FixtureParses) {
    const Gguf g(fixture("types.gguf"));
    const auto L = layout();
    EXPECT_EQ(g.version(), 3u);
    EXPECT_EQ(g.alignment(), 64u);
    EXPECT_EQ((double)g.data_offset(), L.find("data_offset")->number);
    EXPECT_EQ(g.data_offset() % 64, 0u);

    const std::vector<std::string> keys{"general.architecture", "general.name", "general.alignment", "test.u8",
                                        "test.i8", "test.u16", "test.i16", "test.u32", "test.i32", "test.f32",
                                        "test.bool", "test.string", "test.u64", "test.i64", "test.f64",
                                        "test.array.strings", "test.array.i32", "test.array.f32",
                                        "test.array.u64", "test.array.bool", "test.array.empty",
                                        "test.array.nested", "llama.context_length", "tokenizer.ggml.tokens"};
    EXPECT_EQ(g.keys(), keys);

    // Each value, with its type.
    auto type_of = [&](const char *k) { return g.find(k) ? g.find(k)->type : GgufType::ARRAY; };
    EXPECT_EQ(g.string("general.architecture"), "llama");
    EXPECT_EQ(g.string("general.name"), "halformer gguf fixture");
    EXPECT_EQ(type_of("general.alignment"), GgufType::UINT32);
    EXPECT_EQ(g.integer("general.alignment"), 64);
    EXPECT_EQ(type_of("test.u8"), GgufType::UINT8);
    EXPECT_EQ(g.integer("test.u8"), 200);
    EXPECT_EQ(type_of("test.i8"), GgufType::INT8);
    EXPECT_EQ(g.integer("test.i8"), -100);
    EXPECT_EQ(type_of("test.u16"), GgufType::UINT16);
    EXPECT_EQ(g.integer("test.u16"), 60000);
    EXPECT_EQ(type_of("test.i16"), GgufType::INT16);
    EXPECT_EQ(g.integer("test.i16"), -30000);
    EXPECT_EQ(type_of("test.u32"), GgufType::UINT32);
    EXPECT_EQ(g.integer("test.u32"), 4000000000LL);
    EXPECT_EQ(type_of("test.i32"), GgufType::INT32);
    EXPECT_EQ(g.integer("test.i32"), -2000000000LL);
    EXPECT_EQ(type_of("test.f32"), GgufType::FLOAT32);
    EXPECT_EQ(g.number("test.f32"), (double)0.1f);  // widened exactly
    EXPECT_EQ(type_of("test.bool"), GgufType::BOOL);
    EXPECT_TRUE(g.boolean("test.bool"));
    EXPECT_EQ(type_of("test.string"), GgufType::STRING);
    EXPECT_EQ(g.string("test.string"), "h\xc3\xa9llo, w\xc3\xb6rld");
    EXPECT_EQ(type_of("test.u64"), GgufType::UINT64);
    EXPECT_EQ(g.find("test.u64")->u64, (uint64_t(1) << 63) + 5);
    EXPECT_EQ(g.number("test.u64"), 9223372036854775813.0);
    EXPECT_EQ(type_of("test.i64"), GgufType::INT64);
    EXPECT_EQ(g.integer("test.i64"), -(int64_t(1) << 62));
    EXPECT_EQ(type_of("test.f64"), GgufType::FLOAT64);
    EXPECT_EQ(g.number("test.f64"), 1.0 / 3.0);
    EXPECT_EQ(g.integer("llama.context_length"), 2048);
    EXPECT_EQ(g.number("llama.context_length"), 2048.0);

    EXPECT_EQ(g.strings("test.array.strings"), (std::vector<std::string>{"a", "bc", "", "\xc3\xbcn\xc3\xaf"}));
    EXPECT_EQ(g.strings("tokenizer.ggml.tokens"), (std::vector<std::string>{"<s>", "</s>", "\xe2\x96\x81the"}));
    EXPECT_EQ(g.find("test.array.i32")->elem_type, GgufType::INT32);
    EXPECT_EQ(g.numbers("test.array.i32"), (std::vector<double>{1, -2, 3}));
    EXPECT_EQ(g.find("test.array.f32")->elem_type, GgufType::FLOAT32);
    EXPECT_EQ(g.numbers("test.array.f32"), (std::vector<double>{0.25, -1.5, (double)1e-3f}));
    const GgufValue *u64s = g.find("test.array.u64");
    ASSERT_TRUE(u64s);
    ASSERT_EQ(u64s->array.size(), 2u);
    EXPECT_EQ(u64s->array[1].u64, std::numeric_limits<uint64_t>::max());
    const GgufValue *bools = g.find("test.array.bool");
    ASSERT_TRUE(bools);
    EXPECT_EQ(bools->elem_type, GgufType::BOOL);
    ASSERT_EQ(bools->array.size(), 3u);
    EXPECT_TRUE(bools->array[0].boolean);
    EXPECT_FALSE(bools->array[1].boolean);
    EXPECT_TRUE(bools->array[2].boolean);
    EXPECT_EQ(g.find("test.array.empty")->elem_type, GgufType::UINT8);
    EXPECT_TRUE(g.numbers("test.array.empty").empty());
    const GgufValue *nested = g.find("test.array.nested");
    ASSERT_TRUE(nested);
    EXPECT_EQ(nested->elem_type, GgufType::ARRAY);
    ASSERT_EQ(nested->array.size(), 3u);
    EXPECT_EQ(nested->array[0].elem_type, GgufType::UINT8);
    ASSERT_EQ(nested->array[0].array.size(), 2u);
    EXPECT_EQ(nested->array[0].array[1].u64, 2u);
    EXPECT_EQ(nested->array[1].array.at(0).str, "x");
    EXPECT_EQ(nested->array[2].elem_type, GgufType::ARRAY);
    EXPECT_EQ(nested->array[2].array.at(0).elem_type, GgufType::INT16);
    EXPECT_EQ(nested->array[2].array.at(0).array.at(0).i64, -1);

    // Tensors: names, shapes (GGML order), types and offsets as the writer laid them out.
    const auto &want = L.find("tensors")->array;
    ASSERT_EQ(g.tensors().size(), want.size());
    for (size_t k = 0; k < want.size(); k++) {
        const GgufTensor &t = g.tensors()[k];
        const auto &w = want[k];
        SCOPED_TRACE(w.find("name")->string);
        EXPECT_EQ(t.name, w.find("name")->string);
        std::vector<int64_t> ne;
        for (auto &d : w.find("ne")->array) ne.push_back((int64_t)d.number);
        EXPECT_EQ(t.ne, ne);
        EXPECT_STREQ(halformer::ggml_type_name(t.type), w.find("type")->string.c_str());
        EXPECT_EQ((double)t.offset, w.find("offset")->number);
        EXPECT_EQ(t.offset % 64, 0u);
        EXPECT_EQ((double)t.bytes, w.find("bytes")->number);
        EXPECT_EQ((double)t.numel(), w.find("count")->number);
        EXPECT_EQ(g.find_tensor(t.name), &t);
    }
    EXPECT_EQ(g.find_tensor("t.Q4_K")->ne, (std::vector<int64_t>{512, 3}));
    EXPECT_EQ(g.find_tensor("odd.F16.4d")->ne, (std::vector<int64_t>{8, 1, 3, 2}));
    EXPECT_EQ(g.find_tensor("nope"), nullptr);
}

TEST(Gguf, Accessors) {
    const Gguf g(fixture("types.gguf"));
    EXPECT_TRUE(g.has("test.u8"));
    EXPECT_FALSE(g.has("nope"));
    EXPECT_EQ(g.find("nope"), nullptr);
    // Fallbacks stand in for missing keys only.
    EXPECT_EQ(g.integer("nope", 7), 7);
    EXPECT_EQ(g.integer("test.u8", 7), 200);
    EXPECT_EQ(g.number("nope", 1.5), 1.5);
    EXPECT_EQ(g.string("nope", "x"), "x");
    EXPECT_FALSE(g.boolean("nope", false));
    EXPECT_EQ(g.strings("nope", {"a"}), std::vector<std::string>{"a"});
    EXPECT_EQ(g.numbers("nope", {2.0}), std::vector<double>{2.0});
    EXPECT_EQ(g.number("test.i8"), -100.0);  // integers are numbers
    expect_call_error([&] { g.string("nope"); }, {"types.gguf", "'nope'", "missing"});
    expect_call_error([&] { g.string("test.u8"); }, {"'test.u8'", "expected a STRING", "found UINT8"});
    expect_call_error([&] { g.string("test.u8", "x"); }, {"'test.u8'", "found UINT8"});
    expect_call_error([&] { g.integer("test.f32"); }, {"'test.f32'", "integer", "found FLOAT32"});
    expect_call_error([&] { g.integer("test.bool"); }, {"'test.bool'", "found BOOL"});
    expect_call_error([&] { g.integer("test.u64"); }, {"'test.u64'", "9223372036854775813", "does not fit"});
    expect_call_error([&] { g.number("test.string"); }, {"'test.string'", "found STRING"});
    expect_call_error([&] { g.boolean("test.u8"); }, {"'test.u8'", "expected a BOOL"});
    expect_call_error([&] { g.strings("test.array.i32"); }, {"'test.array.i32'", "found ARRAY of INT32"});
    expect_call_error([&] { g.strings("test.string"); }, {"'test.string'", "found STRING"});
    expect_call_error([&] { g.numbers("test.array.strings"); }, {"'test.array.strings'", "ARRAY of STRING"});
    expect_call_error([&] { g.numbers("test.array.nested"); }, {"'test.array.nested'", "ARRAY of ARRAY"});
}

TEST(Gguf, DequantizesAsNumpy) {
    const Gguf g(fixture("types.gguf"));
    const std::string raw = read_bytes(fixture("types.expected.f32"));
    const auto L = layout();
    std::vector<std::string> types_seen;
    for (const auto &w : L.find("tensors")->array) {
        const GgufTensor *t = g.find_tensor(w.find("name")->string);
        ASSERT_TRUE(t);
        SCOPED_TRACE(t->name);
        const size_t at = (size_t)w.find("expected_offset")->number, n = (size_t)w.find("count")->number;
        ASSERT_LE((at + n) * 4, raw.size());
        std::vector<float> want(n), got(n + 1, 12345.0f);
        std::memcpy(want.data(), raw.data() + at * 4, n * 4);
        halformer::dequantize(*t, got.data());
        EXPECT_EQ(got[n], 12345.0f) << "wrote past numel";
        const bool plain = t->type == GgmlType::F32 || t->type == GgmlType::F16 || t->type == GgmlType::BF16;
        // F32, F16 and BF16 must match bit for bit; the quantized types within
        // 1e-6 relative, and in fact they are the same operations in the same
        // order, so they match bit for bit too. (The first few mismatches
        // are reported, then their count.)
        size_t differ = 0, out_of_tolerance = 0;
        for (size_t k = 0; k < n; k++) {
            const bool same = float_bits(got[k]) == float_bits(want[k]);
            const bool close = !plain && std::fabs(got[k] - want[k]) <= 1e-6f * std::max(std::fabs(want[k]), 1e-30f);
            if (!same) differ++;
            if (!same && !close && out_of_tolerance++ < 3) {
                ADD_FAILURE() << "value " << k << ": " << got[k] << ", numpy " << want[k];
            }
        }
        EXPECT_EQ(out_of_tolerance, 0u);
        EXPECT_EQ(differ, 0u);
        types_seen.push_back(halformer::ggml_type_name(t->type));
    }
    for (const char *t : {"F32", "F16", "BF16", "Q8_0", "Q4_0", "Q4_1", "Q5_0", "Q5_1", "Q4_K", "Q5_K", "Q6_K"}) {
        EXPECT_NE(std::find(types_seen.begin(), types_seen.end(), t), types_seen.end()) << t;
    }
    // The special values came through as such.
    const GgufTensor *s = g.find_tensor("special.F16");
    ASSERT_TRUE(s);
    std::vector<float> v((size_t)s->numel());
    halformer::dequantize(*s, v.data());
    EXPECT_EQ(v[4], 65504.0f);
    EXPECT_EQ(v[7], std::ldexp(1.0f, -24));
    EXPECT_TRUE(std::isinf(v[10]) && v[10] > 0);
    EXPECT_TRUE(std::isnan(v[12]));
}

TEST(Gguf, HalfFromFloat) {
    using halformer::fp16_to_fp32;
    using halformer::fp32_to_fp16;
    // Every half back to itself (NaNs stay NaNs).
    for (uint32_t h = 0; h < 0x10000; h++) {
        const float f = fp16_to_fp32((uint16_t)h);
        if (std::isnan(f)) {
            EXPECT_TRUE(std::isnan(fp16_to_fp32(fp32_to_fp16(f)))) << std::hex << h;
            continue;
        }
        ASSERT_EQ(fp32_to_fp16(f), h) << std::hex << h;
    }
    // Halfway between two halves: to the even one; past 65504's half step: infinity;
    // below half the smallest subnormal: zero.
    EXPECT_EQ(fp32_to_fp16(1.0f + std::ldexp(1.0f, -11)), 0x3C00);                           // 1 + half an ulp
    EXPECT_EQ(fp32_to_fp16(1.0f + 3 * std::ldexp(1.0f, -11)), 0x3C02);                       // 1 + 1.5 ulp: up to even
    EXPECT_EQ(fp32_to_fp16(1.0f + std::ldexp(1.0f, -11) + std::ldexp(1.0f, -20)), 0x3C01);  // past the tie
    EXPECT_EQ(fp32_to_fp16(65519.0f), 0x7BFF);
    EXPECT_EQ(fp32_to_fp16(65520.0f), 0x7C00);
    EXPECT_EQ(fp32_to_fp16(-1e9f), 0xFC00);
    EXPECT_EQ(fp32_to_fp16(std::ldexp(1.0f, -25)), 0x0000);              // a tie to even (zero)
    EXPECT_EQ(fp32_to_fp16(std::ldexp(1.5f, -25)), 0x0001);
    EXPECT_EQ(fp32_to_fp16(std::ldexp(1.0f, -26)), 0x0000);
    EXPECT_EQ(fp32_to_fp16(std::ldexp(3.0f, -25)), 0x0002);              // 1.5 subnormal steps: to even
    EXPECT_EQ(fp32_to_fp16(std::ldexp(1023.5f, -24)), 0x0400);           // the largest subnormal's tie: up to normal
    EXPECT_EQ(fp32_to_fp16(-0.0f), 0x8000);
}

// Every block type to Q8_0 (what int8's kernels read): Q4_0 and Q5_0
// exactly (their values are the block's step times integers), Q8_0 as it
// is, the others within half a step of their values, each block of 32 with
// its own step max |x| / 127.
TEST(Gguf, RequantizesToQ8_0) {
    const Gguf g(fixture("types.gguf"));
    std::vector<std::string> seen;
    for (const GgufTensor &t : g.tensors()) {
        if (t.ne.size() != 2 || t.name.rfind("t.", 0) != 0) continue;
        SCOPED_TRACE(t.name);
        const int64_t K = t.ne[0], rows = t.ne[1];
        const size_t in_row = (size_t)(K / halformer::ggml_block_size(t.type)) * halformer::ggml_type_size(t.type);
        std::vector<uint8_t> q((size_t)(K / 32) * 34 + 1, 0xAB);
        std::vector<float> want((size_t)K), got((size_t)K);
        const bool plain = t.type == GgmlType::F32 || t.type == GgmlType::F16 || t.type == GgmlType::BF16;
        if (plain || K % 32 != 0) {
            EXPECT_FALSE(halformer::requantize_row_q8_0(t.type, t.data, q.data(), K));
            EXPECT_EQ(q[0], 0xAB) << "wrote where it refused";
            continue;
        }
        const bool exact = t.type == GgmlType::Q4_0 || t.type == GgmlType::Q5_0 || t.type == GgmlType::Q8_0;
        for (int64_t r = 0; r < rows; r++) {
            const uint8_t *src = t.data + (size_t)r * in_row;
            ASSERT_TRUE(halformer::requantize_row_q8_0(t.type, src, q.data(), K));
            EXPECT_EQ(q.back(), 0xAB) << "wrote past the row";
            halformer::dequantize_row(t.type, src, want.data(), K);
            halformer::dequantize_row(GgmlType::Q8_0, q.data(), got.data(), K);
            for (int64_t b = 0; b < K / 32; b++) {
                const float d = std::fabs(halformer::fp16_to_fp32(uint16_t(q[b * 34] | q[b * 34 + 1] << 8)));
                float amax = 0;
                for (int k = 0; k < 32; k++) amax = std::max(amax, std::fabs(want[b * 32 + k]));
                if (!exact) EXPECT_NEAR(d, amax / 127, amax / 127 * 1e-3 + 1e-30) << "block " << b;
                for (int k = 0; k < 32; k++) {
                    const size_t i = (size_t)(b * 32 + k);
                    if (exact) ASSERT_EQ(float_bits(got[i]), float_bits(want[i])) << "row " << r << " value " << i;
                    else ASSERT_LE(std::fabs(got[i] - want[i]), 0.5f * d * (1 + 1e-3f) + 1e-30f) << "row " << r << " value " << i;
                }
            }
        }
        seen.push_back(halformer::ggml_type_name(t.type));
    }
    for (const char *t : {"Q8_0", "Q4_0", "Q4_1", "Q5_0", "Q5_1", "Q4_K", "Q5_K", "Q6_K"}) {
        EXPECT_NE(std::find(seen.begin(), seen.end(), t), seen.end()) << t;
    }
    std::vector<uint8_t> q(34 * 2);
    EXPECT_FALSE(halformer::requantize_row_q8_0(GgmlType::Q4_K, g.find_tensor("t.Q4_K")->data, q.data(), 64))
        << "64 values are not a whole Q4_K block";
}

// Q4_1 and Q4_K to Q4_1 blocks (what the q4_1 kernels read): Q4_1 as it
// is; Q4_K's codes as they are, each sub-block's step and minimum within
// fp16's rounding of d·sc and dmin·m; every other type refused, writing
// nothing.
TEST(Gguf, TranscodesToQ4_1) {
    const Gguf g(fixture("types.gguf"));
    int seen = 0;
    for (const GgufTensor &t : g.tensors()) {
        if (t.ne.size() != 2 || t.name.rfind("t.", 0) != 0) continue;
        SCOPED_TRACE(t.name);
        const int64_t K = t.ne[0], rows = t.ne[1];
        const size_t in_row = (size_t)(K / halformer::ggml_block_size(t.type)) * halformer::ggml_type_size(t.type);
        std::vector<uint8_t> q((size_t)(K / 32) * 20 + 1, 0xAB);
        if (t.type != GgmlType::Q4_1 && t.type != GgmlType::Q4_K) {
            EXPECT_FALSE(halformer::transcode_row_q4_1(t.type, t.data, q.data(), K));
            EXPECT_EQ(q[0], 0xAB) << "wrote where it refused";
            continue;
        }
        std::vector<float> want((size_t)K), got((size_t)K);
        for (int64_t r = 0; r < rows; r++) {
            const uint8_t *src = t.data + (size_t)r * in_row;
            ASSERT_TRUE(halformer::transcode_row_q4_1(t.type, src, q.data(), K));
            EXPECT_EQ(q.back(), 0xAB) << "wrote past the row";
            if (t.type == GgmlType::Q4_1) {
                EXPECT_TRUE(std::equal(src, src + in_row, q.begin())) << "Q4_1 as it is";
                continue;
            }
            halformer::dequantize_row(t.type, src, want.data(), K);
            halformer::dequantize_row(GgmlType::Q4_1, q.data(), got.data(), K);
            for (int64_t b = 0; b < K / 32; b++) {
                const float d = std::fabs(halformer::fp16_to_fp32(uint16_t(q[b * 20] | q[b * 20 + 1] << 8)));
                const float m = std::fabs(halformer::fp16_to_fp32(uint16_t(q[b * 20 + 2] | q[b * 20 + 3] << 8)));
                for (int k = 0; k < 32; k++) {
                    const size_t i = (size_t)(b * 32 + k);
                    // Q4_K's value d·sc·q − dmin·m; each of the two products rounded to fp16 (2^-11 relative,
                    // 16 subnormal steps of 2^-24 at most where it is that small).
                    ASSERT_LE(std::fabs(got[i] - want[i]), (15 * d + m) * std::ldexp(1.001f, -11) + std::ldexp(1.0f, -20))
                        << "row " << r << " value " << i;
                }
            }
        }
        seen++;
    }
    EXPECT_EQ(seen, 2) << "types.gguf holds a Q4_1 and a Q4_K tensor";
    std::vector<uint8_t> q(20 * 2);
    EXPECT_FALSE(halformer::transcode_row_q4_1(GgmlType::Q4_K, g.find_tensor("t.Q4_K")->data, q.data(), 64))
        << "64 values are not a whole Q4_K block";
}

TEST(Gguf, DequantizeRefusesOtherTypes) {
    GgufTensor t;
    t.name = "blk.0.ffn_down.weight";
    t.type = GgmlType::Q2_K;
    t.ne = {256, 1};
    std::vector<uint8_t> bytes(84);
    t.bytes = bytes.size();
    t.data = bytes.data();
    std::vector<float> out(256);
    expect_call_error([&] { halformer::dequantize(t, out.data()); }, {"'blk.0.ffn_down.weight'", "Q2_K"});
    expect_call_error([&] { halformer::dequantize_row(GgmlType::Q3_K, bytes.data(), out.data(), 256); }, {"Q3_K"});
    expect_call_error([&] { halformer::dequantize_row(GgmlType::Q8_0, bytes.data(), out.data(), 48); },
                      {"48", "Q8_0", "32"});
    t.type = GgmlType::Q8_0;
    t.ne = {256, 1};
    expect_call_error([&] { halformer::dequantize(t, out.data()); }, {"'blk.0.ffn_down.weight'", "bytes"});
}

TEST(Gguf, Version2DefaultAlignment) {
    const Gguf g(fixture("small.gguf"));
    EXPECT_EQ(g.version(), 2u);
    EXPECT_EQ(g.alignment(), 32u);
    EXPECT_FALSE(g.has("general.alignment"));
    EXPECT_EQ(g.data_offset() % 32, 0u);
    ASSERT_EQ(g.tensors().size(), 2u);
    EXPECT_EQ(g.tensors()[0].name, "a");
    EXPECT_EQ(g.tensors()[0].type, GgmlType::Q8_0);
    EXPECT_EQ(g.tensors()[0].ne, (std::vector<int64_t>{32, 2}));
    EXPECT_EQ(g.tensors()[1].offset, 96u);  // 68 bytes of Q8_0, padded to 32
    EXPECT_EQ(g.tensors()[1].data, g.tensors()[0].data + 96);
}

TEST(Gguf, FileErrors) {
    expect_call_error([] { Gguf g("/nonexistent/model.gguf"); }, {"/nonexistent/model.gguf", "cannot open"});
    expect_call_error([] { Gguf g(std::string(HALFORMER_FIXTURES) + "/gguf"); }, {"not a regular file"});
    const std::string empty = (std::filesystem::temp_directory_path() /
                               ("halformer_empty_" + std::to_string(::getpid()) + ".gguf"))
                                  .string();
    { std::ofstream(empty, std::ios::binary | std::ios::trunc); }
    expect_call_error([&] { Gguf g(empty); }, {empty, "truncated"});
    std::remove(empty.c_str());
    expect_call_error([] { Gguf g(nullptr, 0, "buffer"); }, {"buffer: ", "truncated"});
}

TEST_F(GgufFixture, BadMagicAndVersion) {
    std::string f = bytes;
    f[0] = 'X';
    expect_error(f, {"magic"});
    f = bytes;
    put(f, 4, 1, 4);
    expect_error(f, {"version 1"});
    put(f, 4, 4, 4);
    expect_error(f, {"version 4"});
    put(f, 4, 0x03000000, 4);  // a big-endian version 3
    expect_error(f, {"big-endian"});
    put(f, 4, 2, 4);  // version 2 has the same layout
    EXPECT_NO_THROW(Gguf((const uint8_t *)f.data(), f.size(), "types.gguf"));
}

TEST_F(GgufFixture, EveryTruncationIsAnError) {
    const Gguf whole((const uint8_t *)bytes.data(), bytes.size(), "types.gguf");
    size_t end = 0;  // where the last tensor's data ends
    for (const auto &t : whole.tensors()) end = std::max(end, whole.data_offset() + (size_t)t.offset + t.bytes);
    std::vector<size_t> cuts;
    for (size_t c = 0; c <= whole.data_offset() + 8; c++) cuts.push_back(c);
    for (size_t c = whole.data_offset() + 8; c < bytes.size(); c += 61) cuts.push_back(c);
    for (size_t c : {end - 1, end, bytes.size() - 1}) cuts.push_back(c);
    int errors = 0;
    for (size_t c : cuts) {
        const std::string cut = bytes.substr(0, c);
        if (c >= end) {
            EXPECT_NO_THROW(Gguf((const uint8_t *)cut.data(), cut.size(), "types.gguf")) << c;
            continue;
        }
        try {
            Gguf g((const uint8_t *)cut.data(), cut.size(), "types.gguf");
            ADD_FAILURE() << "cut at " << c << " parsed";
        } catch (const Error &e) {
            const std::string msg = e.what();
            EXPECT_EQ(msg.rfind("types.gguf: ", 0), 0u) << msg;
            EXPECT_TRUE(msg.find("truncated") != std::string::npos || msg.find("past the end") != std::string::npos)
                << "cut at " << c << ": " << msg;
            errors++;
        }
    }
    EXPECT_GT(errors, 2000);
}

TEST_F(GgufFixture, HeaderCounts) {
    std::string f = bytes;
    put(f, 16, uint64_t(1) << 62, 8);
    expect_error(f, {"kv_count 4611686018427387904"});
    f = bytes;
    put(f, 8, uint64_t(1) << 62, 8);
    expect_error(f, {"tensor_count 4611686018427387904"});
    f = bytes;
    put(f, 8, get(f, 8, 8) + 1, 8);  // one tensor more than the file holds
    expect_error(f, {"tensor "});
}

TEST_F(GgufFixture, Strings) {
    std::string f = bytes;
    put(f, 24, uint64_t(1) << 40, 8);  // the first key's length
    expect_error(f, {"metadata key 0", "1099511627776", "past the end"});
    f = bytes;
    put(f, 24, 0, 8);
    expect_error(f, {"metadata key 0 is empty"});
    f = bytes;
    put(f, after(f, "test.string") + 4, 1000000000, 8);
    expect_error(f, {"'test.string'", "1000000000", "past the end"});
    f = bytes;
    put(f, after(f, "t.Q4_K") - 6 - 8, uint64_t(1) << 40, 8);  // the tensor's name length
    expect_error(f, {"tensor ", "name", "past the end"});
}

TEST_F(GgufFixture, Values) {
    std::string f = bytes;
    const size_t arr = after(f, "test.array.i32");
    put(f, arr + 8, uint64_t(1) << 40, 8);
    expect_error(f, {"'test.array.i32'", "1099511627776", "past the end"});
    f = bytes;
    put(f, arr + 4, 99, 4);
    expect_error(f, {"'test.array.i32'", "element type 99"});
    f = bytes;
    put(f, after(f, "test.u8"), 99, 4);
    expect_error(f, {"'test.u8'", "unknown value type 99"});
    f = bytes;
    put(f, after(f, "test.u8"), 9, 4);  // an ARRAY whose element type is the byte 200 and what follows
    expect_error(f, {"'test.u8'"});
    f = bytes;
    put(f, after(f, "test.i8") - 2, 'u', 1);  // test.i8 -> test.u8
    expect_error(f, {"duplicate metadata key 'test.u8'"});
}

TEST_F(GgufFixture, Alignment) {
    std::string f = bytes;
    const size_t a = after(f, "general.alignment") + 4;
    put(f, a, 0, 4);
    expect_error(f, {"'general.alignment'", "is 0, not a power of two"});
    put(f, a, 3, 4);
    expect_error(f, {"'general.alignment'", "is 3, not a power of two"});
    put(f, a - 4, 5, 4);  // INT32 64
    put(f, a, 64, 4);
    expect_error(f, {"'general.alignment'", "must be UINT32, not INT32"});
    // Alignment 32: the offsets (multiples of 64) are aligned to it too.
    f = bytes;
    put(f, a, 32, 4);
    const Gguf g((const uint8_t *)f.data(), f.size(), "types.gguf");
    EXPECT_EQ(g.alignment(), 32u);
}

TEST_F(GgufFixture, TensorInfos) {
    // t.Q8_0: name, n_dims (2), ne[0] (512), ne[1] (3), type (8), offset.
    const size_t q8 = after(bytes, "t.Q8_0");
    ASSERT_EQ(get(bytes, q8, 4), 2u);
    ASSERT_EQ(get(bytes, q8 + 4, 8), 512u);
    ASSERT_EQ(get(bytes, q8 + 20, 4), 8u);
    std::string f = bytes;
    put(f, q8 + 20, 77, 4);
    expect_error(f, {"'t.Q8_0'", "unknown ggml type 77"});
    put(f, q8 + 20, 4, 4);  // Q4_2, removed from ggml
    expect_error(f, {"'t.Q8_0'", "unknown ggml type 4"});
    f = bytes;
    put(f, q8, 0, 4);
    expect_error(f, {"'t.Q8_0'", "n_dims 0"});
    put(f, q8, 5, 4);
    expect_error(f, {"'t.Q8_0'", "n_dims 5"});
    f = bytes;
    put(f, q8 + 12, 0, 8);
    expect_error(f, {"'t.Q8_0'", "ne[1] is 0"});
    f = bytes;
    put(f, q8 + 4, 48, 8);
    expect_error(f, {"'t.Q8_0'", "ne[0] = 48", "block size 32"});
    f = bytes;
    put(f, q8 + 4, uint64_t(1) << 40, 8);
    put(f, q8 + 12, uint64_t(1) << 40, 8);
    expect_error(f, {"'t.Q8_0'", "overflow"});
    f = bytes;
    put(f, q8 + 4, uint64_t(1) << 63, 8);
    expect_error(f, {"'t.Q8_0'", "overflow"});
    f = bytes;
    const uint64_t off = get(bytes, q8 + 24, 8);
    put(f, q8 + 24, off + 1, 8);
    expect_error(f, {"'t.Q8_0'", "offset", "not a multiple of the alignment 64"});
    put(f, q8 + 24, off + 32, 8);
    expect_error(f, {"'t.Q8_0'", "not a multiple of the alignment 64"});
    put(f, q8 + 24, uint64_t(1) << 40, 8);
    expect_error(f, {"'t.Q8_0'", "offset 1099511627776", "past the end of the file (" + std::to_string(f.size())});
    put(f, q8 + 24, ~uint64_t(63), 8);  // near 2^64: offset + bytes must not wrap around
    expect_error(f, {"'t.Q8_0'", "past the end of the file"});
    // A bigger tensor running into the next one, and two at one offset.
    f = bytes;
    put(f, q8 + 12, 4, 8);
    expect_error(f, {"'t.Q8_0'", "overlap"});
    f = bytes;
    const size_t q41 = after(f, "t.Q4_1");
    put(f, q41 + 24, get(f, after(f, "t.Q4_0") + 24, 8), 8);
    expect_error(f, {"'t.Q4_0'", "'t.Q4_1'", "overlap"});
    f = bytes;
    put(f, q41 - 1, '0', 1);  // t.Q4_1 -> t.Q4_0
    expect_error(f, {"duplicate tensor name 't.Q4_0'"});
}

TEST_F(GgufFixture, DataSectionPastTheEnd) {
    // Only the header, padded: every tensor is past the end.
    const Gguf whole((const uint8_t *)bytes.data(), bytes.size(), "types.gguf");
    const std::string f = bytes.substr(0, whole.data_offset());
    expect_error(f, {"tensor 't.F32'", "offset 0 + 6144 bytes is past the end of the file (" + std::to_string(f.size())});
}

namespace {
// A file of one key holding arrays nested `depth` deep (the innermost an
// empty UINT8 array).
std::string nested_file(int depth) {
    std::string f = "GGUF" + le(3, 4) + le(0, 8) + le(1, 8) + le(4, 8) + "deep" + le(9, 4);
    for (int k = 1; k < depth; k++) f += le(9, 4) + le(1, 8);
    return f + le(0, 4) + le(0, 8);
}
}  // namespace

TEST(Gguf, NestingIsBounded) {
    for (int depth = 1; depth <= 8; depth++) {
        const std::string f = nested_file(depth);
        const Gguf g((const uint8_t *)f.data(), f.size(), "types.gguf");
        const GgufValue *v = g.find("deep");
        ASSERT_TRUE(v);
        for (int k = 1; k < depth; k++) v = &v->array.at(0);
        EXPECT_EQ(v->elem_type, GgufType::UINT8);
    }
    expect_error(nested_file(9), {"'deep'", "nested more than 8 deep"});
    expect_error(nested_file(100000), {"'deep'", "nested"});
}

TEST(Gguf, ArrayElementsAreBounded) {
    // 2^24 + 1 one-byte elements, all present: refused for their number
    // (each would take a GgufValue), before anything is allocated for them.
    const uint64_t n = (uint64_t(1) << 24) + 1;
    std::string f = "GGUF" + le(3, 4) + le(0, 8) + le(1, 8) + le(3, 8) + "big" + le(9, 4) + le(0, 4) + le(n, 8);
    f.append((size_t)n, '\x01');
    expect_error(f, {"'big'", "16777217", "16777216 elements in all"});
}

TEST_F(GgufFixture, EveryHeaderByteBrokenIsParsedOrRefused) {
    // Each header byte set to 0xFF, then to 0x00: an Error or a valid
    // index, never a crash (ASan/UBSan builds catch wild reads).
    const Gguf whole((const uint8_t *)bytes.data(), bytes.size(), "types.gguf");
    int refused = 0;
    for (size_t k = 0; k < whole.data_offset(); k++) {
        for (char c : {'\xff', '\x00'}) {
            std::string f = bytes;
            f[k] = c;
            try {
                Gguf g((const uint8_t *)f.data(), f.size(), "types.gguf");
                for (const auto &t : g.tensors()) {
                    ASSERT_LE((size_t)(t.data - (const uint8_t *)f.data()) + t.bytes, f.size());
                }
            } catch (const Error &) {
                refused++;
            }
        }
    }
    EXPECT_GT(refused, 100);
}
