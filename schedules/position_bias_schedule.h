// How position_bias runs (algorithm: generators/position_bias_generator.cpp).
// A few thousand entries once per stack and call: elementwise, heads over
// threads (GPU: 64 × 4 tiles).
#pragma once

#include "elementwise_schedule.h"

namespace halformer {

inline void schedule_position_bias(Halide::Func out, Halide::Var c, Halide::Var h, const Halide::Target &t) {
    schedule_elementwise_2d(out, c, h, t);
}

}  // namespace halformer
