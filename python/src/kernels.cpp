// halformer.kernels: single generated kernels (the CPU builds, in the x86
// variant the runtime picks for this CPU) on numpy float32 arrays. Shapes
// follow PyTorch ([rows, features], weights [out, in]); the generators'
// header comments give each kernel's shapes. Inputs are read in place where
// Halide can address them (arrays.h); outputs are new arrays.
#include "arrays.h"
#include "bindings.h"

#include "halformer/kernel_error.h"

#include "hf_attention.h"
#include "hf_attention_causal.h"
#include "hf_layer_norm.h"
#include "hf_layer_norm_residual.h"
#include "hf_linear.h"
#include "hf_linear_gelu.h"
#include "hf_linear_gelu_tanh.h"
#include "hf_linear_relu.h"
#include "hf_linear_residual.h"
#include "hf_linear_tanh.h"
#include "hf_log_softmax.h"
#include "hf_log_softmax_mask.h"
#include "hf_rms_norm.h"
#include "hf_rms_norm_residual.h"
#include "hf_softmax.h"
#include "hf_softmax_mask.h"

#include <pybind11/stl.h>

#include <cmath>
#include <optional>
#include <string>

namespace py = pybind11;

namespace halformer_py {
namespace {

halide_buffer_t *arg(Buffer &b) { return b.raw(); }
template <typename T>
T arg(T scalar) {
    return scalar;
}

// Runs a kernel without the GIL (the arrays stay referenced by the Buffers,
// so they outlive the call) and turns a nonzero return into
// halformer.KernelError with Halide's message. check_kernel runs on success
// too: it is what links the runtime's Halide error hooks into the module,
// without which Halide's default handler would abort the process.
template <typename Fn, typename... Args>
void call(const char *name, Fn kernel, Args &&...args) {
    int rc;
    {
        py::gil_scoped_release nogil;
        rc = kernel(arg(args)...);
    }
    halformer::check_kernel(rc, name);
}

// ---- LayerNorm and RMSNorm: y = norm(x [+ residual]) ----

py::array layer_norm(const py::object &x, const py::object &gamma, const py::object &beta, float eps,
                     const py::object &residual) {
    Buffer xb = Buffer::input(x, "x", {-1, -1});
    const int64_t R = xb.extent(0), D = xb.extent(1);
    Buffer g = Buffer::input(gamma, "gamma", {D}), b = Buffer::input(beta, "beta", {D});
    Buffer y = Buffer::output({R, D});
    if (residual.is_none()) {
        call("hf_layer_norm", hf_layer_norm, xb, g, b, eps, y);
    } else {
        Buffer r = Buffer::input(residual, "residual", {R, D});
        call("hf_layer_norm_residual", hf_layer_norm_residual, xb, g, b, eps, r, y);
    }
    return y.array();
}

py::array rms_norm(const py::object &x, const py::object &gamma, float eps, const py::object &residual) {
    Buffer xb = Buffer::input(x, "x", {-1, -1});
    const int64_t R = xb.extent(0), D = xb.extent(1);
    Buffer g = Buffer::input(gamma, "gamma", {D});
    Buffer y = Buffer::output({R, D});
    if (residual.is_none()) {
        call("hf_rms_norm", hf_rms_norm, xb, g, eps, y);
    } else {
        Buffer r = Buffer::input(residual, "residual", {R, D});
        call("hf_rms_norm_residual", hf_rms_norm_residual, xb, g, eps, r, y);
    }
    return y.array();
}

// ---- linear: y = act(x·wᵀ + b) [+ residual] ----

using LinearFn = int (*)(halide_buffer_t *, halide_buffer_t *, halide_buffer_t *, halide_buffer_t *);
struct LinearKernel {
    const char *activation, *name;
    LinearFn fn;
};
const LinearKernel kLinear[] = {{"none", "hf_linear", hf_linear},
                                {"relu", "hf_linear_relu", hf_linear_relu},
                                {"gelu", "hf_linear_gelu", hf_linear_gelu},
                                {"gelu_tanh", "hf_linear_gelu_tanh", hf_linear_gelu_tanh},
                                {"tanh", "hf_linear_tanh", hf_linear_tanh}};

const LinearKernel &linear_kernel(const std::string &activation) {
    std::string names;
    for (const auto &k : kLinear) {
        if (activation == k.activation) return k;
        names += std::string(names.empty() ? "" : ", ") + k.activation;
    }
    throw py::value_error("activation: '" + activation + "' is not one of None, " + names);
}

py::array linear(const py::object &x, const py::object &w, const py::object &bias,
                 const std::optional<std::string> &activation, const py::object &residual) {
    const LinearKernel &kernel = linear_kernel(activation.value_or("none"));
    Buffer xb = Buffer::input(x, "x", {-1, -1});
    const int64_t M = xb.extent(0), K = xb.extent(1);
    Buffer wb = Buffer::input(w, "w", {-1, K});
    const int64_t N = wb.extent(0);
    // The kernels always add a bias: none is zeros.
    py::object zeros = py::module_::import("numpy").attr("zeros")(N, py::arg("dtype") = "float32");
    Buffer b = Buffer::input(bias.is_none() ? zeros : bias, "b", {N});
    Buffer y = Buffer::output({M, N});
    if (residual.is_none()) {
        call(kernel.name, kernel.fn, xb, wb, b, y);
        return y.array();
    }
    // Only the plain projection has a fused residual (the pre-LN sub-layer's
    // second projection); the runtime never adds one after an activation.
    if (kernel.fn != hf_linear) throw py::value_error("residual: only with activation=None (hf_linear_residual)");
    Buffer r = Buffer::input(residual, "residual", {M, N});
    call("hf_linear_residual", hf_linear_residual, xb, wb, b, r, y);
    return y.array();
}

// ---- softmax / log_softmax over the last axis, optional additive mask ----

py::array softmax(const py::object &x, const py::object &mask, bool log) {
    Buffer xb = Buffer::input(x, "x", {-1, -1});
    const int64_t R = xb.extent(0), N = xb.extent(1);
    Buffer y = Buffer::output({R, N});
    if (mask.is_none()) {
        call(log ? "hf_log_softmax" : "hf_softmax", log ? hf_log_softmax : hf_softmax, xb, y);
    } else {
        Buffer m = Buffer::input(mask, "mask", {R, N});
        call(log ? "hf_log_softmax_mask" : "hf_softmax_mask", log ? hf_log_softmax_mask : hf_softmax_mask, xb, m, y);
    }
    return y.array();
}

// ---- attention: o = softmax(q·kᵀ·scale + mask)·v per batch and head ----

Buffer key_lengths(const std::optional<std::vector<int32_t>> &kv_len, int64_t B, int64_t Tkv) {
    if (!kv_len) return Buffer::ints(std::vector<int32_t>(B, (int32_t)Tkv));
    if ((int64_t)kv_len->size() != B) {
        throw py::value_error("kv_len: expected " + std::to_string(B) + " key lengths (one per batch row), got " +
                              std::to_string(kv_len->size()));
    }
    return Buffer::ints(*kv_len);
}

py::array attention(const py::object &q, const py::object &k, const py::object &v,
                    const std::optional<std::vector<int32_t>> &kv_len, bool causal, int q_offset,
                    const std::optional<float> &scale, int window) {
    if (window < 0) throw py::value_error("attention: window must be 0 (every key) or positive, not " + std::to_string(window));
    if (window > 0 && !causal) throw py::value_error("attention: a sliding window needs causal=True");
    Buffer qb = Buffer::input(q, "q", {-1, -1, -1, -1});
    const int64_t B = qb.extent(0), H = qb.extent(1), Tq = qb.extent(2), dk = qb.extent(3);
    Buffer kb = Buffer::input(k, "k", {B, H, -1, dk});
    const int64_t Tkv = kb.extent(2);
    Buffer vb = Buffer::input(v, "v", {B, H, Tkv, dk});
    Buffer len = key_lengths(kv_len, B, Tkv);
    Buffer o = Buffer::output({B, H, Tq, dk});
    const float s = scale.value_or(1.0f / std::sqrt((float)dk));
    if (causal) {
        call("hf_attention_causal", hf_attention_causal, qb, kb, vb, len, q_offset, s, window, o);
    } else {
        call("hf_attention", hf_attention, qb, kb, vb, len, q_offset, s, o);
    }
    return o.array();
}

}  // namespace

void bind_kernels(py::module_ &m) {
    using namespace py::literals;
    m.def("layer_norm", layer_norm, "x"_a, "gamma"_a, "beta"_a, "eps"_a = 1e-5f, "residual"_a = py::none(),
          "LayerNorm over the last axis of x [R, D] (x + residual when given): hf_layer_norm[_residual].");
    m.def("rms_norm", rms_norm, "x"_a, "gamma"_a, "eps"_a = 1e-6f, "residual"_a = py::none(),
          "RMSNorm (T5) over the last axis of x [R, D]: hf_rms_norm[_residual].");
    m.def("linear", linear, "x"_a, "w"_a, "b"_a = py::none(), "activation"_a = py::none(), "residual"_a = py::none(),
          "act(x·wᵀ + b) [+ residual]: x [M, K], w [N, K] (nn.Linear.weight), b [N] → [M, N]. activation: None, "
          "'relu', 'gelu', 'gelu_tanh' or 'tanh'; residual [M, N] only without one.");
    m.def(
        "softmax", [](const py::object &x, const py::object &mask) { return softmax(x, mask, false); }, "x"_a,
        "mask"_a = py::none(), "Softmax over the last axis of x [R, N], with an additive mask [R, N] (0 or -inf).");
    m.def(
        "log_softmax", [](const py::object &x, const py::object &mask) { return softmax(x, mask, true); }, "x"_a,
        "mask"_a = py::none(), "log_softmax over the last axis of x [R, N], with an additive mask [R, N].");
    m.def("attention", attention, "q"_a, "k"_a, "v"_a, "kv_len"_a = py::none(), "causal"_a = false, "q_offset"_a = 0,
          "scale"_a = py::none(), "window"_a = 0,
          "Scaled dot-product attention: q [B, H, Tq, dk], k and v [B, H, Tkv, dk] → [B, H, Tq, dk]. kv_len: valid "
          "keys per batch row (default Tkv); causal: query i sees keys j ≤ i + q_offset; scale: default 1/√dk; "
          "window (causal only): query i also sees only keys j > p − window, p = min(i + q_offset, kv_len − 1) "
          "(a sliding window, Mistral's; 0: every key).");
    m.def(
        "reads_in_place", [](const py::array &a) { return readable_in_place(a); }, "a"_a,
        "True when the kernels read `a` where it is (a float32 array whose innermost stride is one element); "
        "otherwise they read a C-order copy.");
}

}  // namespace halformer_py
