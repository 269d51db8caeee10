// Generation with a paged KV cache: greedy (argmax kernel, ties to the
// lowest id), beam search (log-softmax head + top-k kernel, length penalty
// ((5 + len) / 6)^α, early stop once `beam` hypotheses have ended), and
// sampling (hf_sample: temperature, top-k, top-p, drawn from one seeded
// uniform a row; only the ids leave the kernels). The decoder runs one
// position per step over all beams of all inputs decoding (one kernel call
// per step for the batch, each row at its own position), and inputs join
// the running batch (continuous batching, GenerateOptions::join): a group
// of joining inputs is encoded and its prefixes prefilled in chunks beside
// the rows decoding, then decodes with them. An input that is done leaves
// the batch at once and its cache blocks are freed.
//
// Beam search, exactly (tests/make_fixtures.py implements the same rule in
// PyTorch): each live beam proposes its beam+1 best next tokens with score
// = beam score + log p; candidates are ranked by score (ties: lower beam, then
// lower id); walking down the ranking, a candidate ending in eos becomes a
// finished hypothesis with score / ((5 + len) / 6)^α (len counts the generated
// tokens, eos included) and any other becomes one of the next step's beams,
// until `beam` beams are chosen. An input is done when `beam` hypotheses have
// finished, no beam is left, or the length limit is reached (live beams are
// then finished as they are). The n_best highest normalised scores are
// returned.
#include "layers/layers.h"
#include "session.h"
#include "decoding/search.h"

#include "halformer/options.h"

#include "hf_argmax.h"
#include "hf_sample.h"
#include "hf_topk8.h"

HF_DEVICE_KERNELS(hf_argmax)
HF_DEVICE_KERNELS(hf_topk8)

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdint>
#include <deque>
#include <sstream>

namespace halformer {
namespace {

constexpr int kTopK = 8;    // hf_topk8: beam + 1 candidates per beam
constexpr int kBlock = kPageRows;  // cache rows per block of the paged cache (the _paged kernels' page)

int blocks_for(int64_t rows) { return (int)((rows + kBlock - 1) / kBlock); }

// A decoder-only prompt's sampling stream for `seed` (as generate() gives a
// prompt its seed, alone or batched).
uint64_t prompt_seed(uint64_t seed) { return seed * 0x9E3779B97F4A7C15ull; }

// Prompt b's stream in a generate() call: its own seed, or the call's seed
// and its index.
uint64_t prompt_stream(const GenerateOptions &opt, size_t b) {
    return opt.seeds.empty() ? prompt_seed(opt.seed) + b : prompt_seed(opt.seeds[b]);
}

bool same_sampling(const Sampling &a, const Sampling &b) {
    return a.sample == b.sample && a.temperature == b.temperature && a.top_k == b.top_k && a.top_p == b.top_p;
}

// Inputs one call takes in all, given and joined: a batch that joins
// without end would grow its per-input bookkeeping without end, so past
// this a call takes no more (the caller's next call does).
constexpr int kMostInputs = 4096;

// The paged KV cache's blocks (vLLM's block manager): kBlock cache rows
// each, in one cache per layer (the same rows in each). A block holds
// positions of one row, or of one source's encoder K|V; it is free again
// when nothing refers to it.
class BlockPool {
public:
    explicit BlockPool(int blocks) : refs_((size_t)blocks, 0) {
        for (int b = blocks - 1; b >= 0; b--) free_.push_back(b);
    }
    int blocks() const { return (int)refs_.size(); }
    int free() const { return (int)free_.size(); }
    int take() {
        if (free_.empty()) throw Error("internal: the KV cache has no free block");
        const int b = free_.back();
        free_.pop_back();
        refs_[b] = 1;
        return b;
    }
    void ref(int b) { refs_[b]++; }
    bool shared(int b) const { return refs_[b] > 1; }
    void unref(int b) {
        if (--refs_[b] == 0) free_.push_back(b);
    }

private:
    std::vector<int> refs_, free_;
};

// One slot's block table (slot r = b·K + k: beam k of input b): position
// t is at cache row blocks[t / kBlock] · kBlock + t % kBlock, each entry one
// reference. A beam that takes another parent takes the parent's table
// (a reference to each block); a block its table shares with another is
// copied on its first write into it (copy-on-write, vLLM's design).
using BlockTable = std::vector<int>;

// A table as a kernel reads it: n entries at out, past its own its first
// block (positions there are masked by their lengths).
void pack_table(const BlockTable &q, int n, int32_t *out) {
    for (int i = 0; i < n; i++) out[i] = i < (int)q.size() ? q[(size_t)i] : q[0];
}

}  // namespace

// One generate() call's decoder: the inputs given and those that join,
// through the paged cache.
struct Session::Decoder {
    Session &s;
    GenerateOptions o;  // the call's options, per-input lists growing as inputs join
    const bool encdec;
    const int K, V, D, KW;  // KW: the K|V cache rows hold 2·KW floats
    const size_t layers;
    std::unique_ptr<decoding::Search> search;
    const float *bias = nullptr;  // T5: the decoder's relative-position bias
    int pool_rows = 0;
    std::unique_ptr<BlockPool> pool;

    // Per input b: its source (encoder-decoder) and decoder prefix (bos +
    // target prefix, or the prompt), its blocks reserved, its source's
    // cache rows and length.
    std::vector<Sequence> src, prefix;
    std::vector<int> reserved;
    std::vector<int> cross_S;  // per input: its source's positions in the cache (its group's longest)
    std::vector<BlockTable> cross_blocks;
    std::vector<int32_t> src_len;
    std::vector<BlockTable> slot;
    std::vector<int32_t> len;     // per slot: positions written with real tokens
    std::vector<Sequence> context;  // per slot: its prefix, bos dropped (the penalties' context)
    int reserved_total = 0;

    std::deque<int> waiting;   // inputs given or joined, not yet prefilling
    std::vector<int> active;   // inputs decoding, in order of their rows
    // The group prefilling: its inputs (one row each: beam 0) and the
    // next position of its chunks.
    std::vector<int> group;
    int group_P = 0, group_S = 0, chunk_at = 0;

