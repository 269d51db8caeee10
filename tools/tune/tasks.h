// What `halformer tune` searches: one task per op and shape class, at the
// model's real shapes. A task tunes one representative kernel; its winner is
// recorded for every kernel of the task's group (the same generator and hand
// parameters, differing only in what the algorithm computes: activation,
// residual, mask, causal).
#pragma once

#include "ops.h"
#include "schedules/attention_schedule.h"
#include "halformer/config.h"

#include <algorithm>
#include <functional>
#include <map>
#include <string>
#include <vector>

namespace tune {

// A kernel the build compiles: generators/CMakeLists.txt, via the generated
// halformer_kernel_list.inc.
struct KernelInfo {
    const char *name;
    const char *generator;
    const char *params;  // "name=value name=value"
    bool strict_float;   // its x86 builds are strict_float (STRICT_FLOAT)
};

inline const std::vector<KernelInfo> &kernel_list() {
    static const std::vector<KernelInfo> list = {
#include "halformer_kernel_list.inc"
    };
    return list;
}

inline const KernelInfo &kernel_info(const std::string &name) {
    for (const auto &k : kernel_list())
        if (name == k.name) return k;
    throw std::runtime_error("no kernel named " + name + " in generators/CMakeLists.txt");
}

inline std::map<std::string, std::string> parse_params(const std::string &text) {
    std::map<std::string, std::string> out;
    size_t pos = 0;
    while (pos < text.size()) {
        size_t end = text.find(' ', pos);
        if (end == std::string::npos) end = text.size();
        std::string item = text.substr(pos, end - pos);
        size_t eq = item.find('=');
        if (eq != std::string::npos) out[item.substr(0, eq)] = item.substr(eq + 1);
        pos = end + 1;
    }
    return out;
}

using Point = std::map<std::string, int>;  // a candidate: knob → value

// "a=1,b=2" (sorted by name), the key of a candidate in records and state.
inline std::string point_key(const Point &p) {
    std::string s;
    for (const auto &[k, v] : p) s += (s.empty() ? "" : ",") + k + "=" + std::to_string(v);
    return s;
}

struct Knob {
    std::string name;
    std::vector<int> values;  // the first is the hand value
};

// A bit-identity the runtime relies on, checked on every candidate: one
// that breaks it cannot win, however fast (tests/test_row_invariance.cpp
// and AttentionCausalChunks check the built kernels the same way).
//   Rows: the call at `part` (fewer rows, sequences or queries; its inputs
//         the first of `whole`'s) gives the same bits as those rows of the
//         call at `whole`: a request's answer does not depend on its batch.
//   CausalChunks: a causal prefill at `whole` run as the runtime runs it, a
//         call per chunk of queries over just the keys the chunk sees
//         (runtime/src/model/layers/causal_chunks.h), gives one call's bits.
//   StepRows: as Rows, across the two kernels of one projection: the
//         candidate (a decoding step's one-row kernel) at `part` against
//         `other` (the prefill kernel, its build parameters and hand values)
//         at `whole`. A request decoding alone takes the one-row kernel, in
//         a batch the prefill one (runtime/src/model/packed.cpp).
//   PrefillRows: the same pair the other way round: `other` (the one-row
//         kernel, hand values) at `part` against the candidate at `whole`.
struct SameBits {
    enum Kind { Rows, CausalChunks, StepRows, PrefillRows } kind;
    Shape whole, part;  // (CausalChunks: part unused)
    std::string other = "";  // StepRows, PrefillRows: the other kernel
};

struct Task {
    std::string op, shape_class;    // e.g. "linear", "prefill"
    std::string kernel;             // the representative kernel tuned
    std::vector<std::string> group; // kernels the winner is recorded for
    std::vector<Knob> knobs;
    std::vector<Shape> shapes;      // the objective: Σ median time over these
    std::vector<Shape> edges;       // small and odd shapes every winner must pass too
    std::vector<SameBits> same_bits; // every candidate must keep these
    // Register-file feasibility of a point (registers: 32 or 16 vectors).
    std::function<bool(const Point &, int registers)> feasible = [](const Point &, int) { return true; };
    std::string id() const { return op + "/" + shape_class; }
    std::string generator() const { return kernel_info(kernel).generator; }
    std::map<std::string, std::string> fixed() const { return parse_params(kernel_info(kernel).params); }
    // The hand values: the kernel's build parameters where it sets a knob,
    // else the knob's first value (the generator's default).
    Point hand() const {
        Point p;
        auto f = fixed();
        for (const auto &k : knobs) p[k.name] = f.count(k.name) ? std::stoi(f.at(k.name)) : k.values.front();
        return p;
    }
};

// Sizes the tasks use: prefill rows (tokens per call), the decode cache
// length, and the rows a decode step has (beam or batch; the runtime takes
// the decode kernels up to 4 rows).
struct Workload {
    int prefill_rows = 128;
    int cache_len = 128;
    int decode_rows = 4;
};

inline std::string shape_label(const char *fmt, std::initializer_list<int> v) {
    char buf[128];
    auto it = v.begin();
    int a = it != v.end() ? *it++ : 0, b = it != v.end() ? *it++ : 0, c = it != v.end() ? *it++ : 0,
        d = it != v.end() ? *it++ : 0;
    std::snprintf(buf, sizeof(buf), fmt, a, b, c, d);
    return buf;
}

inline Shape linear_shape(int M, int K, int N) {
    return {shape_label("%dx%d->%d", {M, K, N}), {{"M", M}, {"K", K}, {"N", N}}, {}};
}

// Rows checks: each of `parts` (fewer rows) against `whole`.
inline std::vector<SameBits> fewer_rows(const Shape &whole, const std::vector<Shape> &parts) {
    std::vector<SameBits> out;
    for (const Shape &p : parts) out.push_back({SameBits::Rows, whole, p});
    return out;
}

// The panel schedule's register block: vectors_n·lanes × rows_m accumulators
// (0 means the schedule's per-target default: 3 vectors, rows to fill the file).
inline bool panel_fits(const Point &p, int regs) {
    int vn = p.at("vectors_n") > 0 ? p.at("vectors_n") : 3;
    int rows = p.at("rows_m") > 0 ? p.at("rows_m") : (regs - vn - 2) / vn;
    return rows >= 1 && vn * rows + vn + 1 <= regs;
}

// linear_packed's register block: rows_m rows × vectors_n vectors, a slice
// of the 48-wide panel (3 vectors on AVX-512, 6 with 8 lanes), beside the
// block's weight vectors and a broadcast; 0s are the schedule's defaults
// (linear_packed_vectors, linear_packed_rows). The width must divide the panel.
inline bool packed_fits(const Point &p, int regs, int kf) {
    const int panel = regs == 32 ? 3 : 6;
    const int knob_vn = p.count("vectors_n") ? p.at("vectors_n") : 0;
    const int knob_rows = p.at("rows_m");
    // (16 registers: AVX2 assumed, whose float32 default is narrower; SSE4.1's
    // panel is 12 vectors, of which these widths are divisors too)
    const int vn = knob_vn > 0 ? knob_vn : regs == 32 || knob_rows == 1 || kf != 1 ? panel : 2;
    if (panel % vn != 0) return false;
    const int rows = knob_rows > 0 ? knob_rows : std::max(1, (regs - vn - 2) / vn);
    return vn * rows + vn + 1 <= regs;
}

// The projections: fp32 prefill and decode, and the reduced-precision ones.
inline std::vector<Task> linear_tasks(const halformer::Config &c, const Workload &w) {
    const int d = c.d_model, F = c.d_ff, P = w.prefill_rows, R = w.decode_rows;
    std::vector<Task> tasks;
    Task lin{"linear", "prefill", "hf_linear",
             {"hf_linear", "hf_linear_relu", "hf_linear_gelu", "hf_linear_gelu_tanh", "hf_linear_tanh",
              "hf_linear_residual", "hf_linear_gelu_tanh_gated", "hf_linear_silu_gated"},
             {{"vectors_n", {0, 1, 2, 4}}, {"rows_m", {0, 2, 4, 6, 8, 10, 12, 14, 16, 20, 24}}},
             {linear_shape(P, d, 3 * d), linear_shape(P, d, d)},
             {linear_shape(1, d, 3 * d), linear_shape(17, 33, 71)}};
    if (c.architecture == halformer::Architecture::EncoderDecoder) lin.shapes.push_back(linear_shape(P, d, 2 * d));
    lin.feasible = panel_fits;
    lin.same_bits = fewer_rows(linear_shape(P, d, 3 * d), {linear_shape(1, d, 3 * d), linear_shape(7, d, 3 * d)});
    tasks.push_back(lin);

    Task dot{"linear", "decode", "hf_linear_dot",
             {"hf_linear_dot", "hf_linear_dot_residual", "hf_linear_dot_relu", "hf_linear_dot_gelu",
              "hf_linear_dot_gelu_tanh", "hf_linear_dot_silu", "hf_linear_dot_gelu_tanh_gated", "hf_linear_dot_silu_gated"},
             {{"vectors_n", {0, 2, 4, 6, 12, 16}}},
             {linear_shape(1, d, 3 * d), linear_shape(1, d, F), linear_shape(1, F, d), linear_shape(R, d, 3 * d)},
             {linear_shape(3, 33, 71)}};
    tasks.push_back(dot);

    // Packed projections (runtime/src/model/packed.cpp): float32 inference on
    // AVX-512 and the reduced precisions (Model::set_precision); every
    // projection, the FFN's two included, is one of these; decode rows above
    // 1 take the prefill kernels (kDotRows).
    for (const char *fmt : {"f32", "bf16", "int8"}) {
        const std::string base = std::string("hf_linear_") + fmt;
        auto variants = [&](const std::string &k) {
            return std::vector<std::string>{k,           k + "_relu",     k + "_gelu",           k + "_gelu_tanh",
                                            k + "_silu", k + "_residual", k + "_gelu_tanh_gated", k + "_silu_gated"};
        };
        // (past 8 rows the block spills on AVX-512, past 6 at 2 vectors on
        // AVX2: packed_fits)
        const std::vector<int> rows_m{0, 1, 2, 3, 4, 5, 6, 7, 8};
        const std::vector<int> task_blocks{0, 1, 2, 4, 8, 16, 32};
        Task pre{std::string("linear_") + fmt, "prefill", base, variants(base),
                 {{"vectors_n", {0, 1, 2, 3, 6}}, {"rows_m", rows_m}, {"task_blocks", task_blocks}},
                 {linear_shape(P, d, 3 * d), linear_shape(P, d, d), linear_shape(P, d, F), linear_shape(P, F, d),
                  linear_shape(R, d, 3 * d)},
                 {linear_shape(1, d, 3 * d), linear_shape(17, 33, 71)}};
        const int kf = std::string(fmt) == "f32" ? 1 : std::string(fmt) == "bf16" ? 2 : 4;
        pre.feasible = [kf](const Point &p, int regs) { return packed_fits(p, regs, kf); };
        // (a decoding step of 2 to 4 rows takes these: docs/precision.md)
        pre.same_bits = fewer_rows(linear_shape(P, d, 3 * d), {linear_shape(1, d, 3 * d), linear_shape(3, d, 3 * d)});
        pre.same_bits.push_back({SameBits::PrefillRows, linear_shape(P, d, 3 * d), linear_shape(1, d, 3 * d), base + "_dot"});
        tasks.push_back(pre);
        Task dec{std::string("linear_") + fmt, "decode", base + "_dot", variants(base + "_dot"),
                 {{"rows_m", {0, 1, 2}}, {"task_blocks", task_blocks}},
                 {linear_shape(1, d, 3 * d), linear_shape(1, d, F), linear_shape(1, F, d)},
                 {linear_shape(3, 33, 71)}};
        dec.feasible = pre.feasible;
        dec.same_bits = {{SameBits::StepRows, linear_shape(4, d, 3 * d), linear_shape(1, d, 3 * d), base}};
        tasks.push_back(dec);
    }
    return tasks;
}

inline Task ffn_task(const halformer::Config &c, const Workload &w) {
    using halformer::Act;
    const int d = c.d_model, F = c.d_ff, P = w.prefill_rows;
    const char *ffn_kernel = c.activation == Act::ReLU       ? "hf_ffn"
                             : c.activation == Act::GELU     ? "hf_ffn_gelu"
                             : c.activation == Act::GELUTanh ? "hf_ffn_gelu_tanh"
                                                             : "hf_ffn_silu";
    Task ffn{"ffn", "prefill", ffn_kernel,
             // every activation: the schedule is the two products'
             {"hf_ffn", "hf_ffn_gelu", "hf_ffn_gelu_tanh", "hf_ffn_silu", "hf_ffn_residual", "hf_ffn_gelu_residual",
              "hf_ffn_gelu_tanh_residual", "hf_ffn_silu_residual"},
             {{"fuse_rows", {0, 16, 32, 64}}, {"vectors_n", {0, 1, 2, 4}}, {"rows_m", {0, 4, 6, 8, 10, 12, 14}}},
             {{shape_label("%dx%d->%d->%d", {P, d, F, d}), {{"M", P}, {"D", d}, {"F", F}}, {}}},
             {{"1x..", {{"M", 1}, {"D", d}, {"F", F}}, {}}, {"17x33->71", {{"M", 17}, {"D", 33}, {"F", 71}}, {}}}};
    ffn.feasible = panel_fits;
    auto fshape = [&](int M) { return Shape{shape_label("%dx%d->%d->%d", {M, d, F, d}), {{"M", M}, {"D", d}, {"F", F}}, {}}; };
    ffn.same_bits = fewer_rows(fshape(P), {fshape(1), fshape(7)});
    return ffn;
}

// Attention over the whole sequence (prefill) and one query row (decode).
inline std::vector<Task> attention_tasks(const halformer::Config &c, const Workload &w) {
    const int H = c.num_heads, dk = c.head_dim(), P = w.prefill_rows, L = w.cache_len, R = w.decode_rows;
    std::vector<Task> tasks;
    auto att_hd = [&](int B, int heads, int Tq, int Tkv, int head_dim, bool causal) {
        Shape s{shape_label("%dx%dx%dx%d", {B, heads, Tq, Tkv}) + (head_dim != dk ? " dk" + std::to_string(head_dim) : "") +
                    (causal ? " causal" : ""),
                {{"B", B}, {"H", heads}, {"Tq", Tq}, {"Tkv", Tkv}, {"dk", head_dim}}, {}};
        // (The causal kernels as built: with their window input, at 0.)
        if (causal) s.gen["causal"] = s.gen["sliding_window"] = "true";
        return s;
    };
    auto att = [&](int B, int Tq, int Tkv, bool causal) { return att_hd(B, H, Tq, Tkv, dk, causal); };
    Task attp{"attention", "prefill", "hf_attention",
              {"hf_attention", "hf_attention_causal", "hf_attention_bias", "hf_attention_causal_bias",
               "hf_attention_causal_window_softcap"},
              {{"query_tile", {8, 1, 2, 4, 6, 12, 16}}, {"key_block", {64, 16, 32, 128, 256}},
               {"heads_per_task", {1, 2, 4}}, {"score_vectors", {2, 1, 3, 4}}, {"value_vectors", {2, 1, 3, 4}}},
              {att(1, P, P, false), att(1, P, P, true)},
              // (other models: few heads, a head size that is no multiple of a vector)
              {att(2, 1, 1, false), att(2, 3, 17, true), att_hd(1, 3, 5, 7, 12, false), att_hd(1, 3, 5, 7, 12, true)}};
    // Register blocks: scores query_tile × score_vectors, P·V query_tile ×
    // value_vectors accumulators (plus the vectors of v they share).
    attp.feasible = [](const Point &p, int regs) {
        return p.at("query_tile") * (p.at("score_vectors") + 1) <= 2 * regs &&
               (p.at("query_tile") + 1) * p.at("value_vectors") <= regs;
    };
    // A sequence alone against it beside a shorter (padded) one, and a
    // causal prefill in query chunks against one call.
    attp.same_bits = {{SameBits::Rows, att(2, P, P, false), att(1, P, P, false)},
                      {SameBits::Rows, att(2, P, P, true), att(1, P, P, true)},
                      {SameBits::CausalChunks, att(2, P, P, true), {}}};
    tasks.push_back(attp);

    // The paged cache's self-attention: each hypothesis reads its keys
    // through its block table (here blocks shared and crossed: AttentionData).
    auto att_rows = [&](int B, int heads, int Tkv, int head_dim) {
        Shape s = att_hd(B, heads, 1, Tkv, head_dim, true);
        s.label += " paged";
        s.gen["page"] = "16";
        return s;
    };
    // (The decode schedule reads only key_block: schedule_attention_decode_cpu.)
    Task attd{"attention", "decode", "hf_attention_decode",
              {"hf_attention_decode", "hf_attention_causal_decode", "hf_attention_causal_decode_paged",
               "hf_attention_decode_paged", "hf_attention_causal_decode_bias", "hf_attention_causal_decode_paged_bias",
               "hf_attention_causal_decode_window_softcap", "hf_attention_causal_decode_paged_window_softcap"},
              {{"key_block", {16, 8, 32, 64, 128}}},
              {att(1, 1, L, false), att(R, 1, L, false), att_rows(R, H, L, dk)},
              {att(3, 1, 1, false), att(2, 1, 19, true), att_hd(2, 3, 1, 9, 12, false), att_hd(2, 1, 1, 9, 20, true),
               att_rows(3, 1, 1, dk), att_rows(5, 3, 19, 20)}};
    attd.same_bits = fewer_rows(att(R, 1, L, false), {att(1, 1, L, false)});
    tasks.push_back(attd);
    return tasks;
}

// The row-wise ops: layer norm, (log-)softmax over the vocabulary, embedding.
inline std::vector<Task> row_tasks(const halformer::Config &c, const Workload &w) {
    const int d = c.d_model, P = w.prefill_rows, R = w.decode_rows;
    const int V = c.has_decoder() ? c.tgt_vocab_size : c.src_vocab_size;
    std::vector<Task> tasks;
    auto rows = [](int M, int D) {
        return Shape{shape_label("%dx%d", {M, D}), {{"M", M}, {"D", D}}, {}};
    };
    tasks.push_back({"layer_norm", "prefill", "hf_layer_norm_residual",
                     {"hf_layer_norm", "hf_layer_norm_residual", "hf_rms_norm", "hf_rms_norm_residual", "hf_rms_norm_add"},
                     {{"rows_per_task", {4, 1, 2, 8, 16, 32}}}, {rows(P, d)}, {rows(1, d), rows(3, 17)},
                     fewer_rows(rows(P, d), {rows(1, d), rows(7, d)})});

    auto srows = [](int Rr, int N) {
        return Shape{shape_label("%dx%d", {Rr, N}), {{"R", Rr}, {"N", N}}, {}};
    };
    // (No hand knob on a CPU: one row a task, so that a row's bits do not
    // depend on its call's rows: schedules/softmax_schedule.h. Adams2019
    // and Mullapudi2016 still search it; a GPU's threads a row are a knob.)
    tasks.push_back({"log_softmax", "decode", "hf_log_softmax",
                     {"hf_softmax", "hf_softmax_mask", "hf_log_softmax", "hf_log_softmax_mask"},
                     {}, {srows(1, V), srows(R, V)}, {srows(3, 17)}, fewer_rows(srows(R, V), {srows(1, V)})});

    const char *emb = c.positional_encoding == halformer::Positional::Learned ? "hf_embedding_learned"
                      : c.positional_encoding == halformer::Positional::SinusoidalConcat ? "hf_embedding_concat"
                                                                                        : "hf_embedding";
    auto eshape = [&](int B, int T, int D) {
        return Shape{shape_label("%dx%dx%d", {B, T, D}), {{"B", B}, {"T", T}, {"D", D}, {"V", V}}, {}};
    };
    tasks.push_back({"embedding", "prefill", emb,
                     {"hf_embedding", "hf_embedding_concat", "hf_embedding_learned", "hf_embedding_learned_types",
                      "hf_embedding_none"},
                     {{"tokens_per_task", {8, 1, 2, 4, 16, 32}}}, {eshape(1, P, d)}, {eshape(2, 3, 18)}});

    // Sampling (temperature, top-k, top-p) over the vocabulary, one decode step.
    auto sshape = [](int Rr, int N) { return Shape{shape_label("%dx%d", {Rr, N}), {{"R", Rr}, {"V", N}}, {}}; };
    tasks.push_back({"sample", "decode", "hf_sample", {"hf_sample"}, {{"vectors", {0, 1, 2, 8}}},
                     {sshape(1, V), sshape(R, V)}, {sshape(3, 17)}, fewer_rows(sshape(R, V), {sshape(1, V)})});
    return tasks;
}

// The output projection onto the vocabulary, prefill and decode.
inline std::vector<Task> head_tasks(const halformer::Config &c, const Workload &w) {
    const int d = c.d_model, P = w.prefill_rows, R = w.decode_rows;
    const int V = c.has_decoder() ? c.tgt_vocab_size : c.src_vocab_size;
    std::vector<Task> tasks;
    auto hshape = [&](int M) {
        return Shape{shape_label("%dx%d->%d", {M, d, V}), {{"M", M}, {"K", d}, {"V", V}}, {}};
    };
    Task head{"output_head", "prefill", "hf_output_head", {"hf_output_head"},
              {{"vectors_n", {0, 1, 2, 4}}, {"rows_m", {0, 4, 6, 8, 10, 12, 14}}},
              {hshape(P)},
              {{"3x33->71", {{"M", 3}, {"K", 33}, {"V", 71}}, {}}},
              fewer_rows(hshape(P), {hshape(1), hshape(7)})};
    head.feasible = panel_fits;
    tasks.push_back(head);

    tasks.push_back({"output_head", "decode", "hf_output_head_dot", {"hf_output_head_dot"},
                     {{"vectors_n", {0, 2, 4, 6, 12, 16}}},
                     {hshape(1), hshape(R)},
                     {{"3x33->71", {{"M", 3}, {"K", 33}, {"V", 71}}, {}}},
                     fewer_rows(hshape(R), {hshape(1)})});
    return tasks;
}

// Every task, in a fixed order (a task's index is its pipeline id in the
// cost model's samples).
inline std::vector<Task> make_cpu_tasks(const halformer::Config &c, const Workload &w) {
    std::vector<Task> tasks = linear_tasks(c, w);
    auto append = [&](const std::vector<Task> &more) { tasks.insert(tasks.end(), more.begin(), more.end()); };
    append({ffn_task(c, w)});
    append(attention_tasks(c, w));
    append(row_tasks(c, w));
    append(head_tasks(c, w));
    return tasks;
}

// The GPU schedules' knobs (--target cuda or opencl), at the same shapes as
// the CPU's tasks: the matmul's tiles and register blocks, the decode
// matmul's columns and rows a block, attention's queries a block, the row
// ops' threads a row. A point must fit CUDA's launch limits (at most 1024
// threads a block, 48 KiB of shared memory) and keep its register block
// small enough not to spill (at most 64 accumulators a thread).
inline bool gpu_matmul_fits(const Point &p, int) {
    const int tn = p.at("gpu_tile_n"), tm = p.at("gpu_tile_m"), rn = p.at("gpu_reg_n"), rm = p.at("gpu_reg_m");
    if (tn % rn || tm % rm || rn * rm > 64) return false;
    const int threads = (tn / rn) * (tm / rm);
    return threads >= 32 && threads <= 1024;
}

inline bool gpu_dot_fits(const Point &p, int) {
    const int cols = p.at("gpu_tile_n"), rows = p.at("gpu_tile_m");
    return 32 * cols <= 1024 && 4 * 32 * cols * rows <= 48 * 1024;
}

inline std::vector<Task> make_gpu_tasks(const halformer::Config &c, const Workload &w) {
    std::vector<Task> cpu = make_cpu_tasks(c, w), tasks;
    auto like = [&](const std::string &id, std::vector<Knob> knobs,
                    std::function<bool(const Point &, int)> feasible = nullptr) {
        for (const Task &t : cpu) {
            if (t.id() != id) continue;
            Task g = t;
            g.knobs = std::move(knobs);
            g.feasible = feasible ? feasible : [](const Point &, int) { return true; };
            tasks.push_back(g);
            return;
        }
        throw std::runtime_error("no CPU task " + id);
    };
    like("linear/prefill",
         {{"gpu_tile_n", {64, 32, 128}}, {"gpu_tile_m", {16, 8, 32, 64}}, {"gpu_reg_n", {4, 8}},
          {"gpu_reg_m", {8, 4, 16}}, {"gpu_k_unroll", {8, 4, 16}}},
         gpu_matmul_fits);
    like("linear/decode", {{"gpu_tile_n", {8, 4, 16, 32}}, {"gpu_tile_m", {4, 1, 2, 8}}}, gpu_dot_fits);
    // (The decode kernels keep their 2 queries a block: their build sets it.)
    // A block stages its queries, 32 keys, and a key block's p and a chunk of
    // its V in shared memory: within 48 KiB at the model's head size, with
    // key blocks of 64 (the decode kernels' 16 need less).
    const int dk = c.head_dim();
    auto attention_fits = [dk](const Point &p, int) {
        return halformer::AttentionGpuBlock(p.at("gpu_query_tile")).shared(64, false).bytes(dk) <=
               halformer::kGpuSharedBytes;
    };
    like("attention/prefill", {{"gpu_query_tile", {32, 8, 16, 64}}}, attention_fits);
    like("attention/decode", {{"gpu_query_tile", {2, 4, 8}}}, attention_fits);
    like("layer_norm/prefill", {{"gpu_threads", {256, 64, 128, 512, 1024}}});
    like("log_softmax/decode", {{"gpu_threads", {256, 64, 128, 512, 1024}}});
    return tasks;
}

// The tasks of a target: its GPU schedules' on a GPU.
inline std::vector<Task> make_tasks(const halformer::Config &c, const Workload &w, bool gpu) {
    return gpu ? make_gpu_tasks(c, w) : make_cpu_tasks(c, w);
}

}  // namespace tune
