// halformer.Tokenizer (halformer/tokenizer.h) and halformer.TextResult, what
// Model.translate returns for a line.
#include "bindings.h"

#include "halformer/model.h"
#include "halformer/tokenizer.h"

#include <pybind11/stl.h>

#include <optional>

namespace py = pybind11;
using halformer::DecodeOptions;
using halformer::Sequence;
using halformer::TextResult;
using halformer::Tokenizer;

namespace halformer_py {
namespace {

void bind_tokenizer(py::module_ &m) {
    py::class_<Tokenizer>(m, "Tokenizer",
                          "Text to token ids and back. Immutable: encode and decode may run from many threads.")
        .def_static("load", &Tokenizer::load, py::arg("path"),
                    "Loads a SentencePiece model; halformer.Error names the file if it cannot.")
        .def_static("load_for", &Tokenizer::load_for, py::arg("path"),
                    "The tokenizer of a SentencePiece file, a model directory (with or without weights), a "
                    "directory of tokenizer files alone (tokenizer.json, ...) or a GGUF file.")
        .def("encode", &Tokenizer::encode, py::arg("text"), "Text → ids (no bos or eos).")
        .def("encode_input", &Tokenizer::encode_input, py::arg("text"),
             "The ids a model reads for text: encode() plus the checkpoint's own additions.")
        .def(
            "decode",
            [](const Tokenizer &t, const Sequence &ids, bool skip_special_tokens,
               std::optional<bool> clean_up_tokenization_spaces) {
                return t.decode(ids, DecodeOptions{skip_special_tokens, clean_up_tokenization_spaces});
            },
            py::arg("ids"), py::arg("skip_special_tokens") = true, py::arg("clean_up_tokenization_spaces") = py::none(),
            "ids → text, as transformers' decode: special tokens (pad, bos, eos, ...) dropped unless "
            "skip_special_tokens is False; spaces cleaned up (\" .\" → \".\") where "
            "clean_up_tokenization_spaces says, or (None) where the tokenizer's config does. An id outside the "
            "vocabulary is an Error.")
        .def_property_readonly("clean_up_tokenization_spaces", &Tokenizer::clean_up_tokenization_spaces)
        .def("pieces", &Tokenizer::pieces, py::arg("text"))
        .def_property_readonly("vocab_size", &Tokenizer::vocab_size)
        .def_property_readonly("pad_id", &Tokenizer::pad_id)
        .def_property_readonly("bos_id", &Tokenizer::bos_id)
        .def_property_readonly("eos_id", &Tokenizer::eos_id)
        .def_property_readonly("unk_id", &Tokenizer::unk_id)
        .def_property_readonly("path", &Tokenizer::path)
        .def("__repr__", [](const Tokenizer &t) {
            return "<halformer.Tokenizer " + t.path() + ", " + std::to_string(t.vocab_size()) + " pieces>";
        });
}

void bind_text_result(py::module_ &m) {
    py::class_<TextResult>(m, "TextResult", "One line through Model.translate / continue_text.")
        .def_readonly("text", &TextResult::text, "The best hypothesis, detokenized (\"\" on error).")
        .def_readonly("error", &TextResult::error, "\"\" when the line was translated, else the reason.")
        .def_readonly("alternatives", &TextResult::alternatives, "Hypotheses 2..n_best (beam search).")
        .def_readonly("score", &TextResult::score, "The best hypothesis' score (beam search), else 0.")
        .def_readonly("input_tokens", &TextResult::input_tokens)
        .def_readonly("output_tokens", &TextResult::output_tokens)
        .def_property_readonly("ok", &TextResult::ok)
        .def("__repr__", [](const TextResult &r) {
            return "<halformer.TextResult " + py::repr(py::str(r.ok() ? r.text : "error: " + r.error)).cast<std::string>() +
                   ">";
        });
}

}  // namespace

void bind_text(py::module_ &m) {
    bind_tokenizer(m);
    bind_text_result(m);
}

}  // namespace halformer_py
