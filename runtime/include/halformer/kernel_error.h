// Errors from generated kernels. A kernel returns nonzero on bad input (an
// out-of-range token id, a buffer smaller than the shapes require, ...);
// Halide's message for it is kept, per thread, instead of aborting.
#pragma once

#include <stdexcept>
#include <string>

namespace halformer {

class KernelError : public std::runtime_error {
public:
    KernelError(const std::string &msg, int code) : std::runtime_error(msg), code_(code) {}
    int code() const { return code_; }

private:
    int code_;
};

// The message of the last kernel error of this thread's calls ("" if none;
// an error raised in a thread-pool worker counts for the thread whose call
// ran the work). take_kernel_error() also clears it.
std::string last_kernel_error();
std::string take_kernel_error();
// Throws KernelError naming `kernel` and Halide's message if rc != 0.
void check_kernel(int rc, const char *kernel);

}  // namespace halformer
