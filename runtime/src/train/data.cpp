// Training data: token-id file reader, synthetic tasks, token-budget batcher
// and data-parallel sharding (see halformer/train_data.h).
#include "halformer/train_data.h"

#include "../splitmix.h"

#include <algorithm>
#include <utility>

namespace halformer {

namespace {

// One splitmix64 step as a hash: nearby inputs (seed 1, seed 2; epoch 0,
// epoch 1) give unrelated streams, which raw splitmix states would not.
uint64_t mix(uint64_t x) { return SplitMix{x}.next(); }

// Fisher–Yates with our own generator, so the order is the same everywhere
// (std::shuffle's use of the generator is implementation-defined).
template <typename T>
void shuffle(std::vector<T> &v, SplitMix &rng) {
    for (size_t i = v.size(); i > 1; --i) std::swap(v[i - 1], v[rng.next() % i]);
}

// A token for an error message: quoted, and cut short if it is garbage.
std::string quoted(const std::string &tok) {
    return "\"" + (tok.size() > 24 ? tok.substr(0, 24) + "..." : tok) + "\"";
}

}  // namespace

// ---- ExampleReader ----

ExampleReader::ExampleReader(const std::string &path, TaskKind kind, DataLimits limits)
    : path_(path), kind_(kind), limits_(limits), in_(path, std::ios::binary) {
    if (!in_) throw Error(path + ": cannot open for reading");
}

void ExampleReader::fail(const std::string &problem) const {
    throw Error(path_ + ":" + std::to_string(line_) + ": " + problem);
}

void ExampleReader::rewind() {
    in_.clear();
    in_.seekg(0);
    line_ = 0;
}

// Space-separated ids of one side. Strict (no doubled or trailing spaces, no
// '+', no hex): a file that breaks the format is more likely corrupt than
// sloppy, and silently accepting it would train on garbage.
void ExampleReader::parse_side(const std::string &text, const char *what, int vocab, int max_len,
                               Sequence &out) const {
    out.clear();
    if (text.empty()) fail(std::string("empty ") + what + " side");
    size_t pos = 0;
    for (int index = 1;; ++index) {
        size_t end = text.find(' ', pos);
        std::string tok = text.substr(pos, end == std::string::npos ? std::string::npos : end - pos);
        std::string where = std::string(what) + " token " + std::to_string(index) + ": ";
        if (tok.empty()) fail(where + "empty (doubled, leading or trailing space)");
        bool negative = tok[0] == '-' && tok.size() > 1;
        size_t digits_from = negative ? 1 : 0;
        bool digits = std::all_of(tok.begin() + digits_from, tok.end(),
                                  [](char c) { return c >= '0' && c <= '9'; });
        if (!digits) fail(where + quoted(tok) + " is not a non-negative decimal integer");
        if (negative) fail(where + "negative id " + quoted(tok));
        int64_t value = 0;
        for (char c : tok) {
            value = value * 10 + (c - '0');
            if (value > INT32_MAX) break;  // the check below reports it
        }
        if (vocab > 0 && value >= vocab) {
            std::string limit =
                std::string(what) == "label" ? "label count " : std::string(what) + " vocabulary size ";
            fail(where + "id " + (value > INT32_MAX ? quoted(tok) : std::to_string(value)) + " >= " + limit +
                 std::to_string(vocab));
        }
        if (value > INT32_MAX) fail(where + "id " + quoted(tok) + " does not fit in int32");
        out.push_back(int32_t(value));
        if (end == std::string::npos) break;
        pos = end + 1;
    }
    if (max_len > 0 && int64_t(out.size()) > max_len) {
        fail(std::string(what) + " has " + std::to_string(out.size()) + " ids, more than the limit " +
             std::to_string(max_len));
    }
}

bool ExampleReader::next(Example &out) {
    while (std::getline(in_, text_)) {
        ++line_;
        if (!text_.empty() && text_.back() == '\r') text_.pop_back();
        if (line_ == 1 && text_.compare(0, 3, "\xEF\xBB\xBF") == 0) text_.erase(0, 3);
        if (text_.empty() || text_[0] == '#') continue;

        size_t tab = text_.find('\t');
        size_t tabs = std::count(text_.begin(), text_.end(), '\t');
        out.line = line_;
        if (kind_ == TaskKind::Decoder) {
            if (tabs) fail("unexpected tab (a decoder-only line is one sequence of space-separated ids)");
            parse_side(text_, "sequence", limits_.src_vocab, limits_.max_src_len, out.src);
            out.tgt.clear();
            return true;
        }
        bool ed = kind_ == TaskKind::EncoderDecoder;
        if (tabs == 0) fail(ed ? "missing tab between source and target ids" : "missing tab between ids and labels");
        if (tabs > 1) fail("too many tabs (" + std::to_string(tabs) + "; expected 1)");
        std::string left = text_.substr(0, tab), right = text_.substr(tab + 1);
        if (ed) {
            parse_side(left, "source", limits_.src_vocab, limits_.max_src_len, out.src);
            parse_side(right, "target", limits_.tgt_vocab, limits_.max_tgt_len, out.tgt);
        } else {
            // Labels have no length limit of their own: their count must match the ids.
            parse_side(left, "input", limits_.src_vocab, limits_.max_src_len, out.src);
            parse_side(right, "label", limits_.tgt_vocab, 0, out.tgt);
            if (out.tgt.size() != out.src.size()) {
                fail(std::to_string(out.tgt.size()) + " labels for " + std::to_string(out.src.size()) +
                     " ids (one label per id expected)");
            }
        }
        return true;
    }
    if (in_.bad()) throw Error(path_ + ": read error after line " + std::to_string(line_));
    return false;
}

std::unique_ptr<ExampleSource> file_source(const std::string &path, TaskKind kind, DataLimits limits) {
    return std::make_unique<ExampleReader>(path, kind, limits);
}

// ---- Synthetic tasks ----

namespace {

class SyntheticSource : public ExampleSource {
public:
    SyntheticSource(SyntheticTask task, int64_t count, uint64_t seed, int length)
        : task_(task), count_(count), seed_(seed), length_(length) {
        rewind();
    }
    bool next(Example &out) override {
        if (made_ >= count_) return false;
        ++made_;
        const uint64_t symbols = kSyntheticVocab - kSyntheticFirstSymbol;  // 8: no modulo bias
        out.src.resize(length_);
        for (int32_t &id : out.src) id = kSyntheticFirstSymbol + int32_t(rng_.next() % symbols);
        out.tgt = out.src;
        if (task_ == SyntheticTask::Reverse) std::reverse(out.tgt.begin(), out.tgt.end());
        if (task_ == SyntheticTask::Sort) std::sort(out.tgt.begin(), out.tgt.end());
        out.line = 0;
        return true;
    }
    void rewind() override {
        rng_ = SplitMix{mix(seed_)};
        made_ = 0;
    }

private:
    SyntheticTask task_;
    int64_t count_;
    uint64_t seed_;
    int length_;
    SplitMix rng_{0};
    int64_t made_ = 0;
};

}  // namespace

const char *synthetic_task_name(SyntheticTask task) {
    switch (task) {
    case SyntheticTask::Copy: return "copy";
    case SyntheticTask::Reverse: return "reverse";
    case SyntheticTask::Sort: return "sort";
    }
    return "?";
}

SyntheticTask synthetic_task_from_name(const std::string &name) {
    for (SyntheticTask t : {SyntheticTask::Copy, SyntheticTask::Reverse, SyntheticTask::Sort}) {
        if (name == synthetic_task_name(t)) return t;
    }
    throw Error("unknown synthetic task \"" + name + "\" (expected copy, reverse or sort)");
}

std::unique_ptr<ExampleSource> synthetic_source(SyntheticTask task, int64_t count, uint64_t seed, int length) {
    if (count < 0) throw Error("synthetic task: count " + std::to_string(count) + " < 0");
    if (length < 1) throw Error("synthetic task: length " + std::to_string(length) + " < 1");
    return std::make_unique<SyntheticSource>(task, count, seed, length);
}

// ---- Batcher ----

Batcher::Batcher(std::unique_ptr<ExampleSource> source, BatchOptions opt)
    : source_(std::move(source)), opt_(opt) {
    if (!source_) throw Error("Batcher: no example source");
    if (opt_.max_tokens < 1) throw Error("Batcher: max_tokens " + std::to_string(opt_.max_tokens) + " < 1");
    if (opt_.pool_examples < 1) {
        throw Error("Batcher: pool_examples " + std::to_string(opt_.pool_examples) + " < 1");
    }
}

void Batcher::restart(int64_t epoch) {
    source_->rewind();
    epoch_ = epoch;
    batch_index_ = pool_index_ = 0;
    exhausted_ = false;
    pending_.clear();
    pending_pos_ = 0;
}

void Batcher::next_epoch() { restart(epoch_ + 1); }

bool Batcher::fill_pool() {
    pending_.clear();  // frees the previous pool before reading the next
    pending_pos_ = 0;
    if (exhausted_) return false;
    std::vector<Example> pool;
    while (int64_t(pool.size()) < opt_.pool_examples) {
        Example ex;
        if (!source_->next(ex)) {
            exhausted_ = true;  // never ask the source again this epoch
            break;
        }
        pool.push_back(std::move(ex));
    }
    if (pool.empty()) return false;
    max_pool_seen_ = std::max(max_pool_seen_, int64_t(pool.size()));

    // Seeded by (seed, epoch, pool): every pool of every epoch has its own order.
    SplitMix rng{mix(mix(mix(opt_.seed) ^ uint64_t(epoch_)) ^ uint64_t(pool_index_++))};
    // Shuffle first so that equal-length examples are not batched in file order.
    shuffle(pool, rng);
    std::stable_sort(pool.begin(), pool.end(), [](const Example &a, const Example &b) {
        if (a.tgt.size() != b.tgt.size()) return a.tgt.size() < b.tgt.size();
        return a.src.size() < b.src.size();
    });

    // Greedy cut: close the batch when one more row would pass the budget on
    // either side. An oversized example starts a batch and closes it at once.
    const size_t budget = size_t(opt_.max_tokens);
    Batch cur;
    size_t max_src = 0, max_tgt = 0;
    for (Example &ex : pool) {
        size_t s = ex.src.size(), t = ex.tgt.empty() ? 0 : ex.tgt.size() + 1;  // +1: bos/eos
        size_t rows = cur.examples.size() + 1;
        if (!cur.examples.empty() &&
            (rows * std::max(max_src, s) > budget || rows * std::max(max_tgt, t) > budget)) {
            pending_.push_back(std::move(cur));
            cur = Batch{};
            max_src = max_tgt = 0;
        }
        max_src = std::max(max_src, s);
        max_tgt = std::max(max_tgt, t);
        cur.src_tokens += int64_t(ex.src.size());
        cur.tgt_tokens += int64_t(ex.tgt.size());
        cur.examples.push_back(std::move(ex));
    }
    pending_.push_back(std::move(cur));
    // Sorted batches would come shortest first: shuffle them.
    shuffle(pending_, rng);
    return true;
}

bool Batcher::next(Batch &out) {
    if (pending_pos_ == pending_.size() && !fill_pool()) return false;
    out = std::move(pending_[pending_pos_++]);
    ++batch_index_;
    return true;
}

void Batcher::seek(int64_t epoch, int64_t batch_index) {
    if (epoch < 0 || batch_index < 0) {
        throw Error("Batcher::seek: negative position (epoch " + std::to_string(epoch) + ", batch " +
                    std::to_string(batch_index) + ")");
    }
    restart(epoch);
    // Replaying is the only way to know the pools' batches: they depend on
    // the data read. Skipped batches are discarded as they come.
    Batch skipped;
    while (batch_index_ < batch_index) {
        if (!next(skipped)) {
            throw Error("Batcher::seek: epoch " + std::to_string(epoch) + " has only " +
                        std::to_string(batch_index_) + " batches, cannot seek to batch " +
                        std::to_string(batch_index));
        }
    }
}

// ---- Sharding ----

Batch shard(const Batch &batch, int rank, int world) {
    if (world < 1 || rank < 0 || rank >= world) {
        throw Error("shard: rank " + std::to_string(rank) + " is not in [0, " + std::to_string(world) + ")");
    }
    int64_t n = int64_t(batch.examples.size());
    int64_t begin = rank * n / world, end = (rank + 1) * n / world;
    Batch out;
    out.examples.assign(batch.examples.begin() + begin, batch.examples.begin() + end);
    for (const Example &ex : out.examples) {
        out.src_tokens += int64_t(ex.src.size());
        out.tgt_tokens += int64_t(ex.tgt.size());
    }
    return out;
}

}  // namespace halformer
