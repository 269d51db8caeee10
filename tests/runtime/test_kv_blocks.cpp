// The paged KV cache's block manager (runtime/src/decoding/kv_blocks.h)
// step by step: which block each position lands in, the copies a shared
// block's first write queues, references as beams change parents, and every
// block free again at the end. Then the decoder's admission
// (decoding/admission.h) group by group.
#include "../../runtime/src/decoding/admission.h"
#include "../../runtime/src/decoding/kv_blocks.h"

#include "halformer/error.h"

#include <gtest/gtest.h>

using halformer::decoding::kBlock;
using halformer::decoding::KvBlocks;

namespace {

std::vector<int32_t> rows(KvBlocks &kv, int slot, int from, int to) {
    std::vector<int32_t> out;
    for (int t = from; t < to; t++) out.push_back(kv.row_for(slot, t));
    return out;
}

}  // namespace

TEST(KvBlocks, CopyOnWriteWhenBeamsShareABlock) {
    KvBlocks kv;
    kv.add_input(2);  // slots 0 and 1: two beams of input 0
    kv.allocate(8);
    // Slot 0's first 18 positions: blocks 0 and 1, in order.
    const auto r = rows(kv, 0, 0, 18);
    for (int t = 0; t < 18; t++) EXPECT_EQ(r[(size_t)t], t);
    EXPECT_EQ(kv.table(0), (std::vector<int>{0, 1}));
    EXPECT_EQ(kv.pool().free(), 6);

    // Beam 1 takes beam 0 as its parent: both tables refer to blocks 0, 1.
    int32_t len[2] = {18, 0};
    kv.follow(0, {0, 0}, len);
    EXPECT_EQ(kv.table(1), (std::vector<int>{0, 1}));
    EXPECT_EQ(len[1], 18);
    EXPECT_EQ(kv.pool().refs(0), 2);
    EXPECT_EQ(kv.pool().refs(1), 2);

    // Beam 1 writes position 18, in shared block 1: a block of its own
    // (2), rows 16 and 17 copied into it first.
    EXPECT_EQ(kv.row_for(1, 18), 2 * kBlock + 2);
    EXPECT_EQ(kv.copy_from(), (std::vector<int32_t>{16, 17}));
    EXPECT_EQ(kv.copy_to(), (std::vector<int32_t>{32, 33}));
    EXPECT_EQ(kv.table(1), (std::vector<int>{0, 2}));
    EXPECT_EQ(kv.pool().refs(1), 1);
    // Beam 0's block 1 is its own again: written in place, no copy.
    EXPECT_EQ(kv.row_for(0, 18), 18);
    EXPECT_EQ(kv.copy_from().size(), 2u);
    kv.take_copies();
    EXPECT_TRUE(kv.copy_from().empty());
    // Block 0 stays shared: a write into it (a prefix's padding) copies too.
    EXPECT_EQ(kv.row_for(1, 5), 3 * kBlock + 5);
    EXPECT_EQ(kv.copy_from(), (std::vector<int32_t>{0, 1, 2, 3, 4}));
    kv.take_copies();

    // The source's rows: a block per kBlock positions.
    EXPECT_EQ(kv.cross_row(0, 0), 4 * kBlock);
    EXPECT_EQ(kv.cross_row(0, 15), 4 * kBlock + 15);
    EXPECT_EQ(kv.cross_row(0, 16), 5 * kBlock);
    EXPECT_EQ(kv.pool().free(), 2);

    kv.release(0, 2);
    EXPECT_EQ(kv.pool().free(), 8);
    EXPECT_TRUE(kv.table(0).empty() && kv.table(1).empty() && kv.cross(0).empty());
}

TEST(KvBlocks, BeamsThatSwapParentsFreeNothingOnTheWay) {
    KvBlocks kv;
    kv.add_input(2);
    kv.allocate(4);
    rows(kv, 0, 0, 3);   // block 0
    rows(kv, 1, 0, 20);  // blocks 1, 2
    int32_t len[2] = {3, 20};
    kv.follow(0, {1, 0}, len);
    EXPECT_EQ(kv.table(0), (std::vector<int>{1, 2}));
    EXPECT_EQ(kv.table(1), (std::vector<int>{0}));
    EXPECT_EQ(len[0], 20);
    EXPECT_EQ(len[1], 3);
    for (int b : {0, 1, 2}) EXPECT_EQ(kv.pool().refs(b), 1) << "block " << b;
    EXPECT_EQ(kv.pool().free(), 1);
    // A parent's table past its length (a prefix's padding) is not taken.
    rows(kv, 0, 20, 33);  // block 3 for 32
    len[0] = 20;
    kv.follow(0, {0, 0}, len);
    EXPECT_EQ(kv.table(1), (std::vector<int>{1, 2}));
    EXPECT_EQ(kv.pool().refs(3), 1);
    EXPECT_EQ(kv.pool().free(), 1);  // block 0 freed, block 3 still beam 0's
}

TEST(KvBlocks, ErrorsNameTheProblem) {
    KvBlocks kv;
    kv.add_input(1);
    kv.allocate(1);
    try {
        kv.row_for(0, 32);
        FAIL() << "a position past the table's end";
    } catch (const halformer::Error &e) {
        EXPECT_NE(std::string(e.what()).find("past its block table"), std::string::npos) << e.what();
    }
    kv.row_for(0, 0);
    try {
        kv.row_for(0, 16);
        FAIL() << "no free block";
    } catch (const halformer::Error &e) {
        EXPECT_NE(std::string(e.what()).find("no free block"), std::string::npos) << e.what();
    }
    EXPECT_THROW(kv.allocate(4), halformer::Error);  // the pool is in use
}

