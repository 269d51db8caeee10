// The decoder's scheduler: one generate() call's inputs, given and joined,
// through the paged KV cache, step by step. Each turn it asks
// GenerateOptions::join for inputs while the batch has room, forms a group
// of waiting inputs whose cache blocks are free (decoding::Admission),
// prefills the group's prefixes in chunks beside the rows decoding (their
// sources encoded first), runs one position more of every row decoding
// (each at its own position), lets the search choose, moves beams' block
// tables to their parents (decoding::KvBlocks, copy-on-write) and frees the
// blocks of every input done. The model's side of each step is a Runner's
// (decoding/runner.h): the scheduler holds no kernel and no activation.
//
// tests/runtime/test_scheduler.cpp runs it over a fake runner and checks
// every step's flat inputs and every row's cache reads.
#pragma once

#include "admission.h"
#include "kv_blocks.h"
#include "runner.h"
#include "search.h"

#include "halformer/config.h"
#include "halformer/model.h"

#include <memory>
#include <vector>

namespace halformer::decoding {

class Scheduler {
public:
    // inputs: sources (encoder-decoder: the decoder starts from bos and
    // opt.target_prefix) or prompts; opt.max_new_tokens_each has one limit
    // per input (generate()'s checks ran on them).
    Scheduler(const Config &cfg, Runner &runner, const std::vector<Sequence> &inputs, const GenerateOptions &opt);
    // Runs to the end: inputs join, groups prefill, the batch decodes.
    std::vector<std::vector<Hypothesis>> run();
    // The same a turn at a time: begin() sizes and allocates the cache;
    // each step() asks for joins, forms a group, runs a prefill chunk and
    // one decoding step, and returns false once nothing is left; results()
    // then gives every input's hypotheses.
    void begin();
    bool step();
    std::vector<std::vector<Hypothesis>> results() { return search->results(); }

private:
    void add_input(const Sequence &in, const Sequence &target_prefix);
    int limit(int b) const { return o.max_new_tokens_each[(size_t)b]; }
    int pool_blocks();
    void copy_shared_rows();
    void release_input(int b);
    int live() const;
    void poll_joins();
    void check_join(const JoinInput &j) const;
    int limit_of(const JoinInput &j) const;
    void form_group();
    void encode_group();
    void tables(const std::vector<int> &slots, int L, int group_rows, bool dense, StepInput &step);
    void prefill_chunk();
    void decode_step(const std::vector<int> &joining);
    void leave_done();
    void choose(bool prefill, const std::vector<int> &inputs, const std::vector<int> &slots);
    void follow_parents(const std::vector<int> &inputs);

    const Config &cfg;
    Runner &runner;
    GenerateOptions o;  // the call's options, per-input lists growing as inputs join
    const bool encdec;
    const int K;  // beams: slot r = b·K + k
    std::unique_ptr<Search> search;
    KvBlocks kv;  // the cache's blocks: per slot, per input's source

    // Per input b: its source (encoder-decoder) and decoder prefix (bos +
    // target prefix, or the prompt), its source's cache positions (its
    // group's longest) and length.
    std::vector<Sequence> src, prefix;
    std::vector<int> cross_S;
    std::vector<int32_t> src_len;
    std::vector<int32_t> len;       // per slot: positions written with real tokens
    std::vector<Sequence> context;  // per slot: its prefix, bos dropped (the penalties' context)

    // Inputs given or joined wait in admission until a group takes them,
    // and hold their reserved blocks until they are done.
    Admission admission;
    std::vector<int> active;  // inputs decoding, in order of their rows
    // The group prefilling: its inputs (one row each: beam 0) and the next
    // position of its chunks.
    std::vector<int> group;
    int group_P = 0, group_S = 0, chunk_at = 0;

    std::vector<int> row_of;  // per slot: its row in the step's batch
    std::vector<char> freed;  // per input: its blocks freed
    // The step's tables (tables()).
    std::vector<int32_t> block_table, cross_table, cross_len, dense_rows;
};

}  // namespace halformer::decoding
