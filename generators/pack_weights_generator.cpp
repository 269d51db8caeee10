// pack_weights: W [N, K] (float32, nn.Linear layout) → the packed panels the
// linear_packed kernels read (generators/packing.h), run once per weight
// when a model is loaded in a precision.
//
//   w       [N, K]    Halide (k, n)           float32
//   wp      packed           Halide (r, j, kk, p)    f32 | bf16 | int8; its extents give Kp and Np
//   scale   [Np, Kp/32]      Halide (j, b, p)        int8 only: max_{k in b} |W(n, k)| / 127 (1 for zeros)
//   colsum  [Np, Kp/32]      Halide (j, b, p)        int8 only: Σ_{k in b} q(n, k), int16
//
// (n = p·48 + j, b = k / 32: generators/packing.h.) Padding (k ≥ K, n ≥ N)
// is zero. bf16 rounds to nearest, ties to even.
//
// format=q8_0 reads a GGUF Q8_0 tensor's blocks as the file holds them
// instead of w, into the int8 layout: no rounding, the file's codes and
// steps (the fp16 d of each block) as they are.
//
//   blocks  [N, K/32, 34]    Halide (i, b, n)        uint8: d (fp16, little-endian), then 32 int8 codes
//
// format=q4_0 reads a GGUF Q4_0 tensor's blocks into the q4 layout: each
// block's step d (its fp16 bits) as its scale, its 16 bytes of nibbles where
// packing.h puts them (a byte permutation, nothing rounded); padding is code
// 8 with step 0 (zero).
//
//   blocks  [N, K/32, 18]    Halide (i, b, n)        uint8: d (fp16), then 16 bytes: k = i low, k = i + 16 high
//
// format=q4_1 reads Q4_1 blocks (W = d·q + m) into the q4_1 layout the same
// way, d's bits as the scale and m's as the minimum (padding: both 0).
//
//   blocks  [N, K/32, 20]    Halide (i, b, n)        uint8: d, m (fp16), then 16 bytes of nibbles as Q4_0's
#include "Halide.h"
#include "packing.h"

#include <stdexcept>

#include "../schedules/pack_weights_schedule.h"

namespace {

using namespace Halide;
using namespace halformer;

class PackWeights : public Generator<PackWeights> {
public:
    GeneratorParam<std::string> format{"format", "bf16"};  // f32 | bf16 | int8 | q8_0 | q4_0 | q4_1
    GeneratorParam<std::string> tuned_as{"tuned_as", ""};

    Input<Buffer<float, 2>> *w = nullptr;
    Input<Buffer<uint8_t, 3>> *blocks = nullptr;
    Output<Buffer<>> *wp = nullptr;
    Output<Buffer<>> *scale = nullptr;
    Output<Buffer<>> *minimum = nullptr;
    Output<Buffer<int16_t, 3>> *colsum = nullptr;

    void configure() {
        if (from_q8_0() || from_q4()) {
            blocks = add_input<Buffer<uint8_t, 3>>("blocks");
        } else {
            w = add_input<Buffer<float, 2>>("w");
        }
        wp = add_output<Buffer<>>("wp", packed_type(packed_format()), 4);
        if (packed_format() == WeightFormat::Int8) scale = add_output<Buffer<>>("scale", Float(32), 3);
        if (from_q4()) scale = add_output<Buffer<>>("scale", UInt(16), 3);
        if (from_q4_1()) minimum = add_output<Buffer<>>("minimum", UInt(16), 3);
        if (packed_format() == WeightFormat::Int8) colsum = add_output<Buffer<int16_t, 3>>("colsum");
    }