    std::vector<int> row_of;  // per slot: its row in the step's batch
    std::chrono::steady_clock::time_point step_start;
    std::vector<double> u;
    std::vector<float> chosen_logp;
    std::vector<Sampling> row_sampling;  // per row of a step without beams: its input's
    decoding::Adjustments adjust;

    Decoder(Session &s_, const std::vector<Sequence> &inputs, const GenerateOptions &opt)
        : s(s_), o(opt), encdec(s_.cfg.architecture == Architecture::EncoderDecoder), K(opt.beam),
          V(s_.w->gen_rows), D(s_.cfg.d_model), KW(s_.desc.kv_width), layers(s_.w->dec.layers.size()) {
        const int eos_stop = o.stop_at_eos ? s.cfg.eos_id : -2;  // -2: no token id matches
        // The checkpoint's generation settings where the options leave them.
        if (o.forced_eos_id == -2) o.forced_eos_id = o.stop_at_eos ? s.cfg.forced_eos_id : -1;
        if (o.forced_eos_id < -1 || o.forced_eos_id >= V) {
            throw Error("generate: forced_eos_id " + std::to_string(o.forced_eos_id) + " is out of range [-1, " +
                        std::to_string(V) + ")");
        }
        if (o.stop_at_eos) {
            for (int32_t id : s.cfg.stop_ids) {
                if (std::find(o.stop_ids.begin(), o.stop_ids.end(), id) == o.stop_ids.end()) o.stop_ids.push_back(id);
            }
        }
        // Limits are per input (max_new_tokens_each, filled by the caller),
        // and so are the greedy or sampling settings without beams.
        if (K == 1 && o.sampling_each.empty()) o.sampling_each.assign(inputs.size(), sampling_of(o));
        search = decoding::make_search(0, o, 1 << 30, eos_stop, s.cfg.pad_id);
        bias = s.stack_bias(s.w->dec, true);
        for (size_t b = 0; b < inputs.size(); b++) {
            add_input(inputs[b], o.target_prefix.empty() ? Sequence{} : o.target_prefix[b]);
        }
        search->add((int)inputs.size());
        if (bias) {
            // T5's kernels take one query position a step: every prefix of
            // one length, and nothing joins.
            for (auto &p : prefix) {
                if (p.size() != prefix[0].size()) {
                    throw Error("generate: this model's relative-position attention (T5) takes one query position "
                                "a step: give every input a target prefix of one length");
                }
            }
            o.join = nullptr;
        }
    }

    // Input b's per-input state (its options are in o's lists already).
    void add_input(const Sequence &in, const Sequence &target_prefix) {
        if (encdec) {
            src.push_back(in);
            Sequence p{s.cfg.bos_id};
            p.insert(p.end(), target_prefix.begin(), target_prefix.end());
            prefix.push_back(std::move(p));
        } else {
            src.emplace_back();
            prefix.push_back(in);
        }
        reserved.push_back(0);
        cross_S.push_back(0);
        cross_blocks.emplace_back();
        src_len.push_back((int32_t)src.back().size());
        const Sequence &p = prefix.back();
        for (int k = 0; k < K; k++) {
            slot.emplace_back();
            len.push_back(0);
            context.emplace_back(p.begin() + (encdec ? 1 : 0), p.end());
        }
        waiting.push_back((int)prefix.size() - 1);
    }

    int limit(int b) const { return o.max_new_tokens_each[(size_t)b]; }

    // The blocks input b can hold at once in a group whose prefixes are P
    // and sources S long: its source's K|V, then (a row writes positions
    // up to p + max_new - 2: the last token chosen is never read) greedy:
    // its prefix padded to P, its new positions taking its padding's rows
    // first; beams: the prefill's blocks, which every beam shares, and per
    // beam the blocks from the one position p is in, which it may copy or
    // add.
    int reservation(int b, int P, int S) const {
        const int n = limit(b), p = (int)prefix[(size_t)b].size();
        if (K == 1) return blocks_for(S) + blocks_for(std::max(P, p + n - 1));
        return blocks_for(S) + blocks_for(P) + K * (blocks_for(p + n - 1) - p / kBlock);
    }

    // The cache: pool_blocks blocks in every layer, within the budget.
    void allocate(int pool_blocks) {
        pool_rows = pool_blocks * kBlock;
        pool = std::make_unique<BlockPool>(pool_blocks);
        s.self_kv.resize(layers);
        s.attach(s.self_kv);
        for (size_t l = 0; l < layers; l++) s.self_kv[l].need((size_t)pool_rows * 2 * KW);
    }

    // Slot r's cache row for position t (written next): in a new block at
    // a block's first position, else in its table's block (beam 0 of a
    // padded prefix: the row its prefill wrote there). A block shared
    // with another table is first copied (its rows before t: the copies
    // run before the step's layers, copy_shared_rows).
    std::vector<int32_t> copy_from, copy_to;
    int32_t row_for(int r, int t) {
        BlockTable &q = slot[(size_t)r];
        const size_t n = (size_t)(t / kBlock);
        const int at = t % kBlock;
        if (n == q.size()) {
            q.push_back(pool->take());
        } else if (n > q.size()) {
            throw Error("internal: position " + std::to_string(t) + " past its block table");
        } else if (pool->shared(q[n])) {
            const int mine = pool->take();
            for (int i = 0; i < at; i++) {
                copy_from.push_back(q[n] * kBlock + i);
                copy_to.push_back(mine * kBlock + i);
            }
            pool->unref(q[n]);
            q[n] = mine;
        }
        return q[n] * kBlock + at;
    }

    // The copies row_for asked for, in every layer's cache.
    void copy_shared_rows() {
        if (copy_from.empty()) return;
        const int n = (int)copy_from.size();
        float *tmp = s.kv_tmp.need((size_t)n * 2 * KW);
        for (size_t l = 0; l < layers; l++) {
            float *cache = s.self_kv[l].get();
            layers::gather_rows(s, cache, 2 * KW, pool_rows, copy_from.data(), n, tmp);
            layers::scatter_rows(s, tmp, 2 * KW, n, copy_to.data(), cache, pool_rows);
        }
        copy_from.clear();
        copy_to.clear();
    }


