#include "halformer/build_info.h"

#include <cstring>

namespace halformer {

namespace {

struct TargetRow {
    const char *target, *machine, *date, *path;
    int kernels, schedules;
};
const TargetRow kTargets[] = {
#include "halformer_tuned_targets.inc"
    {nullptr, nullptr, nullptr, nullptr, 0, 0}};

struct KernelRow {
    const char *target, *kernel, *params;
};
const KernelRow kKernels[] = {
#include "halformer_tuned_records.inc"
    {nullptr, nullptr, nullptr}};

// Kernels whose record carries an autoscheduled schedule (the schedules
// themselves are compiled into the kernels).
struct ScheduleRow {
    const char *target, *kernel;
};
const ScheduleRow kSchedules[] = {
#include "halformer_tuned_schedule_names.inc"
    {nullptr, nullptr}};

}  // namespace

const std::vector<TunedRecord> &tuned_records() {
    static const std::vector<TunedRecord> records = [] {
        std::vector<TunedRecord> out;
        for (const TargetRow *t = kTargets; t->target; t++) {
            TunedRecord r{t->target, t->machine, t->date, t->path, {}};
            for (const KernelRow *k = kKernels; k->target; k++)
                if (std::strcmp(k->target, t->target) == 0) r.kernels.push_back({k->kernel, k->params});
            for (const ScheduleRow *k = kSchedules; k->target; k++)
                if (std::strcmp(k->target, t->target) == 0) r.kernels.push_back({k->kernel, "autoscheduled"});
            out.push_back(r);
        }
        return out;
    }();
    return records;
}

const TunedRecord *tuned_record(Isa isa) {
    for (const auto &r : tuned_records())
        if (r.target == isa_name(isa)) return &r;
    return nullptr;
}

}  // namespace halformer
