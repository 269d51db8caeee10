// Whole files as strings, for the suites that copy a fixture and break it.
#pragma once

#include <fstream>
#include <sstream>
#include <string>

namespace test_files {

inline std::string read(const std::string &path) {
    std::ifstream in(path, std::ios::binary);
    std::stringstream ss;
    ss << in.rdbuf();
    return ss.str();
}
inline void write(const std::string &path, const std::string &bytes) {
    std::ofstream out(path, std::ios::binary | std::ios::trunc);
    out << bytes;
}

}  // namespace test_files