    void release_input(int b) {
        for (int k = 0; k < K; k++) {
            BlockTable &q = slot[(size_t)b * K + k];
            for (int x : q) pool->unref(x);
            q.clear();
        }
        for (int x : cross_blocks[(size_t)b]) pool->unref(x);
        cross_blocks[(size_t)b].clear();
        cross_S[(size_t)b] = 0;
        reserved_total -= reserved[(size_t)b];
        reserved[(size_t)b] = 0;
    }

    // ---- joining ----------------------------------------------------------

    int live() const { return (int)(active.size() + group.size() + waiting.size()); }

    // Asks o.join for inputs while the batch has room, and checks them.
    void poll_joins() {
        if (!o.join || (int)prefix.size() >= kMostInputs) return;
        const int room = std::min(o.max_batch - live(), kMostInputs - (int)prefix.size());
        if (room <= 0) return;
        std::vector<JoinInput> in = o.join(room);
        if (in.empty()) return;
        if ((int)in.size() > room) {
            throw Error("generate: join returned " + std::to_string(in.size()) + " inputs for room for " +
                        std::to_string(room));
        }
        // (Inputs given without seeds keep their streams: seeds[b] is read
        // only as an input joins.)
        if (o.seeds.size() < prefix.size()) o.seeds.resize(prefix.size(), 0);
        for (auto &j : in) {
            check_join(j);
            o.seeds.push_back(encdec ? j.seed : prompt_seed(j.seed));
            o.max_new_tokens_each.push_back(limit_of(j));
            if (K == 1) o.sampling_each.push_back(j.sampling.value_or(sampling_of(o)));
            add_input(j.input, j.target_prefix);
        }
        search->add((int)in.size());
    }

    void check_join(const JoinInput &j) const;
    int limit_of(const JoinInput &j) const;

    // Takes waiting inputs into a new group while their blocks are free:
    // the oldest, then, in order, those whose prefixes keep the group's
    // padding small (the longest at most 1.5 times the shortest, or 16
    // positions more): the others wait for the next group, prefilled while
    // this one decodes.
    void form_group() {
        if (!group.empty() || waiting.empty()) return;
        int P = 0, S = 0, shortest = 0;
        std::vector<int> g;
        for (auto it = waiting.begin(); it != waiting.end();) {
            const int b = *it, p = (int)prefix[(size_t)b].size();
            const int P2 = std::max(P, p), S2 = std::max(S, (int)src[(size_t)b].size());
            const int lo = g.empty() ? p : std::min(shortest, p);
            if (!g.empty() && 2 * P2 > 3 * lo && P2 > lo + 16) {
                ++it;
                continue;
            }
            int need = 0;
            for (int x : g) need += reservation(x, P2, S2);
            need += reservation(b, P2, S2);
            if (reserved_total + need > pool->blocks()) {
                if (g.empty() && active.empty()) {
                    throw Error("generate: input " + std::to_string(b) + " needs " + std::to_string(need) +
                                " KV cache blocks of " + std::to_string(kBlock) + " positions; the cache has " +
                                std::to_string(pool->blocks()) + " (GenerateOptions::kv_blocks)");
                }
                break;
            }
            g.push_back(b);
            P = P2;
            S = S2;
            shortest = lo;
            it = waiting.erase(it);
        }
        if (g.empty()) return;
        for (int x : g) {
            reserved[(size_t)x] = reservation(x, P, S);
            reserved_total += reserved[(size_t)x];
        }
        group = g;
        group_P = P;
        group_S = S;
        chunk_at = 0;
        if (encdec) encode_group();
    }

    // The group's sources: the encoder, then each decoder layer's K|V of
    // them into their blocks (every source padded to the longest).
    void encode_group() {
        const int G = (int)group.size(), S = group_S;
        std::vector<Sequence> srcs;
        for (int b : group) srcs.push_back(src[(size_t)b]);
        std::vector<int32_t> lens;
        const float *memory = s.encoder(srcs, S, lens);
        // (The encoder's bias table took the scratch the decoder's was in.)
        if (bias) bias = s.stack_bias(s.w->dec, true);
        std::vector<int32_t> to((size_t)S * G);
        for (int g = 0; g < G; g++) {
            const int b = group[(size_t)g];
            for (int t = 0; t < S; t++) {
                if (t % kBlock == 0) cross_blocks[(size_t)b].push_back(pool->take());
                to[(size_t)t * G + g] = cross_blocks[(size_t)b].back() * kBlock + t % kBlock;
            }
            cross_S[(size_t)b] = S;
        }
        float *stage = s.kv_stage.need((size_t)S * G * 2 * KW);
        for (size_t l = 0; l < layers; l++) {
            layers::memory_kv(s, layers::Pass{}, s.w->dec.layers[l].cross, memory, S * G, stage);
            layers::scatter_rows(s, stage, 2 * KW, S * G, to.data(), s.self_kv[l].get(), pool_rows);
        }
    }

    // ---- the steps ---------------------------------------------------------

    // The kernels' block tables of the call's rows (their slots), L
    // positions each (entries past a row's own: its first block, masked by
    // kv_len), per group of `group_rows` rows its source's, and for a
    // prefill chunk (dense) every position's row, time-major.
    std::vector<int32_t> block_table, cross_table, cross_len, dense_rows;
    int table_stride = 0, cross_stride = 0, cross_S_max = 0;

    void tables(const std::vector<int> &slots, int L, int group_rows, bool dense) {
        const int R = (int)slots.size(), NB = blocks_for(L);
        table_stride = NB;
        block_table.assign((size_t)R * NB, 0);
        for (int c = 0; c < R; c++) pack_table(slot[(size_t)slots[(size_t)c]], NB, &block_table[(size_t)c * NB]);
        if (dense) {
            // (The prefill's keys: position t of row c at t·R + c.)
            dense_rows.resize((size_t)L * R);
            for (int t = 0; t < L; t++) {
                for (int c = 0; c < R; c++) {
                    dense_rows[(size_t)t * R + c] = block_table[(size_t)c * NB + t / kBlock] * kBlock + t % kBlock;
                }
            }
        }
        if (!encdec) return;
        const int G = R / group_rows;
        int S = 0;
        for (int g = 0; g < G; g++) S = std::max(S, cross_S[(size_t)slots[(size_t)g * group_rows] / K]);
        cross_stride = blocks_for(S);
        cross_table.assign((size_t)G * cross_stride, 0);
        cross_len.resize(G);
        for (int g = 0; g < G; g++) {
            const int b = slots[(size_t)g * group_rows] / K;
            pack_table(cross_blocks[(size_t)b], cross_stride, &cross_table[(size_t)g * cross_stride]);
            cross_len[g] = src_len[(size_t)b];
        }
        cross_S_max = S;
    }

