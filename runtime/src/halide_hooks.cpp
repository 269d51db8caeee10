// Hooks into the Halide runtime that every kernel shares:
//  * variant selection: a custom halide_can_use_target_features that answers
//    "no" for any feature above the limit, then defers to Halide's own CPU
//    detection;
//  * errors: Halide's default handler prints and aborts the process; ours
//    keeps the message (per thread) so the caller gets the kernel's nonzero
//    return code and a message to put in an exception.
#include "halformer/build_info.h"
#include "halformer/isa.h"
#include "halformer/kernel_error.h"

#include <HalideRuntime.h>

#include <algorithm>
#include <atomic>
#include <mutex>
#include <string>
#include <cstdlib>
#include <stdexcept>

namespace halformer {
namespace {

constexpr int kFeatureWords = (halide_target_feature_end + 63) / 64;

bool has(const uint64_t *features, halide_target_feature_t f) {
    return (features[f / 64] >> (f % 64)) & 1;
}

// The lowest variant that needs feature f, or -1 if f does not grade variants.
int variant_of(halide_target_feature_t f) {
    switch (f) {
    case halide_target_feature_avx:
    case halide_target_feature_avx2:
    case halide_target_feature_fma:
    case halide_target_feature_f16c:
        return (int)Isa::AVX2;
    case halide_target_feature_avx512:
    case halide_target_feature_avx512_skylake:
    case halide_target_feature_avx512_knl:
        return (int)Isa::AVX512;
    case halide_target_feature_avx512_cannonlake:
    case halide_target_feature_avx512_sapphirerapids:
        return (int)Isa::SapphireRapids;
    default:
        return -1;
    }
}

}  // namespace

int cuda_capability();  // device.cpp

namespace {

std::atomic<int> g_limit{-1};  // -1: not yet initialised
// Each kernel's wrapper asks once, on its first call, and keeps the answer.
std::atomic<bool> g_asked{false};

// The marker features of tuned records' kernel sets, in the order
// schedules/tuned.h and cmake/HalformerTuned.cmake give them: features x86
// code never uses, so an x86 variant that has one is a record's.
constexpr halide_target_feature_t kMarkers[] = {
    halide_target_feature_arm_dot_prod, halide_target_feature_arm_fp16, halide_target_feature_armv81a,
    halide_target_feature_cl_doubles,   halide_target_feature_cl_half,  halide_target_feature_cl_atomic64};

int limited_can_use(int count, const uint64_t *features) {
    if (has(features, halide_target_feature_cuda_capability86) && cuda_capability() < 86) return 0;
    g_asked.store(true);
    const int limit = (int)isa_limit();
    int isa = (int)Isa::SSE41;
    for (int f = 0; f < count * 64 && f < halide_target_feature_end; f++) {
        if (!has(features, (halide_target_feature_t)f)) continue;
        const int v = variant_of((halide_target_feature_t)f);
        if (v > limit) return 0;
        isa = std::max(isa, v);
    }
    // A tuned record's variant (x86: it has sse41 and a marker) runs only on
    // the record's microarchitecture; the marker itself is no CPU feature.
#if defined(__x86_64__)
    // (Asked only where the CPU runs the variant itself.)
    if (count >= kFeatureWords && has(features, halide_target_feature_sse41)) {
        for (int m = 0; m < (int)(sizeof(kMarkers) / sizeof(kMarkers[0])); m++) {
            if (!has(features, kMarkers[m])) continue;
            uint64_t plain[kFeatureWords];
            std::copy(features, features + kFeatureWords, plain);
            plain[kMarkers[m] / 64] &= ~(uint64_t(1) << (kMarkers[m] % 64));
            if (!halide_default_can_use_target_features(kFeatureWords, plain)) return 0;
            return tuned_variant_runs_here((Isa)isa, m) ? 1 : 0;
        }
    }
#endif
    return halide_default_can_use_target_features(count, features);
}

// Kernel error messages go to the thread whose kernel call failed. Halide
// raises an error in the thread that hits it: for a parallel loop, one of
// the thread pool's workers. So every parallel loop goes through par_for
// below, which runs its tasks with t_slot pointing at the calling thread's
// message (nested loops inherit it); keep_error writes there, under a lock
// (two tasks of one call may fail at once).
thread_local std::string t_last_error;
thread_local std::string *t_slot = nullptr;
std::mutex g_error_mu;

void keep_error(void *, const char *msg) {
    std::string m = msg ? msg : "";
    while (!m.empty() && (m.back() == '\n' || m.back() == ' ')) m.pop_back();
    if (m.rfind("Error: ", 0) == 0) m = m.substr(7);
    std::lock_guard<std::mutex> lock(g_error_mu);
    std::string &slot = t_slot ? *t_slot : t_last_error;
    slot = m;
}

struct Routed {
    halide_task_t task;
    uint8_t *closure;
    std::string *slot;
};

int routed_task(void *user_context, int idx, uint8_t *closure) {
    const Routed *r = (const Routed *)closure;
    std::string *saved = t_slot;
    t_slot = r->slot;
    int rc = r->task(user_context, idx, r->closure);
    t_slot = saved;
    return rc;
}

int par_for(void *user_context, halide_task_t task, int min, int size, uint8_t *closure) {
    Routed r{task, closure, t_slot ? t_slot : &t_last_error};
    return halide_default_do_par_for(user_context, routed_task, min, size, (uint8_t *)&r);
}

struct Installer {
    Installer() {
        halide_set_custom_can_use_target_features(limited_can_use);
        halide_set_error_handler(keep_error);
        halide_set_custom_do_par_for(par_for);
    }
} installer;

void set_bits(uint64_t *words, std::initializer_list<halide_target_feature_t> fs) {
    for (auto f : fs) words[f / 64] |= uint64_t(1) << (f % 64);
}

}  // namespace

std::string last_kernel_error() {
    std::lock_guard<std::mutex> lock(g_error_mu);
    return t_last_error;
}

std::string take_kernel_error() {
    std::lock_guard<std::mutex> lock(g_error_mu);
    std::string m;
    m.swap(t_last_error);
    return m;
}

void check_kernel(int rc, const char *kernel) {
    std::string detail;
    {
        std::lock_guard<std::mutex> lock(g_error_mu);
        detail.swap(t_last_error);  // a message with rc == 0 (a warning) is dropped too
    }
    if (rc == 0) return;
    std::string msg = std::string("kernel ") + kernel + " failed (code " + std::to_string(rc) + ")";
    if (!detail.empty()) msg += ": " + detail;
    throw KernelError(msg, rc);
}

const std::vector<Isa> &all_isas() {
    static const std::vector<Isa> v = {Isa::SSE41, Isa::AVX2, Isa::AVX512, Isa::SapphireRapids};
    return v;
}

const char *isa_name(Isa isa) {
    switch (isa) {
    case Isa::SSE41: return "sse41";
    case Isa::AVX2: return "avx2";
    case Isa::AVX512: return "avx512";
    case Isa::SapphireRapids: return "sapphirerapids";
    }
    return "?";
}

Isa parse_isa(const std::string &name) {
    for (Isa i : all_isas()) {
        if (name == isa_name(i)) return i;
    }
    throw std::invalid_argument("unknown ISA variant '" + name +
                                "' (expected sse41, avx2, avx512 or sapphirerapids)");
}

bool cpu_supports(Isa isa) {
    uint64_t words[kFeatureWords] = {};
    set_bits(words, {halide_target_feature_sse41});
    if (isa >= Isa::AVX2) {
        set_bits(words, {halide_target_feature_avx, halide_target_feature_avx2,
                         halide_target_feature_fma, halide_target_feature_f16c});
    }
    if (isa >= Isa::AVX512) {
        set_bits(words, {halide_target_feature_avx512, halide_target_feature_avx512_skylake});
    }
    if (isa >= Isa::SapphireRapids) {
        set_bits(words, {halide_target_feature_avx512_cannonlake,
                         halide_target_feature_avx512_sapphirerapids});
    }
    return halide_default_can_use_target_features(kFeatureWords, words) != 0;
}

Isa isa_limit() {
    int l = g_limit.load();
    if (l < 0) {
        l = (int)Isa::SapphireRapids;
        if (const char *env = std::getenv("HALFORMER_ISA")) {
            if (*env) l = (int)parse_isa(env);
        }
        g_limit.store(l);
    }
    return (Isa)l;
}

void set_isa_limit(Isa limit) {
    if (g_asked.load() && limit != isa_limit()) {
        throw std::logic_error(
            "set_isa_limit must be called before the first kernel call: each kernel keeps "
            "the variant it chose on its first call (set HALFORMER_ISA in the environment "
            "to be sure)");
    }
    if (!cpu_supports(limit)) {
        throw std::runtime_error(std::string("this CPU cannot run the ") + isa_name(limit) +
                                 " kernel variant");
    }
    g_limit.store((int)limit);
}

Isa selected_isa() {
    const Isa limit = isa_limit();
    for (int i = (int)limit; i > 0; i--) {
        if (cpu_supports((Isa)i)) return (Isa)i;
    }
    return Isa::SSE41;
}

const char *running_variant() {
#if defined(__aarch64__)
    return "arm64";
#else
    return isa_name(selected_isa());
#endif
}

}  // namespace halformer
