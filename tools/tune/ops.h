// The ops the tuner runs: for one generator at one shape, the inputs (random,
// fixed seed), the output buffers, the binding to a JIT-compiled generator
// instance, and the check against the double-precision references of
// tests/reference.h.
#pragma once

#include "Halide.h"
#include "tests/reference.h"

// The AOT packers (linked from halformer_kernels): the tuner's packed
// weights are the runtime's, byte for byte.
#include "hf_pack_bf16.h"
#include "hf_pack_f32.h"
#include "hf_pack_int8.h"

#include <cmath>
#include <cstdio>
#include <cstring>
#include <map>
#include <memory>
#include <set>
#include <string>
#include <vector>

namespace tune {

using Halide::Buffer;
using Dims = std::map<std::string, int>;

// One call shape of an op: named sizes, and generator parameters that differ
// from the task's representative kernel (e.g. causal=true).
struct Shape {
    std::string label;
    Dims dims;
    std::map<std::string, std::string> gen;
};

inline int dim(const Shape &s, const char *name) {
    auto it = s.dims.find(name);
    if (it == s.dims.end()) throw std::runtime_error(std::string("shape has no ") + name);
    return it->second;
}

// One input value, by the generator's Input<> name: a buffer, or a scalar
// of the input's type.
struct InputValue {
    std::string name;
    Halide::Buffer<> buf;
    double scalar = 0;
    // A buffer that some forms of the algorithm do not read, so that the
    // pipeline may not have it (int8's colsum: the offset form's only).
    bool optional = false;
    template <typename T>
    InputValue(const char *n, const Halide::Buffer<T> &b, bool opt = false) : name(n), buf(b), optional(opt) {}
    InputValue(const char *n, double v) : name(n), scalar(v) {}
};

// A generator instance's data at one shape.
class OpData {
public:
    virtual ~OpData() = default;
    // The input values.
    virtual std::vector<InputValue> inputs() = 0;
    virtual Halide::Realization outputs() = 0;
    // Output sizes, for the autoschedulers' estimates.
    virtual std::vector<std::vector<int>> output_extents() = 0;
    // ‖out − ref‖/‖ref‖ after a run (over the rows the reference covers).
    virtual double error() = 0;
};

// Rows checked against the reference: the first, a middle and the last (the
// reference is plain double loops; the full product at vocabulary size
// would take seconds per candidate).
inline ref::Array arr(const Buffer<float> &b) { return ref::to_array(*b.get()); }

inline std::vector<int> check_rows(int M) {
    std::set<int> rows{0, M / 2, M - 1};
    return {rows.begin(), rows.end()};
}

inline ref::Array rows_of(const Buffer<float> &b, const std::vector<int> &rows) {
    const int W = b.dim(0).extent();
    ref::Array a({W, (int)rows.size()});
    for (size_t r = 0; r < rows.size(); r++)
        for (int i = 0; i < W; i++) a(i, (int)r) = b(i, rows[r]);
    return a;
}

inline double rel_error_rows(const Buffer<float> &out, const std::vector<int> &rows,
                             const ref::Array &r) {
    return ref::rel_error_arrays(rows_of(out, rows), r);
}

inline std::string param(const Shape &s, const char *name, const std::string &fallback) {
    auto it = s.gen.find(name);
    return it == s.gen.end() ? fallback : it->second;
}

// linear: x [M, K], w [N, K], bias [N] (+ residual) → y [M, N]
class LinearData : public OpData {
public:
    LinearData(const Shape &s, const std::string &act, bool residual)
        : M(dim(s, "M")), K(dim(s, "K")), N(dim(s, "N")), act(act), has_res(residual),
          x(ref::random_buffer({K, M}, 1)), w(ref::random_buffer({K, N}, 2, -0.1f, 0.1f)),
          b(ref::random_buffer({N}, 3)), res(ref::random_buffer({N, M}, 4)), y(N, M) {}
    std::vector<InputValue> inputs() override {
        std::vector<InputValue> in{{"x", x}, {"w", w}, {"bias", b}};
        if (has_res) in.push_back({"residual", res});
        return in;
    }
    Halide::Realization outputs() override { return Halide::Realization({y}); }
    std::vector<std::vector<int>> output_extents() override { return {{N, M}}; }
    double error() override {
        auto rows = check_rows(M);
        ref::Array xr = rows_of(x, rows), rr = rows_of(res, rows);
        ref::Array r = ref::linear(xr, arr(w), arr(b), act, has_res ? &rr : nullptr);
        return rel_error_rows(y, rows, r);
    }

private:
    int M, K, N;
    std::string act;
    bool has_res;
    Buffer<float> x, w, b, res, y;
};

// linear_packed: x [M, K], w [N, K] packed by hf_pack_f32 / bf16 / int8
// (+ int8's per-block scale, colsum), bias [N] (+ residual) → y [M, N]. The reference
// applies the format's quantization (as tests/test_linear_packed.cpp) and
// sums in double: only float32 summation separates it from the kernel.
class LinearPackedData : public OpData {
public:
    LinearPackedData(const Shape &s, const std::string &format, const std::string &act, bool residual)
        : M(dim(s, "M")), K(dim(s, "K")), N(dim(s, "N")), int8(format == "int8"), f32(format == "f32"), act(act),
          has_res(residual), kf(int8 ? 4 : f32 ? 1 : 2), groups(int8 ? (K + 31) / 32 * 8 : (K + kf - 1) / kf), Np((N + kPanel - 1) / kPanel * kPanel),
          x(ref::random_buffer({K, M}, 1)), w(ref::random_buffer({K, N}, 2, -0.1f, 0.1f)),
          b(ref::random_buffer({N}, 3)), res(ref::random_buffer({N, M}, 4)), y(N, M) {
        if (format != "f32" && format != "bf16" && format != "int8")
            throw std::runtime_error("the tuner has no linear_packed data for format=" + format);
        wp = Buffer<>(int8 ? Halide::Int(8) : f32 ? Halide::Float(32) : Halide::BFloat(16),
                      {kf, kPanel, groups, Np / kPanel});
        int rc;
        if (int8) {
            scale = Buffer<float>(kPanel, groups * kf / 32, Np / kPanel);
            colsum = Buffer<int16_t>(kPanel, groups * kf / 32, Np / kPanel);
            rc = hf_pack_int8(w.raw_buffer(), wp.raw_buffer(), scale.raw_buffer(), colsum.raw_buffer());
        } else if (f32) {
            rc = hf_pack_f32(w.raw_buffer(), wp.raw_buffer());
        } else {
            rc = hf_pack_bf16(w.raw_buffer(), wp.raw_buffer());
        }
        if (rc != 0) throw std::runtime_error("hf_pack_" + format + " failed (" + std::to_string(rc) + ")");
    }
    std::vector<InputValue> inputs() override {
        std::vector<InputValue> in{{"x", x}, {"w", wp}};
        if (int8) {
            in.push_back({"scale", scale});
            in.push_back({"colsum", colsum, true});  // (the sign form has no use for it)
        }
        in.push_back({"bias", b});
        if (has_res) in.push_back({"residual", res});
        return in;
    }
    Halide::Realization outputs() override { return Halide::Realization({y}); }
    std::vector<std::vector<int>> output_extents() override { return {{N, M}}; }
    double error() override {
        auto rows = check_rows(M);
        ref::Array r({N, (int)rows.size()});
        for (size_t i = 0; i < rows.size(); i++) {
            const int m = rows[i];
            // int8: each block of 32 k's step max|x| / 127 (1 for zeros), codes
            // nearbyint(x · (1 / step)) (ties to even, as Halide's round) within ±127.
            std::vector<float> sx((K + 31) / 32, 0.0f);
            for (int k = 0; k < K; k++) sx[k / 32] = std::fmax(sx[k / 32], std::fabs(x(k, m)));
            for (float &v : sx) v = v > 0 ? v / 127.0f : 1.0f;
            for (int n = 0; n < N; n++) {
                double sum = 0;
                for (int k = 0; k < K; k++) {
                    const float inverse = 1.0f / sx[k / 32];
                    double xq = int8 ? std::fmax(-127.0f, std::fmin(127.0f, std::nearbyint(x(k, m) * inverse)))
                                     : f32 ? x(k, m) : bf16_round(x(k, m));
                    if (int8) xq *= (double)sx[k / 32] * scale(n % kPanel, k / 32, n / kPanel);
                    sum += xq * packed_at(n, k);
                }
                r(n, (int)i) = ref::activate(sum + b(n), act) + (has_res ? res(n, m) : 0.0);
            }
        }
        return rel_error_rows(y, rows, r);
    }

private:
    static constexpr int kPanel = 48;  // generators/packing.h
    int M, K, N;
    bool int8, f32;
    std::string act;
    bool has_res;
    int kf, groups, Np;
    Buffer<float> x, w, b, res, y;
    Buffer<> wp;
    Buffer<float> scale;
    Buffer<int16_t> colsum;

