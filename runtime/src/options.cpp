// The generation options' schema (halformer/options.h).
#include "halformer/options.h"

#include <algorithm>
#include <cmath>
#include <sstream>

namespace halformer {

namespace {

constexpr double kInf = HUGE_VAL;

// Most options are set by requests and on the command line alike.
OptionSpec int_option(const char *name, const char *help, double lo, double hi, Sharing s, int GenerateOptions::*m) {
    OptionSpec o{name, help, OptionType::Int, lo, hi, false, s, true, true};
    o.i = m;
    return o;
}
OptionSpec float_option(const char *name, const char *help, double lo, double hi, bool lo_open, Sharing s,
                        float GenerateOptions::*m) {
    OptionSpec o{name, help, OptionType::Float, lo, hi, lo_open, s, true, true};
    o.f = m;
    return o;
}
OptionSpec bool_option(const char *name, const char *help, Sharing s, bool GenerateOptions::*m) {
    OptionSpec o{name, help, OptionType::Bool, 0, 1, false, s, true, true};
    o.b = m;
    return o;
}

OptionSpec api_only(OptionSpec o) {
    o.in_requests = o.on_command_line = false;
    return o;
}
OptionSpec request_only(OptionSpec o) {
    o.on_command_line = false;
    return o;
}

std::string number_text(double v) {
    if (std::isinf(v)) return v > 0 ? "inf" : "-inf";
    if (std::floor(v) == v && std::fabs(v) < 1e15) return std::to_string((long long)v);  // 1048576, not 1.04858e+06
    std::ostringstream s;
    s << v;
    return s.str();
}

}  // namespace

const std::vector<OptionSpec> &generate_option_specs() {
    using G = GenerateOptions;
    using S = Sharing;
    // beam + 1 candidates per beam come from an 8-wide top-k kernel.
    static const std::vector<OptionSpec> specs{
        int_option("max_new_tokens", "tokens generated at most (eos included; default: 2 x the source + 10 for an encoder-decoder, what the positions allow for a decoder; up to 256)",
                   1, 1 << 20, S::PerInput, &G::max_new_tokens),
        int_option("beam", "beam size (1: greedy or sampling)", 1, 7, S::Batch, &G::beam),
        float_option("length_penalty", "beam: alpha in ((5 + len) / 6)^alpha", -kInf, kInf, false, S::Batch,
                     &G::length_penalty),
        int_option("n_best", "beam: hypotheses returned per input (at most beam)", 1, 7, S::Batch, &G::n_best),
        bool_option("sample", "draw the next token instead of the most likely one", S::PerInputWithoutBeams, &G::sample),
        float_option("temperature", "sampling: the logits divided by it", 0, kInf, true, S::PerInputWithoutBeams,
                     &G::temperature),
        int_option("top_k", "sampling: the k most likely tokens only (0: all)", 0, 1 << 20, S::PerInputWithoutBeams,
                   &G::top_k),
        float_option("top_p", "sampling: the smallest set of tokens with this much mass (1: all)", 0, 1, true,
                     S::PerInputWithoutBeams, &G::top_p),
        [] {
            OptionSpec o{"seed", "sampling: the seed of the input's own stream", OptionType::Seed, 0, 0, false,
                         S::PerInput, true, true};
            o.u = &G::seed;
            return o;
        }(),
        api_only(bool_option("stop_at_eos", "end a hypothesis at eos (false: always max_new_tokens)", S::Batch,
                             &G::stop_at_eos)),
        // (halformer generate has --logprobs, for --src only)
        request_only(bool_option("return_logprobs", "each token's log-probability", S::Batch, &G::return_logprobs)),
        float_option("repetition_penalty", "CTRL's penalty on tokens already present (1: off)", 0, kInf, true,
                     S::Batch, &G::repetition_penalty),
        int_option("no_repeat_ngram_size", "never repeat an n-gram of this size (0: off)", 0, 64, S::Batch,
                   &G::no_repeat_ngram_size),
        int_option("min_length", "no eos or stop id before this many new tokens", 0, 1 << 20, S::Batch,
                   &G::min_length),
        api_only(int_option("forced_eos_id",
                            "the id every hypothesis ends with at its limit (-2: the checkpoint's, -1: none)", -2,
                            (1 << 24) - 1, S::Batch, &G::forced_eos_id)),
    };
    return specs;
}

const OptionSpec *find_generate_option(const std::string &name) {
    for (const OptionSpec &s : generate_option_specs()) {
        if (name == s.name) return &s;
    }
    return nullptr;
}

double OptionSpec::get(const GenerateOptions &o) const {
    switch (type) {
    case OptionType::Int: return o.*i;
    case OptionType::Float: return o.*f;
    case OptionType::Bool: return o.*b ? 1 : 0;
    case OptionType::Seed: return (double)(o.*u);
    }
    return 0;
}

void OptionSpec::set(GenerateOptions &o, double v) const {
    switch (type) {
    case OptionType::Int: o.*i = (int)v; break;
    case OptionType::Float: o.*f = (float)v; break;
    case OptionType::Bool: o.*b = v != 0; break;
    case OptionType::Seed: o.*u = (uint64_t)v; break;
    }
}

std::string OptionSpec::check(double v) const {
    if (type == OptionType::Bool) return v == 0 || v == 1 ? "" : "must be true or false";
    if (type == OptionType::Seed) return v >= 0 && std::floor(v) == v ? "" : "must be a non-negative integer";
    const bool bounded = std::isfinite(lo) || std::isfinite(hi);
    const std::string range = lo_open && lo == 0 && std::isinf(hi)
                                  ? "must be positive"
                                  : std::string("must be in ") + (lo_open ? "(" : "[") + number_text(lo) + ", " +
                                        number_text(hi) + "]";
    // NaN: out of a bounded range (as "top_p must be in (0, 1]" says).
    if (std::isnan(v)) return bounded ? range : "must be finite";
    if (!std::isfinite(v)) return "must be finite";
    if (type == OptionType::Int && std::floor(v) != v) return "must be an integer";
    const bool above = lo_open ? v > lo : v >= lo;
    if (above && v <= hi) return "";
    return range;
}

int default_new_tokens(const Config &c, int source_tokens, int prefix_tokens) {
    const int allowed = std::max(0, c.max_positions - prefix_tokens + 1);
    const int most = c.architecture == Architecture::EncoderDecoder ? std::min(2 * source_tokens + 10, 256) : 256;
    return std::min(most, allowed);
}

std::string batch_key(const GenerateOptions &o) {
    std::ostringstream k;
    k.precision(9);
    for (const OptionSpec &s : generate_option_specs()) {
        if (s.sharing == Sharing::Batch || (s.sharing == Sharing::PerInputWithoutBeams && o.beam > 1)) {
            k << s.name << '=' << s.get(o) << ';';
        }
    }
    k << "stop_ids=";
    for (int32_t id : o.stop_ids) k << id << ',';
    return k.str();
}

}  // namespace halformer
