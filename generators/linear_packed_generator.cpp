// linear_packed: Y = act(X·Wᵀ + b) [+ R] with W packed once, at load, in
// float32, bfloat16 or int8 (generators/packing.h gives the layout).
//
//   x        [M, K]              Halide (k, m)           float32 activations
//   w        packed W [N, K]     Halide (r, j, kk, p)    f32 | bf16 | int8, from pack_weights
//   scale    [Np, Kp/32]         Halide (j, b, p)        int8 (float32), q4, q4_1 (fp16 bits): the block steps, b = k / 32
//   minimum  [Np, Kp/32]         Halide (j, b, p)        q4_1 only (fp16 bits): W = scale·q + minimum
//   colsum   [Np, Kp/32]         Halide (j, b, p)        int8 only: Σ_{k in b} q(n, k) (int16)
//   bias     [N]                 Halide (n)
//   residual [M, N]              Halide (n, m)           only when residual=true
//   gate     [M, N]              Halide (n, m)           only when gated=true: y = act(·)·gate
//   y        [M, N]              Halide (n, m)
//
// bf16: each activation is rounded to bfloat16 (nearest, ties to even) where
// it enters the product; products are summed in float32.
// int8 (llama.cpp's Q8_0 scheme, both sides in blocks of 32 k): each row of x
// is quantized on the fly block by block, with the block's own step
// sx(b, m) = max_{k in b} |x(k, m)| / 127 (codes round(x · (1 / sx)), within
// ±127); a block's products of the int8
// codes are summed exactly in int32, rescaled by sx(b, m)·scale(n, b) and
// the blocks summed in float32, in k order. (One step per row and column,
// CTranslate2's scheme, moved the logits of a 1B decoder twice as far from
// float32 as Q8_0's blocks: issue 61.) The products take one of two forms
// with the same exact sums (the schedule's int8_form picks one per target:
// schedules/linear_packed_schedule.h):
//   offset  the codes enter as unsigned bytes qx + 128 (the form of VNNI's
//           vpdpbusd) and 128·colsum(n, b) is subtracted back;
//   sign    |qx| enters as an unsigned byte and the weight's bits are
//           inverted where qx < 0 (w ^ s, s = -1 there: ~w = -w - 1), so
//           each such product is |qx|·(-w - 1) = qx·w + qx; the block's
//           negsum(b, m) = Σ |qx| over its negative codes is added back. The
//           factors stay within [0, 127] and [-128, 126], so a pair of
//           products fits int16 exactly (|a·b + c·d| ≤ 2·127·128 = 32,512)
//           for vpmaddubsw, and the weight costs one xor (not xor and
//           subtract: measured 2026-11-28, AVX2 AMD EPYC, 2 threads,
//           M × 512 → 2048, M = 32 / 128 / 1024: 1.15 / 1.15 / 1.14× faster,
//           the same bits).
// q4 (a GGUF Q4_0 tensor's blocks as they are: packing.h): the activations
// are quantized as int8's are, each weight's 4-bit code q ∈ [0, 15] (one
// nibble of a byte: the low ones hold a block's first 16 k, the high ones
// the next 16) enters as an unsigned byte against the signed code
// (vpdpbusd's form, or vpmaddubsw's in pairs: |q·qx| ≤ 15·127), and
// 8·Σ_{k in b} qx(k) is subtracted from the block's sum: Σ (q − 8)·qx.
// The block's step is the file's fp16 d (scale holds its bits).
// q4_1 (W = d·q + m per block: GGUF Q4_1, and Q4_K's sub-blocks): the same
// products; the block adds sx·(d·Σ q·qx + m·Σ qx) in float32.
#include "Halide.h"
#include "common.h"
#include "packing.h"
#include "../schedules/linear_packed_schedule.h"

namespace {

using namespace Halide;
using namespace halformer;

class LinearPacked : public Generator<LinearPacked> {
public:
    GeneratorParam<WeightFormat> format{"format", WeightFormat::BF16, weight_format_names()};
    GeneratorParam<Activation> activation{"activation", Activation::None, activation_names()};
    GeneratorParam<bool> residual_add{"residual", false};
    GeneratorParam<bool> gated{"gated", false};
    // Schedule knobs (schedules/linear_packed_schedule.h).
    GeneratorParam<int> rows_m{"rows_m", 0};
    GeneratorParam<int> vectors_n{"vectors_n", 0};
    GeneratorParam<int> task_blocks{"task_blocks", 0};
    GeneratorParam<std::string> int8_form_knob{"int8_form", ""};  // offset | sign | "" (the target's)
    GeneratorParam<std::string> tuned_as{"tuned_as", ""};

