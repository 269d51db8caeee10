// Plain double-precision reference implementations and test helpers.
// Layouts match the generators (Halide dims innermost first): a PyTorch
// tensor [A, B] is a Buffer with dim 0 = B and dim 1 = A.
#pragma once

#include <HalideBuffer.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <functional>
#include <limits>
#include <numeric>
#include <random>
#include <sstream>
#include <string>
#include <vector>

namespace ref {

using Halide::Runtime::Buffer;

// A row-major double array with the same shape as a float buffer.
struct Array {
    std::vector<int> dims;  // innermost first
    std::vector<double> v;
    explicit Array(std::vector<int> d) : dims(std::move(d)) {
        size_t n = 1;
        for (int x : dims) n *= (size_t)x;
        v.assign(n, 0.0);
    }
    double &operator()(int a) { return v[a]; }
    double &operator()(int a, int b) { return v[(size_t)b * dims[0] + a]; }
    double &operator()(int a, int b, int c) {
        return v[((size_t)c * dims[1] + b) * dims[0] + a];
    }
    double &operator()(int a, int b, int c, int d) {
        return v[(((size_t)d * dims[2] + c) * dims[1] + b) * dims[0] + a];
    }
};

inline Buffer<float> random_buffer(std::vector<int> dims, uint32_t seed, float lo = -1.f,
                                   float hi = 1.f) {
    Buffer<float> b(dims);
    std::mt19937 rng(seed);
    std::uniform_real_distribution<float> dist(lo, hi);
    b.for_each_value([&](float &x) { x = dist(rng); });
    return b;
}

inline Array to_array(const Buffer<float> &b) {
    std::vector<int> dims;
    for (int i = 0; i < b.dimensions(); i++) dims.push_back(b.dim(i).extent());
    Array a(dims);
    // Walk dim 0 fastest, as Array stores.
    std::vector<int> pos(dims.size(), 0);
    for (size_t idx = 0; idx < a.v.size(); idx++) {
        a.v[idx] = b(pos.data()) ;
        for (size_t d = 0; d < dims.size(); d++) {
            if (++pos[d] < dims[d]) break;
            pos[d] = 0;
        }
    }
    return a;
}

// ‖out − ref‖₂ / ‖ref‖₂ (absolute ‖out − ref‖₂ when ref is all zeros).
// Any NaN or inf in out where ref is finite, or a size mismatch, gives +inf.
inline double rel_error_arrays(const Array &o, const Array &r) {
    if (o.v.size() != r.v.size()) return std::numeric_limits<double>::infinity();
    double num = 0, den = 0;
    for (size_t i = 0; i < r.v.size(); i++) {
        if (std::isinf(r.v[i]) && o.v[i] == r.v[i]) continue;  // matching -inf
        if (!std::isfinite(o.v[i])) return std::numeric_limits<double>::infinity();
        num += (o.v[i] - r.v[i]) * (o.v[i] - r.v[i]);
        den += r.v[i] * r.v[i];
    }
    return den > 0 ? std::sqrt(num / den) : std::sqrt(num);
}

inline double rel_error(const Buffer<float> &out, const Array &r) {
    return rel_error_arrays(to_array(out), r);
}

constexpr double kTolerance = 1e-5;

// ---- references ----

inline double gelu(double x) { return 0.5 * x * (1.0 + std::erf(x / std::sqrt(2.0))); }
inline double gelu_tanh(double x) {
    return 0.5 * x * (1.0 + std::tanh(std::sqrt(2.0 / M_PI) * (x + 0.044715 * x * x * x)));
}
inline double activate(double x, const std::string &act) {
    if (act == "relu") return x > 0 ? x : 0;
    if (act == "gelu") return gelu(x);
    if (act == "gelu_tanh") return gelu_tanh(x);
    if (act == "silu") return x / (1.0 + std::exp(-x));
    if (act == "tanh") return std::tanh(x);
    return x;
}

// y[m, n] = act(Σ_k x[m, k] w[n, k] + b[n]) (+ res[m, n])
inline Array linear(Array x, Array w, Array b, const std::string &act, Array *res) {
    const int K = x.dims[0], M = x.dims[1], N = w.dims[1];
    Array y({N, M});
    for (int m = 0; m < M; m++)
        for (int n = 0; n < N; n++) {
            double s = 0;
            for (int k = 0; k < K; k++) s += x(k, m) * w(k, n);
            double v = activate(s + b(n), act);
            if (res) v += (*res)(n, m);
            y(n, m) = v;
        }
    return y;
}

// softmax over dim 0 of x + mask; fully masked rows → 0 (softmax) / -inf (log)
inline Array softmax(Array x, Array *mask, bool log_out) {
    const int N = x.dims[0], R = x.dims[1];
    Array y({N, R});
    for (int r = 0; r < R; r++) {
        double mx = -INFINITY;
        std::vector<double> s(N);
        for (int n = 0; n < N; n++) {
            s[n] = x(n, r) + (mask ? (*mask)(n, r) : 0.0);
            mx = std::max(mx, s[n]);
        }
        double sum = 0;
        for (int n = 0; n < N; n++) sum += std::isinf(s[n]) ? 0.0 : std::exp(s[n] - mx);
        for (int n = 0; n < N; n++) {
            if (log_out) {
                y(n, r) = std::isinf(s[n]) ? -INFINITY : s[n] - mx - std::log(sum);
            } else {
                y(n, r) = (sum > 0 && !std::isinf(s[n])) ? std::exp(s[n] - mx) / sum : 0.0;
            }
        }
    }
    return y;
}

inline Array layer_norm(Array x, Array *res, Array g, Array b, double eps) {
    const int D = x.dims[0], R = x.dims[1];
    Array y({D, R});
    for (int r = 0; r < R; r++) {
        std::vector<double> h(D);
        double mean = 0;
        for (int d = 0; d < D; d++) {
            h[d] = x(d, r) + (res ? (*res)(d, r) : 0.0);
            mean += h[d];
        }
        mean /= D;
        double var = 0;
        for (int d = 0; d < D; d++) var += (h[d] - mean) * (h[d] - mean);
        var /= D;
        for (int d = 0; d < D; d++) y(d, r) = (h[d] - mean) / std::sqrt(var + eps) * g(d) + b(d);
    }
    return y;
}

// RMSNorm (T5LayerNorm): (x + res) / √(mean((x + res)²) + eps) · g
inline Array rms_norm(Array x, Array *res, Array g, double eps) {
    const int D = x.dims[0], R = x.dims[1];
    Array y({D, R});
    for (int r = 0; r < R; r++) {
        std::vector<double> h(D);
        double sq = 0;
        for (int d = 0; d < D; d++) {
            h[d] = x(d, r) + (res ? (*res)(d, r) : 0.0);
            sq += h[d] * h[d];
        }
        const double inv = 1.0 / std::sqrt(sq / D + eps);
        for (int d = 0; d < D; d++) y(d, r) = h[d] * inv * g(d);
    }
    return y;
}

// q (d, i, h, b), k/v (d, j, g, b) with H / G query heads to a key/value
// head (g = h / (H / G): grouped-query attention; G = H: multi-head); bias
// (T5): bias[h](j − (i + q_offset)) added to the scaled score; window > 0
// (Mistral): the query at position p = min(i + q_offset, kv_len − 1) sees
// keys j > p − window only; softcap > 0 (Gemma 2): each scaled score s is
// softcap·tanh(s/softcap).
using RelBias = std::vector<std::function<double(int)>>;
inline Array attention(Array q, Array k, Array v, const std::vector<int> &kv_len, int q_offset,
                       double scale, bool causal, const RelBias *bias = nullptr, int window = 0,
                       double softcap = 0) {
    const int dk = q.dims[0], Tq = q.dims[1], H = q.dims[2], B = q.dims[3], Tkv = k.dims[1];
    const int group = H / k.dims[2];
    Array o({dk, Tq, H, B});
    for (int b = 0; b < B; b++)
        for (int h = 0; h < H; h++)
            for (int i = 0; i < Tq; i++) {
                std::vector<double> s(Tkv);
                std::vector<bool> ok(Tkv);
                double mx = -INFINITY;
                for (int j = 0; j < Tkv; j++) {
                    ok[j] = j < kv_len[b] && (!causal || j <= i + q_offset);
                    if (window > 0) ok[j] = ok[j] && j > std::min(i + q_offset, kv_len[b] - 1) - window;
                    double acc = 0;
                    for (int d = 0; d < dk; d++) acc += q(d, i, h, b) * k(d, j, h / group, b);
                    const double scaled = softcap > 0 ? softcap * std::tanh(acc * scale / softcap) : acc * scale;
                    s[j] = scaled + (bias ? (*bias)[h](j - (i + q_offset)) : 0.0);
                    if (ok[j]) mx = std::max(mx, s[j]);
                }
                double sum = 0;
                for (int j = 0; j < Tkv; j++) sum += ok[j] ? std::exp(s[j] - mx) : 0.0;
                for (int d = 0; d < dk; d++) {
                    double acc = 0;
                    for (int j = 0; j < Tkv; j++)
                        if (ok[j]) acc += std::exp(s[j] - mx) * v(d, j, h / group, b);
                    o(d, i, h, b) = sum > 0 ? acc / sum : 0.0;
                }
            }
    return o;
}

// The paper's PE (interleaved) or the [sin | cos] halves layout.
inline double positional(int pos, int d, int D, bool concat) {
    int i = concat ? (d < D / 2 ? d : d - D / 2) : d / 2;
    bool is_sin = concat ? d < D / 2 : d % 2 == 0;
    double angle = pos / std::pow(10000.0, 2.0 * i / D);
    return is_sin ? std::sin(angle) : std::cos(angle);
}

// ---- sampling (generators/sample_generator.cpp; tests/test_sample.cpp and
// the tuner) ----

// A draw whose cumulative weight lies within this relative distance of its
// target is on a decision's edge: float sums may fall on either side.
constexpr double kSampleBorder = 1e-5;

struct SampleSettings {
    float temperature;
    int top_k;
    float top_p;
};


// The kernel's rule (generators/sample_generator.cpp) in double precision,
// for one row: candidates best first (ties: lower id first) with weights.
class SampleRow {
public:
    SampleRow(const std::vector<float> &logits, const SampleSettings &s) {
        const int V = (int)logits.size();
        std::vector<double> x(V);
        double mx = -INFINITY;
        for (int v = 0; v < V; v++) {
            x[v] = std::isnan(logits[v]) ? -INFINITY : (double)logits[v];
            mx = std::max(mx, x[v]);
        }
        if (mx == -INFINITY) {  // nothing above −inf: id 0
            masked_ = true;
            return;
        }
        const bool greedy = !(s.temperature > 0);
        const double t = std::min(std::max((double)s.temperature, 1e-30), 1e30);
        w_.assign(V, 0.0);
        for (int v = 0; v < V; v++) {
            if (x[v] == mx) {
                w_[v] = 1.0;
            } else if (!greedy && mx != INFINITY && x[v] != -INFINITY) {
                const double d = (x[v] - mx) / t;
                w_[v] = d > -87.0 ? std::exp(d) : 0.0;
            }
        }
        order_.resize(V);
        std::iota(order_.begin(), order_.end(), 0);
        std::stable_sort(order_.begin(), order_.end(), [&](int a, int b) { return x[a] > x[b]; });
        int n = V;
        if (s.top_k > 0 && s.top_k < V) {  // the k-th best value and every tie with it
            const double kth = x[order_[s.top_k - 1]];
            n = s.top_k;
            while (n < V && x[order_[n]] == kth) n++;
        }
        const double p = std::isnan(s.top_p) ? 1.0 : (double)s.top_p;
        if (p < 1.0) {
            double wk = 0;
            for (int i = 0; i < n; i++) wk += w_[order_[i]];
            const double goal = p * wk;
            double cum = 0;
            for (int i = 0; i < n;) {  // one group of equal values at a time
                int j = i;
                while (j < n && x[order_[j]] == x[order_[i]]) cum += w_[order_[j++]];
                if (std::fabs(cum - goal) <= kSampleBorder * wk) cut_borderline_ = true;
                if (cum >= goal) {
                    n = j;
                    break;
                }
                i = j;
            }
        }
        n_ = n;
        for (int i = 0; i < n_; i++) total_ += w_[order_[i]];
    }

