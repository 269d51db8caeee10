// The decoder's scheduler (scheduler.h). Generation runs one position per
// step over all beams of all inputs decoding (one layers call per step for
// the batch, each row at its own position); inputs join the running batch
// (continuous batching, GenerateOptions::join): a group of joining inputs
// is encoded and its prefixes prefilled in chunks beside the rows
// decoding, then decodes with them. An input that is done leaves the batch
// at once and its cache blocks are freed. The policies (greedy, beams,
// sampling) are search.h's; the kernels are the Runner's.
#include "scheduler.h"
#include "generate.h"

#include <algorithm>

namespace halformer::decoding {
namespace {

// Inputs one call takes in all, given and joined: a batch that joins
// without end would grow its per-input bookkeeping without end, so past
// this a call takes no more (the caller's next call does).
constexpr int kMostInputs = 4096;

}  // namespace

Scheduler::Scheduler(const Config &cfg_, Runner &runner_, const std::vector<Sequence> &inputs,
                     const GenerateOptions &opt)
    : cfg(cfg_), runner(runner_), o(opt), encdec(cfg_.architecture == Architecture::EncoderDecoder), K(opt.beam),
      admission(opt.beam) {
    const int eos_stop = o.stop_at_eos ? cfg.eos_id : -2;  // -2: no token id matches
    const int V = runner.vocab();
    // The checkpoint's generation settings where the options leave them.
    if (o.forced_eos_id == -2) o.forced_eos_id = o.stop_at_eos ? cfg.forced_eos_id : -1;
    if (o.forced_eos_id < -1 || o.forced_eos_id >= V) {
        throw Error("generate: forced_eos_id " + std::to_string(o.forced_eos_id) + " is out of range [-1, " +
                    std::to_string(V) + ")");
    }
    if (o.stop_at_eos) {
        for (int32_t id : cfg.stop_ids) {
            if (std::find(o.stop_ids.begin(), o.stop_ids.end(), id) == o.stop_ids.end()) o.stop_ids.push_back(id);
        }
    }
    // Limits are per input (max_new_tokens_each, filled by the caller), and
    // so are the greedy or sampling settings without beams.
    if (K == 1 && o.sampling_each.empty()) o.sampling_each.assign(inputs.size(), sampling_of(o));
    search = make_search(0, o, 1 << 30, eos_stop, cfg.pad_id);
    for (size_t b = 0; b < inputs.size(); b++) {
        add_input(inputs[b], o.target_prefix.empty() ? Sequence{} : o.target_prefix[b]);
    }
    search->add((int)inputs.size());
    if (runner.one_position()) {
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
void Scheduler::add_input(const Sequence &in, const Sequence &target_prefix) {
    if (encdec) {
        src.push_back(in);
        Sequence p{cfg.bos_id};
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

// The cache's blocks: the inputs given, as one group; with join, room for
// more (GenerateOptions::kv_blocks), as much as the budget allows.
int Scheduler::pool_blocks() {
    const int need = admission.need_all();
    if (!o.join) return need;
    if (o.kv_blocks > 0) return std::max(need, o.kv_blocks);
    const int typical = blocks_for(encdec ? 128 : 0) + blocks_for(128 + 256) + (K - 1) * blocks_for(256);
    const int64_t wanted = std::max<int64_t>(need, (int64_t)std::max(o.max_batch, 1) * typical);
    return runner.cache_blocks(need, wanted);
}

// The copies of shared blocks the step's rows asked for (kv.row_for).
void Scheduler::copy_shared_rows() {
    if (kv.copy_from().empty()) return;
    runner.copy_rows(kv.copy_from(), kv.copy_to());
    kv.take_copies();
}

void Scheduler::release_input(int b) {
    kv.release(b, K);
    cross_S[(size_t)b] = 0;
    admission.release(b);
}

// ---- joining ------------------------------------------------------------

int Scheduler::live() const { return (int)(active.size() + group.size() + admission.waiting().size()); }

// Asks o.join for inputs while the batch has room, and checks them.
void Scheduler::poll_joins() {
    if (!o.join || (int)prefix.size() >= kMostInputs) return;
    const int room = std::min(o.max_batch - live(), kMostInputs - (int)prefix.size());
    if (room <= 0) return;
    std::vector<JoinInput> in = o.join(room);
    if (in.empty()) return;
    if ((int)in.size() > room) {
        throw Error("generate: join returned " + std::to_string(in.size()) + " inputs for room for " +
                    std::to_string(room));
    }
    // (Inputs given without seeds keep their streams: seeds[b] is read only
    // as an input joins.)
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

void Scheduler::check_join(const JoinInput &j) const {
    if (j.sampling) {
        if (K > 1) throw Error("generate: a joining input's sampling is for beam 1, not beam " + std::to_string(K));
        check_sampling(*j.sampling, " of a joining input");
    }
    if (encdec) {
        check_tokens(cfg, {j.input}, cfg.src_vocab_size, "joining source", 0);
        if (!j.target_prefix.empty()) {
            Sequence p{cfg.bos_id};
            p.insert(p.end(), j.target_prefix.begin(), j.target_prefix.end());
            check_tokens(cfg, {p}, cfg.tgt_vocab_size, "joining target prefix", 0);
        }
    } else {
        if (!j.target_prefix.empty()) throw Error("generate: target_prefix is for encoder-decoder models");
        check_tokens(cfg, {j.input}, cfg.tgt_vocab_size, "joining prompt", 0);
    }
}

int Scheduler::limit_of(const JoinInput &j) const {
    GenerateOptions one = o;
    one.max_new_tokens = j.max_new_tokens;
    one.max_new_tokens_each.clear();
    return encdec ? new_token_limit(cfg, one, (int)j.input.size(), 1 + (int)j.target_prefix.size())
                  : new_token_limit(cfg, one, 0, (int)j.input.size());
}

// A new group of waiting inputs while their blocks are free (Admission):
// the others wait for the next group, prefilled while this one decodes.
void Scheduler::form_group() {
    if (!group.empty() || admission.waiting().empty()) return;
    Admission::Group g = admission.form(kv.pool().blocks(), active.empty());
    if (g.inputs.empty()) return;
    group = g.inputs;
    group_P = g.P;
    group_S = g.S;
    chunk_at = 0;
    if (encdec) encode_group();
}

// The group's sources: the encoder, then each decoder layer's K|V of them
// into their blocks (every source padded to the longest).
void Scheduler::encode_group() {
    const int G = (int)group.size(), S = group_S;
    std::vector<Sequence> srcs;
    for (int b : group) srcs.push_back(src[(size_t)b]);
    std::vector<int32_t> to((size_t)S * G);
    for (int g = 0; g < G; g++) {
        const int b = group[(size_t)g];
        for (int t = 0; t < S; t++) to[(size_t)t * G + g] = kv.cross_row(b, t);
        cross_S[(size_t)b] = S;
    }
    runner.encode(srcs, S, to);
}

// ---- the steps ------------------------------------------------------------

// The step's block tables of its rows (their slots), L positions each, per
// group of `group_rows` rows its source's, and for a prefill chunk (dense)
// every position's row, time-major.
void Scheduler::tables(const std::vector<int> &slots, int L, int group_rows, bool dense, StepInput &step) {
    const int R = (int)slots.size(), NB = blocks_for(L);
    block_table.assign((size_t)R * NB, 0);
    for (int c = 0; c < R; c++) pack_table(kv.table(slots[(size_t)c]), NB, &block_table[(size_t)c * NB]);
    step.L = L;
    step.block_table = block_table.data();
    step.table_stride = NB;
    if (dense) {
        dense_rows.resize((size_t)L * R);
        for (int t = 0; t < L; t++) {
            for (int c = 0; c < R; c++) {
                dense_rows[(size_t)t * R + c] = block_table[(size_t)c * NB + t / kBlock] * kBlock + t % kBlock;
            }
        }
        step.dense_rows = dense_rows.data();
    }
    if (!encdec) return;
    const int G = R / group_rows;
    int S = 0;
    for (int g = 0; g < G; g++) S = std::max(S, cross_S[(size_t)slots[(size_t)g * group_rows] / K]);
    const int stride = blocks_for(S);
    cross_table.assign((size_t)G * stride, 0);
    cross_len.resize(G);
    for (int g = 0; g < G; g++) {
        const int b = slots[(size_t)g * group_rows] / K;
        pack_table(kv.cross(b), stride, &cross_table[(size_t)g * stride]);
        cross_len[g] = src_len[(size_t)b];
    }
    step.cross_table = cross_table.data();
    step.cross_stride = stride;
    step.cross_len = cross_len.data();
    step.cross_S = S;
    step.cross_group = group_rows;
}

// One chunk of the group's prefixes: positions chunk_at..+T of every row
// (beam 0 of each input; a shorter prefix padded at its end: its own keys
// stop at its length, and its padding's rows are the ones its next
// positions take). A row whose last position is in the chunk keeps its
// output. After the last chunk the group's first tokens are chosen and it
// joins the rows decoding.
void Scheduler::prefill_chunk() {
    const int G = (int)group.size(), P = group_P;
    const int T = active.empty() ? P - chunk_at : std::min(std::max(o.prefill_chunk, 1), P - chunk_at);
    const int c0 = chunk_at, L = c0 + T;
    std::vector<int> slots(G);
    std::vector<int32_t> tokens((size_t)T * G, cfg.pad_id), write((size_t)T * G), kv_len(G), at, to;
    for (int g = 0; g < G; g++) {
        const int b = group[(size_t)g];
        slots[(size_t)g] = b * K;
        const Sequence &p = prefix[(size_t)b];
        for (int t = c0; t < L; t++) {
            if (t < (int)p.size()) tokens[(size_t)(t - c0) * G + g] = p[(size_t)t];
            write[(size_t)(t - c0) * G + g] = kv.row_for(b * K, t);
        }
        kv_len[g] = std::min((int)p.size(), L);
        const int last = (int)p.size() - 1;
        if (last >= c0 && last < L) {
            at.push_back((last - c0) * G + g);
            to.push_back(g);
        }
    }
    StepInput step;
    step.T = T;
    step.R = G;
    step.start = c0;
    step.tokens = tokens.data();
    step.write_rows = write.data();
    step.kv_len = kv_len.data();
    step.out_at = at.data();
    step.out_to = to.data();
    step.outputs = (int)at.size();
    tables(slots, L, 1, true, step);
    copy_shared_rows();
    runner.run(step);
    chunk_at = L;
    if (chunk_at < P) return;
    // The group's first tokens.
    for (int g = 0; g < G; g++) {
        const int b = group[(size_t)g];
        for (int k = 0; k < K; k++) len[(size_t)b * K + k] = (int32_t)prefix[(size_t)b].size();
    }
    std::vector<int> inputs = group;
    choose(true, inputs, slots);
    group.clear();
    for (int b : inputs) {
        if (!search->done(b)) active.push_back(b);
    }
    leave_done();
}

// One position more for every row decoding: each at its own position;
// `joining` (beam 1, a prefix of one position: bos, or a one-token
// prompt): a group whose whole prefill is that position, run as rows of
// this step at position 0 (one layers call for both, no prefill call).
void Scheduler::decode_step(const std::vector<int> &joining) {
    std::vector<int> slots;
    for (int b : active) {
        for (int k = 0; k < K; k++) slots.push_back(b * K + k);
    }
    const int decoding = (int)slots.size();
    for (int b : joining) slots.push_back(b * K);
    const int R = (int)slots.size();
    std::vector<int32_t> tokens(R), write(R), kv_len(R), row_pos(R);
    int L = 0;
    for (int c = 0; c < R; c++) {
        const int r = slots[(size_t)c];
        tokens[c] = c < decoding ? search->next(r) : prefix[(size_t)(r / K)][0];
        row_pos[c] = len[(size_t)r];
        write[c] = kv.row_for(r, row_pos[c]);
        kv_len[c] = ++len[(size_t)r];
        L = std::max(L, kv_len[c]);
    }
    StepInput step;
    step.T = 1;
    step.R = R;
    step.start = L - 1;
    step.row_pos = row_pos.data();
    step.tokens = tokens.data();
    step.write_rows = write.data();
    step.kv_len = kv_len.data();
    tables(slots, L, K, false, step);
    copy_shared_rows();
    runner.run(step);
    std::vector<int> inputs = active;
    inputs.insert(inputs.end(), joining.begin(), joining.end());
    choose(false, inputs, slots);
    active.clear();
    for (int b : inputs) {
        if (!search->done(b)) active.push_back(b);
    }
    leave_done();
}

// Frees the blocks of every input done and not yet freed.
void Scheduler::leave_done() {
    freed.resize((size_t)search->inputs(), 0);
    for (int b = 0; b < search->inputs(); b++) {
        if (search->done(b) && !freed[(size_t)b] && admission.reserved(b) > 0) {
            release_input(b);
            freed[(size_t)b] = 1;
        }
    }
}

// The step's choice for `inputs`, whose rows (`slots`, in order) the runner
// kept; then the search's step and the beams' tables.
void Scheduler::choose(bool prefill, const std::vector<int> &inputs, const std::vector<int> &slots) {
    const int R = (int)slots.size();
    row_of.assign((size_t)kv.slots(), 0);
    for (int c = 0; c < R; c++) row_of[(size_t)slots[(size_t)c]] = c;
    const StepResult res = runner.choose(prefill, *search, inputs, slots, row_of, context);
    search->step(inputs, res, row_of);
    search->report_done();
    follow_parents(inputs);
}

// Beams that took another parent take its block table (the blocks of its
// first len positions: never a prefix's padding past them).
void Scheduler::follow_parents(const std::vector<int> &inputs) {
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

void Scheduler::begin() {
    const int blocks = pool_blocks();
    kv.allocate(blocks);
    runner.begin(o, blocks * kBlock);
}

bool Scheduler::step() {
    if (o.on_step) o.on_step();
    poll_joins();
    form_group();
    const bool decoding = !active.empty();
    if (decoding && K == 1 && !group.empty() && group_P == 1) {
        // The group's one prefix position as rows of the step.
        std::vector<int> joining;
        joining.swap(group);
        decode_step(joining);
    } else {
        // (A group whose prefill ends now decodes in this turn's step too.)
        if (!group.empty()) prefill_chunk();
        if (decoding) decode_step({});
    }
    return !(active.empty() && group.empty() && admission.waiting().empty());
}

std::vector<std::vector<Hypothesis>> Scheduler::run() {
    begin();
    while (step()) {
    }
    return results();
}

}  // namespace halformer::decoding
