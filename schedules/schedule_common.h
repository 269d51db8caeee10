// Helpers shared by the hand schedules in schedules/ (CPU and GPU).
#pragma once

#include "Halide.h"
#include "tuned.h"

#include <cstdlib>

namespace halformer {

// Natural fp32 vector width of a target: 16 lanes on AVX-512, 8 on AVX2, 4 on
// SSE4.1/NEON.
inline int f32_lanes(const Halide::Target &t) {
    return t.natural_vector_size<float>();
}

// Shared memory a GPU block may use without opting in: 48 KiB on every CUDA
// device (ops.cuda_limits' fake driver refuses a launch past it).
constexpr int kGpuSharedBytes = 48 * 1024;

// Number of architectural vector registers: 32 zmm on AVX-512, 16 otherwise
// on x86, 32 on ARM64. Register blocks are sized from this.
inline int vector_registers(const Halide::Target &t) {
    if (t.has_feature(Halide::Target::AVX512)) return 32;
    if (t.arch == Halide::Target::ARM && t.bits == 64) return 32;
    return 16;
}

// The first step of every schedule(): true when the build asked an
// autoscheduler (Adams2019, Mullapudi2016, Li2018) to schedule this pipeline,
// which it does after schedule() returns.
//
// Adams2019 unrolls a loop when its estimates make the loop's extent look
// constant; a loop over blocks of an input extent (attention's key blocks,
// (keys + 63) / 64) is not constant once lowered, and Halide 14 then stops
// with "Can only unroll for loops over a constant extent". Which loops it
// unrolls depends on the target (the AVX2 target's search unrolls
// attention's `weight.kb`; the AVX-512 one does not). Halide documents the
// setting for this (src/autoschedulers/adams2019/AutoSchedule.cpp,
// HL_PERMIT_FAILED_UNROLL): such a loop is lowered as a serial loop, with the
// same result for any extent. It is set here, in the generator process,
// for autoscheduled builds only: a hand schedule that unrolled a
// non-constant loop would still fail its build.
inline bool leave_to_autoscheduler(bool auto_schedule) {
    if (auto_schedule) setenv("HL_PERMIT_FAILED_UNROLL", "1", 1);
    return auto_schedule;
}

// A tunable integer GeneratorParam that means "pick per target" when 0.
inline int or_default(int value, int fallback) {
    return value > 0 ? value : fallback;
}

// ---- GPU helpers (CUDA, OpenCL) ----

// Threads per block for the row-wise ops (softmax, layer_norm, the output
// head's normalisation): one block per row, `threads` threads striding the row.
inline int gpu_row_threads(int knob) {
    return or_default(knob, 256);
}

// One GPU block per row: `row` becomes the block index and `threads` threads
// stride along `inner` (thread i handles i, i + threads, …: a warp's loads
// and stores are contiguous). `out` must be computed at root.
inline void gpu_row_blocks(Halide::Func out, Halide::Var inner, Halide::Var row, int threads) {
    using namespace Halide;
    Var o(inner.name() + "_o"), i(inner.name() + "_i");
    out.split(inner, o, i, threads, TailStrategy::GuardWithIf).reorder(o, i, row).gpu_blocks(row).gpu_threads(i);
}

// A cooperative reduction of red(row) over kx inside one GPU block: each of
// `threads` threads folds a strided slice of the row into its own partial
// (rfactor; thread u reads elements u, u + threads, … so a warp's loads are
// contiguous), then 16 threads fold those partials (thread v adds v, v + 16,
// …: conflict-free in shared memory) and one thread adds the 16. `red` is
// computed per block of `out` (at `block`). (Measured on an H100: with one
// thread adding all 256 partials, layer_norm of 8192 × 512 ran at 138 GB/s,
// 0.09× PyTorch: each reduction waited on a 256-long chain of shared loads.)
inline void gpu_block_reduce(Halide::Func red, Halide::RVar kx, Halide::Func out,
                             Halide::Var block, int threads) {
    using namespace Halide;
    Var u("u"), v("v");
    RVar ko("ko"), ki("ki"), uo("uo"), ui("ui");
    Func part = red.update().split(kx, ko, ki, threads, TailStrategy::GuardWithIf).rfactor(ki, u);
    red.compute_at(out, block);
    part.compute_at(out, block).gpu_threads(u);
    part.update().reorder(ko, u).gpu_threads(u);
    const int lanes = 16;
    if (threads % lanes == 0 && threads > lanes) {
        Func fold = red.update().split(ki, uo, ui, lanes).rfactor(ui, v);
        fold.compute_at(out, block).gpu_threads(v);
        fold.update().reorder(uo, v).gpu_threads(v);
    }
}

}  // namespace halformer