    Input<Buffer<float, 2>> x{"x"};
    Input<Buffer<>> *w = nullptr;
    Input<Buffer<>> *scale = nullptr;
    Input<Buffer<>> *minimum = nullptr;
    Input<Buffer<int16_t, 3>> *colsum = nullptr;
    Input<Buffer<float, 1>> *bias = nullptr;
    Input<Buffer<float, 2>> *residual = nullptr;
    Input<Buffer<float, 2>> *gate = nullptr;
    Output<Buffer<float, 2>> y{"y"};

    void configure() {
        w = add_input<Buffer<>>("w", packed_type(format), 4);
        if (format == WeightFormat::Int8) scale = add_input<Buffer<>>("scale", Float(32), 3);
        if (is_q4(format)) scale = add_input<Buffer<>>("scale", UInt(16), 3);
        if (format == WeightFormat::Q4_1) minimum = add_input<Buffer<>>("minimum", UInt(16), 3);
        if (format == WeightFormat::Int8) colsum = add_input<Buffer<int16_t, 3>>("colsum");
        bias = add_input<Buffer<float, 1>>("bias");
        if (residual_add) residual = add_input<Buffer<float, 2>>("residual");
        if (gated) gate = add_input<Buffer<float, 2>>("gate");
    }

    void generate() {
        /* THE ALGORITHM */
        const int kf = k_group(format);
        Expr K = x.dim(0).extent(), M = x.dim(1).extent();
        Expr groups = w->dim(2).extent();
        // x zero-padded to Kp along k; rows past M clamped (a register block
        // may compute whole rows past the edge: they are never stored).
        Func xc("xc");
        xc(k, m) = select(k < K, x(clamp(k, 0, K - 1), clamp(m, 0, M - 1)), 0.0f);
        const bool q4 = is_q4(format), int8 = format == WeightFormat::Int8 || q4;
        // int8 sums each block of kQBlock k on its own (r.y: the block's
        // groups), then the blocks (rb); the others sum every group (r.y).
        // q4: r.y the byte groups of a block's first 16 k, r.z the nibble
        // (0: those k, 1: the 16 after them); its w has half the groups.
        const int block_groups = kQBlock / kf;
        r = q4     ? RDom(0, kf, 0, block_groups / 2, 0, 2, "r")
            : int8 ? RDom(0, kf, 0, block_groups, "r")
                   : RDom(0, kf, 0, groups, "r");
        rb = RDom(0, q4 ? groups / (block_groups / 2) : int8 ? groups / block_groups : 1, "rb");
        // xin(rr, mi, kk, mo): the activations in the product's type, of row
        // m = mo·rb + mi and k = kk·kf + rr: each block of rb rows is one
        // contiguous stream, the kf values of one group of its rows side by
        // side. (rb only reshapes: any value gives the same y.)
        const int rows = row_block();
        Expr kx = kk * kf + rr, mx = mo * rows + mi;
        switch ((WeightFormat)format) {
        case WeightFormat::F32:
            xin(rr, mi, kk, mo) = xc(kx, mx);
            break;
        case WeightFormat::BF16:
            xin(rr, mi, kk, mo) = cast(BFloat(16), xc(kx, mx));
            break;
        case WeightFormat::Int8:
        case WeightFormat::Q4:
        case WeightFormat::Q4_1: {
            // Each block's step (zero padding past K: an all-zero block has step 1).
            RDom rq(0, kQBlock, "rq");
            absmax(b, m) = maximum(abs(xc(b * kQBlock + rq, m)));
            step(b, m) = int8_step(absmax(b, m));
            inv_step(b, m) = 1.0f / step(b, m);
            Expr q = quantize_i8_by_inverse(xc(kx, mx), inv_step(kx / kQBlock, mx));
            if (q4) {
                xin(rr, mi, kk, mo) = q;
                // The block's Σ qx: the correction of the weights' offset 8.
                Expr qk = cast<int32_t>(quantize_i8_by_inverse(xc(b * kQBlock + rq, m), inv_step(b, m)));
                negsum(b, m) = sum(qk);
            } else if (sign_form()) {
                xin(rr, mi, kk, mo) = cast<uint8_t>(abs(q));
                xsign(rr, mi, kk, mo) = select(q < 0, cast<int8_t>(-1), cast<int8_t>(0));
                // The block's Σ |q| over its negative codes: the sums' correction (see the top).
                Expr qk = cast<int32_t>(quantize_i8_by_inverse(xc(b * kQBlock + rq, m), inv_step(b, m)));
                negsum(b, m) = sum(select(qk < 0, -qk, 0));
            } else {
                xin(rr, mi, kk, mo) = cast<uint8_t>(cast<int16_t>(q) + 128);
            }
            break;
        }
        }
        // acc(j, p, mi, mo): the sums of column p·cb + j (p counts slices
        // of cb columns; cb divides the panel, so a slice lies in one panel)
        // and row mo·rb + mi. (cb only reshapes, as rb does.)
        const int cb = slice_columns(), slices = kPanel / cb;
        Expr jp = (p % slices) * cb + j, panel = p / slices;  // the column within its panel, the panel
        if (q4) {
            // The byte of r.y's group, its nibble r.z (the k 16 further on).
            Expr wb = (*w)(r.x, jp, b * (block_groups / 2) + r.y, panel);
            Expr wq = select(r.z == 0, wb & cast<uint8_t>(15), wb >> cast<uint8_t>(4));
            Expr kg = b * block_groups + r.z * (block_groups / 2) + r.y;
            blk(j, p, mi, mo, b) = 0;
            blk(j, p, mi, mo, b) += cast<int32_t>(wq) * cast<int32_t>(xin(r.x, mi, kg, mo));
            Expr row = mo * rows + mi;
            Expr d = cast<float>(reinterpret<float16_t>((*scale)(jp, rb, panel)));
            acc(j, p, mi, mo) = 0.0f;
            if (minimum) {
                Expr mn = cast<float>(reinterpret<float16_t>((*minimum)(jp, rb, panel)));
                acc(j, p, mi, mo) += (cast<float>(blk(j, p, mi, mo, rb)) * d + cast<float>(negsum(rb, row)) * mn) *
                                     step(rb, row);
            } else {
                acc(j, p, mi, mo) += cast<float>(blk(j, p, mi, mo, rb) - 8 * negsum(rb, row)) * (step(rb, row) * d);
            }
        } else if (int8) {
            // blk(j, p, mi, mo, b): block b's exact int32 sum; acc adds the
            // blocks rescaled, in k order.
            Expr kg = b * block_groups + r.y;
            Expr wv = (*w)(r.x, jp, kg, panel);
            if (xsign.defined()) wv = wv ^ xsign(r.x, mi, kg, mo);
            blk(j, p, mi, mo, b) = 0;
            blk(j, p, mi, mo, b) += cast<int32_t>(xin(r.x, mi, kg, mo)) * cast<int32_t>(wv);
            Expr row = mo * rows + mi;
            Expr corr = xsign.defined() ? negsum(rb, row) : -128 * cast<int32_t>((*colsum)(jp, rb, panel));
            acc(j, p, mi, mo) = 0.0f;
            acc(j, p, mi, mo) += cast<float>(blk(j, p, mi, mo, rb) + corr) * (step(rb, row) * (*scale)(jp, rb, panel));
        } else {
            acc(j, p, mi, mo) = 0.0f;
            acc(j, p, mi, mo) += cast<float>(xin(r.x, mi, r.y, mo)) * cast<float>((*w)(r.x, jp, r.y, panel));
        }
        Expr v = acc(n % cb, n / cb, m % rows, m / rows);
        v = activate(v + (*bias)(n), activation);
        if (gated) v *= (*gate)(n, m);
        if (residual_add) v += (*residual)(n, m);
        y(n, m) = v;

        // The packed layout's strides (dense, as pack_weights writes it).
        w->dim(0).set_bounds(0, kf).set_stride(1);
        w->dim(1).set_bounds(0, kPanel).set_stride(kf);
        w->dim(2).set_stride(kf * kPanel);
        for (Input<Buffer<>> *s : {scale, minimum}) {
            // scale (minimum): one kPanel run per (block, panel), dense.
            if (!s) continue;
            s->dim(0).set_bounds(0, kPanel).set_stride(1);
            s->dim(1).set_stride(kPanel);
        }
        if (colsum) {
            colsum->dim(0).set_bounds(0, kPanel).set_stride(1);
            colsum->dim(1).set_stride(kPanel);
        }
        x.dim(0).set_stride(1);
        // y starts at (0, 0): which panel column and block row an output
        // is then follows from its index alone.
        y.dim(0).set_min(0);
        y.dim(1).set_min(0);

        /* ESTIMATES: a Transformer-base FFN input, 128 tokens */
        x.set_estimates({{0, 512}, {0, 128}});
        w->set_estimates({{0, kf}, {0, kPanel}, {0, 512 / kf / (q4 ? 2 : 1)}, {0, 2048 / kPanel}});
        bias->set_estimates({{0, 2048}});
        if (scale) scale->set_estimates({{0, kPanel}, {0, 512 / kQBlock}, {0, 2048 / kPanel}});
        if (minimum) minimum->set_estimates({{0, kPanel}, {0, 512 / kQBlock}, {0, 2048 / kPanel}});
        if (colsum) colsum->set_estimates({{0, kPanel}, {0, 512 / kQBlock}, {0, 2048 / kPanel}});
        if (residual_add) residual->set_estimates({{0, 2048}, {0, 128}});
        if (gated) gate->set_estimates({{0, 2048}, {0, 128}});
        y.set_estimates({{0, 2048}, {0, 128}});
    }

