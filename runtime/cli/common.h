// What the commands share: their CLI11 parsing, the option groups (machine,
// decoding), loading a model with them, and a few output helpers.
#pragma once

#include "halformer/device.h"
#include "halformer/model.h"

#include <CLI/CLI.hpp>

#include <string>
#include <vector>

namespace halformer {

// Parses a command's arguments (argv[0]: the command's name) into app.
// Returns false when --help was asked for (the help is printed: the command
// returns 0). A bad option or argument is an Error with the command's name
// ("unknown option --bogus for 'generate'"); an option given twice takes
// the last value.
bool parse_command(CLI::App &app, int argc, char **argv);

// For ->check(): an integer >= min ("--threads: expects an integer >= 1, not
// '0'"; CLI11's PositiveNumber names its range as up to 1.8e308).
CLI::Validator at_least(long min);

struct MachineOptions {
    int threads = 0;  // 0: Halide's default (one per core)
    std::string isa;  // "": the best this CPU runs
    std::string device = "cpu";
    std::string precision;  // empty: the model's as loaded
    std::string max_memory;  // "": the model's default (3/4 of the machine)
};

// "512M", "4G", "1.5G", "65536" (bytes) → bytes; Error otherwise.
int64_t parse_size(const std::string &text, const char *option);

// --threads, --isa, --device.
void add_machine_options(CLI::App &app, MachineOptions &m);
// --precision fp32|bf16|int8 and --max-memory SIZE (commands that run a
// loaded model), and applying them to one.
void add_precision_option(CLI::App &app, MachineOptions &m);
void apply_precision(const MachineOptions &m, Model &model);
// Applies them (thread count, ISA limit), checks --max-memory, and returns
// the device, or throws Error naming what the device lacks.
Device apply_machine_options(const MachineOptions &m);
// Model::load on the options' device, with their precision and memory budget.
Model load_model(const std::string &dir, const MachineOptions &m);

// Every generation option the schema puts on the command line
// (halformer/options.h: --max-new-tokens, --beam, --length-penalty, --n-best,
// --sample, --temperature, --top-k, --top-p, --seed, --repetition-penalty,
// --no-repeat-ngram-size, --min-length), each checked against its range.
void add_decoding_options(CLI::App &app, GenerateOptions &g);
// Checks their combination (the same rules generate() enforces, with the
// option names in the message).
void check_decoding_options(const GenerateOptions &g);

// "5,6,7" → {5, 6, 7}; Error naming --option otherwise.
Sequence parse_id_list(const std::string &text, const char *option);
// Token ids separated by spaces, without a line break.
void print_ids(const std::vector<int32_t> &ids);
// What runs the kernels: the x86 variant, or the GPU device.
std::string kernels_label(Device device);
// Peak resident memory of this process in MB.
double peak_rss_mb();

// Text for a line-oriented output: line breaks and tabs (which a model can
// produce through its byte pieces) become spaces, so one input line is one
// output line and tab-separated fields stay fields.
std::string one_line(std::string text);
// `texts` as given, or when it is empty every line of stdin (a trailing \r
// dropped).
std::vector<std::string> texts_or_stdin(std::vector<std::string> texts);

// A float32 Tensor as a NumPy .npy file (v1.0, little-endian, C order),
// written atomically; an existing file only with force.
void write_npy(const std::string &path, const Tensor &t, bool force);

}  // namespace halformer
