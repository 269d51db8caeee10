// The command line, parsed by hand: each argument in turn, the first bad one
// reported (with the usage) and the program ended with status 2. Values are
// taken as given, even empty or starting with '-' (the tuner passes
// `--weights ''` to its workers); `--name=value` is no form it takes.
// (CLI11, as runtime/cli/ parses, would take --name=value and check the
// values before reporting an unknown argument: other errors, other messages.)
#include "options.h"

#include <cstdio>
#include <cstdlib>
#include <sstream>

namespace tune {

namespace {

double parse_duration(const std::string &s) {
    char *end = nullptr;
    double v = std::strtod(s.c_str(), &end);
    std::string unit = end ? end : "";
    if (end == s.c_str() || v <= 0) usage("--budget wants a positive duration such as 90s, 20m or 1h, not '" + s + "'");
    if (unit == "" || unit == "s") return v;
    if (unit == "m") return v * 60;
    if (unit == "h") return v * 3600;
    usage("--budget: unknown unit '" + unit + "' (s, m or h)");
}

int parse_int(const std::string &flag, const std::string &v, int lo) {
    char *end = nullptr;
    long x = std::strtol(v.c_str(), &end, 10);
    if (v.empty() || *end || x < lo || x > 1 << 20) usage(flag + " wants an integer >= " + std::to_string(lo) + ", not '" + v + "'");
    return (int)x;
}

void add_ops(Options &o, const std::string &list) {
    std::stringstream ss(list);
    for (std::string op; std::getline(ss, op, ',');)
        if (!op.empty()) o.ops.push_back(op);
}

}  // namespace

[[noreturn]] void usage(const std::string &msg) {
    if (!msg.empty()) std::fprintf(stderr, "halformer tune: %s\n\n", msg.c_str());
    std::fprintf(stderr,
        "usage: halformer tune [--target sapphirerapids|avx512|avx2|sse41|host|cuda|opencl]\n"
        "                      [--config base|MODEL_DIR] [--ops linear,attention,...]\n"
        "                      [--budget 20m] [--resume] [--force] [--no-adams] [--adams-batch 6]\n"
        "                      [--adams-rounds N]\n"
        "                      [--rows 128] [--cache-len 128] [--decode-rows 4]\n"
        "                      [--out DIR] [--work DIR] [--threads N]\n"
        "       halformer tune --check-records   (the build applies its records?)\n"
        "       halformer tune --list-kernels    (the kernels the tasks' records cover)\n"
        "       halformer tune --target cuda --launch-only [--ops ...]\n"
        "                                        (every GPU candidate compiled and launched once)\n"
        "       halformer tune --ops TASK --try knob=value,...   (one point: checked, timed)\n"
        "Searches each op's schedule on this machine at the model's shapes and\n"
        "writes DIR/record.json (default: this CPU's record of the target in the\n"
        "source tree, schedules/tuned/<target>[-<vendor>-<family>-<model>]/),\n"
        "report.md and tuning.png. Rebuild to apply the record: its kernel set\n"
        "runs on CPUs of this vendor, family and model. --target cuda or opencl\n"
        "searches the GPU schedules' knobs on this machine's GPU instead\n"
        "(schedules/tuned/cuda/: the build's CUDA kernels, on any GPU).\n");
    std::exit(2);
}

Options parse_options(int argc, char **argv) {
    Options o;
    for (int i = 1; i < argc; i++) o.argv.push_back(argv[i]);
    for (int i = 1; i < argc; i++) {
        std::string a = argv[i];
        auto next = [&]() -> std::string {
            if (i + 1 >= argc) usage(a + " needs a value");
            return argv[++i];
        };
        if (a == "--target") o.target = next();
        else if (a == "--config") o.config = next();
        else if (a == "--ops") add_ops(o, next());
        else if (a == "--budget") o.budget_s = parse_duration(next());
        else if (a == "--resume") o.resume = true;
        else if (a == "--force") o.force = true;
        else if (a == "--no-adams") o.adams = false;
        else if (a == "--adams-batch") o.adams_batch = parse_int(a, next(), 1);
        else if (a == "--adams-rounds") o.adams_rounds = parse_int(a, next(), 1);
        else if (a == "--check-records") o.check_records = true;
        else if (a == "--list-kernels") o.list_kernels = true;
        else if (a == "--launch-only") o.launch_only = true;
        else if (a == "--try") o.try_point = next();
        else if (a == "--out") o.out_dir = next();
        else if (a == "--work") o.work_dir = next();
        else if (a == "--threads") o.threads = parse_int(a, next(), 1);
        else if (a == "--rows") o.workload.prefill_rows = parse_int(a, next(), 1);
        else if (a == "--cache-len") o.workload.cache_len = parse_int(a, next(), 1);
        else if (a == "--decode-rows") o.workload.decode_rows = parse_int(a, next(), 1);
        else if (a == "--worker") o.worker = next();
        else if (a == "--task") o.task = parse_int(a, next(), 0);
        else if (a == "--seed") o.seed = parse_int(a, next(), 0);
        else if (a == "--pipeline-id") o.pipeline_id = parse_int(a, next(), 0);
        else if (a == "--beam") o.beam = parse_int(a, next(), 1);
        else if (a == "--dropout") o.dropout = parse_int(a, next(), 0);
        else if (a == "--weights") o.weights = next();
        else if (a == "--sample-out") o.sample_out = next();
        else if (a == "-h" || a == "--help") usage("");
        else if (a == "--device") {
            usage("--device: halformer tune tunes the CPU kernels (--target); GPU schedules are not "
                  "searched yet (see --target cuda)");
        } else usage("unknown argument '" + a + "'");
    }
    return o;
}

}  // namespace tune
