// The user's op (hf_rotary, built by halformer_add_kernel) against a
// double-precision reference, then beside Halformer's own attention kernel in
// the same program: rotary-embedded queries and keys into hf_attention_causal.
// Exit 0 when every check passes; each failure is printed.
#include "hf_attention_causal.h"
#include "hf_rotary.h"
#ifdef HF_ROTARY_GPU
#include "hf_rotary_opencl.h"
#endif

#include <HalideBuffer.h>
#include <halformer/device.h>
#include <halformer/isa.h>
#include <halformer/kernel_error.h>

#include <cmath>
#include <cstdio>
#include <random>
#include <string>
#include <vector>

using Halide::Runtime::Buffer;

namespace {

int failures = 0;

void expect(bool ok, const std::string &what) {
    std::printf("%s %s\n", ok ? "ok  " : "FAIL", what.c_str());
    if (!ok) failures++;
}

std::string sci(double v) {
    char s[32];
    std::snprintf(s, sizeof s, "%.2e", v);
    return s;
}

void fill(Buffer<float> &b, std::mt19937 &rng, float lo, float hi) {
    std::uniform_real_distribution<float> u(lo, hi);
    b.for_each_value([&](float &v) { v = u(rng); });
}

// y = rotary(x) in double, the formula of rotary_generator.cpp.
double rotary_ref(const Buffer<float> &x, int d, int t, int h, int b, int start_pos, double base) {
    const int dk = x.dim(0).extent(), half = dk / 2;
    const int i = d % half;
    const double angle = (start_pos + t) * std::pow(base, -2.0 * i / dk);
    const double partner = x(d < half ? d + half : d - half, t, h, b);
    return x(d, t, h, b) * std::cos(angle) + (d < half ? -partner : partner) * std::sin(angle);
}

double max_error_rotary(const Buffer<float> &x, const Buffer<float> &y, int start_pos) {
    double err = 0;
    y.for_each_element([&](int d, int t, int h, int b) {
        err = std::max(err, std::abs(y(d, t, h, b) - rotary_ref(x, d, t, h, b, start_pos, 10000.0)));
    });
    return err;
}

void rotary(Buffer<float> &x, int start_pos, Buffer<float> &y) {
    halformer::check_kernel(hf_rotary(x.raw_buffer(), start_pos, 10000.0f, y.raw_buffer()), "hf_rotary");
}

// Shapes: odd lengths, a head size that is not a vector multiple, a position
// in the tens of thousands.
void check_shapes(std::mt19937 &rng) {
    struct Shape { int dk, t, h, b, start; };
    for (Shape s : {Shape{64, 17, 3, 2, 0}, Shape{10, 5, 2, 1, 30000}, Shape{128, 1, 4, 3, 511}}) {
        Buffer<float> x(s.dk, s.t, s.h, s.b), y(s.dk, s.t, s.h, s.b);
        fill(x, rng, -2, 2);
        rotary(x, s.start, y);
        const double err = max_error_rotary(x, y, s.start);
        expect(err < 2e-5, "rotary dk=" + std::to_string(s.dk) + " T=" + std::to_string(s.t) +
                               " start=" + std::to_string(s.start) + ": max |error| " + sci(err));
    }
}

// Q and K as strided views into one fused [B·T, 3·H·dk] projection (the
// layout a fused QKV linear writes): q(d, t, h, b) = qkv[b·T + t, h·dk + d].
Buffer<float> head_view(Buffer<float> &qkv, int part, int dk, int T, int H, int B) {
    const int width = qkv.dim(0).extent();
    halide_dimension_t dims[4] = {{0, dk, 1}, {0, T, width}, {0, H, dk}, {0, B, T * width}};
    return Buffer<float>(qkv.data() + part * H * dk, 4, dims);
}

// Rotated Q and K, then Halformer's causal attention, against the same in
// double: the user's kernel and the package's share one runtime and one
// program.
void check_with_attention(std::mt19937 &rng) {
    const int dk = 32, T = 9, H = 2, B = 2;
    Buffer<float> qkv(3 * H * dk, B * T);
    fill(qkv, rng, -1, 1);
    Buffer<float> q = head_view(qkv, 0, dk, T, H, B), k = head_view(qkv, 1, dk, T, H, B);
    Buffer<float> v = head_view(qkv, 2, dk, T, H, B);
    Buffer<float> qr(dk, T, H, B), kr(dk, T, H, B), o(dk, T, H, B);
    rotary(q, 0, qr);
    rotary(k, 0, kr);
    expect(max_error_rotary(q, qr, 0) < 2e-5, "rotary of a strided view (Q inside a fused QKV)");
    Buffer<int32_t> kv_len(B);
    kv_len.fill(T);
    const float scale = 1.0f / std::sqrt((float)dk);
    halformer::check_kernel(hf_attention_causal(qr.raw_buffer(), kr.raw_buffer(), v.raw_buffer(),
                                                kv_len.raw_buffer(), 0, scale, /*window: every key*/ 0,
                                                o.raw_buffer()),
                            "hf_attention_causal");
    double err = 0;
    for (int b = 0; b < B; b++)
        for (int h = 0; h < H; h++)
            for (int i = 0; i < T; i++) {
                std::vector<double> p(i + 1);
                double mx = -1e300, sum = 0;
                for (int j = 0; j <= i; j++) {
                    double s = 0;
                    for (int d = 0; d < dk; d++)
                        s += rotary_ref(q, d, i, h, b, 0, 1e4) * rotary_ref(k, d, j, h, b, 0, 1e4);
                    p[j] = s * scale;
                    mx = std::max(mx, p[j]);
                }
                for (double &e : p) sum += (e = std::exp(e - mx));
                for (int d = 0; d < dk; d++) {
                    double out = 0;
                    for (int j = 0; j <= i; j++) out += p[j] / sum * v(d, j, h, b);
                    err = std::max(err, std::abs(out - o(d, i, h, b)));
                }
            }
    expect(err < 1e-5, "rotary + hf_attention_causal against double: max |error| " + sci(err));
}

// An output larger than its input: the kernel refuses (nonzero) instead of
// reading past x, and check_kernel's exception carries Halide's message.
void check_error() {
    Buffer<float> x(16, 4, 1, 1), y(16, 5, 1, 1);
    x.fill(1.0f);
    std::string msg;
    int code = 0;
    try {
        rotary(x, 0, y);
    } catch (const halformer::KernelError &e) {
        msg = e.what();
        code = e.code();
    }
    expect(code != 0 && msg.find("hf_rotary") != std::string::npos && msg.find("x") != std::string::npos,
           "an input too small is an error: " + (msg.empty() ? std::string("(none)") : msg));
}

#ifdef HF_ROTARY_GPU
// The OpenCL build of the same op (its GPU schedule), where this machine has
// an OpenCL device: Halide copies x to the device and y back.
void check_opencl(std::mt19937 &rng) {
    const std::string problem = halformer::device_problem(halformer::Device::OpenCL);
    if (!problem.empty()) {
        std::printf("skip hf_rotary_opencl: %s\n", problem.c_str());
        return;
    }
    Buffer<float> x(48, 11, 3, 2), y(48, 11, 3, 2);
    fill(x, rng, -2, 2);
    x.set_host_dirty();  // written on the host: the kernel's copy to the device takes it
    halformer::check_kernel(hf_rotary_opencl(x.raw_buffer(), 100, 10000.0f, y.raw_buffer()), "hf_rotary_opencl");
    y.copy_to_host();
    const double err = max_error_rotary(x, y, 100);
    expect(err < 2e-5, "hf_rotary_opencl: max |error| " + sci(err));
    y.device_free();
    x.device_free();
}
#endif

}  // namespace

int main() {
    std::printf("kernel variant: %s\n", halformer::running_variant());
    std::mt19937 rng(20261125);
    check_shapes(rng);
    check_with_attention(rng);
    check_error();
#ifdef HF_ROTARY_GPU
    check_opencl(rng);
#endif
    std::printf("%s\n", failures ? "FAILED" : "all checks passed");
    return failures ? 1 : 0;
}
