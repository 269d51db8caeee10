// The training data pipeline: token-id file parsing (and every malformed-line
// Error), the token-budget batcher (budget, exactly-once, determinism, seek,
// bounded memory), sharding and the synthetic tasks.
#include "halformer/train_data.h"

#include <gtest/gtest.h>

#include <unistd.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <map>
#include <random>

using namespace halformer;
namespace fs = std::filesystem;

namespace {

// A scratch directory per test, removed afterwards.
class TempDir : public testing::Test {
protected:
    void SetUp() override {
        dir = (fs::temp_directory_path() /
               ("halformer_data_" + std::to_string(::getpid()) + "_" +
                testing::UnitTest::GetInstance()->current_test_info()->name()))
                  .string();
        // Parameterized names hold '/': keep one directory level.
        std::replace(dir.begin() + fs::temp_directory_path().string().size() + 1, dir.end(), '/', '_');
        fs::remove_all(dir);
        fs::create_directories(dir);
    }
    void TearDown() override { fs::remove_all(dir); }
    std::string file(const std::string &name, const std::string &bytes) {
        std::string path = dir + "/" + name;
        std::ofstream(path, std::ios::binary | std::ios::trunc) << bytes;
        return path;
    }
    std::string dir;
};

std::vector<Example> read_all(ExampleSource &source) {
    std::vector<Example> out;
    for (Example ex; source.next(ex);) out.push_back(ex);
    return out;
}

// An in-memory source; examples carry unique line numbers so that tests can
// tell them apart.
class VectorSource : public ExampleSource {
public:
    explicit VectorSource(std::vector<Example> examples) : examples_(std::move(examples)) {}
    bool next(Example &out) override {
        if (pos_ == examples_.size()) return false;
        out = examples_[pos_++];
        return true;
    }
    void rewind() override { pos_ = 0; }

private:
    std::vector<Example> examples_;
    size_t pos_ = 0;
};

// n examples with src and tgt lengths uniform in [1, max_len]; line = index + 1.
// mt19937_64 is fully specified by the standard; the modulo is ours.
std::vector<Example> random_examples(int n, int max_len, uint64_t seed) {
    std::mt19937_64 rng(seed);
    std::vector<Example> out(n);
    for (int i = 0; i < n; ++i) {
        out[i].src.resize(1 + rng() % max_len);
        out[i].tgt.resize(1 + rng() % max_len);
        for (int32_t &id : out[i].src) id = int32_t(rng() % 1000);
        for (int32_t &id : out[i].tgt) id = int32_t(rng() % 1000);
        out[i].line = i + 1;
    }
    return out;
}

std::unique_ptr<ExampleSource> vector_source(std::vector<Example> examples) {
    return std::make_unique<VectorSource>(std::move(examples));
}

// One epoch's batches as lists of line numbers: what determinism compares.
std::vector<std::vector<int64_t>> epoch_lines(Batcher &batcher) {
    std::vector<std::vector<int64_t>> out;
    for (Batch b; batcher.next(b);) {
        out.emplace_back();
        for (const Example &ex : b.examples) out.back().push_back(ex.line);
    }
    return out;
}

std::vector<int32_t> ids(std::initializer_list<int32_t> v) { return v; }

// ---- Parsing ----

using ReadExamples = TempDir;

TEST_F(ReadExamples, EncoderDecoder) {
    std::string path = file("ed.tsv", "# header\n5 6 7\t8 9\n\n10\t11 12 13\n0\t0");
    ExampleReader reader(path, TaskKind::EncoderDecoder, {20, 20, 8, 8});
    EXPECT_EQ(reader.path(), path);
    auto all = read_all(reader);
    ASSERT_EQ(all.size(), 3u);
    EXPECT_EQ(all[0].src, ids({5, 6, 7}));
    EXPECT_EQ(all[0].tgt, ids({8, 9}));
    EXPECT_EQ(all[0].line, 2);
    EXPECT_EQ(all[1].src, ids({10}));
    EXPECT_EQ(all[1].tgt, ids({11, 12, 13}));
    EXPECT_EQ(all[1].line, 4);
    EXPECT_EQ(all[2].src, ids({0}));  // last line without a newline
    EXPECT_EQ(all[2].line, 5);
    Example ex;
    EXPECT_FALSE(reader.next(ex));
    reader.rewind();
    ASSERT_TRUE(reader.next(ex));
    EXPECT_EQ(ex.src, ids({5, 6, 7}));
    EXPECT_EQ(ex.line, 2);
}

TEST_F(ReadExamples, DecoderOnly) {
    auto source = file_source(file("d.txt", "1 2 3\n4\n"), TaskKind::Decoder, {10, 0, 3, 0});
    auto all = read_all(*source);
    ASSERT_EQ(all.size(), 2u);
    EXPECT_EQ(all[0].src, ids({1, 2, 3}));
    EXPECT_TRUE(all[0].tgt.empty());
    EXPECT_EQ(all[1].src, ids({4}));
    EXPECT_TRUE(all[1].tgt.empty());
}

TEST_F(ReadExamples, EncoderOnlyLabels) {
    auto source = file_source(file("e.tsv", "5 6 7\t0 2 1\n9\t1\n"), TaskKind::Encoder, {10, 3, 3, 0});
    auto all = read_all(*source);
    ASSERT_EQ(all.size(), 2u);
    EXPECT_EQ(all[0].src, ids({5, 6, 7}));
    EXPECT_EQ(all[0].tgt, ids({0, 2, 1}));
    EXPECT_EQ(all[1].tgt, ids({1}));
}

TEST_F(ReadExamples, CrlfBomAndCommentsKeepLineNumbers) {
    std::string text = "\xEF\xBB\xBF" "5 6\t7\r\n\r\n# comment\t1 x\r\n#\n8\t9 10\r\n\n";
    auto all = read_all(*file_source(file("crlf.tsv", text), TaskKind::EncoderDecoder, {}));
    ASSERT_EQ(all.size(), 2u);
    EXPECT_EQ(all[0].src, ids({5, 6}));
    EXPECT_EQ(all[0].tgt, ids({7}));  // no '\r' left on the last id
    EXPECT_EQ(all[0].line, 1);
    EXPECT_EQ(all[1].src, ids({8}));
    EXPECT_EQ(all[1].tgt, ids({9, 10}));
    EXPECT_EQ(all[1].line, 5);
}

TEST_F(ReadExamples, LimitsAreInclusiveAndZeroMeansUnchecked) {
    std::string path = file("edge.tsv", "9 9 9\t4 4\n");
    EXPECT_EQ(read_all(*file_source(path, TaskKind::EncoderDecoder, {10, 5, 3, 2})).size(), 1u);
    EXPECT_THROW(read_all(*file_source(path, TaskKind::EncoderDecoder, {9, 5, 3, 2})), Error);
    EXPECT_THROW(read_all(*file_source(path, TaskKind::EncoderDecoder, {10, 5, 2, 2})), Error);
    std::string big = file("big.tsv", "2147483647\t0\n");
    EXPECT_EQ(read_all(*file_source(big, TaskKind::EncoderDecoder, {})).at(0).src, ids({2147483647}));
}

TEST_F(ReadExamples, MissingFileNamesIt) {
    try {
        ExampleReader reader(dir + "/nope.tsv", TaskKind::Decoder, {});
        ADD_FAILURE() << "opened a missing file";
    } catch (const Error &e) {
        EXPECT_NE(std::string(e.what()).find("nope.tsv"), std::string::npos) << e.what();
    }
}

// Each malformed line, placed on line 3 after a good line and a comment, is
// an Error naming the file, the line and the problem.
struct BadLine {
    const char *name;
    TaskKind kind;
    const char *text;
    const char *problem;  // expected in the message
};

void PrintTo(const BadLine &bad, std::ostream *os) { *os << bad.name; }

class MalformedLine : public TempDir, public testing::WithParamInterface<BadLine> {};

TEST_P(MalformedLine, ErrorNamesFileLineAndProblem) {
    const BadLine &bad = GetParam();
    const char *good = bad.kind == TaskKind::EncoderDecoder ? "1 2\t3\n"
                       : bad.kind == TaskKind::Decoder      ? "1 2\n"
                                                            : "1 2\t0 1\n";
    std::string path = file("bad_data.tsv", std::string(good) + "# comment\n" + bad.text + "\n4\t5\n");
    ExampleReader reader(path, bad.kind, {50, 40, 4, 3});
    Example ex;
    ASSERT_TRUE(reader.next(ex));
    EXPECT_EQ(ex.line, 1);
    try {
        reader.next(ex);
        ADD_FAILURE() << "accepted: " << bad.text;
    } catch (const Error &e) {
        std::string msg = e.what();
        EXPECT_NE(msg.find(path + ":3:"), std::string::npos) << msg;
        EXPECT_NE(msg.find(bad.problem), std::string::npos) << msg;
    }
}

const BadLine kBadLines[] = {
    {"letter", TaskKind::EncoderDecoder, "1 x 3\t4", "source token 2: \"x\" is not a non-negative decimal integer"},
    {"decimal_point", TaskKind::EncoderDecoder, "1.5\t4", "not a non-negative decimal integer"},
    {"plus_sign", TaskKind::EncoderDecoder, "+1\t4", "not a non-negative decimal integer"},
    {"hex", TaskKind::EncoderDecoder, "0x1\t4", "not a non-negative decimal integer"},
    {"fullwidth_digit", TaskKind::EncoderDecoder, "1 \xEF\xBC\x92\t4", "not a non-negative decimal integer"},
    {"lone_minus", TaskKind::EncoderDecoder, "1\t-", "target token 1"},
    {"negative", TaskKind::EncoderDecoder, "1 -2\t4", "source token 2: negative id"},
    {"negative_target", TaskKind::EncoderDecoder, "1\t-4", "target token 1: negative id"},
    {"source_vocab", TaskKind::EncoderDecoder, "1 50\t4", "id 50 >= source vocabulary size 50"},
    {"target_vocab", TaskKind::EncoderDecoder, "1\t2 40", "id 40 >= target vocabulary size 40"},
    {"int_overflow", TaskKind::EncoderDecoder, "1 99999999999999999999\t4", ">= source vocabulary size 50"},
    {"missing_tab", TaskKind::EncoderDecoder, "1 2 3 4", "missing tab between source and target"},
    {"too_many_tabs", TaskKind::EncoderDecoder, "1\t2\t3", "too many tabs (2; expected 1)"},
    {"empty_source", TaskKind::EncoderDecoder, "\t4", "empty source side"},
    {"empty_target", TaskKind::EncoderDecoder, "1\t", "empty target side"},
    {"double_space", TaskKind::EncoderDecoder, "1  2\t4", "source token 2: empty"},
    {"trailing_space", TaskKind::EncoderDecoder, "1 2 \t4", "source token 3: empty"},
    {"leading_space", TaskKind::EncoderDecoder, "1\t 4", "target token 1: empty"},
    {"source_too_long", TaskKind::EncoderDecoder, "1 2 3 4 5\t6", "source has 5 ids, more than the limit 4"},
    {"target_too_long", TaskKind::EncoderDecoder, "1\t2 3 4 5", "target has 4 ids, more than the limit 3"},
    {"decoder_tab", TaskKind::Decoder, "1 2\t3", "unexpected tab"},
    {"decoder_vocab", TaskKind::Decoder, "1 50", "id 50 >= sequence vocabulary size 50"},
    {"decoder_too_long", TaskKind::Decoder, "1 2 3 4 5", "sequence has 5 ids"},
    {"decoder_spaces_only", TaskKind::Decoder, "  ", "sequence token 1: empty"},
    {"encoder_label_count", TaskKind::Encoder, "1 2 3\t0 1", "2 labels for 3 ids"},
    {"encoder_label_range", TaskKind::Encoder, "1 2\t0 40", "label token 2: id 40 >= label count 40"},
    {"encoder_missing_tab", TaskKind::Encoder, "1 2", "missing tab between ids and labels"},
    {"encoder_empty_labels", TaskKind::Encoder, "1 2\t", "empty label side"},
};

INSTANTIATE_TEST_SUITE_P(AllCases, MalformedLine, testing::ValuesIn(kBadLines),
                         [](const testing::TestParamInfo<BadLine> &info) { return info.param.name; });

// ---- Batcher ----

using BatcherFile = TempDir;

// 200000 lines through a pool of 1000: every line comes out exactly once and
// the batcher never holds more than the pool.
TEST_F(BatcherFile, StreamsLargeFileWithBoundedPool) {
    const int n = 200000;
    std::string text;
    std::mt19937_64 rng(3);
    for (int i = 0; i < n; ++i) {
        int s = 1 + int(rng() % 20), t = 1 + int(rng() % 20);
        for (int k = 0; k < s; ++k) text += std::to_string(rng() % 100) + (k + 1 < s ? " " : "\t");
        for (int k = 0; k < t; ++k) text += std::to_string(rng() % 100) + (k + 1 < t ? " " : "\n");
    }
    std::string path = file("big.tsv", text);
    Batcher batcher(file_source(path, TaskKind::EncoderDecoder, {100, 100, 20, 20}),
                    {/*max_tokens=*/200, /*pool_examples=*/1000, /*seed=*/1});
    std::vector<char> seen(n + 1, 0);
    int64_t examples = 0;
    for (Batch b; batcher.next(b);) {
        for (const Example &ex : b.examples) {
            ASSERT_TRUE(ex.line >= 1 && ex.line <= n);
            ASSERT_EQ(seen[ex.line]++, 0) << "line " << ex.line << " twice";
            ++examples;
        }
    }
    EXPECT_EQ(examples, n);
    EXPECT_EQ(batcher.max_pool_seen(), 1000);
}

TEST_F(BatcherFile, MalformedLineSurfacesFromNext) {
    std::string path = file("bad.tsv", "1\t2\n3\t4\n5 x\t6\n");
    Batcher batcher(file_source(path, TaskKind::EncoderDecoder, {}), {});
    Batch b;
    try {
        batcher.next(b);
        ADD_FAILURE() << "no error";
    } catch (const Error &e) {
        EXPECT_NE(std::string(e.what()).find(path + ":3:"), std::string::npos) << e.what();
    }
}

bool oversized(const Example &ex, int64_t budget) {
    return int64_t(ex.src.size()) > budget || int64_t(ex.tgt.size()) + 1 > budget;
}

TEST(Batcher, EveryBatchWithinBudgetExceptOversizedSingles) {
    const int64_t budget = 256;
    auto examples = random_examples(3000, 60, 11);
    // Oversized on either side, and one exactly at the budget (fits alone).
    examples[10].src.assign(500, 7);
    examples[20].tgt.assign(300, 7);
    examples[30].src.assign(256, 7);
    examples[40].tgt.assign(255, 7);
    int expected_oversized = 2;
    Batcher batcher(vector_source(examples), {budget, 100000, 9});
    int oversized_seen = 0;
    size_t total = 0;
    for (Batch b; batcher.next(b);) {
        ASSERT_FALSE(b.examples.empty());
        total += b.examples.size();
        int64_t rows = int64_t(b.examples.size()), max_src = 0, max_tgt = 0, src_tokens = 0, tgt_tokens = 0;
        for (const Example &ex : b.examples) {
            max_src = std::max<int64_t>(max_src, ex.src.size());
            max_tgt = std::max<int64_t>(max_tgt, ex.tgt.size());
            src_tokens += ex.src.size();
            tgt_tokens += ex.tgt.size();
        }
        EXPECT_EQ(b.src_tokens, src_tokens);
        EXPECT_EQ(b.tgt_tokens, tgt_tokens);
        if (rows == 1 && oversized(b.examples[0], budget)) {
            ++oversized_seen;
            continue;
        }
        EXPECT_LE(rows * max_src, budget);
        EXPECT_LE(rows * (max_tgt + 1), budget);
    }
    EXPECT_EQ(total, examples.size());
    EXPECT_EQ(oversized_seen, expected_oversized);
}

// Sorting by length within the pool keeps padding low, and the pool's batches
// are then shuffled rather than coming shortest first.
TEST(Batcher, BatchesGroupSimilarLengthsInShuffledOrder) {
    Batcher batcher(vector_source(random_examples(5000, 60, 12)), {512, 100000, 3});
    int64_t tgt_real = 0, tgt_padded = 0, src_real = 0, src_padded = 0;
    std::vector<size_t> longest_tgt;
    for (Batch b; batcher.next(b);) {
        size_t max_src = 0, max_tgt = 0;
        for (const Example &ex : b.examples) {
            max_src = std::max(max_src, ex.src.size());
            max_tgt = std::max(max_tgt, ex.tgt.size());
        }
        tgt_real += b.tgt_tokens;
        src_real += b.src_tokens;
        tgt_padded += int64_t(b.examples.size() * max_tgt);
        src_padded += int64_t(b.examples.size() * max_src);
        longest_tgt.push_back(max_tgt);
    }
    // Unsorted batches of random lengths in [1, 60] would be about half padding.
    EXPECT_GT(double(tgt_real) / double(tgt_padded), 0.95);
    EXPECT_GT(double(src_real) / double(src_padded), 0.8);
    EXPECT_FALSE(std::is_sorted(longest_tgt.begin(), longest_tgt.end()));
    EXPECT_GT(longest_tgt.size(), 100u);
}

// Pools that do not divide the data, several epochs: each epoch yields every
// example exactly once, unchanged.
TEST(Batcher, EveryExampleExactlyOncePerEpoch) {
    auto examples = random_examples(1037, 30, 13);
    Batcher batcher(vector_source(examples), {128, 100, 4});
    for (int epoch = 0; epoch < 3; ++epoch) {
        EXPECT_EQ(batcher.epoch(), epoch);
        std::multiset<std::tuple<int64_t, Sequence, Sequence>> got, want;
        for (const Example &ex : examples) want.insert({ex.line, ex.src, ex.tgt});
        for (Batch b; batcher.next(b);) {
            for (const Example &ex : b.examples) got.insert({ex.line, ex.src, ex.tgt});
        }
        EXPECT_TRUE(got == want) << "epoch " << epoch << ": " << got.size() << " examples";
        EXPECT_LE(batcher.max_pool_seen(), 100);
        Batch b;
        EXPECT_FALSE(batcher.next(b)) << "the epoch ended once and stays ended";
        batcher.next_epoch();
    }
}

TEST(Batcher, DeterministicBySeedAndEpoch) {
    auto examples = random_examples(2000, 40, 14);
    auto run = [&](uint64_t seed) {
        Batcher batcher(vector_source(examples), {200, 500, seed});
        auto first = epoch_lines(batcher);
        batcher.next_epoch();
        return std::make_pair(first, epoch_lines(batcher));
    };
    auto a = run(5), b = run(5), c = run(6);
    EXPECT_EQ(a, b);
    EXPECT_NE(a.first, c.first);
    EXPECT_NE(a.second, c.second);
    EXPECT_NE(a.first, a.second) << "each epoch has its own order";
}

// The seeding scheme is part of the checkpoint format: a resumed run on
// another machine or build must see the same batches. Pinned values.
TEST(Batcher, GoldenOrder) {
    std::vector<Example> examples(6);
    for (int i = 0; i < 6; ++i) {
        examples[i].src.assign(1 + i % 3, 3);
        examples[i].tgt.assign(1 + i % 2, 3);
        examples[i].line = i + 1;
    }
    // Sorted by (tgt, src) length: lines 1 5 3 | 4 2 6. With a budget of 4
    // only 1 and 5 fit together (2 rows x src 2, 2 rows x tgt 1+1); the
    // batches' order comes from the seed.
    Batcher batcher(vector_source(examples), {4, 100, 1});
    std::vector<std::vector<int64_t>> want = {{4}, {2}, {1, 5}, {3}, {6}};
    EXPECT_EQ(epoch_lines(batcher), want);
    auto synth = synthetic_source(SyntheticTask::Copy, 1, 1, 10);
    Example ex;
    ASSERT_TRUE(synth->next(ex));
    EXPECT_EQ(ex.src, ids({9, 9, 3, 4, 4, 7, 6, 6, 6, 6}));
}

TEST(Batcher, SeekGivesTheSameBatchesAsAnUninterruptedRun) {
    auto examples = random_examples(1500, 40, 15);
    const BatchOptions opt{150, 400, 21};
    // Uninterrupted: epochs 0..2.
    std::vector<std::vector<std::vector<int64_t>>> full;
    {
        Batcher batcher(vector_source(examples), opt);
        for (int e = 0; e < 3; ++e, batcher.next_epoch()) full.push_back(epoch_lines(batcher));
    }
    ASSERT_GT(full[1].size(), 10u);
    Batcher resumed(vector_source(examples), opt);
    epoch_lines(resumed);  // a used batcher, so that seek also goes backwards
    for (auto [epoch, index] : std::vector<std::pair<int64_t, int64_t>>{
             {1, 0}, {1, 1}, {1, 7}, {2, 3}, {0, 5}, {1, int64_t(full[1].size()) - 1}, {2, 0}}) {
        SCOPED_TRACE("seek(" + std::to_string(epoch) + ", " + std::to_string(index) + ")");
        resumed.seek(epoch, index);
        EXPECT_EQ(resumed.epoch(), epoch);
        EXPECT_EQ(resumed.batch_index(), index);
        auto rest = epoch_lines(resumed);
        std::vector<std::vector<int64_t>> want(full[epoch].begin() + index, full[epoch].end());
        EXPECT_EQ(rest, want);
        EXPECT_EQ(resumed.batch_index(), int64_t(full[epoch].size()));
        if (epoch < 2) {
            resumed.next_epoch();
            EXPECT_EQ(epoch_lines(resumed), full[epoch + 1]) << "the next epoch too";
        }
    }
    // The end of an epoch is a valid position; past it is not.
    resumed.seek(1, int64_t(full[1].size()));
    Batch b;
    EXPECT_FALSE(resumed.next(b));
    EXPECT_THROW(resumed.seek(1, int64_t(full[1].size()) + 1), Error);
    EXPECT_THROW(resumed.seek(-1, 0), Error);
    EXPECT_THROW(resumed.seek(0, -1), Error);
}

TEST(Batcher, RejectsBadOptions) {
    EXPECT_THROW(Batcher(nullptr, {}), Error);
    EXPECT_THROW(Batcher(vector_source({}), {0, 10, 1}), Error);
    EXPECT_THROW(Batcher(vector_source({}), {10, 0, 1}), Error);
    Batcher empty(vector_source({}), {});
    Batch b;
    EXPECT_FALSE(empty.next(b));
}

TEST(Batcher, DecoderOnlyExamplesAreBudgetedOnSource) {
    std::vector<Example> examples(100);
    for (int i = 0; i < 100; ++i) {
        examples[i].src.assign(10, 5);
        examples[i].line = i + 1;
    }
    Batcher batcher(vector_source(examples), {100, 1000, 1});
    size_t total = 0;
    int in_file_order = 0;
    for (Batch b; batcher.next(b);) {
        EXPECT_EQ(b.examples.size(), 10u);  // exactly fills 100 = 10 rows x 10
        EXPECT_EQ(b.tgt_tokens, 0);
        total += b.examples.size();
        bool consecutive = true;
        for (size_t i = 1; i < b.examples.size(); ++i) consecutive &= b.examples[i].line == b.examples[i - 1].line + 1;
        in_file_order += consecutive;
    }
    EXPECT_EQ(total, 100u);
    // Equal lengths: the shuffle before the (stable) sort still mixes them.
    EXPECT_EQ(in_file_order, 0);
}

// ---- Sharding ----

TEST(Shard, CoversTheBatchExactlyOnce) {
    for (int n = 0; n <= 12; ++n) {
        Batch batch;
        for (int i = 0; i < n; ++i) {
            Example ex;
            ex.src.assign(1 + i, 4);
            ex.tgt.assign(2 + i % 3, 4);
            ex.line = i + 1;
            batch.src_tokens += ex.src.size();
            batch.tgt_tokens += ex.tgt.size();
            batch.examples.push_back(ex);
        }
        for (int world = 1; world <= 5; ++world) {
            SCOPED_TRACE(std::to_string(n) + " examples, world " + std::to_string(world));
            std::vector<int64_t> lines;
            int64_t src = 0, tgt = 0;
            for (int rank = 0; rank < world; ++rank) {
                Batch part = shard(batch, rank, world);
                EXPECT_GE(int(part.examples.size()), n / world);
                EXPECT_LE(int(part.examples.size()), (n + world - 1) / world);
                int64_t part_src = 0;
                for (const Example &ex : part.examples) {
                    lines.push_back(ex.line);
                    part_src += ex.src.size();
                }
                EXPECT_EQ(part.src_tokens, part_src);
                src += part.src_tokens;
                tgt += part.tgt_tokens;
            }
            std::vector<int64_t> want(n);
            for (int i = 0; i < n; ++i) want[i] = i + 1;
            EXPECT_EQ(lines, want);  // in order, each once
            EXPECT_EQ(src, batch.src_tokens);
            EXPECT_EQ(tgt, batch.tgt_tokens);
        }
    }
}

TEST(Shard, RejectsBadRank) {
    Batch batch;
    EXPECT_THROW(shard(batch, 2, 2), Error);
    EXPECT_THROW(shard(batch, -1, 2), Error);
    EXPECT_THROW(shard(batch, 0, 0), Error);
}

// ---- Synthetic tasks ----

TEST(Synthetic, TargetsAreCopyReverseSort) {
    for (SyntheticTask task : {SyntheticTask::Copy, SyntheticTask::Reverse, SyntheticTask::Sort}) {
        SCOPED_TRACE(synthetic_task_name(task));
        auto source = synthetic_source(task, 2000, 42);
        auto all = read_all(*source);
        ASSERT_EQ(all.size(), 2000u);
        std::map<int32_t, int> counts;
        for (const Example &ex : all) {
            ASSERT_EQ(ex.src.size(), 10u);
            EXPECT_EQ(ex.line, 0);
            for (int32_t id : ex.src) {
                ASSERT_GE(id, kSyntheticFirstSymbol);
                ASSERT_LT(id, kSyntheticVocab);
                ++counts[id];
            }
            Sequence want = ex.src;
            if (task == SyntheticTask::Reverse) std::reverse(want.begin(), want.end());
            if (task == SyntheticTask::Sort) std::sort(want.begin(), want.end());
            ASSERT_EQ(ex.tgt, want);
        }
        // Uniform over the 8 symbols: 2500 draws each, give or take.
        ASSERT_EQ(counts.size(), 8u);
        for (auto [id, count] : counts) EXPECT_NEAR(count, 2500, 250) << "symbol " << id;
    }
    // A sort target is not just the copy.
    auto sorted = read_all(*synthetic_source(SyntheticTask::Sort, 5, 1));
    EXPECT_TRUE(std::any_of(sorted.begin(), sorted.end(), [](const Example &e) { return e.src != e.tgt; }));
}

TEST(Synthetic, DeterministicBySeedAndRewind) {
    auto a = synthetic_source(SyntheticTask::Reverse, 50, 7);
    auto first = read_all(*a);
    a->rewind();
    auto again = read_all(*a);
    auto same_seed = read_all(*synthetic_source(SyntheticTask::Reverse, 50, 7));
    auto other_seed = read_all(*synthetic_source(SyntheticTask::Reverse, 50, 8));
    auto key = [](const std::vector<Example> &v) {
        std::vector<Sequence> out;
        for (const Example &e : v) out.push_back(e.src);
        return out;
    };
    EXPECT_EQ(key(first), key(again));
    EXPECT_EQ(key(first), key(same_seed));
    EXPECT_NE(key(first), key(other_seed));
    // Independent, not shifted by one: seed 8's first example is not seed 7's second.
    EXPECT_NE(key(other_seed)[0], key(first)[1]);
    EXPECT_NE(key(other_seed)[1], key(first)[0]);
}

TEST(Synthetic, LengthAndCount) {
    auto all = read_all(*synthetic_source(SyntheticTask::Copy, 3, 1, 1));
    ASSERT_EQ(all.size(), 3u);
    EXPECT_EQ(all[0].src.size(), 1u);
    EXPECT_TRUE(read_all(*synthetic_source(SyntheticTask::Copy, 0, 1)).empty());
    EXPECT_THROW(synthetic_source(SyntheticTask::Copy, -1, 1), Error);
    EXPECT_THROW(synthetic_source(SyntheticTask::Copy, 1, 1, 0), Error);
}

TEST(Synthetic, TaskFromName) {
    EXPECT_EQ(synthetic_task_from_name("copy"), SyntheticTask::Copy);
    EXPECT_EQ(synthetic_task_from_name("reverse"), SyntheticTask::Reverse);
    EXPECT_EQ(synthetic_task_from_name("sort"), SyntheticTask::Sort);
    try {
        synthetic_task_from_name("Copy");
        ADD_FAILURE() << "accepted \"Copy\"";
    } catch (const Error &e) {
        std::string msg = e.what();
        for (const char *name : {"\"Copy\"", "copy", "reverse", "sort"}) {
            EXPECT_NE(msg.find(name), std::string::npos) << msg;
        }
    }
}

}  // namespace
