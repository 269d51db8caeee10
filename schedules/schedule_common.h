// Helpers shared by the hand schedules in schedules/.
#pragma once

#include "Halide.h"
#include "tuned.h"

namespace halformer {

// Natural fp32 vector width of a target: 16 lanes on AVX-512, 8 on AVX2, 4 on
// SSE4.1/NEON.
inline int f32_lanes(const Halide::Target &t) {
    return t.natural_vector_size<float>();
}

// Number of architectural vector registers: 32 zmm on AVX-512, 16 otherwise
// on x86, 32 on ARM64. Register blocks are sized from this.
inline int vector_registers(const Halide::Target &t) {
    if (t.has_feature(Halide::Target::AVX512)) return 32;
    if (t.arch == Halide::Target::ARM && t.bits == 64) return 32;
    return 16;
}

// A tunable integer GeneratorParam that means "pick per target" when 0.
inline int or_default(int value, int fallback) {
    return value > 0 ? value : fallback;
}

}  // namespace halformer
