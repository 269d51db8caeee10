// Packed projections: weights packed once (hf_pack_f32 / bf16 / int8, on
// first use or by prepack) into the panels of generators/packing.h, products
// by the hf_linear_{f32,bf16,int8}* kernels. CPU only, and x86 only: a build
// without them (the ARM one, built with HALFORMER_NO_LOWP by tests/arm)
// refuses set_precision(BF16 / INT8) and runs float32 unpacked.
//
// Float32 inference packs too (Fp32Packing, halformer/build_info.h): every
// projection where the panel kernels beat the unpacked ones. AVX-512
// (48 columns are 3 of its 32 vector registers): measured 2026-11-25, AMD
// EPYC, 2 threads, 512 → 2048 against oneDNN: M=32 0.90 packed vs 0.55
// unpacked, M=128 0.98 vs 0.79, M=1 0.89 vs 0.69 (bench/results/
// amd-epyc-2026-11-25). AVX2, with 16-column blocks of 6 rows
// (schedules/linear_packed_schedule.h): measured 2026-11-29, AMD EPYC Zen
// 3, 2 threads, the tuner's --try at M × 512 → 1536: M=32 0.35–0.58 ms
// packed vs 0.53–0.73 unpacked, M=128 1.23–1.44 vs 1.53–1.79, M=1024
// 8.8–11.3 vs 14.5. SSE4.1 (its 12-vector panel leaves one-row blocks, and
// narrower ones were no faster) packs the decoding steps' shapes only (up
// to dot_rows rows), with prefill on W as stored: both sum each output's
// products in k order from zero, so a row has the same bits in a step of
// any row count (tests/test_row_invariance.cpp,
// tests/runtime/test_batch_invariance.cpp), which W as stored's one-row dot
// products (lane partial sums) would break.
// A model whose weights change (the trainer's) never packs float32.
#include "session.h"

#include "layers/layers.h"

#include "halformer/build_info.h"
#include "halformer/isa.h"

#include <cstdlib>
#include <string>

#ifndef HALFORMER_NO_LOWP
#include "hf_linear_f32.h"
#include "hf_linear_f32_dot.h"
#include "hf_linear_f32_dot_gelu.h"
#include "hf_linear_f32_dot_gelu_tanh.h"
#include "hf_linear_f32_dot_gelu_tanh_gated.h"
#include "hf_linear_f32_dot_relu.h"
#include "hf_linear_f32_dot_residual.h"
#include "hf_linear_f32_dot_silu.h"
#include "hf_linear_f32_dot_silu_gated.h"
#include "hf_linear_f32_gelu.h"
#include "hf_linear_f32_gelu_tanh.h"
#include "hf_linear_f32_gelu_tanh_gated.h"
#include "hf_linear_f32_relu.h"
#include "hf_linear_f32_residual.h"
#include "hf_linear_f32_silu.h"
#include "hf_linear_f32_silu_gated.h"
#include "hf_linear_bf16.h"
#include "hf_linear_bf16_dot.h"
#include "hf_linear_bf16_dot_gelu.h"
#include "hf_linear_bf16_dot_gelu_tanh.h"
#include "hf_linear_bf16_dot_gelu_tanh_gated.h"
#include "hf_linear_bf16_dot_relu.h"
#include "hf_linear_bf16_dot_residual.h"
#include "hf_linear_bf16_dot_silu.h"
#include "hf_linear_bf16_dot_silu_gated.h"
#include "hf_linear_bf16_gelu.h"
#include "hf_linear_bf16_gelu_tanh.h"
#include "hf_linear_bf16_gelu_tanh_gated.h"
#include "hf_linear_bf16_relu.h"
#include "hf_linear_bf16_residual.h"
#include "hf_linear_bf16_silu.h"
#include "hf_linear_bf16_silu_gated.h"
#include "hf_linear_int8.h"
#include "hf_linear_int8_dot.h"
#include "hf_linear_int8_dot_gelu.h"
#include "hf_linear_int8_dot_gelu_tanh.h"
#include "hf_linear_int8_dot_gelu_tanh_gated.h"
#include "hf_linear_int8_dot_relu.h"
#include "hf_linear_int8_dot_residual.h"
#include "hf_linear_int8_dot_silu.h"
#include "hf_linear_int8_dot_silu_gated.h"
#include "hf_linear_int8_gelu.h"
#include "hf_linear_int8_gelu_tanh.h"
#include "hf_linear_int8_gelu_tanh_gated.h"
#include "hf_linear_int8_relu.h"
#include "hf_linear_int8_residual.h"
#include "hf_linear_int8_silu.h"
#include "hf_linear_int8_silu_gated.h"
#include "hf_pack_bf16.h"
#include "hf_pack_f32.h"
#include "hf_pack_int8.h"
#include "hf_pack_q8_0.h"
#include "hf_linear_q4.h"
#include "hf_linear_q4_dot.h"
#include "hf_linear_q4_dot_gelu_tanh_gated.h"
#include "hf_linear_q4_dot_residual.h"
#include "hf_linear_q4_dot_silu_gated.h"
#include "hf_linear_q4_gelu_tanh_gated.h"
#include "hf_linear_q4_residual.h"
#include "hf_linear_q4_silu_gated.h"
#include "hf_pack_q4_0.h"
#include "hf_pack_q4_1.h"
#include "hf_linear_q4_1.h"
#include "hf_linear_q4_1_dot.h"
#include "hf_linear_q4_1_dot_gelu_tanh_gated.h"
#include "hf_linear_q4_1_dot_residual.h"
#include "hf_linear_q4_1_dot_silu_gated.h"
#include "hf_linear_q4_1_gelu_tanh_gated.h"
#include "hf_linear_q4_1_residual.h"
#include "hf_linear_q4_1_silu_gated.h"
#endif

