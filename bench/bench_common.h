// Shared by the benchmark programs.
#pragma once

#include <HalideBuffer.h>

#include <cstdint>
#include <random>
#include <vector>

namespace halformer_bench {

// A float buffer of the given (Halide-order) dims, uniform in [-scale, scale).
inline Halide::Runtime::Buffer<float> rnd(std::vector<int> dims, uint32_t seed, float scale = 1.0f) {
    Halide::Runtime::Buffer<float> b(dims);
    std::mt19937 rng(seed);
    std::uniform_real_distribution<float> d(-scale, scale);
    b.for_each_value([&](float &x) { x = d(rng); });
    return b;
}

}  // namespace halformer_bench
