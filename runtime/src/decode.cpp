// Generation with a paged KV cache: the scheduler (decoding/scheduler.h)
// decides each step, this file's runner runs it through a Session's
// kernels (decoding/runner.h): the layers over the step's rows, each
// reading its keys through its block table, and the sampler (the output
// head, then greedy's argmax, beam search's top-k or a draw, on the
// device; only ids and the few log-probabilities asked for come back).
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
#include "model/layers/layers.h"
#include "model/session.h"
#include "decoding/kv_blocks.h"
#include "decoding/runner.h"
#include "decoding/sampler.h"
#include "decoding/scheduler.h"

#include <chrono>
#include <optional>

namespace halformer {
namespace {

static_assert(decoding::kBlock == kPageRows, "the block manager's blocks are the _paged kernels' pages");

// The decoder's steps through a Session's kernels: the cache is every
// decoder layer's self_kv (pool_rows rows of 2·KW floats; the sources' K|V
// in the same blocks), a prefill's kept rows are in last_rows, a step's in
// the stream's buffer.
class SessionRunner final : public decoding::Runner {
public:
    explicit SessionRunner(Session &s)
        : s(s), encdec(s.cfg.architecture == Architecture::EncoderDecoder), V(s.w->gen_rows), D(s.cfg.d_model),
          KW(s.desc.kv_width), layers(s.w->dec.layers.size()), bias(s.stack_bias(s.w->dec, true)) {}

    int vocab() const override { return V; }
    bool one_position() const override { return bias != nullptr; }

    int cache_blocks(int need, int64_t wanted) override {
        int64_t blocks = wanted;
        for (; blocks > need; blocks = std::max<int64_t>(need, blocks / 2)) {
            try {
                s.require_fits(checked_product({blocks, decoding::kBlock, 2 * (int64_t)KW, (int64_t)layers}, "generate"),
                               "the KV cache");
                break;
            } catch (const Error &) {
            }
        }
        return (int)blocks;
    }

    void begin(const GenerateOptions &o, int rows) override {
        pool_rows = rows;
        s.self_kv.resize(layers);
        s.attach(s.self_kv);
        for (size_t l = 0; l < layers; l++) s.self_kv[l].need((size_t)pool_rows * 2 * KW);
        sampler.emplace(s, o, V, D);
        // (The step's time and rows: Model::step_seconds, step_rows.)
        s.step_seconds.clear();
        s.step_rows.clear();
        step_start = std::chrono::steady_clock::now();
    }

    void copy_rows(const std::vector<int32_t> &from, const std::vector<int32_t> &to) override {
        const int n = (int)from.size();
        float *tmp = s.kv_tmp.need((size_t)n * 2 * KW);
        for (size_t l = 0; l < layers; l++) {
            float *cache = s.self_kv[l].get();
            layers::gather_rows(s, cache, 2 * KW, pool_rows, from.data(), n, tmp);
            layers::scatter_rows(s, tmp, 2 * KW, n, to.data(), cache, pool_rows);
        }
    }

    void encode(const std::vector<Sequence> &sources, int S, const std::vector<int32_t> &to) override {
        const int G = (int)sources.size();
        std::vector<int32_t> lens;
        const float *memory = s.encoder(sources, S, lens);
        // (The encoder's bias table took the scratch the decoder's was in.)
        if (bias) bias = s.stack_bias(s.w->dec, true);
        float *stage = s.kv_stage.need((size_t)S * G * 2 * KW);
        for (size_t l = 0; l < layers; l++) {
            layers::memory_kv(s, layers::Pass{}, s.w->dec.layers[l].attn("multihead_attn"), memory, S * G, stage);
            layers::scatter_rows(s, stage, 2 * KW, S * G, to.data(), s.self_kv[l].get(), pool_rows);
        }
    }

