#include "fault.h"

#include <HalideRuntime.h>

#include <atomic>
#include <string>
#include <mutex>

namespace halformer {
namespace {

std::atomic<int> g_armed{0};
std::mutex g_mu;
int g_countdown[(int)Fault::Count] = {-1, -1, -1, -1, -1};

}  // namespace

void inject_fault(Fault f, int skip) {
    std::lock_guard<std::mutex> lock(g_mu);
    if (g_countdown[(int)f] < 0) g_armed++;
    g_countdown[(int)f] = skip;
}

void clear_faults() {
    std::lock_guard<std::mutex> lock(g_mu);
    for (int &c : g_countdown) c = -1;
    g_armed = 0;
}

bool fault_now(Fault f) {
    if (g_armed.load(std::memory_order_relaxed) == 0) return false;
    std::lock_guard<std::mutex> lock(g_mu);
    int &c = g_countdown[(int)f];
    if (c < 0) return false;
    if (c-- > 0) return false;
    g_armed--;
    return true;
}

int injected(const char *what, int code) {
    halide_error(nullptr, (std::string("injected failure: ") + what).c_str());
    return code;
}

}  // namespace halformer