namespace halformer {

namespace {

#ifndef HALFORMER_NO_LOWP
constexpr int kPanel = 48;   // generators/packing.h
constexpr int kQBlock = 32;  // k per int8 scale

// Rows up to which a projection uses the one-row register blocks (_dot):
// measured 2026-11-23 (sapphirerapids, 2 threads, 1 × 512 → 2048) 84 GFLOP/s
// bf16 and 136 GOP/s int8 against 38 and 56 with the 9-row blocks.
constexpr int kDotRows = 1;

using Buf = halide_buffer_t *;
using PlainFn = int (*)(Buf, Buf, Buf, Buf);          // f32, bf16: x, w, bias, y
using PlainResFn = int (*)(Buf, Buf, Buf, Buf, Buf);  // ... residual (or gate), y
using Int8Fn = int (*)(Buf, Buf, Buf, Buf, Buf, Buf);  // x, w, scale, colsum, bias, y
using Int8ResFn = int (*)(Buf, Buf, Buf, Buf, Buf, Buf, Buf);
using Q4Fn = int (*)(Buf, Buf, Buf, Buf, Buf);          // x, w, scale, bias, y
using Q4ResFn = int (*)(Buf, Buf, Buf, Buf, Buf, Buf);  // ... residual (or gate), y
using Q41Fn = int (*)(Buf, Buf, Buf, Buf, Buf, Buf);    // x, w, scale, minimum, bias, y
using Q41ResFn = int (*)(Buf, Buf, Buf, Buf, Buf, Buf, Buf);

// One format's kernels: [dot][variant], variants in the order of Kind.
enum Kind { kNone, kReLU, kGELU, kGELUTanh, kSiLU, kResidual, kGELUTanhGated, kSiLUGated, kKinds };

int kind_of(const Act *act) {
    if (!act) return kNone;
    switch (*act) {
    case Act::ReLU: return kReLU;
    case Act::GELU: return kGELU;
    case Act::GELUTanh: return kGELUTanh;
    case Act::SiLU: return kSiLU;
    }
    throw Error("internal: activation out of range");
}

// The kernels as untyped pointers, cast to the signature where called.
using AnyFn = void (*)();
#define HF_FN(f) reinterpret_cast<AnyFn>(&f)
const AnyFn kPackedKernels[3][2][kKinds] = {
    {{HF_FN(hf_linear_f32), HF_FN(hf_linear_f32_relu), HF_FN(hf_linear_f32_gelu), HF_FN(hf_linear_f32_gelu_tanh), HF_FN(hf_linear_f32_silu), HF_FN(hf_linear_f32_residual), HF_FN(hf_linear_f32_gelu_tanh_gated), HF_FN(hf_linear_f32_silu_gated)},
     {HF_FN(hf_linear_f32_dot), HF_FN(hf_linear_f32_dot_relu), HF_FN(hf_linear_f32_dot_gelu), HF_FN(hf_linear_f32_dot_gelu_tanh), HF_FN(hf_linear_f32_dot_silu), HF_FN(hf_linear_f32_dot_residual), HF_FN(hf_linear_f32_dot_gelu_tanh_gated), HF_FN(hf_linear_f32_dot_silu_gated)}},
    {{HF_FN(hf_linear_bf16), HF_FN(hf_linear_bf16_relu), HF_FN(hf_linear_bf16_gelu), HF_FN(hf_linear_bf16_gelu_tanh), HF_FN(hf_linear_bf16_silu), HF_FN(hf_linear_bf16_residual), HF_FN(hf_linear_bf16_gelu_tanh_gated), HF_FN(hf_linear_bf16_silu_gated)},
     {HF_FN(hf_linear_bf16_dot), HF_FN(hf_linear_bf16_dot_relu), HF_FN(hf_linear_bf16_dot_gelu), HF_FN(hf_linear_bf16_dot_gelu_tanh), HF_FN(hf_linear_bf16_dot_silu), HF_FN(hf_linear_bf16_dot_residual), HF_FN(hf_linear_bf16_dot_gelu_tanh_gated), HF_FN(hf_linear_bf16_dot_silu_gated)}},
    {{HF_FN(hf_linear_int8), HF_FN(hf_linear_int8_relu), HF_FN(hf_linear_int8_gelu), HF_FN(hf_linear_int8_gelu_tanh), HF_FN(hf_linear_int8_silu), HF_FN(hf_linear_int8_residual), HF_FN(hf_linear_int8_gelu_tanh_gated), HF_FN(hf_linear_int8_silu_gated)},
     {HF_FN(hf_linear_int8_dot), HF_FN(hf_linear_int8_dot_relu), HF_FN(hf_linear_int8_dot_gelu), HF_FN(hf_linear_int8_dot_gelu_tanh), HF_FN(hf_linear_int8_dot_silu), HF_FN(hf_linear_int8_dot_residual), HF_FN(hf_linear_int8_dot_gelu_tanh_gated), HF_FN(hf_linear_int8_dot_silu_gated)}}};
// q4 (a GGUF file's Q4_0 weights kept 4-bit): the kinds a decoder's
// projections use; null where there is none (another kind is an Error).
// [minimum][dot][kind]: q4 (Q4_0), q4_1 (Q4_1 and Q4_K).
const AnyFn kQ4Kernels[2][2][kKinds] = {
    {{HF_FN(hf_linear_q4), nullptr, nullptr, nullptr, nullptr, HF_FN(hf_linear_q4_residual),
      HF_FN(hf_linear_q4_gelu_tanh_gated), HF_FN(hf_linear_q4_silu_gated)},
     {HF_FN(hf_linear_q4_dot), nullptr, nullptr, nullptr, nullptr, HF_FN(hf_linear_q4_dot_residual),
      HF_FN(hf_linear_q4_dot_gelu_tanh_gated), HF_FN(hf_linear_q4_dot_silu_gated)}},
    {{HF_FN(hf_linear_q4_1), nullptr, nullptr, nullptr, nullptr, HF_FN(hf_linear_q4_1_residual),
      HF_FN(hf_linear_q4_1_gelu_tanh_gated), HF_FN(hf_linear_q4_1_silu_gated)},
     {HF_FN(hf_linear_q4_1_dot), nullptr, nullptr, nullptr, nullptr, HF_FN(hf_linear_q4_1_dot_residual),
      HF_FN(hf_linear_q4_1_dot_gelu_tanh_gated), HF_FN(hf_linear_q4_1_dot_silu_gated)}}};
#undef HF_FN

// The format a session's packed projections use.
enum Format { kF32, kBF16, kInt8 };
Format format_of(Precision p) { return p == Precision::INT8 ? kInt8 : p == Precision::BF16 ? kBF16 : kF32; }
int k_group(Format f) { return f == kInt8 ? 4 : f == kBF16 ? 2 : 1; }
halide_type_t packed_type(Format f) {
    return f == kInt8   ? halide_type_t(halide_type_int, 8)
           : f == kBF16 ? halide_type_t(halide_type_bfloat, 16)
                        : halide_type_t(halide_type_float, 32);
}
#endif

}  // namespace

Precision parse_precision(const std::string &name) {
    if (name == "fp32" || name == "f32" || name == "float32") return Precision::FP32;
    if (name == "bf16" || name == "bfloat16") return Precision::BF16;
    if (name == "int8") return Precision::INT8;
    throw Error("unknown precision '" + name + "' (expected fp32, bf16 or int8)");
}

const char *precision_name(Precision p) {
    switch (p) {
    case Precision::FP32: return "fp32";
    case Precision::BF16: return "bf16";
    case Precision::INT8: return "int8";
    }
    return "?";
}

bool lowp_kernels() {
#ifdef HALFORMER_NO_LOWP
    return false;
#else
    return true;
#endif
}

Fp32Packing fp32_packing() {
#ifdef HALFORMER_NO_LOWP
    return Fp32Packing::None;
#else
    // Read when called: a model reads it once, when it is made (a test or
    // a host program may set it before it loads one).
    const char *v = std::getenv("HALFORMER_FP32_PACK");
    if (v && std::string(v) == "0") return Fp32Packing::None;
    if (v && std::string(v) == "1") return Fp32Packing::All;
    const Isa isa = selected_isa();
    return isa == Isa::SSE41 ? Fp32Packing::Steps : Fp32Packing::All;
#endif
}

bool Session::packed(int M) const {
    if (w->precision != Precision::FP32) return true;
    if (device() != Device::CPU) return false;
    switch (w->fp32_pack) {
    case Fp32Packing::None: return false;
    case Fp32Packing::All: return true;
    case Fp32Packing::Steps: return M <= layers::dot_rows(Device::CPU);
    }
    return false;
}

#ifndef HALFORMER_NO_LOWP
namespace {

// Whether a file's Q4_0 weights run the q4 kernels, and its Q4_1 and Q4_K
// ones the q4_1 kernels (read when packed): HALFORMER_Q4=0 takes them
// through int8 instead, their blocks as Q8_0's (requantize_row_q8_0: Q4_0
// exactly, the same products bit for bit; the others requantized per 32).
// The tests compare the two; a benchmark times both.
bool q4_kernels() {
    const char *v = std::getenv("HALFORMER_Q4");
    return !(v && std::string(v) == "0");
}

View packed_view(const PackedLinear &p, Format f) {
    return View(p.data.get(),
                {{p.kf, 1}, {kPanel, p.kf}, {p.groups, p.kf * kPanel}, {p.Np / kPanel, p.kf * kPanel * p.groups}},
                p.q4 ? halide_type_t(halide_type_uint, 8) : packed_type(f));
}

// int8's per-block scales and code sums, (j, b, p) as packing.h lays them out
// (q4: a group's byte holds 8 k, two nibbles of 4).
int int8_blocks(const PackedLinear &p) { return p.groups * p.kf * (p.q4 ? 2 : 1) / kQBlock; }
// (q4: fp16 bits; int8: float32.)
View block_view(const PackedLinear &p, const Scratch &s) {
    const int B = int8_blocks(p);
    return View(s.get(), {{kPanel, 1}, {B, kPanel}, {p.Np / kPanel, kPanel * B}},
                p.q4 ? halide_type_t(halide_type_uint, 16) : halide_type_t(halide_type_float, 32));
}
View scale_view(const PackedLinear &p) { return block_view(p, p.scale); }
View colsum_view(const PackedLinear &p) {
    const int B = int8_blocks(p);
    return View(p.colsum.get(), {{kPanel, 1}, {B, kPanel}, {p.Np / kPanel, kPanel * B}},
                halide_type_t(halide_type_int, 16));
}

// The entry for (weight, N), made empty under the cache's lock (and the
// existing one when there is one).
std::pair<PackedLinear *, bool> cache_entry(PackCache &c, const float *weight, int N) {
    auto key = std::make_pair(weight, N);
    auto it = c.map.find(key);
    if (it != c.map.end()) return {&it->second, false};
    return {&c.map[key], true};
}

// Sizes p's buffers for N × K in format f; four_bit (int8 precision): 0,
// or the 4-bit layout, 1 q4 (a step per block), 2 q4_1 (and a minimum).
void allocate(PackedLinear &p, Format f, int N, int K, int four_bit = 0) {
    p.N = N;
    p.K = K;
    p.kf = k_group(f);
    p.q4 = four_bit > 0;
    p.minimum = four_bit == 2;
    p.Np = (N + kPanel - 1) / kPanel * kPanel;
    const int unit = f == kInt8 ? kQBlock : p.kf;
    p.groups = (K + unit - 1) / unit * unit / p.kf / (p.q4 ? 2 : 1);  // (q4: two codes a byte)
    const size_t values = (size_t)p.Np * p.groups * p.kf, bytes = values * packed_type(f).bytes();
    p.data.need((bytes + 3) / 4);
    if (f != kInt8) return;
    const size_t blocks = (size_t)p.Np * int8_blocks(p);
    if (p.q4) {
        p.scale.need((blocks * 2 + 3) / 4);
        if (p.minimum) p.mins.need((blocks * 2 + 3) / 4);
    } else {
        p.scale.need(blocks);
        p.colsum.need((blocks * 2 + 3) / 4);
    }
}

}  // namespace

const PackedLinear &Session::pack(const float *weight, int N, int K) {
    // Sessions share the cache: prepack() has filled it, or the first call
    // packs under the lock (entries of a std::map stay where they are while
    // others are added).
    std::lock_guard<std::mutex> lock(w->packs->mu);
    auto [entry, fresh] = cache_entry(*w->packs, weight, N);
    PackedLinear &p = *entry;
    if (!fresh) return p;
    const Format f = format_of(w->precision);
    try {
        if (f == kInt8 && w->source && K % kQBlock == 0 && q4_kernels()) {
            // A file's Q4_0 blocks kept 4-bit (the q4 kernels), or its Q4_1
            // ones, Q4_K's transcoded to them (the q4_1 kernels).
            std::vector<uint8_t> q4 = w->source->q4_0(weight, N, K);
            const bool with_min = q4.empty();
            if (with_min) q4 = w->source->q4_1(weight, N, K);
            if (!q4.empty()) {
                const int bb = with_min ? 20 : 18;  // bytes a block
                allocate(p, f, N, K, with_min ? 2 : 1);
                View vb(q4.data(), {{bb, 1}, {K / kQBlock, bb}, {N, K / kQBlock * bb}}, halide_type_t(halide_type_uint, 8));
                View vp = packed_view(p, f), vs = scale_view(p);
                if (with_min) {
                    View vm = block_view(p, p.mins);
                    run("pack", [&] { return hf_pack_q4_1(vb.get(), vp.get(), vs.get(), vm.get()); });
                } else {
                    run("pack", [&] { return hf_pack_q4_0(vb.get(), vp.get(), vs.get()); });
                }
                return p;
            }
        }
        if (f == kInt8 && w->source) {
            // A quantized file's own codes where it has them for these rows.
            std::vector<uint8_t> q = w->source->q8_0(weight, N, K);
            if (!q.empty()) {
                allocate(p, f, N, K);
                View vb(q.data(), {{34, 1}, {K / kQBlock, 34}, {N, K / kQBlock * 34}}, halide_type_t(halide_type_uint, 8));
                View vp = packed_view(p, f), vs = scale_view(p), vc = colsum_view(p);
                run("pack", [&] { return hf_pack_q8_0(vb.get(), vp.get(), vs.get(), vc.get()); });
                return p;
            }
        }
        if (w->source) w->source->materialize(weight);
        allocate(p, f, N, K);
        View vw(weight, {{K, 1}, {N, K}}), vp = packed_view(p, f);
        switch (f) {
        case kInt8: {
            View vs = scale_view(p), vc = colsum_view(p);
            run("pack", [&] { return hf_pack_int8(vw.get(), vp.get(), vs.get(), vc.get()); });
            break;
        }
        case kBF16: run("pack", [&] { return hf_pack_bf16(vw.get(), vp.get()); }); break;
        case kF32: run("pack", [&] { return hf_pack_f32(vw.get(), vp.get()); }); break;
        }
        if (w->source) w->source->release(weight);  // (the packed copy is what runs now)
    } catch (...) {
        w->packs->map.erase(std::make_pair(weight, N));  // (no half-made entry left behind)
        throw;
    }
    return p;
}

const EmbedRows *Session::embed_rows(const float *table, int V, int D) {
    if (w->precision != Precision::INT8 || !w->source || device() != Device::CPU || D % kQBlock != 0) return nullptr;
    std::lock_guard<std::mutex> lock(w->packs->mu);
    auto [it, fresh] = w->packs->embeds.try_emplace(table);
    if (!fresh) return it->second.get();
    // The file's own blocks where its kernels read them as they are
    // (Q4_0, Q4_1 and Q4_K as Q4_1: the types the projections keep 4-bit),
    // else Q8_0's (the file's, or its blocks transcoded).
    auto e = std::make_unique<EmbedRows>();
    if (q4_kernels()) {
        e->bytes = w->source->q4_0(table, V, D);
        e->format = EmbedRows::Q4_0, e->block_bytes = 18;
        if (e->bytes.empty()) {
            e->bytes = w->source->q4_1(table, V, D);
            e->format = EmbedRows::Q4_1, e->block_bytes = 20;
        }
    }
    if (e->bytes.empty()) {
        e->bytes = w->source->q8_0(table, V, D);
        e->format = EmbedRows::Q8_0, e->block_bytes = 34;
    }
    if (!e->bytes.empty()) it->second = std::move(e);
    return it->second.get();
}

// One call of a packed kernel: `extra` is the residual or the gate (null:
// neither), `kind` the variant.
void Session::run_packed(const char *name, const float *x, int M, int x_stride, const float *weight, int N, int K,
                         const float *bias, int kind, const float *extra, float *y, int y_stride) {
    const PackedLinear &p = pack(weight, N, K);
    const Format f = format_of(w->precision);
    if (p.q4) {
        const AnyFn q4 = kQ4Kernels[p.minimum ? 1 : 0][M <= kDotRows ? 1 : 0][kind];
        if (!q4) throw Error(std::string("internal: ") + name + ": no 4-bit kernel of this kind for a 4-bit weight");
        View vx(x, {{K, 1}, {M, x_stride}}), vb(bias, {{N, 1}}), vy(y, {{N, 1}, {M, y_stride}}), vp = packed_view(p, f),
            vs = scale_view(p), ve(extra ? extra : y, {{N, 1}, {M, y_stride}});
        if (p.minimum) {
            View vm = block_view(p, p.mins);
            if (extra) {
                auto fn = reinterpret_cast<Q41ResFn>(q4);
                run(name, [&] { return fn(vx.get(), vp.get(), vs.get(), vm.get(), vb.get(), ve.get(), vy.get()); });
            } else {
                auto fn = reinterpret_cast<Q41Fn>(q4);
                run(name, [&] { return fn(vx.get(), vp.get(), vs.get(), vm.get(), vb.get(), vy.get()); });
            }
        } else if (extra) {
            auto fn = reinterpret_cast<Q4ResFn>(q4);
            run(name, [&] { return fn(vx.get(), vp.get(), vs.get(), vb.get(), ve.get(), vy.get()); });
        } else {
            auto fn = reinterpret_cast<Q4Fn>(q4);
            run(name, [&] { return fn(vx.get(), vp.get(), vs.get(), vb.get(), vy.get()); });
        }
        return;
    }
    const AnyFn any = kPackedKernels[f][M <= kDotRows ? 1 : 0][kind];
    View vx(x, {{K, 1}, {M, x_stride}}), vb(bias, {{N, 1}}), vy(y, {{N, 1}, {M, y_stride}}), vp = packed_view(p, f),
        ve(extra ? extra : y, {{N, 1}, {M, y_stride}});
    if (f == kInt8) {
        View vs = scale_view(p), vc = colsum_view(p);
        if (extra) {
            auto fn = reinterpret_cast<Int8ResFn>(any);
            run(name, [&] { return fn(vx.get(), vp.get(), vs.get(), vc.get(), vb.get(), ve.get(), vy.get()); });
        } else {
            auto fn = reinterpret_cast<Int8Fn>(any);
            run(name, [&] { return fn(vx.get(), vp.get(), vs.get(), vc.get(), vb.get(), vy.get()); });
        }
    } else if (extra) {
        auto fn = reinterpret_cast<PlainResFn>(any);
        run(name, [&] { return fn(vx.get(), vp.get(), vb.get(), ve.get(), vy.get()); });
    } else {
        auto fn = reinterpret_cast<PlainFn>(any);
        run(name, [&] { return fn(vx.get(), vp.get(), vb.get(), vy.get()); });
    }
}

void Session::linear_packed(const char *name, const float *x, int M, int x_stride, const float *weight, int N,
                            int K, const float *bias, const Act *act, const float *residual, float *y,
                            int y_stride) {
    if (residual && act) throw Error("internal: no packed kernel with both an activation and a residual");
    run_packed(name, x, M, x_stride, weight, N, K, bias, residual ? kResidual : kind_of(act), residual, y, y_stride);
}

void Session::linear_packed_gated(const char *name, const float *x, int M, int x_stride, const float *weight, int N,
                                  int K, const float *bias, Act act, const float *gate, float *y, int y_stride) {
    if (act != Act::GELUTanh && act != Act::SiLU) throw Error("internal: no gated kernel for this activation");
    run_packed(name, x, M, x_stride, weight, N, K, bias, act == Act::GELUTanh ? kGELUTanhGated : kSiLUGated, gate,
               y, y_stride);
}
#else
const EmbedRows *Session::embed_rows(const float *, int, int) { return nullptr; }

const PackedLinear &Session::pack(const float *, int, int) {
    throw Error("this build has no packed (bf16 / int8) kernels (x86 only)");
}

void Session::run_packed(const char *, const float *, int, int, const float *, int, int, const float *, int,
                         const float *, float *, int) {
    throw Error("this build has no packed (bf16 / int8) kernels (x86 only)");
}

void Session::linear_packed(const char *, const float *, int, int, const float *, int, int, const float *,
                            const Act *, const float *, float *, int) {
    throw Error("this build has no packed (bf16 / int8) kernels (x86 only)");
}

void Session::linear_packed_gated(const char *, const float *, int, int, const float *, int, int, const float *,
                                  Act, const float *, float *, int) {
    throw Error("this build has no packed (bf16 / int8) kernels (x86 only)");
}
#endif

void Model::set_precision(Precision p) {
    Session &m = *impl_->first;
    if (p != Precision::FP32 && m.device() != Device::CPU) {
        throw Error(std::string("precision ") + precision_name(p) + " runs on the CPU only (this model is on " +
                    device_name(m.device()) + ")");
    }
#ifdef HALFORMER_NO_LOWP
    if (p != Precision::FP32) {
        throw Error(std::string("precision ") + precision_name(p) +
                    " needs the x86 bf16 / int8 kernels, which this build (no x86) does not have: fp32 only");
    }
#endif
    std::lock_guard<std::mutex> lock(pool_->mu);
    pool_->require_idle("set_precision");
    // Projections a quantized file's codes stood in for get their float32
    // values now (model_weights.h: TensorSource::projection).
    if (p != Precision::INT8 && impl_->w->source) impl_->w->source->materialize_all();
    // The weights' packed copies are shared by every session.
    impl_->w->packs = std::make_shared<PackCache>();
    impl_->w->precision = p;
    if (p != Precision::FP32) {
        DeviceScope scope(m.dev.get());
        m.prepack();
    }
}

void Session::prepack() {
    const int D = cfg.d_model, A = desc.attn_width, K = desc.kv_width;
    for (const StackW *s : {&w->enc, &w->dec}) {
        const int F = desc.dims(s == &w->dec).d_ff;
        for (const LayerW &L : s->layers) {
            const AttnW self = L.attn("self_attn"), cross = L.attn("multihead_attn");
            for (const auto &[first, rows] : layers::self_projection_rows(desc)) pack(self.in_w + (size_t)first * D, rows, D);
            pack(self.out_w, D, A);
            if (cross.in_w) {
                pack(cross.in_w, A, D);                      // the queries
                pack(cross.in_w + (size_t)A * D, 2 * K, D);  // keys and values
                pack(cross.out_w, D, A);
            }
            if (const float *w1 = L.get("linear1.weight")) pack(w1, F, D);
            if (const float *wg = L.get("linear_gate.weight")) pack(wg, F, D);
            if (const float *w2 = L.get("linear2.weight")) pack(w2, D, F);
            // A mixture of experts' router and experts (layers/moe.cpp).
            const int Fe = desc.moe.d_ff;
            for (const auto &[key, w] : L.tensors) {
                if (key == "router.weight") pack(w, desc.moe.experts, D);
                if (key.rfind("experts.", 0) != 0) continue;
                if (key.find(".linear2.") != std::string::npos) {
                    pack(w, D, Fe);
                } else {
                    pack(w, Fe, D);
                }
            }
        }
    }
    if (w->gen_w) pack(w->gen_w, w->gen_rows, D);
    // The decoder's table as blocks where its embedding adds no positions (layers/embedding.cpp).
    const bool plain_lookup = desc.position == Positional::Rotary || desc.position == Positional::Relative;
    if (w->dec.embed && plain_lookup && !w->dec.types) embed_rows(w->dec.embed, w->dec.vocab, D);
}

Precision Model::precision() const { return impl_->w->precision; }

}  // namespace halformer