    void run(const decoding::StepInput &in) override {
        const int T = in.T, R = in.R;
        float *x = s.x0.need((size_t)T * R * D), *xa = s.x1.need((size_t)T * R * D);
        layers::embed(s, s.w->dec, in.tokens, T, R, in.start, x, bias ? nullptr : in.row_pos);
        RowMap rows;
        rows.row_pos = in.row_pos;
        rows.block_table = in.block_table;
        rows.table_stride = in.table_stride;
        rows.pool_rows = pool_rows;
        rows.write_rows = in.write_rows;
        if (T > 1) {
            rows.dense_rows = in.dense_rows;
            rows.dense = s.kv_tmp.need((size_t)in.L * R * 2 * KW);
        }
        Session::StackPass pass;
        pass.T = T;
        pass.R = R;
        pass.start = in.start;
        pass.self_kv = [&](size_t l) { return s.self_kv[l].get(); };
        pass.kv_len = in.kv_len;
        if (encdec) {
            // (The paged cache holds the sources' K|V too.)
            rows.cross_table = in.cross_table;
            rows.cross_stride = in.cross_stride;
            pass.cross_kv = [&](size_t l) -> const float * { return s.self_kv[l].get(); };
            pass.cross_len = in.cross_len;
            pass.S = in.cross_S;
        }
        pass.cross_group = in.cross_group;
        pass.rows = rows;
        pass.pos_bias = bias;
        s.stack(s.w->dec, true, x, xa, pass);
        if (!in.out_at) {
            step_rows = x;
            return;
        }
        if (in.outputs == 0) return;
        // The prefill's rows whose last position was in this chunk.
        float *last_rows = s.last_rows.need((size_t)R * D);
        float *tmp = s.head_tmp.need((size_t)in.outputs * D);
        layers::gather_rows(s, x, D, T * R, in.out_at, in.outputs, tmp);
        layers::scatter_rows(s, tmp, D, in.outputs, in.out_to, last_rows, R);
    }

    decoding::StepResult choose(bool prefill, decoding::Search &search, const std::vector<int> &inputs,
                                const std::vector<int> &slots, const std::vector<int> &row_of,
                                const std::vector<Sequence> &context) override {
        const int R = (int)slots.size();
        float *x = prefill ? s.last_rows.get() : step_rows;
        s.final_norm(s.w->dec.final_norm, x, R);
        const decoding::StepResult res = sampler->choose(search, inputs, slots, x, row_of, context);
        const auto now = std::chrono::steady_clock::now();
        s.step_seconds.push_back(std::chrono::duration<double>(now - step_start).count());
        s.step_rows.push_back(R);
        step_start = now;
        return res;
    }

private:
    Session &s;
    const bool encdec;
    const int V, D, KW;  // KW: the K|V cache rows hold 2·KW floats
    const size_t layers;
    const float *bias;  // T5: the decoder's relative-position bias
    int pool_rows = 0;
    float *step_rows = nullptr;  // the last decoding step's outputs
    std::optional<decoding::Sampler> sampler;
    std::chrono::steady_clock::time_point step_start;
};

// The scheduler over this runner, a turn at a time.
struct SessionDecoding final : Session::Decoding {
    SessionDecoding(Session &s, const std::vector<Sequence> &inputs, const GenerateOptions &opt)
        : runner(s), scheduler(s.cfg, runner, inputs, opt) {
        scheduler.begin();
    }
    bool step() override { return scheduler.step(); }
    std::vector<std::vector<Hypothesis>> results() override { return scheduler.results(); }

    SessionRunner runner;
    decoding::Scheduler scheduler;
};

}  // namespace

std::unique_ptr<Session::Decoding> Session::start_decode(const std::vector<Sequence> &inputs,
                                                         const GenerateOptions &opt) {
    return std::make_unique<SessionDecoding>(*this, inputs, opt);
}

std::vector<std::vector<Hypothesis>> Session::decode(const std::vector<Sequence> &inputs, const GenerateOptions &opt) {
    SessionRunner runner(*this);
    decoding::Scheduler scheduler(cfg, runner, inputs, opt);
    return scheduler.run();
}

}  // namespace halformer
