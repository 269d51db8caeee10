// halformer._halformer: the runtime's Model and Tokenizer, and single kernels
// on numpy arrays. The package halformer/__init__.py re-exports it.
#include "bindings.h"

#include "halformer/engine.h"
#include "halformer/error.h"
#include "halformer/kernel_error.h"

namespace py = pybind11;

namespace halformer_py {

// halformer::Error (a bad model, file or input) and halformer::KernelError
// (a kernel's nonzero return) become halformer.Error and its subclass
// halformer.KernelError, both RuntimeErrors, with the C++ message. The C++
// classes are unrelated (KernelError is a std::runtime_error), so each gets
// its own translator. std::invalid_argument and the like keep pybind11's
// standard mapping (ValueError, ...).
void bind_errors(py::module_ &m) {
    auto &error = py::register_exception<halformer::Error>(m, "Error", PyExc_RuntimeError);
    error.attr("__doc__") = "A problem with a model, its files or its inputs; the message names it.";
    auto &kernel_error = py::register_exception<halformer::KernelError>(m, "KernelError", error.ptr());
    kernel_error.attr("__doc__") = "A generated kernel returned nonzero; the message is Halide's.";
    auto &busy = py::register_exception<halformer::EngineBusy>(m, "EngineBusy", error.ptr());
    busy.attr("__doc__") = "Engine.submit refused a request: the queue is full, or the engine stopped.";
}

}  // namespace halformer_py

PYBIND11_MODULE(_halformer, m) {
    m.doc() = "Halformer: Halide-generated Transformer kernels and their runtime (docs/python.md)";
    halformer_py::bind_errors(m);
    halformer_py::bind_config(m);
    halformer_py::bind_text(m);
    halformer_py::bind_model(m);
    halformer_py::bind_engine(m);
    auto kernels = m.def_submodule("kernels", "Single generated kernels on numpy float32 arrays");
    halformer_py::bind_kernels(kernels);
}
