// Training data: token-id files (or synthetic tasks) read as a stream of
// Examples and cut into batches of about equal token counts, as in the paper
// ("each training batch contained a set of sentence pairs containing
// approximately 25000 source tokens and 25000 target tokens").
//
//   halformer::DataLimits limits{37000, 37000, 256, 255};  // vocabularies, lengths
//   auto src = halformer::file_source("train.tsv", halformer::TaskKind::EncoderDecoder, limits);
//   halformer::Batcher batcher(std::move(src), {25000, 100000, /*seed=*/7});
//   for (halformer::Batch b; ; batcher.next_epoch())
//       while (batcher.next(b)) train_on(halformer::shard(b, rank, world));
//
// Token-id files are UTF-8 text, one example a line; ids are decimal integers
// separated by single spaces, and a tab separates the two sides of a line:
//   encoder-decoder  "src ids<TAB>tgt ids"
//   decoder-only     "ids"               (no tab)
//   encoder-only     "ids<TAB>labels"    (one label per id)
// Empty lines and lines starting with '#' are skipped; CRLF line ends and a
// leading UTF-8 byte order mark are accepted. Any other malformed line (a
// token that is not a non-negative decimal integer, an id out of range, a
// missing or extra tab, an empty side, an empty token from a doubled or
// trailing space, a label count mismatch, a sequence longer than its limit)
// throws halformer::Error "FILE:LINE: problem".
//
// Everything is deterministic: the same seed, epoch and data give the same
// batches on every machine (splitmix64, never std:: distributions).
#pragma once

#include "halformer/error.h"
#include "halformer/model.h"  // Sequence

#include <cstdint>
#include <fstream>
#include <memory>
#include <string>
#include <vector>

namespace halformer {

struct Example {
    Sequence src;  // encoder-decoder: source ids; decoder-only: the sequence; encoder-only: input ids
    Sequence tgt;  // encoder-decoder: target ids WITHOUT bos/eos (the trainer adds them);
                   // decoder-only: empty; encoder-only: one label per src token
    int64_t line = 0;  // 1-based line number in its file (0 for generated examples)
};

enum class TaskKind { EncoderDecoder, Decoder, Encoder };

// Limits checked while reading; 0 means "not checked". They apply to the ids
// as written in the file: pass max_positions - 1 as max_tgt_len when the
// trainer's bos/eos make the decoder input one longer.
//   encoder-decoder: src_vocab, max_src_len for the source; tgt_vocab, max_tgt_len for the target
//   decoder-only:    src_vocab, max_src_len for the sequence (tgt_* unused)
//   encoder-only:    src_vocab, max_src_len for the ids; tgt_vocab is the label count
struct DataLimits {
    int src_vocab = 0, tgt_vocab = 0;
    int max_src_len = 0, max_tgt_len = 0;
};

// What the Batcher draws from: a file or a synthetic task.
class ExampleSource {
public:
    virtual ~ExampleSource() = default;
    virtual bool next(Example &out) = 0;  // false when exhausted
    virtual void rewind() = 0;            // start again from the first example
};

// Streaming reader of a token-id file: one line in memory at a time.
class ExampleReader : public ExampleSource {
public:
    // Throws Error naming the path when the file cannot be opened.
    ExampleReader(const std::string &path, TaskKind kind, DataLimits limits);
    bool next(Example &out) override;  // false at end of file; throws Error on a malformed line
    void rewind() override;
    const std::string &path() const { return path_; }

private:
    [[noreturn]] void fail(const std::string &problem) const;
    void parse_side(const std::string &text, const char *what, int vocab, int max_len, Sequence &out) const;

    std::string path_;
    TaskKind kind_;
    DataLimits limits_;
    std::ifstream in_;
    std::string text_;  // the current line (reused buffer)
    int64_t line_ = 0;
};

std::unique_ptr<ExampleSource> file_source(const std::string &path, TaskKind kind, DataLimits limits);

// The synthetic tasks of The Annotated Transformer, generated in process:
// vocabulary 11 (0 pad, 1 bos, 2 eos, 3..10 the symbols). src is `length`
// symbols drawn uniformly from 3..10; tgt is src copied, reversed or sorted
// ascending. `count` examples per pass; rewind() replays the same examples
// (the seed fixes them); another seed gives independent examples (use one
// for training and another for a held-out set).
enum class SyntheticTask { Copy, Reverse, Sort };
constexpr int kSyntheticVocab = 11;
constexpr int kSyntheticFirstSymbol = 3;

const char *synthetic_task_name(SyntheticTask task);
// "copy" | "reverse" | "sort"; anything else is an Error listing the names.
SyntheticTask synthetic_task_from_name(const std::string &name);
// count >= 0 and length >= 1, else Error.
std::unique_ptr<ExampleSource> synthetic_source(SyntheticTask task, int64_t count, uint64_t seed,
                                                int length = 10);

struct BatchOptions {
    // Padded-size budget, checked separately for the source side (rows ×
    // longest src) and the target side (rows × (longest tgt + 1), the +1 for
    // the bos/eos the trainer adds; examples with an empty tgt cost nothing there).
    int64_t max_tokens = 4096;
    int64_t pool_examples = 100000;  // examples read, sorted and batched together
    uint64_t seed = 1;
};

struct Batch {
    std::vector<Example> examples;
    int64_t src_tokens = 0, tgt_tokens = 0;  // non-pad ids in src and tgt (bos/eos not counted)
};

// Examples are read into a pool of up to pool_examples; the pool is shuffled,
// stably sorted by (tgt length, src length) so that each batch holds examples
// of similar lengths (little padding), and cut greedily into batches within
// max_tokens; then the pool's batches are shuffled, so that lengths do not
// come in order. A single example over the budget is a batch alone (never
// dropped). The shuffles are seeded by (seed, epoch, pool number).
class Batcher {
public:
    // Throws Error for a null source, max_tokens < 1 or pool_examples < 1.
    Batcher(std::unique_ptr<ExampleSource> source, BatchOptions opt);

    bool next(Batch &out);  // false at the end of the epoch; call next_epoch() to go on
    void next_epoch();      // rewinds the source; the epoch number goes into the shuffling seed

    // Position, for checkpoints: the epoch (from 0) and the batches already
    // returned in it.
    int64_t epoch() const { return epoch_; }
    int64_t batch_index() const { return batch_index_; }
    // Resume: from here on the same batches as an uninterrupted run. Re-reads
    // the epoch up to batch_index (cost: reading that much data). Error when
    // negative or past the end of the epoch (the end itself is allowed).
    void seek(int64_t epoch, int64_t batch_index);

    // The most examples ever held at once (the pool bounds memory); for tests.
    int64_t max_pool_seen() const { return max_pool_seen_; }

private:
    bool fill_pool();  // reads and batches the next pool; false when the source is exhausted
    void restart(int64_t epoch);

    std::unique_ptr<ExampleSource> source_;
    BatchOptions opt_;
    int64_t epoch_ = 0, batch_index_ = 0, pool_index_ = 0;
    bool exhausted_ = false;
    std::vector<Batch> pending_;  // the current pool's batches, in the order returned
    size_t pending_pos_ = 0;
    int64_t max_pool_seen_ = 0;
};

// Data parallel: rank r of `world` takes examples [r*B/world, (r+1)*B/world)
// of the batch, in order, with its own token counts. Shares differ by at most
// one example; a rank gets none when B < world. Error unless 0 <= rank < world.
Batch shard(const Batch &batch, int rank, int world);

}  // namespace halformer
