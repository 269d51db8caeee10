// What generate() and the decoder share: the options' checks a joining
// input passes too, each input's new-token limit, and the sampling streams
// of decoder-only prompts.
#pragma once

#include "halformer/config.h"
#include "halformer/model.h"

#include <cstdint>
#include <string>
#include <vector>

namespace halformer::decoding {

// A decoder-only prompt's sampling stream for `seed` (as generate() gives a
// prompt its seed, alone or batched).
inline uint64_t prompt_seed(uint64_t seed) { return seed * 0x9E3779B97F4A7C15ull; }

// Prompt b's stream in a generate() call: its own seed, or the call's seed
// and its index.
inline uint64_t prompt_stream(const GenerateOptions &opt, size_t b) {
    return opt.seeds.empty() ? prompt_seed(opt.seed) + b : prompt_seed(opt.seeds[b]);
}

// Token sequences against the model (`what` names them in the message):
// Error for an empty batch or sequence, an id outside [0, vocab), or one
// that needs more than max_positions with `extra_positions` more.
void check_tokens(const Config &c, const std::vector<Sequence> &seqs, int vocab, const char *what,
                  int extra_positions);

// Sampling settings (`of`: whose, for the message): Error if out of range.
void check_sampling(const Sampling &x, const std::string &of);

// New tokens for an input of S source tokens (decoder-only: 0) and a
// prefix of P: max_new_tokens (-1: default_new_tokens, halformer/options.h),
// within max_positions; Error where they do not fit.
int new_token_limit(const Config &c, const GenerateOptions &opt, int S, int P);

}  // namespace halformer::decoding
