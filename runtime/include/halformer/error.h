// halformer::Error: every problem with a model, its files or its inputs is
// reported as one of these, with a message that names the problem (the file,
// the tensor and its expected shape, the config field, the token and its
// position). Kernel failures are halformer::KernelError (kernel_error.h).
#pragma once

#include <stdexcept>
#include <string>

namespace halformer {

class Error : public std::runtime_error {
public:
    explicit Error(const std::string &msg) : std::runtime_error(msg) {}
};

}  // namespace halformer
