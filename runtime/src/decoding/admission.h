// The decoder's admission (decoding/scheduler.h): which waiting inputs prefill next
// as a group, and the cache blocks each holds at most while it runs. An
// input is admitted only when its blocks, its longest case, are free beside
// those already reserved, so a running batch never runs out of blocks.
//
// No kernel runs here: it decides who goes, the decoder runs them.
// tests/runtime/test_kv_blocks.cpp checks it group by group.
#pragma once

#include <cstddef>
#include <deque>
#include <vector>

namespace halformer::decoding {

// An input as admission sees it: its decoder prefix (bos + target prefix,
// or the prompt), its source (encoder-decoder; 0: none) and its new tokens
// at most.
struct InputShape {
    int prefix = 0, source = 0, limit = 0;
};

class Admission {
public:
    explicit Admission(int beams) : K_(beams) {}

    // Input b (the count so far) arrives and waits.
    void add(const InputShape &in);
    int inputs() const { return (int)shape_.size(); }
    const std::deque<int> &waiting() const { return waiting_; }

    // The blocks input b holds at once in a group whose prefixes are P and
    // sources S long: its source's K|V, then (a row writes positions up to
    // p + limit - 2: the last token chosen is never read) greedy: its prefix
    // padded to P, its new positions taking its padding's rows first;
    // beams: the prefill's blocks, which every beam shares, and per beam the
    // blocks from the one position p is in, which it may copy or add.
    int reservation(int b, int P, int S) const;

    // A new group from the waiting inputs, within `pool` blocks beside those
    // reserved: the oldest, then, in order, those whose prefixes keep the
    // group's padding small (the longest at most 1.5 times the shortest, or
    // 16 positions more); it stops at the first that does not fit. The
    // others wait for a later group. Empty when none fits now; Error when
    // the oldest fits in no pool of `pool` blocks and nothing else holds any
    // (`idle`: no input decoding).
    struct Group {
        std::vector<int> inputs;
        int P = 0, S = 0;  // the longest prefix and source
    };
    Group form(int pool, bool idle);

    // Input b is done: its blocks are free (0 when it held none).
    void release(int b);
    int reserved(int b) const { return reserved_[(size_t)b]; }
    int reserved_total() const { return reserved_total_; }

    // The blocks every input holds as one group: the least pool that runs
    // them all at once.
    int need_all() const;

private:
    int K_;
    std::vector<InputShape> shape_;
    std::vector<int> reserved_;
    int reserved_total_ = 0;
    std::deque<int> waiting_;
};

}  // namespace halformer::decoding