// ---- admission (runtime/src/decoding/admission.h): which waiting inputs
// prefill next as a group, and the blocks each holds, group by group ----

using halformer::decoding::Admission;

namespace {

std::vector<int> waiting_of(const Admission &a) { return {a.waiting().begin(), a.waiting().end()}; }

}  // namespace

// Greedy prompts of 10, 12, 40 and 11 tokens, 20 new each: the 40-token
// prompt would pad the others past 1.5 times and 16 positions, so it waits
// for the next group; each holds blocks_for(max(P, p + 19)).
TEST(Admission, GroupsKeepTheirPaddingSmall) {
    Admission a(1);
    for (int p : {10, 12, 40, 11}) a.add({p, 0, 20});
    Admission::Group g = a.form(100, true);
    EXPECT_EQ(g.inputs, (std::vector<int>{0, 1, 3}));
    EXPECT_EQ(g.P, 12);
    EXPECT_EQ(g.S, 0);
    EXPECT_EQ(waiting_of(a), std::vector<int>{2});
    EXPECT_EQ(a.reserved(0), 2);  // positions up to 10 + 19 = 29: 2 blocks
    EXPECT_EQ(a.reserved(1), 2);
    EXPECT_EQ(a.reserved(2), 0);
    EXPECT_EQ(a.reserved_total(), 6);
    g = a.form(100, false);
    EXPECT_EQ(g.inputs, std::vector<int>{2});
    EXPECT_EQ(g.P, 40);
    EXPECT_EQ(a.reserved(2), 4);  // up to 59
    EXPECT_EQ(a.reserved_total(), 10);
    a.release(0);
    EXPECT_EQ(a.reserved(0), 0);
    EXPECT_EQ(a.reserved_total(), 8);
    EXPECT_TRUE(a.waiting().empty());
    EXPECT_TRUE(a.form(100, false).inputs.empty());
}

// A pool of 5 blocks: a group stops at the first input that does not fit;
// the rest wait until inputs done free their blocks, oldest first.
TEST(Admission, InputsWaitUntilTheirBlocksAreFree) {
    Admission a(1);
    for (int p : {10, 12, 40, 11}) a.add({p, 0, 20});
    EXPECT_EQ(a.form(5, true).inputs, (std::vector<int>{0, 1}));  // 0, 1 and 3 would need 6
    EXPECT_EQ(waiting_of(a), (std::vector<int>{2, 3}));
    EXPECT_TRUE(a.form(5, false).inputs.empty());  // the 40-token prompt needs 4 of the 1 free
    a.release(0);
    EXPECT_TRUE(a.form(5, false).inputs.empty());  // 4 of 3
    a.release(1);
    Admission::Group g = a.form(5, true);
    EXPECT_EQ(g.inputs, std::vector<int>{2});  // the 11-token prompt: too much padding beside it
    EXPECT_EQ(waiting_of(a), std::vector<int>{3});
    EXPECT_TRUE(a.form(5, false).inputs.empty());
    a.release(2);
    EXPECT_EQ(a.form(5, true).inputs, std::vector<int>{3});
    EXPECT_EQ(a.reserved_total(), 2);
}

// An input that fits in no pool of that size is an error only when nothing
// else holds blocks (otherwise it waits for them).
TEST(Admission, AnInputPastThePoolIsAnErrorWhenIdle) {
    Admission a(1);
    a.add({40, 0, 20});
    EXPECT_TRUE(a.form(3, false).inputs.empty());
    try {
        a.form(3, true);
        FAIL() << "no error";
    } catch (const halformer::Error &e) {
        EXPECT_STREQ(e.what(), "generate: input 0 needs 4 KV cache blocks of 16 positions; the cache has 3 "
                               "(GenerateOptions::kv_blocks)");
    }
}

// Beams of an encoder-decoder: a source's blocks, the prefill's blocks every
// beam shares, and per beam the blocks from the one its prefix ends in.
TEST(Admission, BeamsReserveTheirSourcesAndEachBeamsTail) {
    Admission a(4);
    a.add({1, 30, 40});   // bos alone
    a.add({1, 50, 40});
    a.add({20, 0, 10});   // a target prefix of 19 tokens, no source
    // Alone: 2 (30 positions) + 1 + 4 · 3 (up to 39) = 15.
    EXPECT_EQ(a.reservation(0, 1, 30), 15);
    // 2 (padding to 20 positions) + 4 · (2 - 1) (positions 20..28: block 1 only) = 6.
    EXPECT_EQ(a.reservation(2, 20, 0), 6);
    EXPECT_EQ(a.need_all(), 4 + 2 + 12 + 4 + 2 + 12 + 4 + 2 + 4);
    Admission::Group g = a.form(100, true);
    EXPECT_EQ(g.inputs, (std::vector<int>{0, 1}));  // the 20-position prefix pads past 1.5 times and 16
    EXPECT_EQ(g.S, 50);
    EXPECT_EQ(a.reserved(0), 17);  // every source padded to the group's longest: 4 blocks
    EXPECT_EQ(a.reserved_total(), 34);
}
