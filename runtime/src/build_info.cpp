#include "halformer/build_info.h"

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <mutex>
#include <fstream>
#include <string>
#include <thread>

namespace halformer {

namespace {

struct TargetRow {
    const char *record, *target;
    int marker;
    const char *machine, *cpu, *date, *path;
    int kernels, schedules;
};
const TargetRow kTargets[] = {
#include "halformer_tuned_targets.inc"
    {nullptr, nullptr, -1, nullptr, nullptr, nullptr, nullptr, 0, 0}};

struct KernelRow {
    const char *record, *kernel, *params;
};
const KernelRow kKernels[] = {
#include "halformer_tuned_records.inc"
    {nullptr, nullptr, nullptr}};

// Kernels whose record carries an autoscheduled schedule (the schedules
// themselves are compiled into the kernels).
struct ScheduleRow {
    const char *record, *kernel;
};
const ScheduleRow kSchedules[] = {
#include "halformer_tuned_schedule_names.inc"
    {nullptr, nullptr}};

// "32K" / "1024K" / "32M" → KiB (0: unreadable).
int cache_kb(int index) {
    std::ifstream f("/sys/devices/system/cpu/cpu0/cache/index" + std::to_string(index) + "/size");
    std::string v;
    if (!(f >> v) || v.empty()) return 0;
    try {
        const int n = std::stoi(v);
        return v.back() == 'M' ? n * 1024 : n;
    } catch (const std::exception &) {
        return 0;
    }
}

std::string cpuinfo_field(const std::string &line) {
    const size_t c = line.find(':');
    const size_t v = c == std::string::npos ? c : line.find_first_not_of(" \t", c + 1);
    return v == std::string::npos ? "" : line.substr(v);
}

}  // namespace

std::string CpuInfo::key() const {
    return vendor + " family " + std::to_string(family) + " model " + std::to_string(model);
}

std::string CpuInfo::describe() const {
    return name + " (" + key() + "), " + std::to_string(threads) + " threads, L1d " + std::to_string(l1d_kb) +
           " KiB, L2 " + std::to_string(l2_kb) + " KiB, L3 " + std::to_string(l3_kb) + " KiB";
}

namespace {

// HALFORMER_CPU="<vendor> family <f> model <m>" into c (false: not that form).
bool parse_cpu_key(const std::string &text, CpuInfo &c) {
    char vendor[64] = {0};
    int f = 0, m = 0, used = 0;
    if (std::sscanf(text.c_str(), "%63s family %d model %d%n", vendor, &f, &m, &used) != 3 ||
        used != (int)text.size()) {
        return false;
    }
    c.vendor = vendor;
    c.family = f;
    c.model = m;
    return true;
}

}  // namespace

const CpuInfo &this_cpu() {
    static const CpuInfo cpu = [] {
        CpuInfo c;
        const char *fake = std::getenv("HALFORMER_CPU");
        if (fake && *fake) {
            if (!parse_cpu_key(fake, c)) {
                std::fprintf(stderr, "halformer: HALFORMER_CPU='%s' is not \"<vendor> family <n> model <n>\": "
                                     "ignored\n", fake);
            } else {
                c.name = "HALFORMER_CPU";
            }
        }
        std::ifstream in(c.vendor.empty() ? "/proc/cpuinfo" : "/dev/null");
        for (std::string line; std::getline(in, line);) {
            auto field = [&](const char *name) { return line.rfind(name, 0) == 0; };
            if (field("vendor_id") && c.vendor.empty()) c.vendor = cpuinfo_field(line);
            if (field("cpu family") && !c.family) c.family = std::atoi(cpuinfo_field(line).c_str());
            if (field("model name") && c.name.empty()) c.name = cpuinfo_field(line);
            if (field("model") && !field("model name") && !c.model) c.model = std::atoi(cpuinfo_field(line).c_str());
            if (line.empty() && !c.vendor.empty()) break;  // the first CPU's block
        }
        if (c.vendor.empty()) c.vendor = "unknown";
        if (c.name.empty()) c.name = "unknown CPU";
        c.threads = (int)std::thread::hardware_concurrency();
        // index0..3: L1d, L1i, L2, L3 on x86 Linux
        c.l1d_kb = cache_kb(0);
        c.l2_kb = cache_kb(2);
        c.l3_kb = cache_kb(3);
        return c;
    }();
    return cpu;
}

bool record_matches_cpu(const TunedRecord &r) { return !r.cpu.empty() && r.cpu == this_cpu().key(); }

std::string record_note(const TunedRecord *r) {
    if (r) {
        return "tuned record " + r->path + ", made on " + r->machine + " (" + r->cpu + ") " + r->date +
               ": its kernel set runs on this microarchitecture";
    }
    std::string others;
    for (const auto &x : tuned_records()) {
        if (x.target != isa_name(selected_isa())) continue;
        others += (others.empty() ? "" : ", ") + x.name + " (" + x.cpu + ")";
    }
    std::string s = "hand schedules (no tuned record of this variant was made on " + this_cpu().key() + ")";
    if (!others.empty()) s += "; records of this variant for other CPUs: " + others + " (`halformer tune` makes one for this CPU)";
    return s;
}

const std::vector<TunedRecord> &tuned_records() {
    static const std::vector<TunedRecord> records = [] {
        std::vector<TunedRecord> out;
        for (const TargetRow *t = kTargets; t->record; t++) {
            TunedRecord r;
            r.name = t->record;
            r.target = t->target;
            r.marker = t->marker;
            r.machine = t->machine;
            r.cpu = t->cpu;
            r.date = t->date;
            r.path = t->path;
            for (const KernelRow *k = kKernels; k->record; k++)
                if (std::strcmp(k->record, t->record) == 0) r.kernels.push_back({k->kernel, k->params});
            for (const ScheduleRow *k = kSchedules; k->record; k++)
                if (std::strcmp(k->record, t->record) == 0) r.kernels.push_back({k->kernel, "autoscheduled"});
            out.push_back(r);
        }
        return out;
    }();
    return records;
}

const TunedRecord *tuned_record(Isa isa) {
    for (const auto &r : tuned_records())
        if (r.target == isa_name(isa) && record_matches_cpu(r)) return &r;
    return nullptr;
}

namespace {
std::mutex g_choices_mu;
std::vector<KernelSetChoice> g_choices;
}  // namespace

bool tuned_variant_runs_here(Isa isa, int marker) {
    const TunedRecord *found = nullptr;
    for (const auto &r : tuned_records())
        if (r.target == isa_name(isa) && r.marker == marker) found = &r;
    const bool taken = found && record_matches_cpu(*found);
    std::lock_guard<std::mutex> lock(g_choices_mu);
    g_choices.push_back({found ? found->name : "?", taken});
    return taken;
}

std::vector<KernelSetChoice> kernel_set_choices() {
    std::lock_guard<std::mutex> lock(g_choices_mu);
    return g_choices;
}

}  // namespace halformer
