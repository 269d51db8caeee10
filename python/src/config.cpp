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
        .value("Relative", Positional::Relative)
        .value("Rotary", Positional::Rotary);
    py::enum_<Act>(m, "Activation")
        .value("ReLU", Act::ReLU)
        .value("GELU", Act::GELU)
        .value("GELUTanh", Act::GELUTanh)
        .value("SiLU", Act::SiLU);
}

}  // namespace

void bind_config(py::module_ &m) {
    bind_enums(m);
    using Rope = Config::RopeScaling;
    py::class_<Rope> rope(m, "RopeScaling", "Config.rope_scaling: how rotary frequencies are rescaled.");
    py::enum_<Rope::Kind>(rope, "Kind").value("Default", Rope::Kind::None).value("Linear", Rope::Kind::Linear)
        .value("Llama3", Rope::Kind::Llama3);
    rope.def(py::init<>())
        .def_readwrite("kind", &Rope::kind)
        .def_readwrite("factor", &Rope::factor)
        .def_readwrite("low_freq_factor", &Rope::low_freq_factor)
        .def_readwrite("high_freq_factor", &Rope::high_freq_factor)
        .def_readwrite("original_max_positions", &Rope::original_max_positions);
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
        // BERT
        .def_readwrite("type_vocab_size", &Config::type_vocab_size)
        .def_readwrite("embedding_norm", &Config::embedding_norm)
        .def_readwrite("labels", &Config::labels)
        // the checkpoint's generation settings
        .def_readwrite("banned_ids", &Config::banned_ids)
        .def_readwrite("forced_eos_id", &Config::forced_eos_id)
        .def_readwrite("stop_ids", &Config::stop_ids)
        .def_readwrite("default_beams", &Config::default_beams)
        .def_readwrite("default_max_length", &Config::default_max_length)
        // T5
        .def_readwrite("d_kv", &Config::d_kv)
        .def_readwrite("attention_scale", &Config::attention_scale)
        .def_readwrite("rms_norm", &Config::rms_norm)
        .def_readwrite("gated_ffn", &Config::gated_ffn)
        .def_readwrite("biases", &Config::biases)
        .def_readwrite("relative_buckets", &Config::relative_buckets)
        .def_readwrite("relative_max_distance", &Config::relative_max_distance)
        .def_readwrite("tied_head", &Config::tied_head)
        // grouped-query attention, per-stack widths, bias flags
        .def_readwrite("num_kv_heads", &Config::num_kv_heads)
        .def_readwrite("decoder_num_heads", &Config::decoder_num_heads)
        .def_readwrite("decoder_d_ff", &Config::decoder_d_ff)
        .def_readwrite("qkv_bias", &Config::qkv_bias)
        .def_readwrite("out_bias", &Config::out_bias)
        .def_readwrite("ffn_bias", &Config::ffn_bias)
        // rotary positions and the sliding window
        .def_readwrite("rope_theta", &Config::rope_theta)
        .def_readwrite("rope_scaling", &Config::rope_scaling)
        .def_readwrite("sliding_window", &Config::sliding_window)
        .def_property_readonly("head_dim", &Config::head_dim)
        .def_property_readonly("kv_heads", &Config::kv_heads)
        .def_property_readonly("attention_width", &Config::attention_width)
        .def_property_readonly("kv_width", &Config::kv_width);
}

}  // namespace halformer_py
