// GGUF files as models (runtime/src/model/hf/gguf_files.cpp): a file
// written the way llama.cpp's converter writes it (tests/make_gguf_models.py,
// numpy only) loads as the Hugging Face checkpoint it came from. The float32
// Llama file must give the directory's logits (its Q and K rows un-permuted,
// grouped-query heads, linear rope scaling, its own head); the quantized
// Qwen3 mix (Q8_0, Q4_0, Q4_1, Q5_1, F32) must give the logits of a
// directory holding numpy's dequantization of the same bytes, and stay near
// the float32 model's; greedy decoding with the KV cache agrees with
// recomputation. Bad files are errors that name what is wrong.
#include "halformer/error.h"
#include "halformer/model.h"

#include "test_files.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iterator>

#include <unistd.h>

using namespace halformer;
using namespace std::string_literals;

namespace {

std::string gguf(const std::string &name) { return std::string(HALFORMER_FIXTURES) + "/gguf/" + name; }
std::string hf(const std::string &name) { return std::string(HALFORMER_FIXTURES) + "/hf/" + name; }

// Three prompts of different lengths (the batch is padded and masked).
std::vector<Sequence> prompts(int vocab) {
    std::vector<Sequence> p(3);
    for (int t = 0; t < 11; t++) p[0].push_back((3 + t * 7) % vocab);
    for (int t = 0; t < 5; t++) p[1].push_back((1 + t * 13) % vocab);
    for (int t = 0; t < 17; t++) p[2].push_back((5 + t * 3) % vocab);
    return p;
}

// max |a - b| / max |b| over all sequences' logits.
double rel_diff(const std::vector<Tensor> &a, const std::vector<Tensor> &b) {
    double num = 0, den = 0;
    for (size_t s = 0; s < a.size(); s++) {
        EXPECT_EQ(a[s].shape, b[s].shape);
        for (size_t k = 0; k < a[s].data.size() && k < b[s].data.size(); k++) {
            num = std::max(num, (double)std::fabs(a[s].data[k] - b[s].data[k]));
            den = std::max(den, (double)std::fabs(b[s].data[k]));
        }
    }
    return num / std::max(den, 1e-30);
}

// A file of this process's own in the temporary directory (ctest runs the
// suite once per x86 variant, side by side).
std::string temp_file(const std::string &name) {
    return testing::TempDir() + "halformer_gguf_" + std::to_string(getpid()) + "_" + name;
}

std::string error_of(const std::string &path) {
    try {
        Model::load(path);
    } catch (const Error &e) {
        return e.what();
    }
    return "";
}

// The fixture's bytes with `from` replaced by `to` (same length), as a new file.
std::string edited(const std::string &name, const std::string &from, const std::string &to) {
    std::ifstream in(gguf(name), std::ios::binary);
    std::string bytes((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
    const size_t at = bytes.find(from);
    EXPECT_NE(at, std::string::npos) << from;
    EXPECT_EQ(from.size(), to.size());
    if (at != std::string::npos) bytes.replace(at, from.size(), to);
    const std::string out = temp_file("edited_" + name);
    std::ofstream(out, std::ios::binary) << bytes;
    return out;
}

}  // namespace

TEST(GgufModels, LlamaFloat32EqualsItsDirectory) {
    Model g = Model::load(gguf("llama_gqa.f32.gguf"));
    Model d = Model::load(hf("llama_gqa"));
    const Config &c = g.config();
    EXPECT_EQ(c.family, "llama");
    EXPECT_EQ(c.kv_heads(), d.config().kv_heads());
    EXPECT_EQ(c.num_heads, 6);
    EXPECT_FALSE(g.tied_head());
    EXPECT_EQ(c.rope_scaling.kind, Config::RopeScaling::Kind::Linear);
    EXPECT_FLOAT_EQ(c.rope_scaling.factor, 2.0f);
    const auto p = prompts(c.tgt_vocab_size);
    EXPECT_LE(rel_diff(g.logits(p), d.logits(p)), 1e-5);
}

TEST(GgufModels, QuantizedMixEqualsItsDequantization) {
    Model g = Model::load(gguf("qwen3.mixed.gguf"));
    Model d = Model::load(gguf("qwen3.mixed.dequant"));
    Model f32 = Model::load(hf("qwen3"));
    EXPECT_EQ(g.config().family, "qwen3");
    EXPECT_EQ(g.config().d_kv, 16) << "qwen3.attention.key_length: head_dim";
    EXPECT_TRUE(g.tied_head());
    const auto p = prompts(g.config().tgt_vocab_size);
    // A file of block types runs as int8 (Q8_0 as it is, Q5_1 requantized
    // per 32; Q4_0 and Q4_1 4-bit), near its own float32 values.
    EXPECT_EQ(g.precision(), Precision::INT8) << "a file of quantized weights runs as int8";
    const auto int8 = g.logits(p);
    g.set_precision(Precision::FP32);
    const auto lg = g.logits(p);
    EXPECT_LE(rel_diff(lg, d.logits(p)), 1e-5) << "the reader's dequantization against numpy's";
    const double to_f32 = rel_diff(int8, lg);
    EXPECT_GT(to_f32, 1e-6) << "int8 products should not give the float32 logits";
    EXPECT_LE(to_f32, 0.05) << "the blocks as Q8_0 (and the activations' blocks) against the file's values";
    // 4- and 8-bit weights move the logits, but not far.
    const double q = rel_diff(lg, f32.logits(p));
    EXPECT_GT(q, 1e-4) << "quantized weights should not give the float32 logits";
    EXPECT_LE(q, 0.5) << "(a tiny random model: the largest logit's error against the largest logit)";
}

// A file of Q8_0 weights runs as it is: int8 by default, its projections
// packed from the file's codes (the query and key rows found where
// llama.cpp's converter permuted them), their float32 values made only
// when another precision asks for them. Against the same file in float32
// (the reader's dequantization, tested above) int8 moves the logits a little
// (the activations' blocks), as it does the directory's own int8; rows read
// in the wrong order would move them by their whole size.
TEST(GgufModels, Q8_0FileRunsInt8FromItsCodes) {
    Model g = Model::load(gguf("llama3_mqa.q8_0.gguf"));
    EXPECT_EQ(g.precision(), Precision::INT8) << "a Q8_0 file runs as int8";
    Model d = Model::load(hf("llama3_mqa"));
    const auto p = prompts(g.config().tgt_vocab_size);
    const auto int8 = g.logits(p);
    d.set_precision(Precision::INT8);
    const auto d_int8 = d.logits(p);
    g.set_precision(Precision::FP32);  // the deferred float32 values made now
    const auto f32 = g.logits(p);
    d.set_precision(Precision::FP32);
    const auto d_f32 = d.logits(p);
    const double to_f32 = rel_diff(int8, f32);
    EXPECT_GT(to_f32, 1e-6) << "int8 products should not give the float32 logits";
    EXPECT_LE(to_f32, 0.05);
    EXPECT_LE(rel_diff(f32, d_f32), 0.05) << "Q8_0 weights against the float32 ones";
    EXPECT_LE(rel_diff(int8, d_int8), 0.05) << "the file's codes against the directory quantized at load";
    // Back to int8: packed from the codes again, the same bits.
    g.set_precision(Precision::INT8);
    const auto again = g.logits(p);
    for (size_t s = 0; s < int8.size(); s++) EXPECT_EQ(again[s].data, int8[s].data) << "sequence " << s;
}

// A file of Q4_0 weights runs them 4-bit (the q4 kernels): its logits are
// bit for bit those of the same blocks taken through int8 as Q8_0's
// (HALFORMER_Q4=0: codes q − 8, the same steps; the same exact sums), near
// its own float32 values; the query and key rows found where llama.cpp's
// converter permuted them (read in the wrong order they would move the
// logits by their whole size).
TEST(GgufModels, Q4_0FileRunsFourBitAsInt8Would) {
    Model g = Model::load(gguf("llama3_mqa.q4_0.gguf"));
    EXPECT_EQ(g.precision(), Precision::INT8);
    const auto p = prompts(g.config().tgt_vocab_size);
    const auto q4 = g.logits(p);
    setenv("HALFORMER_Q4", "0", 1);
    Model t = Model::load(gguf("llama3_mqa.q4_0.gguf"));
    const auto through_int8 = t.logits(p);
    unsetenv("HALFORMER_Q4");
    for (size_t s = 0; s < q4.size(); s++) EXPECT_EQ(q4[s].data, through_int8[s].data) << "sequence " << s;
    g.set_precision(Precision::FP32);
    const double to_f32 = rel_diff(q4, g.logits(p));
    EXPECT_GT(to_f32, 1e-6) << "int8 activations should move the logits";
    EXPECT_LE(to_f32, 0.05);
    // Back to int8: packed 4-bit again, the same bits.
    g.set_precision(Precision::INT8);
    const auto again = g.logits(p);
    for (size_t s = 0; s < q4.size(); s++) EXPECT_EQ(again[s].data, q4[s].data) << "sequence " << s;
}

// A file of Q4_K weights runs them 4-bit too (the q4_1 kernels: each
// sub-block of 32 as Q4_1's step and minimum, transcode_row_q4_1), in
// 20 bytes a block (int8 through Q8_0's blocks takes 34 and colsums), near
// the file's own float32 values and near the int8 path (HALFORMER_Q4=0,
// Q4_K requantized per 32). The codes or minimums misread would move the
// logits by their whole size.
TEST(GgufModels, Q4_KFileRunsFourBitWithMinimums) {
    Model g = Model::load(gguf("llama_wide.q4_k.gguf"));
    EXPECT_EQ(g.precision(), Precision::INT8);
    const auto p = prompts(g.config().tgt_vocab_size);
    const auto q4 = g.logits(p);
    const int64_t q4_bytes = g.packed_weight_bytes();
    setenv("HALFORMER_Q4", "0", 1);
    Model t = Model::load(gguf("llama_wide.q4_k.gguf"));
    const auto through_int8 = t.logits(p);
    const int64_t int8_bytes = t.packed_weight_bytes();
    unsetenv("HALFORMER_Q4");
    // The projections' rows (q, k, v, o, gate, up, down), the tied head's and the embedding table's
    // (kept as the blocks: no float32 table), 256 wide.
    const double weights = 256.0 * (256 + 64 + 64 + 256 + 3 * 256 + 300 + 300);
    EXPECT_LE(q4_bytes, weights * 20 / 32 * 1.2) << "4 bits and two fp16 values per 32 (rows padded to 48s)";
    EXPECT_GE(int8_bytes, weights * 38 / 32) << "int8: a byte, a float32 step and an int16 sum per 32";
    g.set_precision(Precision::FP32);
    const auto f32 = g.logits(p);
    const double to_f32 = rel_diff(q4, f32), int8_to_f32 = rel_diff(through_int8, f32);
    EXPECT_GT(to_f32, 1e-6) << "int8 activations should move the logits";
    EXPECT_LE(to_f32, 0.05);
    EXPECT_LE(to_f32, 2 * int8_to_f32) << "no further from float32 than Q4_K requantized to Q8_0";
    EXPECT_LE(rel_diff(q4, through_int8), 0.05);
    g.set_precision(Precision::INT8);
    const auto again = g.logits(p);
    for (size_t s = 0; s < q4.size(); s++) EXPECT_EQ(again[s].data, q4[s].data) << "sequence " << s;
}

TEST(GgufModels, GreedyDecodingMatchesRecomputation) {
    Model m = Model::load(gguf("qwen3.mixed.gguf"));
    Sequence prompt = prompts(m.config().tgt_vocab_size)[0];
    GenerateOptions o;
    o.max_new_tokens = 12;
    o.stop_at_eos = false;
    auto out = m.generate({prompt}, o)[0][0].tokens;
    ASSERT_EQ(out.size(), 12u);
    Sequence full = prompt;
    full.insert(full.end(), out.begin(), out.end() - 1);
    auto lg = m.logits({full});
    const int V = (int)lg[0].shape[1];
    for (size_t k = 0; k < out.size(); k++) {
        const float *row = &lg[0].data[(prompt.size() - 1 + k) * V];
        EXPECT_EQ(out[k], (int32_t)(std::max_element(row, row + V) - row)) << "step " << k;
    }
}

TEST(GgufModels, BadFilesNameTheProblem) {
    // An architecture without a family.
    EXPECT_NE(error_of(edited("qwen3.mixed.gguf", "\x05\0\0\0\0\0\0\0qwen3"s, "\x05\0\0\0\0\0\0\0qwen9"s))
                  .find("general.architecture \"qwen9\" is not supported"),
              std::string::npos);
    // A tensor renamed: the one missing by its GGUF name, the one no
    // transformers name maps to among those the model does not read.
    const std::string renamed = edited("llama_gqa.f32.gguf", "blk.1.ffn_up.weight", "blk.1.ffn_xx.weight");
    const std::string missing = error_of(renamed);
    EXPECT_NE(missing.find("missing tensor 'blk.1.ffn_up.weight'"), std::string::npos) << missing;
    // (output.weight renamed: the head is tied, and the renamed tensor unread.)
    const std::string extra =
        edited("llama_gqa.f32.gguf", "\x0d\0\0\0\0\0\0\0output.weight"s, "\x0d\0\0\0\0\0\0\0outpux.weight"s);
    EXPECT_NE(error_of(extra).find("does not use: 'outpux.weight'"), std::string::npos) << error_of(extra);
    // A missing key the config needs names it.
    const std::string nokey = error_of(edited("llama_gqa.f32.gguf", "llama.attention.head_count\x04",
                                              "llama.attention.head_xxxxx\x04"));
    EXPECT_NE(nokey.find("llama.attention.head_count"), std::string::npos) << nokey;
    // Not a GGUF file, not a directory.
    const std::string plain = temp_file("not_a_model.bin");
    std::ofstream(plain) << "hello";
    EXPECT_NE(error_of(plain).find("nor a GGUF file"), std::string::npos) << error_of(plain);
    // A truncated file: the reader's error, naming the file.
    std::ifstream in(gguf("qwen3.mixed.gguf"), std::ios::binary);
    std::string bytes((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
    const std::string cut = temp_file("cut.gguf");
    std::ofstream(cut, std::ios::binary) << bytes.substr(0, bytes.size() / 2);
    EXPECT_NE(error_of(cut).find("cut.gguf"), std::string::npos) << error_of(cut);
    for (const std::string &f : {renamed, extra, plain, cut}) std::remove(f.c_str());
    std::remove(temp_file("edited_qwen3.mixed.gguf").c_str());
}

// A GGUF file's tokenizer (tokenizer.ggml.*: byte-level BPE as llama.cpp
// stores Qwen2's and Llama 3's) encodes and decodes as the directory's
// tokenizer.json does, special tokens, NFC (Qwen2) and the bos Llama 3 puts
// first included; the chat template renders the same prompt; the models'
// logits agree (Qwen2 in float32; Llama 3 in bfloat16, its Q/K weights and
// biases un-permuted and its rope scaling read off rope_freqs.weight).
TEST(GgufModels, TokenizerChatAndLogitsAsTheDirectory) {
    const std::vector<std::string> texts = {
        "hello world",         "Hello, World! 12345 and 1234567",   "caf\u00e9 cafe\u0301 na\u00efve",
        "  spaces\tand\nlines\n\n", "<|im_start|>user\nhi<|im_end|>", "<|begin_of_text|>x<|eot_id|>", "\u4f60\u597d \U0001f600",
    };
    for (auto [file, dir] : {std::pair{"qwen2.f32.gguf", "qwen2"}, std::pair{"llama3_mqa.bf16.gguf", "llama3_mqa"}}) {
        Model g = Model::load(gguf(file));
        Model d = Model::load(hf(dir));
        ASSERT_TRUE(g.has_tokenizer()) << file;
        for (const std::string &t : texts) {
            EXPECT_EQ(g.tokenizer().encode(t), d.tokenizer().encode(t)) << file << ": " << t;
            EXPECT_EQ(g.tokenizer().encode_input(t), d.tokenizer().encode_input(t)) << file << ": " << t;
            const Sequence ids = d.tokenizer().encode_input(t);
            EXPECT_EQ(g.tokenizer().decode(ids), d.tokenizer().decode(ids)) << file << ": " << t;
        }
        ASSERT_TRUE(g.has_chat_template()) << file;
        const std::vector<ChatMessage> chat = {{"system", "be brief"}, {"user", "hi"}, {"assistant", "hello"},
                                               {"user", "and you?"}};
        EXPECT_EQ(g.chat_prompt(chat), d.chat_prompt(chat)) << file;
        const auto p = prompts(g.config().tgt_vocab_size);
        EXPECT_LE(rel_diff(g.logits(p), d.logits(p)), 1e-5) << file;
    }
    EXPECT_EQ(Model::load(gguf("llama3_mqa.bf16.gguf")).config().rope_scaling.kind, Config::RopeScaling::Kind::Llama3);
}
