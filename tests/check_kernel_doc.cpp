// Keeps docs/kernels.md true: its "Kernel reference" must list every kernel
// the build makes, with the generator, parameters, builds and argument order
// the build gave it, and describe every argument with the kind, type and
// dimensions the compiled kernel declares (Halide's filter metadata, read
// from the linked kernels themselves). Its error-code table must give
// HalideRuntime.h's values.
//
//   check_kernel_doc --check docs/kernels.md    exit 1 and name each mismatch
//   check_kernel_doc --print [generator]        the tables as the build sees
//                                               them (shape column empty)
#include <HalideRuntime.h>

#include <cstdio>
#include <cstring>
#include <fstream>
#include <iostream>
#include <map>
#include <set>
#include <sstream>
#include <string>
#include <vector>

#define HF_KERNEL(name, gen, params, builds) extern "C" const halide_filter_metadata_t *name##_metadata();
#include "halformer_kernel_doc_list.inc"
#undef HF_KERNEL

namespace {

struct Kernel {
    std::string name, generator, params, builds;
    const halide_filter_metadata_t *meta;
};

const std::vector<Kernel> &built_kernels() {
    static const std::vector<Kernel> kernels = {
#define HF_KERNEL(name, gen, params, builds) {#name, gen, params, builds, name##_metadata()},
#include "halformer_kernel_doc_list.inc"
#undef HF_KERNEL
    };
    return kernels;
}

// The error codes docs/kernels.md may name.
const std::map<std::string, int> &error_codes() {
#define E(x) {"halide_error_code_" #x, halide_error_code_##x}
    static const std::map<std::string, int> codes = {
        E(generic_error), E(explicit_bounds_too_small), E(bad_type), E(access_out_of_bounds),
        E(buffer_allocation_too_large), E(buffer_extents_too_large), E(constraint_violated),
        E(param_too_small), E(param_too_large), E(out_of_memory), E(buffer_argument_is_null),
        E(copy_to_host_failed), E(copy_to_device_failed), E(device_malloc_failed),
        E(device_run_failed), E(requirement_failed), E(buffer_extents_negative),
        E(host_is_null), E(bad_dimensions), E(no_device_interface),
    };
#undef E
    return codes;
}

std::string kind_name(int kind) {
    switch (kind) {
    case halide_argument_kind_input_scalar: return "scalar";
    case halide_argument_kind_input_buffer: return "input";
    case halide_argument_kind_output_buffer: return "output";
    }
    return "kind " + std::to_string(kind);
}

std::string type_name(halide_type_t t) {
    const char *code = t.code == halide_type_int     ? "int"
                       : t.code == halide_type_uint  ? "uint"
                       : t.code == halide_type_float ? "float"
                       : t.code == halide_type_bfloat ? "bfloat"
                                                      : "handle";
    return code + std::to_string(t.bits);
}

// An argument's name without the number Halide's metadata gives an output
// ("y$3" → "y"; a tuple's parts "out$3.1" → "out.1", as the header's
// _out__3_1_buffer).
std::string arg_name(const halide_filter_argument_t &a) {
    std::string n = a.name;
    size_t dollar = n.find('$');
    if (dollar == std::string::npos) return n;
    size_t dot = n.find('.', dollar);
    return n.substr(0, dollar) + (dot == std::string::npos ? "" : n.substr(dot));
}

std::vector<std::string> argument_names(const Kernel &k) {
    std::vector<std::string> names;
    for (int i = 0; i < k.meta->num_arguments; i++) names.push_back(arg_name(k.meta->arguments[i]));
    return names;
}

std::string join(const std::vector<std::string> &v, const char *sep) {
    std::string s;
    for (size_t i = 0; i < v.size(); i++) s += (i ? sep : "") + v[i];
    return s;
}

std::string trim(std::string s) {
    s.erase(0, s.find_first_not_of(" \t"));
    s.erase(s.find_last_not_of(" \t") + 1);
    return s;
}

// A markdown table row's cells, backticks removed.
std::vector<std::string> cells(const std::string &line) {
    std::vector<std::string> out;
    std::string cur;
    for (size_t i = 1; i < line.size(); i++) {
        if (line[i] == '|' && line[i - 1] != '\\') {
            out.push_back(trim(cur));
            cur.clear();
        } else if (line[i] != '`') {
            cur += line[i];
        }
    }
    return out;
}

// "a or b or c" → {a, b, c}
std::set<std::string> alternatives(const std::string &cell) {
    std::set<std::string> out;
    size_t pos = 0;
    while (true) {
        size_t at = cell.find(" or ", pos);
        out.insert(trim(cell.substr(pos, at == std::string::npos ? std::string::npos : at - pos)));
        if (at == std::string::npos) return out;
        pos = at + 4;
    }
}

struct ArgRow {
    std::string kind;
    std::set<std::string> types, dims;
    int line;
    bool used = false;
};

struct KernelRow {
    std::string generator, params, builds, arguments;
    int line;
};

struct Doc {
    std::map<std::string, KernelRow> kernels;
    std::map<std::string, std::map<std::string, ArgRow>> args;  // generator → argument → row
    std::map<std::string, std::pair<int, int>> codes;           // name → (value, line)
    std::vector<std::string> problems;
};

void problem(Doc &doc, int line, const std::string &what) {
    doc.problems.push_back("docs/kernels.md:" + std::to_string(line) + ": " + what);
}

// Reads the "## Kernel reference" section: "### generator" headings, each
// with a kernel table and an argument table, and the error-code table.
Doc read_doc(const std::string &path) {
    Doc doc;
    std::ifstream in(path);
    if (!in) {
        doc.problems.push_back("cannot read " + path);
        return doc;
    }
    std::string line, generator, table;
    bool in_reference = false;
    for (int n = 1; std::getline(in, line); n++) {
        if (line.rfind("## ", 0) == 0) in_reference = line == "## Kernel reference";
        if (!in_reference) continue;
        if (line.rfind("### ", 0) == 0) {
            std::string h = line.substr(4);
            size_t a = h.find('`'), b = h.find('`', a + 1);
            generator = a != std::string::npos && b != std::string::npos ? h.substr(a + 1, b - a - 1) : "";
            table.clear();
            continue;
        }
        if (line.rfind("|", 0) != 0) {
            table.clear();
            continue;
        }
        std::vector<std::string> c = cells(line);
        if (table.empty()) {
            table = c.empty() ? "?" : c[0];
            continue;
        }
        if (line.find("---") != std::string::npos) continue;
        if (table == "kernel" && c.size() >= 4) {
            if (doc.kernels.count(c[0])) problem(doc, n, c[0] + " is listed twice");
            doc.kernels[c[0]] = {generator, c[1], c[2], c[3], n};
        } else if (table == "argument" && c.size() >= 4) {
            doc.args[generator][c[0]] = {c[1], alternatives(c[2]), alternatives(c[3]), n};
        } else if (table == "code" && c.size() >= 2) {
            doc.codes[c[0]] = {std::atoi(c[1].c_str()), n};
        } else {
            problem(doc, n, "a row of table '" + table + "' with too few cells");
        }
    }
    return doc;
}

void check_kernel(Doc &doc, const Kernel &k) {
    auto it = doc.kernels.find(k.name);
    if (it == doc.kernels.end()) {
        doc.problems.push_back(k.name + " (generator " + k.generator + ") is not in docs/kernels.md");
        return;
    }
    const KernelRow &row = it->second;
    auto expect = [&](const std::string &what, const std::string &doc_value, const std::string &built) {
        if (doc_value != built)
            problem(doc, row.line, k.name + ": " + what + " '" + doc_value + "', the build has '" + built + "'");
    };
    expect("generator", row.generator, k.generator);
    expect("params", row.params, k.params);
    expect("builds", row.builds, k.builds);
    expect("arguments", row.arguments, join(argument_names(k), ", "));
    auto &table = doc.args[k.generator];
    for (int i = 0; i < k.meta->num_arguments; i++) {
        const halide_filter_argument_t &a = k.meta->arguments[i];
        auto r = table.find(arg_name(a));
        if (r == table.end()) {
            problem(doc, row.line, k.name + ": argument '" + arg_name(a) +
                                       "' is not in the argument table of " + k.generator);
            continue;
        }
        ArgRow &ar = r->second;
        ar.used = true;
        const std::string where = k.name + " argument " + arg_name(a) + ": ";
        if (ar.kind != kind_name(a.kind)) problem(doc, ar.line, where + "kind '" + ar.kind + "', built " + kind_name(a.kind));
        if (!ar.types.count(type_name(a.type)))
            problem(doc, ar.line, where + "type is not listed: built " + type_name(a.type));
        if (!ar.dims.count(std::to_string(a.dimensions)))
            problem(doc, ar.line, where + "dims not listed: built " + std::to_string(a.dimensions));
    }
}

int check(const std::string &path) {
    Doc doc = read_doc(path);
    std::set<std::string> built;
    for (const Kernel &k : built_kernels()) {
        built.insert(k.name);
        check_kernel(doc, k);
    }
    for (const auto &[name, row] : doc.kernels)
        if (!built.count(name)) problem(doc, row.line, name + " is documented but this build has no such kernel");
    for (const auto &[gen, table] : doc.args)
        for (const auto &[name, row] : table)
            if (!row.used) problem(doc, row.line, "argument '" + name + "' of " + gen + " belongs to no kernel");
    if (doc.codes.empty()) doc.problems.push_back("docs/kernels.md has no error-code table");
    for (const auto &[name, v] : doc.codes) {
        auto it = error_codes().find(name);
        if (it == error_codes().end())
            problem(doc, v.second, name + " is not a Halide error code this check knows");
        else if (it->second != v.first)
            problem(doc, v.second, name + " is " + std::to_string(it->second) + " in HalideRuntime.h, not " +
                                       std::to_string(v.first));
    }
    for (const std::string &p : doc.problems) std::cerr << p << "\n";
    if (!doc.problems.empty()) {
        std::cerr << doc.problems.size() << " problem(s); `check_kernel_doc --print GENERATOR` prints the tables "
                  << "as the build sees them\n";
        return 1;
    }
    std::cout << built.size() << " kernels, " << doc.args.size() << " generators and " << doc.codes.size()
              << " error codes agree with docs/kernels.md\n";
    return 0;
}

void print(const std::string &only) {
    std::map<std::string, std::vector<const Kernel *>> by_gen;
    for (const Kernel &k : built_kernels()) by_gen[k.generator].push_back(&k);
    for (const auto &[gen, ks] : by_gen) {
        if (!only.empty() && gen != only) continue;
        std::cout << "### `" << gen << "`\n\n| kernel | params | builds | arguments |\n|---|---|---|---|\n";
        std::map<std::string, std::pair<std::set<std::string>, std::set<std::string>>> args;  // types, dims
        std::map<std::string, std::string> kinds;
        std::vector<std::string> order;
        for (const Kernel *k : ks) {
            std::cout << "| `" << k->name << "` | " << k->params << " | " << k->builds << " | "
                      << join(argument_names(*k), ", ") << " |\n";
            for (int i = 0; i < k->meta->num_arguments; i++) {
                const halide_filter_argument_t &a = k->meta->arguments[i];
                const std::string n = arg_name(a);
                if (!kinds.count(n)) order.push_back(n);
                kinds[n] = kind_name(a.kind);
                args[n].first.insert(type_name(a.type));
                args[n].second.insert(std::to_string(a.dimensions));
            }
        }
        std::cout << "\n| argument | kind | type | dims | shape, layout |\n|---|---|---|---|---|\n";
        for (const std::string &a : order) {
            std::vector<std::string> t(args[a].first.begin(), args[a].first.end());
            std::vector<std::string> d(args[a].second.begin(), args[a].second.end());
            std::cout << "| `" << a << "` | " << kinds[a] << " | " << join(t, " or ") << " | " << join(d, " or ")
                      << " | |\n";
        }
        std::cout << "\n";
    }
}

}  // namespace

int main(int argc, char **argv) {
    if (argc >= 3 && !std::strcmp(argv[1], "--check")) return check(argv[2]);
    if (argc >= 2 && !std::strcmp(argv[1], "--print")) {
        print(argc >= 3 ? argv[2] : "");
        return 0;
    }
    std::cerr << "usage: check_kernel_doc --check docs/kernels.md | --print [generator]\n";
    return 2;
}
