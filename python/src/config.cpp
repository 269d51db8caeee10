// halformer.Config: a model's config.json (halformer/config.h), for reading a
// loaded model's and for building one for Model.random.
#include "bindings.h"

#include "halformer/config.h"

#include <pybind11/stl.h>

namespace py = pybind11;
using halformer::Config;

namespace halformer_py {
namespace {

void bind_enums(py::module_ &m) {
    using halformer::Act;
    using halformer::Architecture;
    using halformer::Positional;
    py::enum_<Architecture>(m, "Architecture")
        .value("EncoderDecoder", Architecture::EncoderDecoder)
        .value("Encoder", Architecture::Encoder)
        .value("Decoder", Architecture::Decoder);
    py::enum_<Positional>(m, "Positional")
        .value("Sinusoidal", Positional::Sinusoidal)
        .value("SinusoidalConcat", Positional::SinusoidalConcat)
        .value("Learned", Positional::Learned)
        .value("Relative", Positional::Relative);
    py::enum_<Act>(m, "Activation")
        .value("ReLU", Act::ReLU)
        .value("GELU", Act::GELU)
        .value("GELUTanh", Act::GELUTanh)
        .value("SiLU", Act::SiLU);
}

}  // namespace

void bind_config(py::module_ &m) {
    bind_enums(m);
    py::class_<Config>(m, "Config", "A model's config.json (halformer/config.h); the default is the paper's base model.")
        .def(py::init<>())
        .def_static("from_json", &Config::from_json, py::arg("text"), py::arg("what") = "config.json",
                    "Parses config.json text and validates it; `what` names it in errors.")
        .def_static("from_file", &Config::from_file, py::arg("path"))
        .def("validate", &Config::validate, "Raises halformer.Error naming the first field out of range.")
        .def("to_json", &Config::to_json)
        .def("__repr__", [](const Config &c) { return "halformer.Config(" + c.to_json() + ")"; })
        .def_readwrite("architecture", &Config::architecture)
        .def_readwrite("d_model", &Config::d_model)
        .def_readwrite("num_heads", &Config::num_heads)
        .def_readwrite("d_ff", &Config::d_ff)
        .def_readwrite("num_encoder_layers", &Config::num_encoder_layers)
        .def_readwrite("num_decoder_layers", &Config::num_decoder_layers)
        .def_readwrite("src_vocab_size", &Config::src_vocab_size)
        .def_readwrite("tgt_vocab_size", &Config::tgt_vocab_size)
        .def_readwrite("max_positions", &Config::max_positions)
        .def_readwrite("positional_encoding", &Config::positional_encoding)
        .def_readwrite("norm_first", &Config::norm_first)
        .def_readwrite("activation", &Config::activation)
        .def_readwrite("layer_norm_eps", &Config::layer_norm_eps)
        .def_readwrite("scale_embeddings", &Config::scale_embeddings)
        .def_readwrite("pad_id", &Config::pad_id)
        .def_readwrite("bos_id", &Config::bos_id)
        .def_readwrite("eos_id", &Config::eos_id)
        .def_readwrite("tokenizer", &Config::tokenizer)
        .def_readwrite("family", &Config::family)
        .def_property_readonly("head_dim", &Config::head_dim);
}

}  // namespace halformer_py
