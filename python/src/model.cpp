// halformer.Model (halformer/model.h): loading, logits, generation and text.
// Every call into the runtime runs without the GIL: one Model serves many
// Python threads at once, as it serves many C++ threads (model.h, Threads).
#include "bindings.h"

#include "halformer/chat.h"
#include "halformer/model.h"
#include "halformer/options.h"

#include <pybind11/numpy.h>
#include <pybind11/stl.h>

#include <optional>
#include <string>
#include <utility>
#include <vector>

namespace py = pybind11;
using halformer::GenerateOptions;
using halformer::Hypothesis;
using halformer::Sampling;
using halformer::Model;
using halformer::Sequence;
using halformer::Tensor;
using halformer::TextResult;

namespace halformer_py {
namespace {

template <typename F>
auto without_gil(F &&f) {
    py::gil_scoped_release nogil;
    return f();
}

// A runtime Tensor as a numpy array over the Tensor's own storage: the
// vector moves into a capsule that the array keeps alive, so logits are
// never copied.
py::array to_numpy(Tensor &&t) {
    auto *data = new std::vector<float>(std::move(t.data));
    py::capsule owner(data, [](void *p) { delete static_cast<std::vector<float> *>(p); });
    std::vector<py::ssize_t> shape(t.shape.begin(), t.shape.end());
    return py::array_t<float>(shape, data->data(), owner);
}

py::list to_numpy(std::vector<Tensor> &&tensors) {
    py::list out;
    for (auto &t : tensors) out.append(to_numpy(std::move(t)));
    return out;
}

// The scalar options from their schema (halformer/options.h): each a
// property whose setter refuses a value out of its range (ValueError naming
// the option) and a value of another type (TypeError).
void bind_scalar_options(py::class_<GenerateOptions> &c) {
    for (const halformer::OptionSpec &s : halformer::generate_option_specs()) {
        const halformer::OptionSpec *spec = &s;
        auto checked = [spec](double v) {
            const std::string why = spec->check(v);
            if (!why.empty()) throw py::value_error(std::string(spec->name) + " " + why);
        };
        switch (s.type) {
        case halformer::OptionType::Int:
            c.def_property(s.name, [spec](const GenerateOptions &o) { return o.*spec->i; },
                           [spec, checked](GenerateOptions &o, int v) {
                               // max_new_tokens: -1 is "as the positions allow"
                               if (!(spec->i == &GenerateOptions::max_new_tokens && v == -1)) checked(v);
                               o.*spec->i = v;
                           }, s.help);
            break;
        case halformer::OptionType::Float:
            c.def_property(s.name, [spec](const GenerateOptions &o) { return o.*spec->f; },
                           [spec, checked](GenerateOptions &o, float v) {
                               checked(v);
                               o.*spec->f = v;
                           }, s.help);
            break;
        case halformer::OptionType::Bool:
            c.def_property(s.name, [spec](const GenerateOptions &o) { return o.*spec->b; },
                           [spec](GenerateOptions &o, bool v) { o.*spec->b = v; }, s.help);
            break;
        case halformer::OptionType::Seed:
            c.def_property(s.name, [spec](const GenerateOptions &o) { return o.*spec->u; },
                           [spec](GenerateOptions &o, uint64_t v) { o.*spec->u = v; }, s.help);
            break;
        }
    }
}

void bind_generate_options(py::module_ &m) {
    py::class_<Sampling>(m, "Sampling",
                         "One input's choice without beams (GenerateOptions.sampling_each): greedy, or drawn "
                         "with its temperature, top_k and top_p.")
        .def(py::init([](bool sample, float temperature, int top_k, float top_p) {
                 return Sampling{sample, temperature, top_k, top_p};
             }),
             py::arg("sample") = false, py::arg("temperature") = 1.0f, py::arg("top_k") = 0, py::arg("top_p") = 1.0f)
        .def_readwrite("sample", &Sampling::sample)
        .def_readwrite("temperature", &Sampling::temperature)
        .def_readwrite("top_k", &Sampling::top_k)
        .def_readwrite("top_p", &Sampling::top_p);
    py::class_<GenerateOptions> options(m, "GenerateOptions",
                                "Decoding options (halformer/model.h); Model.generate and translate take the same "
                                "names as keyword arguments.");
    options.def(py::init([](const py::kwargs &kw) { return options_from(std::nullopt, kw, "GenerateOptions"); }))
        .def_readwrite("seeds", &GenerateOptions::seeds, "Sampling: one seed per input (empty: `seed` for all).")
        .def_readwrite("max_new_tokens_each", &GenerateOptions::max_new_tokens_each,
                       "One limit per input (empty: max_new_tokens for all).")
        .def_readwrite("sampling_each", &GenerateOptions::sampling_each,
                       "Beam 1: one Sampling per input, each greedy or drawn with its own settings (empty: "
                       "sample, temperature, top_k and top_p for all).")
        .def_readwrite("stop_ids", &GenerateOptions::stop_ids, "Ids that end a hypothesis as eos does.")
        .def_readwrite("target_prefix", &GenerateOptions::target_prefix,
                       "Encoder-decoder: per input, ids the output continues (the hypotheses hold what follows).");
    bind_scalar_options(options);
}

void bind_hypothesis(py::module_ &m) {
    py::class_<Hypothesis>(m, "Hypothesis", "One generated sequence: its ids (eos included when produced) and score.")
        .def_readonly("tokens", &Hypothesis::tokens)
        .def_readonly("score", &Hypothesis::score,
                      "Beam search: total log-probability / ((5 + len) / 6)^α; greedy and sampling: the total "
                      "log-probability with return_logprobs, else 0.")
        .def_readonly("log_probs", &Hypothesis::log_probs,
                      "With return_logprobs: each token's log-probability under the model.")
        .def("__repr__", [](const Hypothesis &h) {
            return "Hypothesis(tokens=" + py::repr(py::cast(h.tokens)).cast<std::string>() +
                   ", score=" + std::to_string(h.score) + ")";
        });
    py::class_<halformer::Generation>(m, "Generation", "Model.start(): a generate() call run a turn at a time.")
        .def("step", &halformer::Generation::step, py::call_guard<py::gil_scoped_release>(),
             "One turn (joins, a prefill chunk, one decoding step): False once every input is done.")
        .def_property_readonly("done", &halformer::Generation::done)
        .def("results", &halformer::Generation::results, py::call_guard<py::gil_scoped_release>(),
             "What generate() returns (halformer.Error before done).");
}

// translate() and continue_text(): texts in, one TextResult each. With
// raise_errors a line the runtime refused raises halformer.Error naming it;
// without, its TextResult carries the reason and the others their text.
using TextCall = std::vector<TextResult> (Model::*)(const std::vector<std::string> &, const GenerateOptions &, int);

void raise_first_error(const std::vector<TextResult> &results, const std::string &caller) {
    for (size_t i = 0; i < results.size(); i++) {
        if (!results[i].ok()) throw halformer::Error(caller + "(): line " + std::to_string(i) + ": " + results[i].error);
    }
}

auto text_method(TextCall call, std::string name) {
    return [call, name](Model &m, const std::vector<std::string> &texts, const std::optional<GenerateOptions> &options,
                        int batch_size, bool raise_errors, const py::kwargs &kw) {
        GenerateOptions o = options_from(options, kw, name);
        auto results = without_gil([&] { return (m.*call)(texts, o, batch_size); });
        if (raise_errors) raise_first_error(results, name);
        return results;
    };
}

template <typename T>
void config_shortcut(py::class_<Model> &c, const char *name, T halformer::Config::*field) {
    c.def_property_readonly(name, [field](const Model &m) { return m.config().*field; });
}

void bind_model_properties(py::class_<Model> &c) {
    c.def_property_readonly("config", [](const Model &m) { return m.config(); }, "A copy of the model's Config.")
        .def_property_readonly("device", [](const Model &m) { return halformer::device_name(m.device()); })
        .def_property_readonly("parameter_count", &Model::parameter_count)
        .def_property_readonly("packed_weight_bytes", &Model::packed_weight_bytes,
                               "Bytes the projections' packed copies hold now (their precision's panels).")
        .def_property_readonly("output_rows", &Model::output_rows, "The logits' width (vocabulary, or d_model).")
        .def_property_readonly("architecture",
                               [](const Model &m) { return halformer::architecture_name(m.config().architecture); })
        .def_property_readonly("has_tokenizer", &Model::has_tokenizer)
        .def_property_readonly("tokenizer", &Model::tokenizer, "The model's Tokenizer (halformer.Error if none).")
        .def_property("precision", [](const Model &m) { return halformer::precision_name(m.precision()); },
                      [](Model &m, const std::string &p) { m.set_precision(halformer::parse_precision(p)); },
                      "'fp32', 'bf16' or 'int8' (CPU). Do not change it while other threads use the model.")
        .def_property("max_sessions", &Model::max_sessions, &Model::set_max_sessions)
        .def_property("memory_budget", &Model::memory_budget, &Model::set_memory_budget)
        .def_property_readonly("memory_used", &Model::memory_used);
    config_shortcut(c, "d_model", &halformer::Config::d_model);
    config_shortcut(c, "num_heads", &halformer::Config::num_heads);
    config_shortcut(c, "num_encoder_layers", &halformer::Config::num_encoder_layers);
    config_shortcut(c, "num_decoder_layers", &halformer::Config::num_decoder_layers);
    config_shortcut(c, "src_vocab_size", &halformer::Config::src_vocab_size);
    config_shortcut(c, "tgt_vocab_size", &halformer::Config::tgt_vocab_size);
    config_shortcut(c, "max_positions", &halformer::Config::max_positions);
}

void bind_model_loading(py::class_<Model> &c) {
    c.def_static(
         "load",
         [](const std::string &dir, const std::string &device) {
             halformer::Device d = halformer::parse_device(device);
             return without_gil([&] { return Model::load(dir, d); });
         },
         py::arg("dir"), py::arg("device") = "cpu",
         "Loads DIR/config.json and DIR/model.safetensors (or a Hugging Face directory) on 'cpu', 'cuda' or 'opencl'.")
        .def_static(
            "random",
            [](const halformer::Config &config, uint64_t seed, const std::string &device) {
                halformer::Device d = halformer::parse_device(device);
                return without_gil([&] { return Model::random(config, seed, d); });
            },
            py::arg("config"), py::arg("seed") = 0, py::arg("device") = "cpu",
            "The model of `config` with deterministic random weights.");
}

void bind_model_calls(py::class_<Model> &c) {
    c.def(
         "logits",
         [](Model &m, const std::vector<Sequence> &src, const std::vector<Sequence> &tgt) {
             return to_numpy(without_gil([&] { return m.logits(src, tgt); }));
         },
         py::arg("src"), py::arg("tgt") = std::vector<Sequence>{},
         "Teacher-forced logits: one float32 array [len, output_rows] per sequence. Encoder-decoder: src and "
         "tgt (the decoder input as given); decoder-only and encoder-only: src alone.")
        .def(
            "generate",
            [](Model &m, const std::vector<Sequence> &src, const std::optional<GenerateOptions> &options,
               const py::kwargs &kw) {
                GenerateOptions o = options_from(options, kw, "generate");
                return without_gil([&] { return m.generate(src, o); });
            },
            py::arg("src"), py::arg("options") = py::none(),
            "n_best Hypothesis per input, best first. Options as GenerateOptions or keywords: beam, "
            "max_new_tokens, n_best, length_penalty, sample, temperature, top_k, top_p, seed, seeds, "
            "max_new_tokens_each, sampling_each, stop_at_eos.")
        .def(
            "start",
            [](Model &m, const std::vector<Sequence> &src, const std::optional<GenerateOptions> &options,
               const py::kwargs &kw) {
                GenerateOptions o = options_from(options, kw, "start");
                return without_gil([&] { return m.start(src, o); });
            },
            py::arg("src"), py::arg("options") = py::none(), py::keep_alive<0, 1>(),  // it keeps its model
            "generate() run a turn at a time: a Generation whose step() runs one turn (False once every input "
            "is done) and results() then. It holds one of the model's sessions until it is deleted.")
        .def(
            "encode",
            [](Model &m, const std::vector<Sequence> &src) {
                return to_numpy(without_gil([&] { return m.encode(src); }));
            },
            py::arg("src"), "The encoder's output, one float32 array [len, d_model] per sequence.")
        .def("translate", text_method(&Model::translate, "translate"), py::arg("texts"),
             py::arg("options") = py::none(), py::arg("batch_size") = 32, py::arg("raise_errors") = true,
             "Encoder-decoder: one TextResult per text, in order. Options as generate's.")
        .def("continue_text", text_method(&Model::continue_text, "continue_text"), py::arg("prompts"),
             py::arg("options") = py::none(), py::arg("batch_size") = 32, py::arg("raise_errors") = true,
             "Decoder-only: continues each prompt (TextResult.text is the continuation).")
        .def_property_readonly("has_chat_template", &Model::has_chat_template)
        .def(
            "chat_prompt",
            [](const Model &m, const std::vector<std::pair<std::string, std::string>> &messages,
               bool add_generation_prompt) {
                std::vector<halformer::ChatMessage> msgs;
                for (const auto &[role, content] : messages) msgs.push_back({role, content});
                return m.chat_prompt(msgs, add_generation_prompt);
            },
            py::arg("messages"), py::arg("add_generation_prompt") = true,
            "The checkpoint's chat_template rendered over (role, content) pairs: the prompt continue_text "
            "takes (halformer.Error without a template, or where the template refuses the messages).")
        .def(
            "chat_prompt",
            [](const Model &m, const py::list &messages, bool add_generation_prompt, const py::object &tools,
               const py::kwargs &kwargs) {
                // As transformers' apply_chat_template(messages, tools=..., **kwargs):
                // the conversation as JSON, in the order Python holds it.
                py::dict request;
                request["messages"] = messages;
                if (!tools.is_none()) request["tools"] = tools;
                for (auto item : kwargs) request[item.first] = item.second;
                const std::string text =
                    py::module_::import("json").attr("dumps")(request, py::arg("ensure_ascii") = false).cast<std::string>();
                return m.chat_prompt_json(text, add_generation_prompt);
            },
            py::arg("messages"), py::arg("add_generation_prompt") = true, py::arg("tools") = py::none(),
            "The same over message dicts, as transformers' apply_chat_template takes them (tool_calls, tool "
            "messages, any key), with tools and the template's other variables as keyword arguments "
            "(enable_thinking=False, ...).")
        .def(
            "embed",
            [](Model &m, const std::vector<std::string> &texts) {
                return to_numpy(without_gil([&] { return m.embed(texts); }));
            },
            py::arg("texts"), "The encoder's output for each text, [tokens, d_model].")
        .def(
            "text_of",
            [](const Model &m, const Sequence &tokens, const std::optional<Sequence> &prompt) {
                return m.text_of(tokens, prompt ? &*prompt : nullptr);
            },
            py::arg("tokens"), py::arg("prompt") = py::none(), "The text of generated ids, up to eos.")
        .def("release_memory", &Model::release_memory, "Frees what idle sessions grew; returns the bytes freed.");
}

}  // namespace

// Decoding options from `options` (a GenerateOptions, or None for the
// defaults) with keyword arguments set on a copy of it: generate(beam=4)
// and generate(GenerateOptions(beam=4)) are the same call. The fields are
// GenerateOptions' bound attributes, so the option names and their types
// live in one place (bind_generate_options).
GenerateOptions options_from(const std::optional<GenerateOptions> &options, const py::kwargs &kwargs,
                             const std::string &caller) {
    py::object o = py::cast(options.value_or(GenerateOptions{}));
    for (auto item : kwargs) {
        const std::string key = py::str(item.first);
        if (key.empty() || key[0] == '_' || !py::hasattr(o, key.c_str())) {
            throw py::type_error(caller + "() got an unexpected keyword argument '" + key + "'");
        }
        try {
            o.attr(key.c_str()) = item.second;
        } catch (py::error_already_set &e) {
            if (!e.matches(PyExc_TypeError)) throw;
            throw py::type_error(caller + "(): " + key + "=" + py::repr(item.second).cast<std::string>() +
                                 " has the wrong type (expected a value like " +
                                 py::repr(o.attr(key.c_str())).cast<std::string>() + ")");
        }
    }
    return o.cast<GenerateOptions>();
}

void bind_model(py::module_ &m) {
    bind_generate_options(m);
    bind_hypothesis(m);
    py::class_<Model> c(m, "Model",
                        "A Transformer model run by the generated kernels. Calls may come from many threads at once.");
    bind_model_loading(c);
    bind_model_properties(c);
    bind_model_calls(c);
    c.def("__repr__", [](const Model &m) {
        const auto &cfg = m.config();
        return std::string("<halformer.Model ") + halformer::architecture_name(cfg.architecture) +
               " d_model=" + std::to_string(cfg.d_model) + ", " + std::to_string(m.parameter_count()) +
               " parameters, on " + halformer::device_name(m.device()) + ">";
    });
}

}  // namespace halformer_py
