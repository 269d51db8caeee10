// How rotary runs (algorithm: rotary_generator.cpp), with the helpers
// Halformer installs for its users' ops.
#pragma once

#include <halformer/generator/schedule_common.h>

struct RotaryStages {
    Halide::Func y, cs;
    Halide::Var d, t, h, b;
};

// CPU: tasks of `rows` positions of one head; the angle table for those
// positions is computed per task (T·dk/2 cos/sin pairs, reused by nothing
// else), and both passes are vectorized along d.
inline void schedule_rotary_cpu(RotaryStages s, int rows, const Halide::Target &target) {
    using namespace Halide;
    const int lanes = halformer::f32_lanes(target);
    Var to("to"), ti("ti"), task("task");
    s.y.compute_root()
        .split(s.t, to, ti, rows, TailStrategy::GuardWithIf)
        .fuse(to, s.h, task)
        .fuse(task, s.b, task)
        .parallel(task)
        .vectorize(s.d, lanes, TailStrategy::GuardWithIf);
    s.cs.compute_at(s.y, ti).vectorize(s.d, lanes, TailStrategy::GuardWithIf);
}

// GPU: one block per (position, head, sequence), a thread per element; the
// angle is recomputed per element (cheaper than a round trip to memory).
inline void schedule_rotary_gpu(RotaryStages s) {
    using namespace Halide;
    Var dout("dout"), din("din");
    s.y.compute_root()
        .split(s.d, dout, din, 64, TailStrategy::GuardWithIf)
        .reorder(din, dout, s.t, s.h, s.b)
        .gpu_blocks(s.t, s.h, s.b)
        .gpu_threads(din);
}
