// One scratch directory for a test binary's whole run (temp/<prefix>_<pid>),
// removed at the end; scratch() is its path.
#pragma once

#include <gtest/gtest.h>

#include <unistd.h>

#include <filesystem>
#include <string>

#ifndef HALFORMER_SCRATCH_PREFIX
#error "define HALFORMER_SCRATCH_PREFIX (the scratch directory's name before _<pid>) before including scratch.h"
#endif

namespace {

const std::string &scratch() {
    static const std::string dir = [] {
        namespace fs = std::filesystem;
        std::string d = (fs::temp_directory_path() / (HALFORMER_SCRATCH_PREFIX "_" + std::to_string(::getpid()))).string();
        fs::remove_all(d);
        fs::create_directories(d);
        return d;
    }();
    return dir;
}
class ScratchCleanup : public testing::Environment {
public:
    void TearDown() override { std::filesystem::remove_all(scratch()); }
};
const auto *const scratch_cleanup = testing::AddGlobalTestEnvironment(new ScratchCleanup);

}  // namespace
