// The pieces of the extension module halformer._halformer, one file each.
#pragma once

#include <pybind11/pybind11.h>

namespace halformer_py {

void bind_errors(pybind11::module_ &m);   // module.cpp
void bind_config(pybind11::module_ &m);   // config.cpp
void bind_text(pybind11::module_ &m);     // text.cpp: Tokenizer, TextResult
void bind_model(pybind11::module_ &m);    // model.cpp
void bind_kernels(pybind11::module_ &m);  // kernels.cpp: the `kernels` submodule

}  // namespace halformer_py