    void generate() {
        /* THE ALGORITHM */
        const WeightFormat f = packed_format();
        const int kf = k_group(f);
        Expr col = p * kPanel + j, kk_r = kk * kf + r;
        if (from_q4()) {
            // Group kk = b·4 + e of column col: byte e·4 + r of its block b
            // (after the block's fp16 d, and m for q4_1).
            const int head = from_q4_1() ? 4 : 2;
            Expr N = blocks->dim(2).extent(), KB = blocks->dim(1).extent();
            Expr in = col < N && kk / 4 < KB, nc = clamp(col, 0, N - 1), bc = clamp(kk / 4, 0, KB - 1);
            (*wp)(r, j, kk, p) = select(in, blocks_at(head + (kk % 4) * 4 + r, bc, nc), cast<uint8_t>(0x88));
            Expr sin = col < N && b < KB, sb = clamp(b, 0, KB - 1);
            auto half_bits = [&](int at) {
                Expr bits = cast<uint16_t>(blocks_at(at, sb, nc)) | (cast<uint16_t>(blocks_at(at + 1, sb, nc)) << 8);
                return select(sin, bits, cast<uint16_t>(0));
            };
            (*scale)(j, b, p) = half_bits(0);
            if (minimum) (*minimum)(j, b, p) = half_bits(2);
            blocks->set_estimates({{0, head + 16}, {0, 512 / kQBlock}, {0, 2048}});
            wp->set_estimates({{0, kf}, {0, kPanel}, {0, 512 / 8}, {0, 2048 / kPanel}});
            scale->set_estimates({{0, kPanel}, {0, 512 / kQBlock}, {0, 2048 / kPanel}});
            if (minimum) minimum->set_estimates({{0, kPanel}, {0, 512 / kQBlock}, {0, 2048 / kPanel}});
            return;
        }
        if (from_q8_0()) {
            // The file's codes and steps, zero codes (step 1) past its rows.
            Expr N = blocks->dim(2).extent(), KB = blocks->dim(1).extent();
            Expr in = n < N && b < KB, nc = clamp(n, 0, N - 1), bc = clamp(b, 0, KB - 1);
            Expr bits = cast<uint16_t>(blocks_at(0, bc, nc)) | (cast<uint16_t>(blocks_at(1, bc, nc)) << 8);
            bstep(n, b) = select(in, cast<float>(reinterpret<float16_t>(bits)), 1.0f);
            Expr code = reinterpret<int8_t>(blocks_at(2 + k % kQBlock, clamp(k / kQBlock, 0, KB - 1), nc));
            q(k, n) = select(n < N && k / kQBlock < KB, code, cast<int8_t>(0));
        } else {
            Expr K = w->dim(0).extent(), N = w->dim(1).extent();
            wz(k, n) = select(k < K && n < N, (*w)(clamp(k, 0, K - 1), clamp(n, 0, N - 1)), 0.0f);
        }
        switch (f) {
        case WeightFormat::F32:
            (*wp)(r, j, kk, p) = wz(kk_r, col);
            break;
        case WeightFormat::BF16:
            (*wp)(r, j, kk, p) = cast(BFloat(16), wz(kk_r, col));
            break;
        case WeightFormat::Int8: {
            RDom rq(0, kQBlock, "rq");
            if (!from_q8_0()) {
                absmax(n, b) = maximum(abs(wz(b * kQBlock + rq, n)));
                bstep(n, b) = int8_step(absmax(n, b));
                q(k, n) = quantize_i8(wz(k, n), bstep(n, k / kQBlock));
            }
            (*scale)(j, b, p) = bstep(col, b);
            bsum(n, b) = cast<int16_t>(sum(cast<int32_t>(q(b * kQBlock + rq, n))));
            (*colsum)(j, b, p) = bsum(col, b);
            (*wp)(r, j, kk, p) = q(kk_r, col);
            break;
        }
        case WeightFormat::Q4:
        case WeightFormat::Q4_1: break;  // (from_q4 above)
        }
        if (w) w->set_estimates({{0, 512}, {0, 2048}});
        if (blocks) blocks->set_estimates({{0, 34}, {0, 512 / kQBlock}, {0, 2048}});
        wp->set_estimates({{0, kf}, {0, kPanel}, {0, 512 / kf}, {0, 2048 / kPanel}});
        if (scale) scale->set_estimates({{0, kPanel}, {0, 512 / kQBlock}, {0, 2048 / kPanel}});
        if (colsum) colsum->set_estimates({{0, kPanel}, {0, 512 / kQBlock}, {0, 2048 / kPanel}});
    }

    void schedule() {
        if (leave_to_autoscheduler(auto_schedule)) return;
        if (from_q4()) {
            Func(*wp).compute_root().parallel(p);
            Func(*scale).compute_root().parallel(p);
            if (minimum) Func(*minimum).compute_root().parallel(p);
            return;
        }
        const bool int8 = packed_format() == WeightFormat::Int8;
        schedule_pack_weights_cpu({Func(*wp), int8, int8 ? Func(*scale) : Func(), int8 ? Func(*colsum) : Func(), bstep,
                                   bsum, q, p, n, k},
                                  get_target());
    }

private:
    Var r{"r"}, j{"j"}, kk{"kk"}, p{"p"}, k{"k"}, n{"n"}, b{"b"};
    Func wz{"wz"}, absmax{"absmax"}, bstep{"bstep"}, bsum{"bsum"}, q{"q"};

    bool from_q8_0() const { return format.value() == "q8_0"; }
    bool from_q4_0() const { return format.value() == "q4_0"; }
    bool from_q4_1() const { return format.value() == "q4_1"; }
    bool from_q4() const { return from_q4_0() || from_q4_1(); }
    WeightFormat packed_format() const {
        if (from_q8_0()) return WeightFormat::Int8;
        if (from_q4_0()) return WeightFormat::Q4;
        if (from_q4_1()) return WeightFormat::Q4_1;
        auto it = weight_format_names().find(format.value());
        if (it != weight_format_names().end() && is_q4(it->second)) {
            throw std::invalid_argument("pack_weights: q4 packs a GGUF file's Q4_0 blocks (format=q4_0), not float32");
        }
        if (it == weight_format_names().end()) {
            throw std::invalid_argument("pack_weights: format must be f32, bf16, int8, q8_0, q4_0 or q4_1, not " +
                                        format.value());
        }
        return it->second;
    }
    // byte i of block b of row n (the file's row-major [N, K/32, 34] bytes).
    Expr blocks_at(Expr i, Expr bb, Expr nn) { return (*blocks)(i, bb, nn); }
};

}  // namespace

HALIDE_REGISTER_GENERATOR(PackWeights, pack_weights)