    void schedule() {
        if (leave_to_autoscheduler(auto_schedule)) return;
        Tuned rec(tuned_as, get_target());
        if (rec.apply_schedule(get_pipeline(), get_target())) return;
        // q4 without VNNI: its 4-way sums in vpmaddubsw's pairs, the
        // unsigned factor read from the weights.
        const bool pair_q4 = is_q4(format) && !get_target().has_feature(Target::AVX512_SapphireRapids) &&
                             get_target().arch == Target::X86;
        schedule_linear_packed_cpu({y, acc, blk, xin, xsign, absmax, step, inv_step, negsum, n, m, j, p, mi, mo, rr, kk, b, r, rb},
                                   {row_block(), slice_columns(), k_group(format), rec.get("task_blocks", task_blocks),
                                    pair_q4},
                                   get_pipeline(), get_target());
    }

private:
    Var n{"n"}, m{"m"}, j{"j"}, p{"p"}, k{"k"}, rr{"rr"}, kk{"kk"}, mi{"mi"}, mo{"mo"}, b{"b"};

    // Vectors per register block row: the tuned or given vectors_n, else
    // the target's (linear_packed_vectors); cb = that many vectors of 32-bit
    // lanes, a divisor of the panel.
    int block_vectors() {
        Tuned rec(tuned_as, get_target());
        return linear_packed_vectors(rec.get("vectors_n", vectors_n), rec.get("rows_m", rows_m), get_target(),
                                     k_group(format));
    }
    int slice_columns() { return block_vectors() * f32_lanes(get_target()); }
    // Rows per register block: the tuned or given rows_m, else as many as
    // the target's vector registers hold next to the block's weight vectors.
    int row_block() {
        Tuned rec(tuned_as, get_target());
        return linear_packed_rows(rec.get("rows_m", rows_m), block_vectors(), get_target(), k_group(format));
    }
    // int8: whether the products take the sign form (see the top).
    bool sign_form() {
        return format == WeightFormat::Int8 && int8_form(int8_form_knob, get_target()) == Int8Form::Sign;
    }
    Func acc{"acc"}, blk{"blk"}, xin{"xin"}, xsign{"xsign"}, absmax{"absmax"}, step{"step"}, inv_step{"inv_step"},
        negsum{"negsum"};
    RDom r, rb;
};

}  // namespace

HALIDE_REGISTER_GENERATOR(LinearPacked, linear_packed)