    // float32 → bfloat16 → float32, to nearest, ties to even.
    static float bf16_round(float v) {
        uint32_t u;
        std::memcpy(&u, &v, 4);
        u += 0x7fff + ((u >> 16) & 1);
        u &= 0xffff0000u;
        std::memcpy(&v, &u, 4);
        return v;
    }
    // W[n, k] as packed: a float32 or bfloat16 value, or an int8 code.
    double packed_at(int n, int k) const {
        const size_t i = (size_t)k % kf + (size_t)kf * (n % kPanel) + (size_t)kf * kPanel * (k / kf) +
                         (size_t)kf * kPanel * groups * (n / kPanel);
        if (int8) return ((const int8_t *)wp.data())[i];
        if (f32) return ((const float *)wp.data())[i];
        uint32_t u = (uint32_t)((const uint16_t *)wp.data())[i] << 16;
        float v;
        std::memcpy(&v, &u, 4);
        return v;
    }
};

// ffn: x [M, D] → act(x·W1ᵀ + b1)·W2ᵀ + b2 (+ x) → y [M, D]
class FFNData : public OpData {
public:
    FFNData(const Shape &s, const std::string &act, bool residual)
        : M(dim(s, "M")), D(dim(s, "D")), F(dim(s, "F")), act(act), has_res(residual),
          x(ref::random_buffer({D, M}, 1)), w1(ref::random_buffer({D, F}, 2, -0.1f, 0.1f)),
          b1(ref::random_buffer({F}, 3)), w2(ref::random_buffer({F, D}, 4, -0.05f, 0.05f)),
          b2(ref::random_buffer({D}, 5)), res(ref::random_buffer({D, M}, 6)), y(D, M) {}
    std::vector<InputValue> inputs() override {
        std::vector<InputValue> in{{"x", x}, {"w1", w1}, {"b1", b1}, {"w2", w2}, {"b2", b2}};
        if (has_res) in.push_back({"residual", res});
        return in;
    }
    Halide::Realization outputs() override { return Halide::Realization({y}); }
    std::vector<std::vector<int>> output_extents() override { return {{D, M}}; }
    double error() override {
        auto rows = check_rows(M);
        ref::Array xr = rows_of(x, rows), rr = rows_of(res, rows);
        ref::Array hidden = ref::linear(xr, arr(w1), arr(b1), act, nullptr);
        ref::Array r = ref::linear(hidden, arr(w2), arr(b2), "none",
                                   has_res ? &rr : nullptr);
        return rel_error_rows(y, rows, r);
    }

private:
    int M, D, F;
    std::string act;
    bool has_res;
    Buffer<float> x, w1, b1, w2, b2, res, y;
};

// output_head: log_softmax(x·Wᵀ + b) over the vocabulary
class HeadData : public OpData {
public:
    explicit HeadData(const Shape &s)
        : M(dim(s, "M")), K(dim(s, "K")), V(dim(s, "V")), x(ref::random_buffer({K, M}, 1)),
          w(ref::random_buffer({K, V}, 2, -0.1f, 0.1f)), b(ref::random_buffer({V}, 3)), y(V, M) {}
    std::vector<InputValue> inputs() override { return {{"x", x}, {"w", w}, {"bias", b}}; }
    Halide::Realization outputs() override { return Halide::Realization({y}); }
    std::vector<std::vector<int>> output_extents() override { return {{V, M}}; }
    double error() override {
        auto rows = check_rows(M);
        ref::Array logits = ref::linear(rows_of(x, rows), arr(w), arr(b), "none", nullptr);
        return rel_error_rows(y, rows, ref::softmax(logits, nullptr, true));
    }

private:
    int M, K, V;
    Buffer<float> x, w, b, y;
};

// softmax / log_softmax over rows of N (+ mask)
class SoftmaxData : public OpData {
public:
    SoftmaxData(const Shape &s, bool log_out, bool mask)
        : R(dim(s, "R")), N(dim(s, "N")), log_out(log_out), has_mask(mask),
          x(ref::random_buffer({N, R}, 1, -8.f, 8.f)), m(ref::random_buffer({N, R}, 2, -1.f, 0.f)),
          y(N, R) {}
    std::vector<InputValue> inputs() override {
        std::vector<InputValue> in{{"x", x}};
        if (has_mask) in.push_back({"mask", m});
        return in;
    }
    Halide::Realization outputs() override { return Halide::Realization({y}); }
    std::vector<std::vector<int>> output_extents() override { return {{N, R}}; }
    double error() override {
        ref::Array ma = arr(m);
        return ref::rel_error(*y.get(), ref::softmax(arr(x), has_mask ? &ma : nullptr, log_out));
    }

private:
    int R, N;
    bool log_out, has_mask;
    Buffer<float> x, m, y;
};

// layer_norm(x (+ residual)) · γ + β
class LayerNormData : public OpData {
public:
    LayerNormData(const Shape &s, bool residual)
        : M(dim(s, "M")), D(dim(s, "D")), has_res(residual), x(ref::random_buffer({D, M}, 1, -2.f, 3.f)),
          g(ref::random_buffer({D}, 2, 0.5f, 1.5f)), be(ref::random_buffer({D}, 3)),
          res(ref::random_buffer({D, M}, 4)), y(D, M) {}
    std::vector<InputValue> inputs() override {
        std::vector<InputValue> in{{"x", x}, {"gamma", g}, {"beta", be}, {"eps", eps}};
        if (has_res) in.push_back({"residual", res});
        return in;
    }
    Halide::Realization outputs() override { return Halide::Realization({y}); }
    std::vector<std::vector<int>> output_extents() override { return {{D, M}}; }
    double error() override {
        ref::Array ra = arr(res);
        return ref::rel_error(*y.get(), ref::layer_norm(arr(x), has_res ? &ra : nullptr,
                                                 arr(g), arr(be), eps));
    }

private:
    int M, D;
    bool has_res;
    float eps = 1e-5f;
    Buffer<float> x, g, be, res, y;
};

// attention: q (dk, Tq, H, B), k/v (dk, Tkv, H, B), per-sequence kv_len;
// paged (page > 0): k and v a pool of B blocks of `page` rows, key t of
// sequence b in row block_table(t / page, b) · page + t % page
class AttentionData : public OpData {
public:
    AttentionData(const Shape &s, bool causal, int page)
        : B(dim(s, "B")), H(dim(s, "H")), Tq(dim(s, "Tq")), Tkv(dim(s, "Tkv")), dk(dim(s, "dk")),
          causal(causal), page(page), q_offset(Tkv - Tq), scale(1.0f / std::sqrt((float)dk)),
          q(ref::random_buffer({dk, Tq, H, B}, 1)), k(ref::random_buffer({dk, Tkv, H, B * std::max(page, 1)}, 2)),
          v(ref::random_buffer({dk, Tkv, H, B * std::max(page, 1)}, 3)), kv_len(B),
          block_table(std::max((Tkv + std::max(page, 1) - 1) / std::max(page, 1), 1), B), o(dk, Tq, H, B) {
        // Sequences of a batch end at different lengths (the padded case).
        for (int b = 0; b < B; b++) kv_len(b) = std::max(1, Tkv - 3 * b);
        // As beam search leaves them: blocks shared and crossed between
        // hypotheses, each hypothesis' newest block its own.
        const int NB = block_table.dim(0).extent();
        for (int b = 0; b < B; b++)
            for (int n = 0; n < NB; n++) block_table(n, b) = n == NB - 1 ? b : (b * 7 + n * 3) % B;
    }
    std::vector<InputValue> inputs() override {
        std::vector<InputValue> in{{"q", q}, {"k", k}, {"v", v}, {"kv_len", kv_len},
                                   {"q_offset", (double)q_offset}, {"scale", scale},
                                   {"window", 0.0}};  // (causal: every key)
        if (page > 0) in.push_back({"block_table", block_table});
        return in;
    }
    Halide::Realization outputs() override { return Halide::Realization({o}); }
    std::vector<std::vector<int>> output_extents() override { return {{dk, Tq, H, B}}; }
    double error() override {
        std::vector<int> lens(kv_len.data(), kv_len.data() + B);
        ref::Array ka = arr(k), va = arr(v);
        if (page > 0) {  // the cache as each sequence sees it
            ref::Array kr({dk, Tkv, H, B}), vr({dk, Tkv, H, B});
            for (int b = 0; b < B; b++)
                for (int h = 0; h < H; h++)
                    for (int t = 0; t < Tkv; t++) {
                        const int row = block_table(t / page, b) * page + t % page;
                        for (int d = 0; d < dk; d++) {
                            kr(d, t, h, b) = ka(d, t, h, row);
                            vr(d, t, h, b) = va(d, t, h, row);
                        }
                    }
            ka = kr;
            va = vr;
        }
        return ref::rel_error(*o.get(), ref::attention(arr(q), ka, va, lens, q_offset, scale, causal));
    }

private:
    int B, H, Tq, Tkv, dk;
    bool causal;
    int page;
    int32_t q_offset;
    float scale;
    Buffer<float> q, k, v;
    Buffer<int32_t> kv_len, block_table;
    Buffer<float> o;
};

// embedding: table[token]·scale + position encoding → out (D, T, B)
class EmbeddingData : public OpData {
public:
    EmbeddingData(const Shape &s, const std::string &pe, bool token_types = false)
        : B(dim(s, "B")), T(dim(s, "T")), D(dim(s, "D")), V(dim(s, "V")), pe(pe), with_types(token_types),
          tokens(T, B), types(T, B), starts(B), table(ref::random_buffer({D, V}, 1)),
          pos(ref::random_buffer({D, T + start + B}, 2)), type_table(ref::random_buffer({D, 2}, 3)), out(D, T, B) {
        for (int b = 0; b < B; b++) starts(b) = start + b;  // each sequence at its own position
        uint32_t h = 12345;
        tokens.for_each_value([&](int32_t &t) { h = h * 1664525u + 1013904223u; t = (int32_t)(h % (uint32_t)V); });
        types.for_each_value([&](int32_t &t) { h = h * 1664525u + 1013904223u; t = (int32_t)((h >> 16) % 2u); });
    }
    std::vector<InputValue> inputs() override {
        std::vector<InputValue> in{{"tokens", tokens}, {"table", table}, {"start_pos", starts}, {"scale", scale}};
        if (pe == "learned") in.push_back({"pos_table", pos});
        if (with_types) {
            in.push_back({"types", types});
            in.push_back({"type_table", type_table});
        }
        return in;
    }
    Halide::Realization outputs() override { return Halide::Realization({out}); }
    std::vector<std::vector<int>> output_extents() override { return {{D, T, B}}; }
    double error() override {
        ref::Array r({D, T, B});
        for (int b = 0; b < B; b++)
            for (int t = 0; t < T; t++)
                for (int d = 0; d < D; d++) {
                    const int at = starts(b) + t;
                    double p = pe == "learned" ? (double)pos(d, at) : ref::positional(at, d, D, pe == "sinusoidal_concat");
                    if (with_types) p += type_table(d, types(t, b));
                    r(d, t, b) = (double)table(d, tokens(t, b)) * scale + p;
                }
        return ref::rel_error(*out.get(), r);
    }

private:
    int B, T, D, V;
    std::string pe;
    bool with_types;
    int32_t start = 3;
    float scale = 2.0f;
    Buffer<int32_t> tokens, types, starts;
    Buffer<float> table, pos, type_table, out;
};

// Sampling: R rows of V logits (N(0, 3): a trained model's spread), the
// decode step's settings, one fixed uniform a row (spread over [0, 1) by
// the golden ratio, and the same for a row whatever R: fewer rows are the
// first rows of more, as the Rows check needs). The check is exact: the
// share of rows whose id differs from the double-precision rule's draw
// (ref::SampleRow; a draw on a decision's edge is not judged).
class SampleData : public OpData {
public:
    explicit SampleData(const Shape &s)
        : R(dim(s, "R")), V(dim(s, "V")), logits(V, R), u(R), ids(R) {
        std::mt19937 rng(7);
        std::normal_distribution<float> normal(0.0f, 3.0f);
        logits.for_each_value([&](float &x) { x = normal(rng); });
        for (int r = 0; r < R; r++) u(r) = (float)std::fmod(0.37 + r * 0.6180339887, 1.0);
    }
    std::vector<InputValue> inputs() override {
        return {{"logits", logits}, {"temperature", (double)set.temperature}, {"top_k", (double)set.top_k},
                {"top_p", (double)set.top_p}, {"u", u}};
    }
    Halide::Realization outputs() override { return Halide::Realization({ids}); }
    std::vector<std::vector<int>> output_extents() override { return {{R}}; }
    double error() override {
        int wrong = 0;
        for (int r = 0; r < R; r++) {
            std::vector<float> row(V);
            for (int v = 0; v < V; v++) row[v] = logits(v, r);
            ref::SampleRow::Draw want = ref::SampleRow(row, set).draw(u(r));
            if (!want.borderline && ids(r) != want.id) wrong++;
        }
        return (double)wrong / R;
    }

private:
    int R, V;
    ref::SampleSettings set{0.8f, 50, 0.9f};
    Buffer<float> logits, u;
    Buffer<int32_t> ids;
};

// The data for `generator` with the given generator parameters at `shape`.
inline std::unique_ptr<OpData> make_op_data(const std::string &generator,
                                            const std::map<std::string, std::string> &params,
                                            const Shape &shape) {
    auto get = [&](const char *name, const std::string &fallback) {
        auto it = params.find(name);
        return param(shape, name, it == params.end() ? fallback : it->second);
    };
    if (generator == "linear")
        return std::make_unique<LinearData>(shape, get("activation", "none"), get("residual", "false") == "true");
    if (generator == "ffn")
        return std::make_unique<FFNData>(shape, get("activation", "relu"), get("residual", "false") == "true");
    if (generator == "output_head") return std::make_unique<HeadData>(shape);
    if (generator == "softmax")
        return std::make_unique<SoftmaxData>(shape, get("log", "false") == "true", get("mask", "false") == "true");
    if (generator == "layer_norm")
        return std::make_unique<LayerNormData>(shape, get("residual", "false") == "true");
    if (generator == "linear_packed")
        return std::make_unique<LinearPackedData>(shape, get("format", "bf16"), get("activation", "none"),
                                                  get("residual", "false") == "true");
    if (generator == "attention")
        return std::make_unique<AttentionData>(shape, get("causal", "false") == "true",
                                               std::stoi(get("page", "0")));
    if (generator == "embedding")
        return std::make_unique<EmbeddingData>(shape, get("pe", "sinusoidal"), get("token_types", "false") == "true");
    if (generator == "sample") return std::make_unique<SampleData>(shape);
    throw std::runtime_error("the tuner has no op data for generator " + generator);
}

}  // namespace tune