    // T positions of the call's R rows from position `start`: their K|V to
    // write_rows, keys through the block tables.
    void run_layers(float *&x, float *&xa, int T, int R, int start, const std::vector<int32_t> &write_rows,
                    const std::vector<int32_t> &kv_len, int L, int cross_group, const int32_t *row_pos = nullptr) {
        copy_shared_rows();
        RowMap rows;
        rows.row_pos = row_pos;
        rows.block_table = block_table.data();
        rows.table_stride = table_stride;
        rows.pool_rows = pool_rows;
        rows.write_rows = write_rows.data();
        rows.staging = s.kv_stage.need((size_t)T * R * 2 * KW);
        if (T > 1) {
            rows.dense_rows = dense_rows.data();
            rows.dense = s.kv_tmp.need((size_t)L * R * 2 * KW);
        }
        if (encdec) {
            rows.cross_table = cross_table.data();
            rows.cross_stride = cross_stride;
        }
        for (size_t l = 0; l < layers; l++) {
            float *cache = s.self_kv[l].get();
            s.layer(s.w->dec.layers[l], true, x, xa, T, R, start, cache, kv_len.data(), encdec ? cache : nullptr,
                    encdec ? cross_len.data() : nullptr, cross_S_max, cross_group, rows, bias);
        }
    }

    // One chunk of the group's prefixes: positions chunk_at..+T of every
    // row (beam 0 of each input; a shorter prefix padded at its end: its
    // own keys stop at its length, and its padding's rows are the ones its
    // next positions take). A row whose last position is in the chunk
    // keeps its output in last_rows. After the last chunk the group's first
    // tokens are chosen and it joins the rows decoding.
    void prefill_chunk() {
        const int G = (int)group.size(), P = group_P;
        const int T = active.empty() ? P - chunk_at : std::min(std::max(o.prefill_chunk, 1), P - chunk_at);
        const int c0 = chunk_at, L = c0 + T;
        std::vector<int> slots(G);
        std::vector<int32_t> tokens((size_t)T * G, s.cfg.pad_id), write((size_t)T * G), kv_len(G);
        for (int g = 0; g < G; g++) {
            const int b = group[(size_t)g];
            slots[(size_t)g] = b * K;
            const Sequence &p = prefix[(size_t)b];
            for (int t = c0; t < L; t++) {
                if (t < (int)p.size()) tokens[(size_t)(t - c0) * G + g] = p[(size_t)t];
                write[(size_t)(t - c0) * G + g] = row_for(b * K, t);
            }
            kv_len[g] = std::min((int)p.size(), L);
        }
        tables(slots, L, 1, true);
        float *x = s.x0.need((size_t)T * G * D), *xa = s.x1.need((size_t)T * G * D);
        layers::embed(s, s.w->dec, tokens.data(), T, G, c0, x);
        run_layers(x, xa, T, G, c0, write, kv_len, L, 1);
        // Rows whose last position is in this chunk.
        std::vector<int32_t> at, to;
        for (int g = 0; g < G; g++) {
            const int last = (int)prefix[(size_t)group[(size_t)g]].size() - 1;
            if (last >= c0 && last < L) {
                at.push_back((last - c0) * G + g);
                to.push_back(g);
            }
        }
        float *last_rows = s.last_rows.need((size_t)G * D);
        if (!at.empty()) {
            float *tmp = s.head_tmp.need(at.size() * D);
            layers::gather_rows(s, x, D, T * G, at.data(), (int)at.size(), tmp);
            layers::scatter_rows(s, tmp, D, (int)at.size(), to.data(), last_rows, G);
        }
        chunk_at = L;
        if (chunk_at < P) return;
        // The group's first tokens.
        for (int g = 0; g < G; g++) {
            const int b = group[(size_t)g];
            for (int k = 0; k < K; k++) len[(size_t)b * K + k] = (int32_t)prefix[(size_t)b].size();
        }
        s.final_norm(s.w->dec.final_norm, last_rows, G);
        std::vector<int> inputs = group;
        choose(inputs, slots, last_rows);
        group.clear();
        for (int b : inputs) {
            if (!search->done(b)) active.push_back(b);
        }
        leave_done();
    }

    // One position more for every row decoding: each at its own position.
    void decode_step() {
        std::vector<int> slots;
        for (int b : active) {
            for (int k = 0; k < K; k++) slots.push_back(b * K + k);
        }
        const int R = (int)slots.size();
        std::vector<int32_t> tokens(R), write(R), kv_len(R), row_pos(R);
        int L = 0;
        for (int c = 0; c < R; c++) {
            const int r = slots[(size_t)c];
            tokens[c] = search->next(r);
            row_pos[c] = len[(size_t)r];
            write[c] = row_for(r, row_pos[c]);
            kv_len[c] = ++len[(size_t)r];
            L = std::max(L, kv_len[c]);
        }
        tables(slots, L, K, false);
        float *x = s.x0.need((size_t)R * D), *xa = s.x1.need((size_t)R * D);
        layers::embed(s, s.w->dec, tokens.data(), 1, R, L - 1, x, bias ? nullptr : row_pos.data());
        run_layers(x, xa, 1, R, L - 1, write, kv_len, L, K, row_pos.data());
        s.final_norm(s.w->dec.final_norm, x, R);
        choose(active, slots, x);
        std::vector<int> still;
        for (int b : active) {
            if (!search->done(b)) still.push_back(b);
        }
        active = still;
        leave_done();
    }

    // Frees the blocks of every input done and not yet freed.
    std::vector<char> freed;
    void leave_done() {
        freed.resize((size_t)search->inputs(), 0);
        for (int b = 0; b < search->inputs(); b++) {
            if (search->done(b) && !freed[(size_t)b] && reserved[(size_t)b] > 0) {
                release_input(b);
                freed[(size_t)b] = 1;
            }
        }
    }

