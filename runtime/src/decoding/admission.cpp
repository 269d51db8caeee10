// The decoder's admission (admission.h).
#include "admission.h"

#include "kv_blocks.h"

#include "halformer/error.h"

#include <algorithm>
#include <string>

namespace halformer::decoding {

void Admission::add(const InputShape &in) {
    shape_.push_back(in);
    reserved_.push_back(0);
    waiting_.push_back((int)shape_.size() - 1);
}

int Admission::reservation(int b, int P, int S) const {
    const InputShape &in = shape_[(size_t)b];
    const int n = in.limit, p = in.prefix;
    if (K_ == 1) return blocks_for(S) + blocks_for(std::max(P, p + n - 1));
    return blocks_for(S) + blocks_for(P) + K_ * (blocks_for(p + n - 1) - p / kBlock);
}

Admission::Group Admission::form(int pool, bool idle) {
    Group g;
    int shortest = 0;
    for (auto it = waiting_.begin(); it != waiting_.end();) {
        const int b = *it, p = shape_[(size_t)b].prefix;
        const int P2 = std::max(g.P, p), S2 = std::max(g.S, shape_[(size_t)b].source);
        const int lo = g.inputs.empty() ? p : std::min(shortest, p);
        if (!g.inputs.empty() && 2 * P2 > 3 * lo && P2 > lo + 16) {
            ++it;
            continue;
        }
        int need = 0;
        for (int x : g.inputs) need += reservation(x, P2, S2);
        need += reservation(b, P2, S2);
        if (reserved_total_ + need > pool) {
            if (g.inputs.empty() && idle) {
                throw Error("generate: input " + std::to_string(b) + " needs " + std::to_string(need) +
                            " KV cache blocks of " + std::to_string(kBlock) + " positions; the cache has " +
                            std::to_string(pool) + " (GenerateOptions::kv_blocks)");
            }
            break;
        }
        g.inputs.push_back(b);
        g.P = P2;
        g.S = S2;
        shortest = lo;
        it = waiting_.erase(it);
    }
    for (int x : g.inputs) {
        reserved_[(size_t)x] = reservation(x, g.P, g.S);
        reserved_total_ += reserved_[(size_t)x];
    }
    return g;
}

void Admission::release(int b) {
    reserved_total_ -= reserved_[(size_t)b];
    reserved_[(size_t)b] = 0;
}

int Admission::need_all() const {
    int P = 0, S = 0;
    for (const InputShape &in : shape_) {
        P = std::max(P, in.prefix);
        S = std::max(S, in.source);
    }
    int need = 0;
    for (int b = 0; b < inputs(); b++) need += reservation(b, P, S);
    return need;
}

}  // namespace halformer::decoding
