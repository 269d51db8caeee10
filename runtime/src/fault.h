// Internal: fault injection, for the tests that prove a failure in the middle
// of a call leaves the Model usable (tests/runtime/test_threads.cpp). Each
// point asks fault_now(); an armed point fails once, the (skip + 1)-th time
// it is passed. Costs one relaxed atomic load when nothing is armed.
#pragma once

namespace halformer {

enum class Fault {
    Kernel,       // a kernel returns an error (after it ran, its buffers bound)
    HostAlloc,    // a scratch buffer cannot be allocated
    DeviceAlloc,  // a device buffer (activations or weights) cannot be allocated
    Upload,       // weights cannot be copied to the device
    Bind,         // a kernel argument cannot be bound to device memory
    Count
};

void inject_fault(Fault f, int skip = 0);
void clear_faults();
bool fault_now(Fault f);
// At an injected failure: raises `what` as Halide's error message (so the
// exception names it) and returns `code`.
int injected(const char *what, int code);

}  // namespace halformer
