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
#include "decoding/generate.h"
#include "decoding/admission.h"
#include "decoding/kv_blocks.h"
#include "decoding/sampler.h"
#include "decoding/search.h"

#include "halformer/options.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdint>
#include <deque>
#include <sstream>

namespace halformer {
namespace {

using decoding::kTopK;
using decoding::blocks_for;
using decoding::BlockTable;
using decoding::kBlock;
static_assert(kBlock == kPageRows, "the block manager's blocks are the _paged kernels' pages");


// Inputs one call takes in all, given and joined: a batch that joins
// without end would grow its per-input bookkeeping without end, so past
// this a call takes no more (the caller's next call does).
constexpr int kMostInputs = 4096;

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
    decoding::KvBlocks kv;  // the cache's blocks: per slot, per input's source

    // Per input b: its source (encoder-decoder) and decoder prefix (bos +
    // target prefix, or the prompt), its source's cache rows and length.
    std::vector<Sequence> src, prefix;
    std::vector<int> cross_S;  // per input: its source's positions in the cache (its group's longest)
    std::vector<int32_t> src_len;
    std::vector<int32_t> len;     // per slot: positions written with real tokens
    std::vector<Sequence> context;  // per slot: its prefix, bos dropped (the penalties' context)

    // Inputs given or joined wait here until a group takes them, and hold
    // their reserved blocks until they are done.
    decoding::Admission admission;
    std::vector<int> active;   // inputs decoding, in order of their rows
    // The group prefilling: its inputs (one row each: beam 0) and the
    // next position of its chunks.
    std::vector<int> group;
    int group_P = 0, group_S = 0, chunk_at = 0;

    std::vector<int> row_of;  // per slot: its row in the step's batch
    std::chrono::steady_clock::time_point step_start;
    decoding::Sampler sampler;  // the step's scores and choice of ids

    Decoder(Session &s_, const std::vector<Sequence> &inputs, const GenerateOptions &opt)
        : s(s_), o(opt), encdec(s_.cfg.architecture == Architecture::EncoderDecoder), K(opt.beam),
          V(s_.w->gen_rows), D(s_.cfg.d_model), KW(s_.desc.kv_width), layers(s_.w->dec.layers.size()),
          admission(opt.beam), sampler(s_, o, V, D) {
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
        cross_S.push_back(0);
        kv.add_input(K);
        src_len.push_back((int32_t)src.back().size());
        const Sequence &p = prefix.back();
        for (int k = 0; k < K; k++) {
            len.push_back(0);
            context.emplace_back(p.begin() + (encdec ? 1 : 0), p.end());
        }
        const int b = (int)prefix.size() - 1;
        admission.add({(int)p.size(), (int)src.back().size(), limit(b)});
    }

    int limit(int b) const { return o.max_new_tokens_each[(size_t)b]; }

    // The cache: pool_blocks blocks in every layer, within the budget.
    void allocate(int pool_blocks) {
        pool_rows = pool_blocks * kBlock;
        kv.allocate(pool_blocks);
        s.self_kv.resize(layers);
        s.attach(s.self_kv);
        for (size_t l = 0; l < layers; l++) s.self_kv[l].need((size_t)pool_rows * 2 * KW);
    }

    // The copies of shared blocks the step's rows asked for (kv.row_for),
    // in every layer's cache.
    void copy_shared_rows() {
        if (kv.copy_from().empty()) return;
        const int n = (int)kv.copy_from().size();
        float *tmp = s.kv_tmp.need((size_t)n * 2 * KW);
        for (size_t l = 0; l < layers; l++) {
            float *cache = s.self_kv[l].get();
            layers::gather_rows(s, cache, 2 * KW, pool_rows, kv.copy_from().data(), n, tmp);
            layers::scatter_rows(s, tmp, 2 * KW, n, kv.copy_to().data(), cache, pool_rows);
        }
        kv.take_copies();
    }

    void release_input(int b) {
        kv.release(b, K);
        cross_S[(size_t)b] = 0;
        admission.release(b);
    }

    // ---- joining ----------------------------------------------------------