    // The step's choice for `inputs`, whose rows (`slots`, in order) have
    // their last hidden states, normalized, in x: only ids (and for beam
    // search the K + 1 best log-probabilities) come back to the host.
    void choose(const std::vector<int> &inputs, const std::vector<int> &slots, const float *x) {
        const int R = (int)slots.size();
        row_of.assign(slot.size(), 0);
        for (int c = 0; c < R; c++) row_of[(size_t)slots[(size_t)c]] = c;
        float *topv = s.topv.need((size_t)R * kTopK);
        int32_t *topi = (int32_t *)s.topi.need((size_t)R * kTopK);
        const decoding::Need need = search->need();
        const bool logp = o.return_logprobs;
        float *scores = step_scores(slots, x, need == decoding::Need::TopLogProbs || logp);
        View vs(scores, {{V, 1}, {R, V}});
        decoding::StepResult res;
        if (need == decoding::Need::TopLogProbs) {
            View vv(topv, {{kTopK, 1}, {R, kTopK}}), vi(topi, {{kTopK, 1}, {R, kTopK}}, true);
            s.run("topk", [&] { return HF_PICK(s.device(), hf_topk8)(vs.get(), vv.get(), vi.get()); });
            s.dev->to_host(topv, (size_t)R * kTopK * sizeof(float));
            s.dev->to_host(topi, (size_t)R * kTopK * sizeof(int32_t));
            res = {topi, topv, kTopK};
        } else if (need == decoding::Need::Argmax) {
            argmax(vs, R, topv, topi, logp);
            res = {topi, nullptr, 1};
            // (The argmax of the log-probabilities is the chosen id's.)
            if (logp) res.logp = topv;
        } else {
            res = draw(inputs, slots, scores, vs, topv, topi);
        }
        search->step(inputs, res, row_of);
        // (The step's time and rows: Model::step_seconds, step_rows.)
        const auto now = std::chrono::steady_clock::now();
        s.step_seconds.push_back(std::chrono::duration<double>(now - step_start).count());
        s.step_rows.push_back(R);
        step_start = now;
        search->report_done();
        follow_parents(inputs);
    }

    // The step's scores for its rows (`slots`), from their last hidden
    // states x: the logits, after the search's penalties and bans, or
    // their log-softmax (lsm).
    float *step_scores(const std::vector<int> &slots, const float *x, bool lsm) {
        const int R = (int)slots.size();
        float *out = s.logits.need((size_t)R * V);
        if (!search->adjusts()) {
            s.project(x, R, D, out, lsm, true);
            return out;
        }
        // The penalties and bans change the logits, then the log-softmax
        // (where needed) normalizes what they left.
        s.project(x, R, D, out, false, true);
        adjust.clear();
        for (int c = 0; c < R; c++) {
            const int r = slots[(size_t)c];
            search->adjustments(c, r, context[(size_t)r], adjust);
        }
        float *tmp = s.head_tmp.need((size_t)R * V);
        float *scores = out;
        if (!adjust.ids.empty()) {
            layers::logits_adjust(s, out, R, V, adjust.rows.data(), adjust.ids.data(), adjust.factor.data(),
                                  (int)adjust.ids.size(), tmp);
            std::swap(scores, tmp);
        }
        if (lsm) {
            layers::log_softmax(s, scores, R, V, tmp);
            std::swap(scores, tmp);
        }
        // A forced last token: every other id banned after the log-softmax
        // (the forced one keeps its own log-probability, as transformers
        // scores it).
        adjust.clear();
        for (int c = 0; c < R; c++) search->forced(c, slots[(size_t)c], V, adjust);
        if (adjust.ids.empty()) return scores;
        layers::logits_adjust(s, scores, R, V, adjust.rows.data(), adjust.ids.data(), adjust.factor.data(),
                              (int)adjust.ids.size(), tmp);
        return tmp;
    }

    // Each row's argmax id into topi (and its value into topv, with
    // return_logprobs), on the host.
    void argmax(View &vs, int R, float *topv, int32_t *topi, bool logp) {
        View vv(topv, {{1, 1}, {R, 1}}), vi(topi, {{1, 1}, {R, 1}}, true);
        s.run("argmax", [&] { return HF_PICK(s.device(), hf_argmax)(vs.get(), vv.get(), vi.get()); });
        s.dev->to_host(topi, (size_t)R * sizeof(int32_t));
        if (logp) s.dev->to_host(topv, (size_t)R * sizeof(float));
    }

    // Without beams, each input greedy or sampling with its own settings
    // (sampling_each): the greedy rows take hf_argmax's ids, one call for
    // the step's rows; each run of consecutive rows that sample alike, one
    // hf_sample call, which draws each row's id from the row's uniform on
    // the CPU (hf_sample has no GPU build: a GPU session brings the step's
    // logits to the host first).
    decoding::StepResult draw(const std::vector<int> &inputs, const std::vector<int> &slots, float *scores,
                              View &vs, float *topv, int32_t *topi) {
        const int R = (int)slots.size();
        static_cast<decoding::SamplingSearch &>(*search).uniforms(inputs, row_of, R, u);
        std::vector<float> uf(u.begin(), u.end());
        row_sampling.assign((size_t)R, Sampling{});
        bool greedy_rows = false, sampled_rows = false;
        for (int c = 0; c < R; c++) {
            row_sampling[(size_t)c] = o.sampling_each[(size_t)slots[(size_t)c]];
            (row_sampling[(size_t)c].sample ? sampled_rows : greedy_rows) = true;
        }
        const bool logp = o.return_logprobs;
        if (greedy_rows) argmax(vs, R, topv, topi, logp);
        if (sampled_rows && s.dev->on_gpu()) s.dev->to_host(scores, (size_t)R * V * sizeof(float));
        for (int c0 = 0, c1 = 0; c0 < R; c0 = c1) {
            const Sampling &a = row_sampling[(size_t)c0];
            for (c1 = c0 + 1; c1 < R && same_sampling(row_sampling[(size_t)c1], a); c1++) {}
            if (!a.sample) continue;
            const int n = c1 - c0;
            View vh(scores + (size_t)c0 * V, {{V, 1}, {n, V}}), vu(uf.data() + c0, {{n, 1}}),
                vid(topi + c0, {{n, 1}}, true);
            s.run("sample", [&] { return hf_sample(vh.host(), a.temperature, a.top_k, a.top_p, vu.host(), vid.host()); });
        }
        decoding::StepResult res{topi, nullptr, 1};
        if (logp) {
            // The chosen ids' log-probabilities: a greedy row's is its
            // argmax's value; a drawn id's is read from its row (on the host).
            chosen_logp.resize(R);
            for (int c = 0; c < R; c++) {
                chosen_logp[c] = row_sampling[(size_t)c].sample ? scores[(size_t)c * V + topi[c]] : topv[c];
            }
            res.logp = chosen_logp.data();
        }
        return res;
    }

