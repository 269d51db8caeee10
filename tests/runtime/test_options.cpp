// The generation options' schema (halformer/options.h) against what reads
// it: generate() refuses each option's first value outside its range with
// a message naming it and takes its bounds; the batch key tells two option
// sets apart exactly where generate() cannot run them in one batch.
#include "halformer/options.h"
#include "halformer/model.h"
#include "test_files.h"

#include <gtest/gtest.h>

#include <cmath>
#include <set>

using namespace halformer;

namespace {

Model small_decoder() {
    Config c;
    c.architecture = Architecture::Decoder;
    c.d_model = 32;
    c.num_heads = 2;
    c.d_ff = 64;
    c.num_encoder_layers = 0;
    c.num_decoder_layers = 1;
    c.src_vocab_size = 0;
    c.tgt_vocab_size = 50;
    c.max_positions = 64;
    c.eos_id = 2;
    return Model::random(c, 3, test_files::test_device());
}

// A value of this option other than its default, inside its range.
double other_value(const OptionSpec &s) {
    const double d = s.default_value();
    switch (s.type) {
    case OptionType::Bool: return d == 0 ? 1 : 0;
    case OptionType::Seed: return d + 12345;
    case OptionType::Int: return d + 1 <= s.hi ? (d + 1 < s.lo ? s.lo : d + 1) : d - 1;
    case OptionType::Float: return std::isinf(s.hi) ? d + 0.5 : (s.lo + s.hi) / 2;
    }
    return d;
}

TEST(Options, TheSchemaIsConsistent) {
    std::set<std::string> names;
    for (const OptionSpec &s : generate_option_specs()) {
        SCOPED_TRACE(s.name);
        EXPECT_TRUE(names.insert(s.name).second) << "listed twice";
        EXPECT_EQ(find_generate_option(s.name), &s);
        const int members = (s.i != nullptr) + (s.f != nullptr) + (s.b != nullptr) + (s.u != nullptr);
        EXPECT_EQ(members, 1);
        // Defaults are values the option takes (max_new_tokens' -1: "as the
        // positions allow").
        if (std::string(s.name) != "max_new_tokens") EXPECT_EQ(s.check(s.default_value()), "");
        EXPECT_EQ(s.check(other_value(s)), "");
        GenerateOptions o;
        s.set(o, other_value(s));
        EXPECT_EQ(s.get(o), other_value(s));
    }
    EXPECT_EQ(find_generate_option("beem"), nullptr);
    EXPECT_NE(find_generate_option("temperature")->check(0), "");
    EXPECT_EQ(find_generate_option("temperature")->check(0), "must be positive");
    EXPECT_EQ(find_generate_option("top_p")->check(1.5), "must be in (0, 1]");
    EXPECT_EQ(find_generate_option("beam")->check(2.5), "must be an integer");
    EXPECT_EQ(find_generate_option("length_penalty")->check(NAN), "must be finite");
    // NaN is out of a bounded range, and says which; infinity is never a value.
    EXPECT_EQ(find_generate_option("top_p")->check(NAN), "must be in (0, 1]");
    EXPECT_EQ(find_generate_option("temperature")->check(NAN), "must be positive");
    EXPECT_EQ(find_generate_option("temperature")->check(INFINITY), "must be finite");
}

// A per-input Sampling (GenerateOptions::sampling_each) is held to the same
// ranges as the options themselves: top_k's upper end included.
TEST(Options, PerInputSamplingFollowsTheSchema) {
    Model m = small_decoder();
    GenerateOptions o;
    o.max_new_tokens = 2;
    const std::vector<Sequence> src = {{1, 2, 3}, {4, 5}};
    Sampling ok;
    ok.sample = true;
    o.sampling_each = {ok, ok};
    EXPECT_NO_THROW(m.generate(src, o));
    const double top = find_generate_option("top_k")->hi;
    o.sampling_each[1].top_k = (int)top + 1;
    try {
        m.generate(src, o);
        ADD_FAILURE() << "a top_k past the schema's range was taken";
    } catch (const Error &e) {
        EXPECT_NE(std::string(e.what()).find("top_k of input 1 must be in [0, 1048576], not 1048577"), std::string::npos) << e.what();
    }
}

// Two option sets that differ in one option: the same batch key exactly
// when generate() runs them in one batch (per input, or per input without
// beams); stop_ids are batch-wide too.
TEST(Options, TheBatchKeySeparatesWhatCannotShareABatch) {
    for (int beam : {1, 3}) {
        for (const OptionSpec &s : generate_option_specs()) {
            if (std::string(s.name) == "beam") continue;
            SCOPED_TRACE(std::string(s.name) + " beam " + std::to_string(beam));
            GenerateOptions a, b;
            a.beam = b.beam = beam;
            s.set(b, other_value(s));
            const bool shared = s.sharing == Sharing::PerInput || (s.sharing == Sharing::PerInputWithoutBeams && beam == 1);
            EXPECT_EQ(batch_key(a) == batch_key(b), shared);
        }
    }
    GenerateOptions a, b;
    b.beam = 2;
    EXPECT_NE(batch_key(a), batch_key(b));
    b = a;
    b.stop_ids = {7};
    EXPECT_NE(batch_key(a), batch_key(b));
    // Float values apart in their last bits are apart in the key.
    b = a;
    b.beam = a.beam = 2;
    b.length_penalty = std::nextafter(a.length_penalty, 1.0f);
    EXPECT_NE(batch_key(a), batch_key(b));
}

// generate() refuses the first value past each end of each option's range,
// naming the option, and takes the bounds themselves.
TEST(Options, GenerateRefusesValuesOutOfTheSchemasRange) {
    Model m = small_decoder();
    auto fails = [&](const OptionSpec &s, double v) {
        GenerateOptions o;
        o.max_new_tokens = 3;
        s.set(o, v);
        try {
            m.generate({{5, 6}}, o);
            return std::string();
        } catch (const Error &e) {
            return std::string(e.what());
        }
    };
    int checked = 0;
    for (const OptionSpec &s : generate_option_specs()) {
        if (s.type == OptionType::Bool || s.type == OptionType::Seed) continue;
        SCOPED_TRACE(s.name);
        const bool is_int = s.type == OptionType::Int;
        if (!std::isinf(s.lo)) {
            const double below = s.lo_open ? s.lo : s.lo - (is_int ? 1 : 1e-3);
            const std::string e = fails(s, below);
            EXPECT_NE(e.find(std::string("generate: ") + s.name), std::string::npos) << e;
            checked++;
        }
        if (!std::isinf(s.hi)) {
            const double above = is_int ? s.hi + 1 : s.hi + 1e-3;
            const std::string e = fails(s, above);
            EXPECT_NE(e.find(std::string("generate: ") + s.name), std::string::npos) << e;
            checked++;
        }
        if (std::isinf(s.lo) || std::isinf(s.hi)) {
            EXPECT_NE(fails(s, NAN).find(s.name), std::string::npos);
            EXPECT_NE(fails(s, INFINITY).find(s.name), std::string::npos);
        }
    }
    EXPECT_GE(checked, 15);
    // Bounds are taken: beam 7 (n_best 1), top_p 1, top_k and
    // no_repeat_ngram_size at their largest.
    GenerateOptions o;
    o.max_new_tokens = 3;
    o.beam = 7;
    EXPECT_NO_THROW(m.generate({{5, 6}}, o));
    o = GenerateOptions{};
    o.max_new_tokens = 3;
    o.sample = true;
    o.top_p = 1;
    o.top_k = 1 << 20;
    o.no_repeat_ngram_size = 64;
    EXPECT_NO_THROW(m.generate({{5, 6}}, o));
}

// Without max_new_tokens each input gets default_new_tokens for its own
// lengths, batched or alone: an encoder-decoder 2 × its source + 10, a
// decoder-only model what its positions allow (at most 256).
TEST(Options, TheDefaultNewTokenLimitIsEachInputsOwn) {
    for (Architecture arch : {Architecture::EncoderDecoder, Architecture::Decoder}) {
        const bool ed = arch == Architecture::EncoderDecoder;
        Config c;
        c.architecture = arch;
        c.d_model = 32;
        c.num_heads = 2;
        c.d_ff = 64;
        c.num_encoder_layers = ed ? 1 : 0;
        c.num_decoder_layers = 1;
        c.src_vocab_size = ed ? 40 : 0;
        c.tgt_vocab_size = 50;
        c.max_positions = 64;
        c.eos_id = 2;
        Model m = Model::random(c, 4, test_files::test_device());
        const std::vector<Sequence> src = {{5, 6}, Sequence(20, 7), {8, 9, 10, 11}};
        GenerateOptions o;
        o.stop_at_eos = false;  // random weights: run to each limit
        const auto batched = m.generate(src, o);
        for (size_t b = 0; b < src.size(); b++) {
            const int S = (int)src[b].size();
            const int expected = ed ? default_new_tokens(c, S, 1) : default_new_tokens(c, 0, S);
            EXPECT_EQ(expected, ed ? std::min(2 * S + 10, 64) : 64 - S + 1) << "input " << b;
            EXPECT_EQ((int)batched[b][0].tokens.size(), expected) << "input " << b << " in the batch";
            EXPECT_EQ((int)m.generate({src[b]}, o)[0][0].tokens.size(), expected) << "input " << b << " alone";
        }
    }
    Config big;
    EXPECT_EQ(default_new_tokens(big, 500, 1), 256);  // the paper's base model: at most 256
}

}  // namespace
