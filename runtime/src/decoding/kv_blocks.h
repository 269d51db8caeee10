// The paged KV cache's block manager for one generate() call (vLLM's
// design): a pool of blocks of kBlock cache rows each, the same rows in
// every layer's cache; per slot (r = b·K + k: beam k of input b) a table
// of the blocks holding its positions; per input the blocks of its
// source's encoder K|V. A block is free again when no table refers to it.
// Beams that take another parent take the parent's table (a reference to
// each block); a block two tables share is copied on its first write
// (copy-on-write): row_for() queues the copies, which the caller runs in
// every layer's cache before the step's layers write.
//
// No kernel runs here: it decides where rows go, the decoder moves them.
// tests/runtime/test_kv_blocks.cpp checks it step by step.
#pragma once

#include <cstddef>
#include <cstdint>
#include <vector>

namespace halformer::decoding {

constexpr int kBlock = 16;  // cache rows per block: the _paged kernels' page (session.h's kPageRows)

// Blocks that hold `rows` positions.
inline int blocks_for(int64_t rows) { return (int)((rows + kBlock - 1) / kBlock); }

// Free blocks and reference counts. take() hands out the lowest free block
// first.
class BlockPool {
public:
    explicit BlockPool(int blocks = 0);
    int blocks() const { return (int)refs_.size(); }
    int free() const { return (int)free_.size(); }
    int take();
    void ref(int b) { refs_[(size_t)b]++; }
    bool shared(int b) const { return refs_[(size_t)b] > 1; }
    int refs(int b) const { return refs_[(size_t)b]; }
    void unref(int b);

private:
    std::vector<int> refs_, free_;
};

// Position t of a table's slot is at cache row table[t / kBlock] · kBlock
// + t % kBlock.
using BlockTable = std::vector<int>;

// A table as a kernel reads it: n entries at out, past its own its first
// block (positions there are masked by their lengths).
void pack_table(const BlockTable &q, int n, int32_t *out);

class KvBlocks {
public:
    // The pool: `blocks` blocks, all free (before any is taken).
    void allocate(int blocks);
    // One more input with `beams` slots.
    void add_input(int beams);

    const BlockPool &pool() const { return pool_; }
    const BlockTable &table(int slot) const { return slot_[(size_t)slot]; }
    const BlockTable &cross(int input) const { return cross_[(size_t)input]; }
    int slots() const { return (int)slot_.size(); }

    // Slot r's cache row for position t, written next: in a new block at a
    // block's first position, else in its table's block; a block shared
    // with another table is first copied (its rows before t: queued in
    // copies()). Error past the table's end.
    int32_t row_for(int r, int t);
    // The copies row_for queued, as (from, to) cache rows; take_copies()
    // empties the queue once the caller has run them.
    const std::vector<int32_t> &copy_from() const { return copy_from_; }
    const std::vector<int32_t> &copy_to() const { return copy_to_; }
    void take_copies();

    // Input b's source position t (written once, in order): its cache row.
    int32_t cross_row(int b, int t);

    // Frees input b's blocks: its `beams` slots' and its source's.
    void release(int b, int beams);

    // Slots [first, first + n) take their parents' tables: slot first + k
    // takes parent[k]'s (an index in [0, n)), the blocks of its first
    // len[parent] positions, and its length. Every new reference is taken
    // before the old ones are dropped, so a block that two beams pass
    // between them is never freed on the way.
    void follow(int first, const std::vector<int> &parent, int32_t *len);

private:
    BlockPool pool_;
    std::vector<BlockTable> slot_, cross_;
    std::vector<int32_t> copy_from_, copy_to_;
};

}  // namespace halformer::decoding