    // Beams that took another parent take its block table (the blocks of
    // its first len positions: never a prefix's padding past them).
    void follow_parents(const std::vector<int> &inputs) {
        if (K == 1) return;
        for (int b : inputs) {
            if (search->done(b)) continue;
            const size_t first = (size_t)b * K;
            bool moved = false;
            for (int k = 0; k < K; k++) moved = moved || search->parent((int)first + k) != (int)first + k;
            if (!moved) continue;
            std::vector<BlockTable> old(slot.begin() + (ptrdiff_t)first, slot.begin() + (ptrdiff_t)(first + K));
            std::vector<int32_t> lens(len.begin() + (ptrdiff_t)first, len.begin() + (ptrdiff_t)(first + K));
            // Every new reference first, then the old ones dropped: a block
            // two beams pass between them is never freed on the way.
            for (int k = 0; k < K; k++) {
                const int r = (int)first + k, from = search->parent(r) - (int)first;
                if (from == k) continue;
                const BlockTable &p = old[(size_t)from];
                const size_t n = std::min(p.size(), (size_t)blocks_for(lens[(size_t)from]));
                slot[(size_t)r].assign(p.begin(), p.begin() + (ptrdiff_t)n);
                for (int x : slot[(size_t)r]) pool->ref(x);
                len[(size_t)r] = lens[(size_t)from];
            }
            for (int k = 0; k < K; k++) {
                const int from = search->parent((int)first + k) - (int)first;
                if (from == k) continue;
                for (int x : old[(size_t)k]) pool->unref(x);
            }
        }
    }

    // The cache's blocks: the inputs given, as one group; with join, room
    // for more (GenerateOptions::kv_blocks), as much as the budget allows.
    int pool_blocks() {
        int P = 0, S = 0;
        for (size_t b = 0; b < prefix.size(); b++) {
            P = std::max(P, (int)prefix[b].size());
            S = std::max(S, (int)src[b].size());
        }
        int need = 0;
        for (size_t b = 0; b < prefix.size(); b++) need += reservation((int)b, P, S);
        if (!o.join) return need;
        if (o.kv_blocks > 0) return std::max(need, o.kv_blocks);
        const int typical = blocks_for(encdec ? 128 : 0) + blocks_for(128 + 256) + (K - 1) * blocks_for(256);
        int64_t blocks = std::max<int64_t>(need, (int64_t)std::max(o.max_batch, 1) * typical);
        for (; blocks > need; blocks = std::max<int64_t>(need, blocks / 2)) {
            try {
                s.require_fits(checked_product({blocks, kBlock, 2 * (int64_t)KW, (int64_t)layers}, "generate"),
                               "the KV cache");
                break;
            } catch (const Error &) {
            }
        }
        return (int)blocks;
    }

