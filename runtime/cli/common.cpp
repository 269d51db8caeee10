#include "common.h"

#include "halformer/isa.h"

#include <HalideRuntime.h>

#include <cerrno>
#include <cstdio>
#include <fstream>
#include <sys/stat.h>
#include <unistd.h>

namespace halformer {

void add_machine_options(CLI::App &app, MachineOptions &m) {
    app.add_option("--threads", m.threads, "threads (default: one per core)")->check(CLI::PositiveNumber);
    app.add_option("--isa", m.isa, "kernel variant limit: sse41|avx2|avx512|sapphirerapids");
    app.add_option("--device", m.device, "cpu, cuda or opencl");
}

void add_precision_option(CLI::App &app, MachineOptions &m) {
    app.add_option("--precision", m.precision, "projections in fp32, bf16 or int8 (bf16/int8: CPU only)")
        ->check(CLI::IsMember({"fp32", "bf16", "int8"}));
    app.add_option("--max-memory", m.max_memory,
                   "activations and caches the model may hold, e.g. 2G (default: 3/4 of the machine's memory)");
}

void apply_precision(const MachineOptions &m, Model &model) {
    model.set_precision(parse_precision(m.precision));
    if (!m.max_memory.empty()) model.set_memory_budget(parse_size(m.max_memory, "--max-memory"));
}

int64_t parse_size(const std::string &text, const char *option) {
    char *end = nullptr;
    errno = 0;
    const double v = std::strtod(text.c_str(), &end);
    double unit = 1;
    const std::string suffix = end ? std::string(end) : "";
    if (suffix == "K" || suffix == "k" || suffix == "KiB") unit = 1024.0;
    else if (suffix == "M" || suffix == "m" || suffix == "MiB") unit = 1024.0 * 1024;
    else if (suffix == "G" || suffix == "g" || suffix == "GiB") unit = 1024.0 * 1024 * 1024;
    else if (!suffix.empty()) unit = -1;
    const double bytes = v * unit;
    if (text.empty() || end == text.c_str() || errno || unit < 0 || !(bytes >= 1) || bytes > 9.0e18) {
        throw Error(std::string(option) + " expects a size such as 512M, 4G or a number of bytes, not '" + text + "'");
    }
    return (int64_t)bytes;
}

Device apply_machine_options(const MachineOptions &m) {
    if (!m.isa.empty()) set_isa_limit(parse_isa(m.isa));
    if (m.threads > 0) halide_set_num_threads(m.threads);
    const Device d = parse_device(m.device);
    require_device(d);
    return d;
}

void add_decoding_options(CLI::App &app, GenerateOptions &g) {
    app.add_option("--beam", g.beam, "beam size (1: greedy)")->check(CLI::PositiveNumber);
    app.add_option("--length-penalty", g.length_penalty, "beam: alpha in ((5 + len) / 6)^alpha");
    app.add_option("--n-best", g.n_best, "beam: hypotheses per input")->check(CLI::PositiveNumber);
    app.add_option("--max-new-tokens", g.max_new_tokens, "tokens generated at most (default: 2 x source + 10)");
    app.add_flag("--sample", g.sample, "sample instead of greedy");
    app.add_option("--temperature", g.temperature, "sampling temperature");
    app.add_option("--top-k", g.top_k, "sampling: keep the k most likely tokens (0: all)");
    app.add_option("--top-p", g.top_p, "sampling: nucleus mass");
    app.add_option("--seed", g.seed, "sampling seed");
}

void check_decoding_options(const GenerateOptions &g) {
    if (g.n_best > g.beam) {
        throw Error("--n-best " + std::to_string(g.n_best) + " is more than --beam " + std::to_string(g.beam));
    }
    if (g.sample && g.beam > 1) throw Error("--sample and --beam are exclusive");
    if (g.max_new_tokens != -1 && g.max_new_tokens < 1) throw Error("--max-new-tokens must be >= 1");
}

void check_writable(const std::string &path, bool force) {
    struct stat st;
    if (!force && stat(path.c_str(), &st) == 0) throw Error(path + " exists: not replacing it (--force replaces it)");
}

void write_file(const std::string &path, const std::string &text, bool force) {
    check_writable(path, force);
    const std::string tmp = path + ".tmp" + std::to_string(getpid());
    {
        std::ofstream out(tmp, std::ios::binary | std::ios::trunc);
        out << text;
        out.close();
        if (!out) {
            std::remove(tmp.c_str());
            throw Error(path + ": cannot write");
        }
    }
    // link() fails with EEXIST rather than replacing; rename() replaces.
    const int rc = force ? std::rename(tmp.c_str(), path.c_str()) : link(tmp.c_str(), path.c_str());
    const int err = errno;
    if (!force || rc != 0) std::remove(tmp.c_str());
    if (rc != 0) {
        throw Error(path + (err == EEXIST ? " appeared meanwhile: not replacing it" : ": cannot write"));
    }
}

std::string one_line(std::string text) {
    for (char &c : text)
        if (c == '\n' || c == '\r' || c == '\t' || c == '\v' || c == '\f' || c == '\0') c = ' ';
    return text;
}

}  // namespace halformer
