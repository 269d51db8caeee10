#include "arrays.h"

#include <cstddef>
#include <limits>

namespace py = pybind11;

namespace halformer_py {
namespace {

std::string shape_text(const std::vector<int64_t> &shape) {
    std::string s = "[";
    for (size_t i = 0; i < shape.size(); i++) {
        s += (i ? ", " : "") + (shape[i] < 0 ? std::string("?") : std::to_string(shape[i]));
    }
    return s + "]";
}

std::vector<int64_t> shape_of(const py::array &a) { return {a.shape(), a.shape() + a.ndim()}; }

bool matches(const py::array &a, const Shape &shape) {
    if (a.ndim() != (py::ssize_t)shape.size()) return false;
    for (size_t i = 0; i < shape.size(); i++) {
        if (shape[i] >= 0 && a.shape(i) != shape[i]) return false;
    }
    return true;
}

[[noreturn]] void reject(const py::handle &obj, const char *name, const Shape &shape, bool wrong_type) {
    std::string given;
    if (py::isinstance<py::array>(obj)) {
        auto a = py::reinterpret_borrow<py::array>(obj);
        given = "a " + py::str(a.dtype()).cast<std::string>() + " array of shape " + shape_text(shape_of(a));
    } else {
        given = "a " + py::str(obj.get_type().attr("__name__")).cast<std::string>();
    }
    std::string msg = std::string(name) + ": expected a numpy float32 array of shape " + shape_text(shape) +
                      ", got " + given;
    if (wrong_type) throw py::type_error(msg);
    throw py::value_error(msg);
}

// numpy's equivalence: native-order float32, whatever dtype object carries it.
bool is_float32(const py::array &a) { return py::isinstance<py::array_t<float>>(a); }

int32_t to_int32(int64_t v, const char *name, const char *what) {
    if (v < std::numeric_limits<int32_t>::min() || v > std::numeric_limits<int32_t>::max()) {
        throw py::value_error(std::string(name) + ": " + what + " " + std::to_string(v) +
                              " does not fit a Halide buffer (32-bit)");
    }
    return (int32_t)v;
}

}  // namespace

bool readable_in_place(const py::array &a) {
    if (!is_float32(a)) return false;
    if (a.size() == 0) return true;  // nothing is read
    if (reinterpret_cast<uintptr_t>(a.data()) % alignof(float)) return false;
    for (py::ssize_t i = 0; i < a.ndim(); i++) {
        if (a.shape(i) == 1) continue;  // a stride never stepped along does not matter
        if (a.strides(i) % (py::ssize_t)sizeof(float)) return false;
        if (i == a.ndim() - 1 && a.strides(i) != (py::ssize_t)sizeof(float)) return false;
    }
    return true;
}

Buffer::Buffer(py::array array, halide_type_t type, const char *name) : array_(std::move(array)) {
    const int n = (int)array_.ndim();
    dims_.resize(n);
    for (int i = 0; i < n; i++) {
        halide_dimension_t &d = dims_[n - 1 - i];  // Halide: innermost first
        d.min = 0;
        d.extent = to_int32(array_.shape(i), name, "extent");
        // A dimension never stepped along (extent 1, or an empty array) may
        // have any stride in numpy (empty arrays have all 0); Halide wants
        // the innermost one to be 1 and ignores the others.
        const bool stepped = array_.shape(i) > 1 && array_.size() > 0;
        const int64_t stride = stepped ? array_.strides(i) / (py::ssize_t)type.bytes() : (i == n - 1 ? 1 : 0);
        d.stride = to_int32(stride, name, "stride");
        d.flags = 0;
    }
    // Halide never writes its inputs; numpy's read-only arrays (broadcasts,
    // frombuffer) are read through the same non-const pointer.
    buf_.host = static_cast<uint8_t *>(const_cast<void *>(array_.data()));
    buf_.type = type;
    buf_.dimensions = n;
    buf_.dim = dims_.data();
}

Buffer Buffer::input(const py::handle &obj, const char *name, const Shape &shape) {
    if (!py::isinstance<py::array>(obj)) reject(obj, name, shape, true);
    auto a = py::reinterpret_borrow<py::array>(obj);
    if (!is_float32(a)) reject(obj, name, shape, true);
    if (!matches(a, shape)) reject(obj, name, shape, false);
    if (!readable_in_place(a)) {
        // A fresh array from numpy is C-ordered and aligned.
        a = py::module_::import("numpy").attr("array")(a, py::arg("order") = "C", py::arg("copy") = true);
    }
    return Buffer(std::move(a), halide_type_t(halide_type_float, 32), name);
}

Buffer Buffer::output(const Shape &shape) {
    return Buffer(py::array_t<float>(std::vector<py::ssize_t>(shape.begin(), shape.end())),
                  halide_type_t(halide_type_float, 32), "output");
}

Buffer Buffer::ints(const std::vector<int32_t> &values) {
    py::array_t<int32_t> a((py::ssize_t)values.size());
    std::copy(values.begin(), values.end(), a.mutable_data());
    return Buffer(std::move(a), halide_type_t(halide_type_int, 32), "ints");
}

}  // namespace halformer_py