    // Runs to the end: inputs join, groups prefill, the batch decodes.
    std::vector<std::vector<Hypothesis>> run() {
        s.step_seconds.clear();
        s.step_rows.clear();
        step_start = std::chrono::steady_clock::now();
        for (;;) {
            if (o.on_step) o.on_step();
            poll_joins();
            form_group();
            // (A group whose prefill ends now decodes from the next turn.)
            const bool decoding = !active.empty();
            if (!group.empty()) prefill_chunk();
            if (decoding) decode_step();
            if (active.empty() && group.empty() && waiting.empty()) break;
        }
        return search->results();
    }
};

std::vector<std::vector<Hypothesis>> Session::decode(const std::vector<Sequence> &inputs, const GenerateOptions &opt) {
    Decoder d(*this, inputs, opt);
    d.allocate(d.pool_blocks());
    return d.run();
}

namespace {

// Sampling settings (`of`: whose, for the message).
void check_sampling(const Sampling &x, const std::string &of) {
    if (x.sample && !(x.temperature > 0 && std::isfinite(x.temperature))) {
        throw Error("generate: temperature" + of + " must be positive, not " + std::to_string(x.temperature));
    }
    if (x.top_k < 0) throw Error("generate: top_k" + of + " must be >= 0");
    if (!(x.top_p > 0 && x.top_p <= 1)) {
        throw Error("generate: top_p" + of + " must be in (0, 1], not " + std::to_string(x.top_p));
    }
}

// generate()'s options and inputs, before anything runs.
void check_generate(const Config &c, const std::vector<Sequence> &src, const GenerateOptions &opt) {
    if (c.architecture == Architecture::Encoder) throw Error("generate: an encoder-only model does not generate");
    // Each scalar option against its range (halformer/options.h); -1 is
    // max_new_tokens' "as the positions allow".
    static_assert(kTopK - 1 == 7, "options.cpp: beam's range is the top-k kernel's width - 1");
    for (const OptionSpec &s : generate_option_specs()) {
        const double v = s.get(opt);
        if (s.i == &GenerateOptions::max_new_tokens && v == -1) continue;
        const std::string why = s.check(v);
        if (!why.empty()) {
            std::ostringstream text;
            text << "generate: " << s.name << " = " << v << " " << why;
            throw Error(text.str());
        }
    }
    if (opt.n_best > opt.beam) {
        throw Error("generate: n_best " + std::to_string(opt.n_best) + " must be in [1, beam = " +
                    std::to_string(opt.beam) + "]");
    }
    if (opt.sample && opt.beam > 1) throw Error("generate: sampling and beam search are exclusive");
    if (!opt.sampling_each.empty()) {
        if (opt.beam > 1) throw Error("generate: sampling_each is for beam 1 (greedy or sampling), not beam " +
                                      std::to_string(opt.beam));
        if (opt.sampling_each.size() != src.size()) {
            throw Error("generate: " + std::to_string(opt.sampling_each.size()) + " sampling_each for " +
                        std::to_string(src.size()) + " inputs (give one per input, or none)");
        }
        for (size_t b = 0; b < src.size(); b++) check_sampling(opt.sampling_each[b], " of input " + std::to_string(b));
    }
    if (!opt.max_new_tokens_each.empty()) {
        if (opt.max_new_tokens_each.size() != src.size()) {
            throw Error("generate: " + std::to_string(opt.max_new_tokens_each.size()) + " max_new_tokens_each for " +
                        std::to_string(src.size()) + " inputs (give one per input, or none)");
        }
        for (int n : opt.max_new_tokens_each) {
            if (n < 1) throw Error("generate: max_new_tokens_each must be >= 1, not " + std::to_string(n));
        }
    }
    const int V = c.tgt_vocab_size;
    for (int32_t id : opt.stop_ids) {
        if (id < 0 || id >= V) {
            throw Error("generate: stop id " + std::to_string(id) + " is out of range [0, " + std::to_string(V) + ")");
        }
    }
    if (!opt.target_prefix.empty()) {
        if (c.architecture != Architecture::EncoderDecoder) {
            throw Error("generate: target_prefix is for encoder-decoder models (a decoder-only model's prompt "
                        "is its prefix)");
        }
        if (opt.target_prefix.size() != src.size()) {
            throw Error("generate: " + std::to_string(opt.target_prefix.size()) + " target prefixes for " +
                        std::to_string(src.size()) + " inputs (give one per input, or none)");
        }
        for (size_t b = 0; b < opt.target_prefix.size(); b++) {
            for (size_t t = 0; t < opt.target_prefix[b].size(); t++) {
                const int32_t id = opt.target_prefix[b][t];
                if (id < 0 || id >= V) {
                    throw Error("generate: target prefix token id " + std::to_string(id) + " at position " +
                                std::to_string(t) + " of input " + std::to_string(b) + " is out of range [0, " +
                                std::to_string(V) + ")");
                }
            }
        }
    }
    if (!opt.seeds.empty() && opt.seeds.size() != src.size()) {
        throw Error("generate: " + std::to_string(opt.seeds.size()) + " seeds for " + std::to_string(src.size()) +
                    " inputs (give one per input, or none)");
    }
}

}  // namespace

namespace {

// New tokens for an input of S source tokens (decoder-only: 0) and a
// prefix of P: max_new_tokens (-1: default_new_tokens, halformer/options.h),
// within max_positions.
int new_token_limit(const Config &c, const GenerateOptions &opt, int S, int P) {
    const int allowed = c.max_positions - P + 1;
    if (opt.max_new_tokens == -1) return default_new_tokens(c, S, P);
    if (opt.max_new_tokens < 1) throw Error("generate: max_new_tokens must be >= 1");
    if (opt.max_new_tokens > allowed) {
        throw Error("generate: " + std::to_string(P) + " prefix tokens + " + std::to_string(opt.max_new_tokens) +
                    " new tokens need " + std::to_string(P + opt.max_new_tokens - 1) +
                    " positions; the model has max_positions = " + std::to_string(c.max_positions));
    }
    return opt.max_new_tokens;
}

// Activations and caches of B inputs (S source and P prefix tokens, new_tokens
// more), estimated from the shapes (64-bit, checked), within the budget.
void require_generate_fits(Session &m, const GenerateOptions &opt, int64_t B, int64_t S, int64_t P,
                           int64_t new_tokens) {
    const Config &c = m.cfg;
    const int64_t D = std::max(c.d_model, m.desc.attn_width), F = m.desc.max_d_ff() * (m.desc.gated_ffn ? 2 : 1),
                  Ld = c.num_decoder_layers, V = c.tgt_vocab_size;
    const int64_t R = checked_product({B, opt.beam}, "generate"), cap = P + new_tokens;
    const int64_t enc = checked_product({S, B, 6 * D + F}, "generate"),
                  cross = checked_product({Ld, S, B, 2 * D}, "generate"),
                  self = checked_product({Ld, cap, R, 2 * D}, "generate"),
                  acts = checked_product({std::max<int64_t>(P, 1), R, 6 * D + F}, "generate"),
                  head = checked_product({R, V + 64}, "generate");
    m.require_fits(enc + cross + self + acts + head,
                   "generate (" + std::to_string(B) + " inputs x beam " + std::to_string(opt.beam) + ", " +
                       std::to_string(std::max(S, P)) + " input tokens, " + std::to_string(new_tokens) + " new)");
}

// Prompt b's new tokens at most: new_token_limit for its length, or less
// where max_new_tokens_each says so; Error where they do not fit its
// positions.
int prompt_limit(const Config &c, const GenerateOptions &opt, size_t b, int P) {
    if (opt.max_new_tokens_each.empty()) return new_token_limit(c, opt, 0, P);
    const int allowed = c.max_positions - P + 1, each = opt.max_new_tokens_each[b];
    const int n = opt.max_new_tokens == -1 ? std::min(default_new_tokens(c, 0, P), each)
                                           : std::min(opt.max_new_tokens, each);
    if (opt.max_new_tokens != -1 && opt.max_new_tokens < 1) throw Error("generate: max_new_tokens must be >= 1");
    if (n > allowed) {
        throw Error("generate: prompt " + std::to_string(b) + ": " + std::to_string(P) + " tokens + " +
                    std::to_string(n) + " new tokens need " + std::to_string(P + n - 1) +
                    " positions; the model has max_positions = " + std::to_string(c.max_positions));
    }
    return n;
}

// A decoder-only model's prompts run as one batch whatever their lengths
// (each row at its own positions: one kernel call per step for the
// batch), as many at a time as the memory budget holds: in order of
// length, each chunk halved until it fits. Each prompt keeps the seed,
// limit, callbacks and cancellation it has alone.
std::vector<std::vector<Hypothesis>> generate_prompts(Session &m, const std::vector<Sequence> &src,
                                                      const GenerateOptions &opt) {
    std::vector<size_t> order(src.size());
    for (size_t b = 0; b < src.size(); b++) order[b] = b;
    std::stable_sort(order.begin(), order.end(), [&](size_t a, size_t b) { return src[a].size() < src[b].size(); });
    std::vector<int> limit(src.size());
    for (size_t b = 0; b < src.size(); b++) limit[b] = prompt_limit(m.cfg, opt, b, (int)src[b].size());
    std::vector<std::vector<Hypothesis>> out(src.size());
    for (size_t at = 0; at < order.size();) {
        // The chunk order[at, at + n): its longest prompt is its last; the
        // most new tokens any of them may take.
        auto longest_new = [&](size_t n) {
            int most = 0;
            for (size_t i = at; i < at + n; i++) most = std::max(most, limit[order[i]]);
            return most;
        };
        size_t n = order.size() - at;
        while (n > 1) {
            try {
                require_generate_fits(m, opt, (int64_t)n, 0, (int64_t)src[order[at + n - 1]].size(), longest_new(n));
                break;
            } catch (const Error &) {
                n = (n + 1) / 2;
            }
        }
        const std::vector<size_t> idx(order.begin() + (ptrdiff_t)at, order.begin() + (ptrdiff_t)(at + n));
        at += n;
        GenerateOptions o = opt;
        o.seeds.clear();
        o.max_new_tokens_each.clear();
        o.sampling_each.clear();
        std::vector<Sequence> prompts;
        for (size_t b : idx) {
            prompts.push_back(src[b]);
            o.seeds.push_back(prompt_stream(opt, b));
            o.max_new_tokens_each.push_back(limit[b]);
            if (!opt.sampling_each.empty()) o.sampling_each.push_back(opt.sampling_each[b]);
        }
        if (opt.on_finished) {
            o.on_finished = [&opt, &idx](int i, const std::vector<Hypothesis> &h) {
                opt.on_finished((int)idx[(size_t)i], h);
            };
        }
        if (opt.on_token) o.on_token = [&opt, &idx](int i, int32_t id) { opt.on_token((int)idx[(size_t)i], id); };
        if (opt.cancelled) o.cancelled = [&opt, &idx](int i) { return opt.cancelled((int)idx[(size_t)i]); };
        auto r = m.decode(prompts, o);
        for (size_t i = 0; i < idx.size(); i++) out[idx[i]] = std::move(r[i]);
    }
    return out;
}

}  // namespace

void Session::Decoder::check_join(const JoinInput &j) const {
    const Config &c = s.cfg;
    if (j.sampling) {
        if (K > 1) throw Error("generate: a joining input's sampling is for beam 1, not beam " + std::to_string(K));
        check_sampling(*j.sampling, " of a joining input");
    }
    if (encdec) {
        s.check_tokens({j.input}, c.src_vocab_size, "joining source", 0);
        if (!j.target_prefix.empty()) {
            Sequence p{c.bos_id};
            p.insert(p.end(), j.target_prefix.begin(), j.target_prefix.end());
            s.check_tokens({p}, c.tgt_vocab_size, "joining target prefix", 0);
        }
    } else {
        if (!j.target_prefix.empty()) throw Error("generate: target_prefix is for encoder-decoder models");
        s.check_tokens({j.input}, c.tgt_vocab_size, "joining prompt", 0);
    }
}

int Session::Decoder::limit_of(const JoinInput &j) const {
    GenerateOptions one = o;
    one.max_new_tokens = j.max_new_tokens;
    one.max_new_tokens_each.clear();
    return encdec ? new_token_limit(s.cfg, one, (int)j.input.size(), 1 + (int)j.target_prefix.size())
                  : new_token_limit(s.cfg, one, 0, (int)j.input.size());
}

std::vector<std::vector<Hypothesis>> Model::generate(const std::vector<Sequence> &src,
                                                     const GenerateOptions &opt) {
    Lease lease(*pool_, true);
    Session &m = *lease;
    const Config &c = m.cfg;
    check_generate(c, src, opt);
    DeviceScope scope(m.dev.get());
    if (c.architecture == Architecture::EncoderDecoder) {
        m.check_tokens(src, c.src_vocab_size, "source", 0);
        int S = 0;
        for (auto &s : src) S = std::max(S, (int)s.size());
        // The decoder starts from bos and each input's target prefix.
        std::vector<Sequence> prefix(src.size(), Sequence{c.bos_id});
        int P = 1;
        for (size_t b = 0; b < opt.target_prefix.size(); b++) {
            prefix[b].insert(prefix[b].end(), opt.target_prefix[b].begin(), opt.target_prefix[b].end());
            P = std::max(P, (int)prefix[b].size());
        }
        // Each input's limit from its own source and prefix (an answer does
        // not depend on what else is in its batch).
        GenerateOptions o = opt;
        o.max_new_tokens_each.resize(src.size(), INT32_MAX);
        int new_tokens = 0;
        for (size_t b = 0; b < src.size(); b++) {
            int &n = o.max_new_tokens_each[b];
            n = std::min(n, new_token_limit(c, opt, (int)src[b].size(), (int)prefix[b].size()));
            new_tokens = std::max(new_tokens, n);
        }
        require_generate_fits(m, opt, (int64_t)src.size(), S, P, new_tokens);
        return m.decode(src, o);
    }
    m.check_tokens(src, c.tgt_vocab_size, "prompt", 0);
    for (size_t b = 0; b < src.size(); b++) {
        require_generate_fits(m, opt, 1, 0, (int64_t)src[b].size(), prompt_limit(c, opt, b, (int)src[b].size()));
    }
    if (opt.join) {
        // Joining: one batch, the cache's blocks deciding who prefills when.
        GenerateOptions o = opt;
        o.max_new_tokens_each.clear();
        o.seeds.clear();
        for (size_t b = 0; b < src.size(); b++) {
            o.max_new_tokens_each.push_back(prompt_limit(c, opt, b, (int)src[b].size()));
            o.seeds.push_back(prompt_stream(opt, b));
        }
        return m.decode(src, o);
    }
    return generate_prompts(m, src, opt);
}

}  // namespace halformer