    struct Draw {
        int id;
        bool borderline;
    };
    Draw draw(float u) const {
        if (masked_) return {0, false};
        double uc = u;
        if (std::isnan(u) || u <= 0) uc = 0;
        if (u >= 1) uc = std::nextafter(1.0f, 0.0f);
        const double target = uc * total_, near = kSampleBorder * total_;
        double cum = 0;
        int last = -1;
        for (int i = 0; i < n_; i++) {
            const double before = cum, wi = w_[order_[i]];
            if (wi > 0) last = order_[i];
            cum += wi;
            if (cum > target) {
                bool border = cut_borderline_ || std::fabs(cum - target) <= near ||
                              (i > 0 && std::fabs(before - target) <= near);
                return {order_[i], border};
            }
        }
        return {last, true};
    }
    int candidates() const { return n_; }
    // Where `id` lies in the draw, for failure messages: its cumulative
    // weight before and after it, relative to u · total.
    std::string where(int id, float u) const {
        if (masked_) return "(masked row)";
        const double target = std::min(std::max((double)u, 0.0), 1.0) * total_;
        double cum = 0;
        for (int i = 0; i < (int)order_.size(); i++) {
            const double before = cum;
            cum += i < n_ ? w_[order_[i]] : 0.0;
            if (order_[i] == id) {
                std::ostringstream o;
                o << "id " << id << " is candidate " << i << " of " << n_ << ": cumulative before/after it − target = "
                  << (before - target) / total_ << " / " << (cum - target) / total_ << " of the total";
                return o.str();
            }
        }
        return "id " + std::to_string(id) + " is no token";
    }

private:
    bool masked_ = false, cut_borderline_ = false;
    std::vector<double> w_;
    std::vector<int> order_;
    int n_ = 0;
    double total_ = 0;
};

}  // namespace ref
