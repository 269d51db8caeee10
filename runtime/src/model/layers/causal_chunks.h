// A causal prefill's queries in chunks. Chunk [begin, end) of T new queries
// after `start` cached positions sees keys [0, start + end) only, so an
// attention call per chunk, over just those keys, skips the key blocks that
// a single call would compute and then mask for every query of the chunk:
// with n chunks of a fresh prefill, about (n + 1) / 2n of the single call's
// work (n ≤ 8: 56%).
//
// The answers are the same bits. A query's keys are cut into blocks from
// key 0 either way (generators/attention_generator.cpp); in a chunk's call
// its last block ends with keys past the call's extent, which are masked
// as the causal mask masked them in the single call, and the blocks a
// single call has beyond it are wholly masked for the chunk's queries:
// weight 0 times a sum of 0, adding exactly +0 to the row's denominator and
// output. (Halide 14 cannot skip those blocks inside one call: a predicate
// on the combination over key blocks that names the query narrows the
// query range of the per-tile stages, which then read past their scratch.)
#pragma once

#include <algorithm>
#include <vector>

namespace halformer {
namespace layers {

struct QueryChunk {
    int begin, end;
};

// Whole multiples of 32 queries (a GPU block's query tile, four of the CPU
// schedule's), at most 8 chunks; under 64 queries, one.
inline std::vector<QueryChunk> causal_query_chunks(int T) {
    constexpr int kMostChunks = 8, kAlign = 32;
    if (T < 2 * kAlign) return {{0, T}};
    const int per = (T + kMostChunks - 1) / kMostChunks;
    const int size = (per + kAlign - 1) / kAlign * kAlign;
    std::vector<QueryChunk> out;
    for (int t = 0; t < T; t += size) out.push_back({t, std::min(T, t + size)});
    return out;
}

}  // namespace layers
}  // namespace halformer
