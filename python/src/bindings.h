// The pieces of the extension module halformer._halformer, one file each.
#pragma once

#include "halformer/model.h"

#include <pybind11/pybind11.h>

#include <optional>
#include <string>

namespace halformer_py {

void bind_errors(pybind11::module_ &m);   // module.cpp
void bind_config(pybind11::module_ &m);   // config.cpp
void bind_text(pybind11::module_ &m);     // text.cpp: Tokenizer, TextResult
void bind_model(pybind11::module_ &m);    // model.cpp
void bind_kernels(pybind11::module_ &m);  // kernels.cpp: the `kernels` submodule
void bind_engine(pybind11::module_ &m);   // engine.cpp: Engine, EngineRequest

// Decoding options from `options` (a GenerateOptions, or None for the
// defaults) with keyword arguments set on a copy of it (model.cpp).
halformer::GenerateOptions options_from(const std::optional<halformer::GenerateOptions> &options,
                                        const pybind11::kwargs &kwargs, const std::string &caller);

}  // namespace halformer_py
