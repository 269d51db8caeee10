// Options the CLI11-parsed commands share (train, translate, eval).
#pragma once

#include "halformer/device.h"
#include "halformer/model.h"

#include <CLI/CLI.hpp>

#include <string>

namespace halformer {

struct MachineOptions {
    int threads = 0;  // 0: Halide's default (one per core)
    std::string isa;  // "": the best this CPU runs
    std::string device = "cpu";
    std::string precision = "fp32";
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
// Applies them (thread count, ISA limit) and returns the device, or throws
// Error naming what the device lacks.
Device apply_machine_options(const MachineOptions &m);

// Every decoding option `halformer generate` has: --beam, --length-penalty,
// --n-best, --max-new-tokens, --sample, --temperature, --top-k, --top-p, --seed.
void add_decoding_options(CLI::App &app, GenerateOptions &g);
// Checks their combination (the same rules generate() enforces, with the
// option names in the message).
void check_decoding_options(const GenerateOptions &g);

// Writes text to path through a temporary file beside it. Without force an
// existing path is never replaced (checked again at the moment of
// publishing: a file that appeared meanwhile is kept). Throws Error.
void write_file(const std::string &path, const std::string &text, bool force);
// Throws Error when path exists and force is false (check before long work).
void check_writable(const std::string &path, bool force);

// Text for a line-oriented output: line breaks and tabs (which a model can
// produce through its byte pieces) become spaces, so one input line is one
// output line and tab-separated fields stay fields.
std::string one_line(std::string text);

}  // namespace halformer
