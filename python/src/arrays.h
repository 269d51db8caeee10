// Halide buffers over numpy arrays, for calling the generated kernels on
// Python's memory.
//
// numpy lists dimensions outermost first, Halide innermost first: a C-order
// [M, K] array is the buffer (K, M) with strides (1, K). A kernel reads an
// input in place when Halide can address it: its innermost stride is one
// float (Halide's default constraint on every buffer), its other strides are
// whole floats (any sign, or 0 for a broadcast) and its data is float-aligned.
// Anything else (a[:, ::2], a byte-offset view) is copied once into C order.
// Outputs are new C-order arrays.
#pragma once

#include <HalideRuntime.h>
#include <pybind11/numpy.h>

#include <cstdint>
#include <string>
#include <vector>

namespace halformer_py {

// The shape a kernel expects of an argument, numpy order; -1 where any
// extent will do (it is then read from the array and fixes the others).
using Shape = std::vector<int64_t>;

// True when `a` is a float32 array the kernels read in place (no copy).
bool readable_in_place(const pybind11::array &a);

class Buffer {
public:
    // The kernel argument `name`: a numpy float32 array of `shape`. Any other
    // object or dtype is a TypeError, another shape a ValueError; both name
    // the argument and give the expected and the given dtype and shape.
    static Buffer input(const pybind11::handle &obj, const char *name, const Shape &shape);
    // A new C-order float32 array for a kernel to write.
    static Buffer output(const Shape &shape);
    // Integers (key lengths) as an int32 buffer of their own.
    static Buffer ints(const std::vector<int32_t> &values);

    Buffer(Buffer &&) = default;  // the dims vector keeps its storage: buf_.dim stays valid
    Buffer(const Buffer &) = delete;
    Buffer &operator=(const Buffer &) = delete;

    int64_t extent(int numpy_dim) const { return array_.shape(numpy_dim); }
    halide_buffer_t *raw() { return &buf_; }
    const pybind11::array &array() const { return array_; }

private:
    Buffer(pybind11::array array, halide_type_t type, const char *name);

    pybind11::array array_;  // keeps the memory buf_ points into alive
    std::vector<halide_dimension_t> dims_;
    halide_buffer_t buf_{};
};

}  // namespace halformer_py
