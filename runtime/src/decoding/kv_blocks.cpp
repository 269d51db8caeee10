#include "kv_blocks.h"

#include "halformer/error.h"

#include <algorithm>
#include <string>

namespace halformer::decoding {

BlockPool::BlockPool(int blocks) : refs_((size_t)std::max(blocks, 0), 0) {
    for (int b = blocks - 1; b >= 0; b--) free_.push_back(b);
}

int BlockPool::take() {
    if (free_.empty()) throw Error("internal: the KV cache has no free block");
    const int b = free_.back();
    free_.pop_back();
    refs_[(size_t)b] = 1;
    return b;
}

void BlockPool::unref(int b) {
    if (refs_[(size_t)b] <= 0) throw Error("internal: KV cache block " + std::to_string(b) + " freed twice");
    if (--refs_[(size_t)b] == 0) free_.push_back(b);
}

void pack_table(const BlockTable &q, int n, int32_t *out) {
    for (int i = 0; i < n; i++) out[i] = i < (int)q.size() ? q[(size_t)i] : q[0];
}

void KvBlocks::allocate(int blocks) {
    if (pool_.free() != pool_.blocks()) throw Error("internal: the KV cache's pool replaced while in use");
    pool_ = BlockPool(blocks);
}

void KvBlocks::add_input(int beams) {
    slot_.resize(slot_.size() + (size_t)beams);
    cross_.emplace_back();
}

int32_t KvBlocks::row_for(int r, int t) {
    BlockTable &q = slot_[(size_t)r];
    const size_t n = (size_t)(t / kBlock);
    const int at = t % kBlock;
    if (n == q.size()) {
        q.push_back(pool_.take());
    } else if (n > q.size()) {
        throw Error("internal: position " + std::to_string(t) + " past its block table");
    } else if (pool_.shared(q[n])) {
        const int mine = pool_.take();
        for (int i = 0; i < at; i++) {
            copy_from_.push_back(q[n] * kBlock + i);
            copy_to_.push_back(mine * kBlock + i);
        }
        pool_.unref(q[n]);
        q[n] = mine;
    }
    return q[n] * kBlock + at;
}

void KvBlocks::take_copies() {
    copy_from_.clear();
    copy_to_.clear();
}

int32_t KvBlocks::cross_row(int b, int t) {
    BlockTable &q = cross_[(size_t)b];
    if (t % kBlock == 0) q.push_back(pool_.take());
    return q.back() * kBlock + t % kBlock;
}

void KvBlocks::release(int b, int beams) {
    for (int k = 0; k < beams; k++) {
        BlockTable &q = slot_[(size_t)b * beams + k];
        for (int x : q) pool_.unref(x);
        q.clear();
    }
    for (int x : cross_[(size_t)b]) pool_.unref(x);
    cross_[(size_t)b].clear();
}

void KvBlocks::follow(int first, const std::vector<int> &parent, int32_t *len) {
    const int n = (int)parent.size();
    const std::vector<BlockTable> old(slot_.begin() + first, slot_.begin() + first + n);
    const std::vector<int32_t> lens(len + first, len + first + n);
    for (int k = 0; k < n; k++) {
        const int from = parent[(size_t)k];
        if (from == k) continue;
        const BlockTable &p = old[(size_t)from];
        const size_t m = std::min(p.size(), (size_t)blocks_for(lens[(size_t)from]));
        slot_[(size_t)(first + k)].assign(p.begin(), p.begin() + (ptrdiff_t)m);
        for (int x : slot_[(size_t)(first + k)]) pool_.ref(x);
        len[first + k] = lens[(size_t)from];
    }
    for (int k = 0; k < n; k++) {
        if (parent[(size_t)k] == k) continue;
        for (int x : old[(size_t)k]) pool_.unref(x);
    }
}

}  // namespace halformer::decoding
