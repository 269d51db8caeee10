// The model side of the decoder's steps (vLLM's model runner): what the
// scheduler (decoding/scheduler.h) asks of a model, from flat inputs. The
// scheduler decides who runs, at which positions, and where each position's
// K|V goes in the paged cache; a Runner runs the layers and the sampler
// over that and nothing else. decode.cpp's runner calls the kernels through
// a Session; tests/runtime/test_scheduler.cpp's fake runner keeps a token
// per cache row instead and checks that each row reads exactly its own.
#pragma once

#include "halformer/model.h"
#include "search.h"

#include <cstdint>
#include <vector>

namespace halformer::decoding {

// One call of the layers: T positions of R rows, time-major (m = t·R + r).
//
// Cache rows (decoding/kv_blocks.h): position t of row r is at cache row
// table[t / kBlock] · kBlock + t % kBlock, table = block_table +
// r·table_stride, entries past a row's own its first block (masked by
// kv_len). The T·R new positions' K|V go to write_rows (distinct).
struct StepInput {
    int T = 0, R = 0;
    // A prefill chunk (T ≥ 1, row_pos null): every row from position
    // `start`. A decoding step (T = 1): each row at row_pos[r]; `start` is
    // the furthest row's.
    int start = 0;
    const int32_t *row_pos = nullptr;
    const int32_t *tokens = nullptr;      // [T][R] (pad past a row's prefix)
    const int32_t *write_rows = nullptr;  // [T][R]
    const int32_t *kv_len = nullptr;      // [R]: each row's keys, its own included
    int L = 0;                            // the tables cover positions 0..L-1
    const int32_t *block_table = nullptr;
    int table_stride = 0;
    // A prefill chunk: position t of row r is at cache row dense_rows[t·R + r]
    // (t < L), the tables read out once.
    const int32_t *dense_rows = nullptr;
    // Encoder-decoder: source g's position s at its table (cross_table +
    // g·cross_stride) the same way; rows r·cross_group .. +cross_group read
    // source r / cross_group, cross_len[g] positions of it; cross_S the
    // longest.
    const int32_t *cross_table = nullptr;
    int cross_stride = 0, cross_S = 0, cross_group = 1;
    const int32_t *cross_len = nullptr;
    // A prefill chunk's outputs the group's first choice reads: the hidden
    // state of position m = out_at[i] is kept as the prefill's row out_to[i]
    // (a group's rows end in different chunks). A decoding step keeps all
    // its R rows (no out_at).
    const int32_t *out_at = nullptr, *out_to = nullptr;
    int outputs = 0;
};

class Runner {
public:
    virtual ~Runner() = default;

    // The vocabulary the sampler chooses from.
    virtual int vocab() const = 0;
    // Whether the model's attention takes one query position a step with
    // every row at one position (T5's relative-position bias): then
    // prefixes are of one length and nothing joins.
    virtual bool one_position() const = 0;
    // The cache's blocks: the most, from `wanted` down to `need`, that the
    // memory budget allows.
    virtual int cache_blocks(int need, int64_t wanted) = 0;
    // Before the first step: the cache of pool_rows rows in every layer;
    // `o`: the call's options, whose per-input lists grow as inputs join.
    virtual void begin(const GenerateOptions &o, int pool_rows) = 0;

    // Copy-on-write: cache row from[i] to to[i] in every layer (n of them),
    // before the step that asked for them writes.
    virtual void copy_rows(const std::vector<int32_t> &from, const std::vector<int32_t> &to) = 0;
    // The encoder over `sources` (each padded to S), then each decoder
    // layer's K|V of them to cache rows `to` ([S][G], time-major).
    virtual void encode(const std::vector<Sequence> &sources, int S, const std::vector<int32_t> &to) = 0;
    // The layers over one step (StepInput), keeping its outputs.
    virtual void run(const StepInput &step) = 0;
    // The choice for `inputs`, whose rows (`slots`, in order; row_of maps a
    // slot to its row) are the kept outputs of the last prefill chunk's
    // group (prefill) or of the last decoding step: their scores (the head,
    // the search's adjustments) and each row's choice (search.need()).
    // context: each slot's decoder prefix, bos dropped (the penalties').
    virtual StepResult choose(bool prefill, Search &search, const std::vector<int> &inputs,
                              const std::vector<int> &slots, const std::vector<int> &row_of,
                              const std::vector<Sequence> &context) = 0;
};

}  // namespace halformer::decoding
