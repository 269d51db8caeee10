// The generation options' schema: each scalar option of GenerateOptions
// (model.h) once, with its name, type, range, default and whether requests
// that differ in it may share a batch. The server's /v1/generate fields and
// its batching read it; so may a host program that exposes the options
// (a form, another protocol).
//
// Sharing says what a batch may mix:
//   PerInput            each input of a generate() call has its own (the seed
//                       through GenerateOptions::seeds, the limit through
//                       max_new_tokens_each): requests that differ share a batch;
//   PerInputWithoutBeams  each input has its own without beams
//                       (GenerateOptions::sampling_each: greedy and sampled
//                       rows, any temperature, top-k and top-p, in one batch);
//                       with beam > 1 the whole batch shares one value;
//   Batch               one value for the whole call: requests that differ
//                       in it never share a batch.
#pragma once

#include "halformer/config.h"
#include "halformer/model.h"

#include <cstdint>
#include <string>
#include <vector>

namespace halformer {

enum class OptionType { Int, Float, Bool, Seed };
enum class Sharing { PerInput, PerInputWithoutBeams, Batch };

struct OptionSpec {
    const char *name;  // GenerateOptions' member and the JSON field
    const char *help;
    OptionType type;
    // The range values take: [lo, hi], lo excluded where lo_open (Float).
    // Bool and Seed: unused (a seed is any 64-bit unsigned integer).
    double lo, hi;
    bool lo_open;
    Sharing sharing;
    // Where a user sets it by name: a request to `halformer serve`
    // (/v1/generate's JSON field), the command line (--name-with-dashes).
    // Those without either are the C++ API's and Python's only.
    bool in_requests, on_command_line;
    // The member (one of them, by type).
    int GenerateOptions::*i = nullptr;
    float GenerateOptions::*f = nullptr;
    bool GenerateOptions::*b = nullptr;
    uint64_t GenerateOptions::*u = nullptr;

    // The option's value in `o` as a number (bool: 0 or 1).
    double get(const GenerateOptions &o) const;
    // Sets it; check() first.
    void set(GenerateOptions &o, double v) const;
    // "" when v is a value this option takes, else why not
    // ("must be in [1, 7]", "must be an integer", "must be positive").
    std::string check(double v) const;
    // Its default (GenerateOptions{}'s value).
    double default_value() const { return get(GenerateOptions{}); }
};

// Every scalar option, in GenerateOptions' order. The list-valued ones
// (stop_ids, target_prefix) and the per-input vectors and callbacks are
// not in it: stop_ids is batch-wide, the rest per input.
const std::vector<OptionSpec> &generate_option_specs();
// The option of that name, or null.
const OptionSpec *find_generate_option(const std::string &name);

// The new-token limit where a call gives none (max_new_tokens -1), the one
// every caller uses (generate(), translate, continue_text, `halformer serve`,
// the command line): per input, an encoder-decoder's 2 × its source's tokens
// + 10 (a translation is rarely more than twice its source), a decoder-only
// model's as many as its positions allow after its prompt; both at most 256.
// `prefix_tokens`: the decoder's input before the new tokens (the prompt; an
// encoder-decoder's bos and target prefix). A checkpoint's own
// generation_config.json max_length, where the command line reads it, comes
// first. At least 1 (0 where the prefix already fills the positions).
int default_new_tokens(const Config &c, int source_tokens, int prefix_tokens);

// Equal for two option sets exactly when generate() can run their
// requests in one batch: every Batch option (and stop_ids) equal, the
// PerInputWithoutBeams ones too where beam > 1.
std::string batch_key(const GenerateOptions &o);

}  // namespace halformer