    int live() const { return (int)(active.size() + group.size() + admission.waiting().size()); }

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
            o.seeds.push_back(encdec ? j.seed : decoding::prompt_seed(j.seed));
            o.max_new_tokens_each.push_back(limit_of(j));
            if (K == 1) o.sampling_each.push_back(j.sampling.value_or(sampling_of(o)));
            add_input(j.input, j.target_prefix);
        }
        search->add((int)in.size());
    }

    void check_join(const JoinInput &j) const;
    int limit_of(const JoinInput &j) const;

    // A new group of waiting inputs while their blocks are free
    // (decoding::Admission): the others wait for the next group, prefilled
    // while this one decodes.
    void form_group() {
        if (!group.empty() || admission.waiting().empty()) return;
        decoding::Admission::Group g = admission.form(kv.pool().blocks(), active.empty());
        if (g.inputs.empty()) return;
        group = g.inputs;
        group_P = g.P;
        group_S = g.S;
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
            for (int t = 0; t < S; t++) to[(size_t)t * G + g] = kv.cross_row(b, t);
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
        for (int c = 0; c < R; c++) {
            decoding::pack_table(kv.table(slots[(size_t)c]), NB, &block_table[(size_t)c * NB]);
        }
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
            decoding::pack_table(kv.cross(b), cross_stride, &cross_table[(size_t)g * cross_stride]);
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
        Session::StackPass pass;
        pass.T = T;
        pass.R = R;
        pass.start = start;
        pass.self_kv = [&](size_t l) { return s.self_kv[l].get(); };
        pass.kv_len = kv_len.data();
        if (encdec) {
            // (The paged cache holds the sources' K|V too.)
            pass.cross_kv = [&](size_t l) -> const float * { return s.self_kv[l].get(); };
            pass.cross_len = cross_len.data();
            pass.S = cross_S_max;
        }
        pass.cross_group = cross_group;
        pass.rows = rows;
        pass.pos_bias = bias;
        s.stack(s.w->dec, true, x, xa, pass);
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
                write[(size_t)(t - c0) * G + g] = kv.row_for(b * K, t);
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
            write[c] = kv.row_for(r, row_pos[c]);
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
            if (search->done(b) && !freed[(size_t)b] && admission.reserved(b) > 0) {
                release_input(b);
                freed[(size_t)b] = 1;
            }
        }
    }

    // The step's choice for `inputs`, whose rows (`slots`, in order) have
    // their last hidden states, normalized, in x (the sampler: only ids,
    // and for beam search the K + 1 best log-probabilities, come back to
    // the host); then the search's step, the step's time, the beams' tables.
    void choose(const std::vector<int> &inputs, const std::vector<int> &slots, const float *x) {
        const int R = (int)slots.size();
        row_of.assign((size_t)kv.slots(), 0);
        for (int c = 0; c < R; c++) row_of[(size_t)slots[(size_t)c]] = c;
        const decoding::StepResult res = sampler.choose(*search, inputs, slots, x, row_of, context);
        search->step(inputs, res, row_of);
        // (The step's time and rows: Model::step_seconds, step_rows.)
        const auto now = std::chrono::steady_clock::now();
        s.step_seconds.push_back(std::chrono::duration<double>(now - step_start).count());
        s.step_rows.push_back(R);
        step_start = now;
        search->report_done();
        follow_parents(inputs);
    }

    // Beams that took another parent take its block table (the blocks of
    // its first len positions: never a prefix's padding past them).
    void follow_parents(const std::vector<int> &inputs) {
        if (K == 1) return;
        std::vector<int> parent((size_t)K);
        for (int b : inputs) {
            if (search->done(b)) continue;
            const int first = b * K;
            bool moved = false;
            for (int k = 0; k < K; k++) {
                parent[(size_t)k] = search->parent(first + k) - first;
                moved = moved || parent[(size_t)k] != k;
            }
            if (moved) kv.follow(first, parent, len.data());
        }
    }

    // The cache's blocks: the inputs given, as one group; with join, room
    // for more (GenerateOptions::kv_blocks), as much as the budget allows.
    int pool_blocks() {
        const int need = admission.need_all();
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
            if (active.empty() && group.empty() && admission.waiting().empty()) break;
        }
        return search->results();
    }
};

std::vector<std::vector<Hypothesis>> Session::decode(const std::vector<Sequence> &inputs, const GenerateOptions &opt) {
    Decoder d(*this, inputs, opt);
    d.allocate(d.pool_blocks());
    return d.run();
}

void Session::Decoder::check_join(const JoinInput &j) const {
    const Config &c = s.cfg;
    if (j.sampling) {
        if (K > 1) throw Error("generate: a joining input's sampling is for beam 1, not beam " + std::to_string(K));
        decoding::check_sampling(*j.sampling, " of a joining input");
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
    return encdec ? decoding::new_token_limit(s.cfg, one, (int)j.input.size(), 1 + (int)j.target_prefix.size())
                  : decoding::new_token_limit(s.cfg, one, 0, (int)j.input.size());
}

}  // namespace halformer
