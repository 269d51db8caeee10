#include "common.h"
#include "halformer/files.h"

#include "halformer/isa.h"
#include "halformer/options.h"

#include <HalideRuntime.h>

#include <cctype>
#include <cerrno>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <iostream>
#include <sstream>
#include <sys/resource.h>

namespace halformer {

namespace {

// "halformer generate" → "generate".
std::string command_name(const CLI::App &app) {
    const std::string name = app.get_name();
    return name.rfind("halformer ", 0) == 0 ? name.substr(10) : name;
}

// An option given twice takes the last value, as on every halformer command
// line before CLI11 (CLI11's default refuses it); lists keep every value.
void take_last_value(CLI::App &app) {
    for (CLI::Option *o : app.get_options()) {
        if (o->get_items_expected_max() == 1) o->multi_option_policy(CLI::MultiOptionPolicy::TakeLast);
    }
    for (CLI::App *sub : app.get_subcommands([](CLI::App *) { return true; })) take_last_value(*sub);
}

// What CLI11 left over: the first unknown option, else the first extra argument.
std::string extras_message(const CLI::App &app) {
    const std::string name = command_name(app);
    const std::vector<std::string> rest = app.remaining(true);
    std::string what = "unexpected argument '" + (rest.empty() ? std::string() : rest[0]) + "'";
    for (const std::string &a : rest) {
        if (a.size() > 1 && a[0] == '-' && !std::isdigit((unsigned char)a[1])) {
            what = "unknown option " + a.substr(0, a.find('='));
            break;
        }
    }
    return what + " for '" + name + "' (halformer " + name + " --help lists its options)";
}

}  // namespace

bool parse_command(CLI::App &app, int argc, char **argv) {
    take_last_value(app);
    try {
        app.parse(argc, argv);
        return true;
    } catch (const CLI::CallForHelp &e) {
        app.exit(e);
        return false;
    } catch (const CLI::CallForAllHelp &e) {
        app.exit(e);
        return false;
    } catch (const CLI::ExtrasError &) {
        throw Error(extras_message(app));
    } catch (const CLI::ParseError &e) {
        throw Error(command_name(app) + ": " + e.what());
    }
}

CLI::Validator at_least(long min) {
    auto check = [min](std::string &text) {
        char *end = nullptr;
        errno = 0;
        const long v = std::strtol(text.c_str(), &end, 10);
        if (text.empty() || *end || errno || v < min) {
            return "expects an integer >= " + std::to_string(min) + ", not '" + text + "'";
        }
        return std::string();
    };
    return CLI::Validator(check, ">= " + std::to_string(min));
}

void add_machine_options(CLI::App &app, MachineOptions &m) {
    app.add_option("--threads", m.threads, "threads (default: one per core)")->check(at_least(1));
    app.add_option("--isa", m.isa, "kernel variant limit: sse41|avx2|avx512|sapphirerapids");
    app.add_option("--device", m.device, "cpu, cuda or opencl");
}

void add_precision_option(CLI::App &app, MachineOptions &m) {
    app.add_option("--precision", m.precision,
                   "projections in fp32, bf16 or int8 (bf16/int8: CPU only; default: the file's, int8 for a GGUF "
                   "file of block-quantized weights (Q8_0, Q4_0, Q4_K, ...), else fp32)")
        ->check(CLI::IsMember({"fp32", "bf16", "int8"}));
    app.add_option("--max-memory", m.max_memory,
                   "activations and caches the model may hold, e.g. 2G (default: 3/4 of the machine's memory)");
}

void apply_precision(const MachineOptions &m, Model &model) {
    if (!m.precision.empty()) model.set_precision(parse_precision(m.precision));
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
    if (!m.max_memory.empty()) parse_size(m.max_memory, "--max-memory");  // refused before a model loads
    return d;
}

Model load_model(const std::string &dir, const MachineOptions &m) {
    Model model = Model::load(dir, apply_machine_options(m));
    apply_precision(m, model);
    return model;
}

// The generation options from their schema (halformer/options.h): one
// --name-with-dashes per option set on the command line, its help, type and
// range from there.
void add_decoding_options(CLI::App &app, GenerateOptions &g) {
    for (const OptionSpec &s : generate_option_specs()) {
        if (!s.on_command_line) continue;
        std::string flag = std::string("--") + s.name;
        for (char &ch : flag) ch = ch == '_' ? '-' : ch;
        const OptionSpec *spec = &s;
        CLI::Validator in_range(
            [spec](std::string &text) {
                char *end = nullptr;
                const double v = std::strtod(text.c_str(), &end);
                if (text.empty() || *end) return "expects a number, not '" + text + "'";
                const std::string why = spec->check(v);
                return why.empty() ? why : why + ", not " + text;
            },
            "");
        switch (s.type) {
        case OptionType::Int: app.add_option(flag, g.*s.i, s.help)->check(in_range); break;
        case OptionType::Float: app.add_option(flag, g.*s.f, s.help)->check(in_range); break;
        case OptionType::Bool: app.add_flag(flag, g.*s.b, s.help); break;
        case OptionType::Seed: app.add_option(flag, g.*s.u, s.help); break;
        }
    }
}

void check_decoding_options(const GenerateOptions &g) {
    if (g.n_best > g.beam) {
        throw Error("--n-best " + std::to_string(g.n_best) + " is more than --beam " + std::to_string(g.beam));
    }
    if (g.sample && g.beam > 1) throw Error("--sample and --beam are exclusive");
}

Sequence parse_id_list(const std::string &text, const char *option) {
    Sequence out;
    std::stringstream ss(text);
    std::string tok;
    while (std::getline(ss, tok, ',')) {
        char *end = nullptr;
        long v = std::strtol(tok.c_str(), &end, 10);
        if (tok.empty() || *end || v < INT32_MIN || v > INT32_MAX) {
            throw Error(std::string("--") + option + ": '" + tok + "' is not a token id");
        }
        out.push_back((int32_t)v);
    }
    if (out.empty()) throw Error(std::string("--") + option + " is empty");
    return out;
}

void print_ids(const std::vector<int32_t> &ids) {
    for (size_t k = 0; k < ids.size(); k++) std::printf("%s%d", k ? " " : "", ids[k]);
}

std::string kernels_label(Device device) {
    return device == Device::CPU ? std::string(running_variant()) + " variant" : device_description(device);
}

// VmHWM: per address space, so not inherited from a parent the way
// getrusage's ru_maxrss is after fork.
double peak_rss_mb() {
    std::ifstream in("/proc/self/status");
    for (std::string line; std::getline(in, line);) {
        if (line.rfind("VmHWM:", 0) == 0) return std::strtod(line.c_str() + 6, nullptr) / 1024.0;
    }
    struct rusage ru;
    getrusage(RUSAGE_SELF, &ru);
    return ru.ru_maxrss / 1024.0;
}

std::string one_line(std::string text) {
    for (char &c : text)
        if (c == '\n' || c == '\r' || c == '\t' || c == '\v' || c == '\f' || c == '\0') c = ' ';
    return text;
}

// NumPy .npy v1.0, little-endian float32, C order; written through
// files::write_atomic, so a failed write leaves nothing half-written.
void write_npy(const std::string &path, const Tensor &t, bool force) {
    std::string shape = "(";
    for (size_t k = 0; k < t.shape.size(); k++) shape += (k ? ", " : "") + std::to_string(t.shape[k]);
    if (t.shape.size() == 1) shape += ",";
    shape += ")";
    std::string header = "{'descr': '<f4', 'fortran_order': False, 'shape': " + shape + ", }";
    while ((10 + header.size() + 1) % 64) header += ' ';
    header += '\n';
    auto write = [&](const std::string &tmp) {
        std::ofstream out(tmp, std::ios::binary | std::ios::trunc);
        if (!out) throw Error(path + ": cannot write");
        out.write("\x93NUMPY\x01\x00", 8);
        uint16_t len = (uint16_t)header.size();
        out.put(char(len & 0xFF));
        out.put(char(len >> 8));
        out.write(header.data(), header.size());
        out.write((const char *)t.data.data(), t.data.size() * sizeof(float));
        out.close();
        if (!out) throw Error(path + ": write failed");
    };
    files::write_atomic(path, write, force);
}


std::vector<std::string> texts_or_stdin(std::vector<std::string> texts) {
    if (!texts.empty()) return texts;
    for (std::string s; std::getline(std::cin, s);) {
        if (!s.empty() && s.back() == '\r') s.pop_back();
        texts.push_back(std::move(s));
    }
    return texts;
}

}  // namespace halformer
