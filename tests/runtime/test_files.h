// Whole files as strings, and what the suites that copy a fixture and
// break it share: a model.safetensors rewritten with an edit, and the load
// that must fail with a message naming the problem.
#pragma once

#include "halformer/device.h"
#include "halformer/json.h"
#include "halformer/model.h"
#include "halformer/safetensors.h"

#include <gtest/gtest.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <initializer_list>
#include <sstream>
#include <string>
#include <utility>
#include <vector>

#include <unistd.h>

namespace test_files {

// The device under test: HALFORMER_DEVICE=cpu (default), opencl or cuda
// (ctest runs the runtime suite once per device; tests/runtime/CMakeLists.txt).
inline halformer::Device test_device() {
    const char *e = std::getenv("HALFORMER_DEVICE");
    return halformer::parse_device(e && *e ? e : "cpu");
}

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

// Model::load(dir) must throw an Error whose message contains every piece.
inline void expect_load_error(const std::string &dir, std::initializer_list<const char *> pieces) {
    try {
        halformer::Model::load(dir);
        ADD_FAILURE() << "loaded without an error";
    } catch (const halformer::Error &e) {
        for (const char *p : pieces) EXPECT_NE(std::string(e.what()).find(p), std::string::npos) << e.what();
    }
}

// Rewrites a safetensors file (as F32; tensors of other dtypes dropped)
// with `edit` applied to its tensor list.
template <typename F>
void rewrite_safetensors(const std::string &path, F edit) {
    using namespace halformer;
    std::vector<std::pair<std::string, std::vector<float>>> data;
    std::vector<std::vector<int64_t>> shapes;
    {
        SafeTensors f(path, true);
        for (auto &t : f.tensors()) {
            if (t.dtype == DType::Other) continue;
            const float *p = f.f32(t);
            data.push_back({t.name, std::vector<float>(p, p + t.numel())});
            shapes.push_back(t.shape);
        }
    }
    std::vector<TensorRef> refs;
    for (size_t k = 0; k < data.size(); k++) refs.push_back({data[k].first, shapes[k], data[k].second.data()});
    edit(refs);
    write_safetensors(path, refs);
}

// A Hugging Face fixture's directory (tests/fixtures/hf/NAME) and its
// golden.json.
inline std::string hf_fixture(const std::string &name) { return std::string(HALFORMER_FIXTURES) + "/hf/" + name; }
inline halformer::json::Value hf_golden(const std::string &name) {
    return halformer::json::parse(read(hf_fixture(name) + "/golden.json"), name + "/golden.json");
}

// A scratch copy of a fixture directory (one per test and process), to
// edit or break; removed after the test.
class FixtureCopy : public testing::Test {
protected:
    void use(const std::string &name) { use_dir(hf_fixture(name)); }
    void use_dir(const std::string &from) {
        namespace fs = std::filesystem;
        dir = (fs::temp_directory_path() / ("halformer_copy_" + std::to_string(::getpid()) + "_" +
                                             testing::UnitTest::GetInstance()->current_test_info()->name()))
                  .string();
        fs::remove_all(dir);
        fs::copy(from, dir, fs::copy_options::recursive);
    }
    void TearDown() override {
        if (!dir.empty()) std::filesystem::remove_all(dir);
    }
    // The first `from` in the copy's `file` replaced by `to` (a failure
    // where the file has no `from`).
    void edit(const std::string &file, const std::string &from, const std::string &to) {
        std::string s = read(dir + "/" + file);
        const size_t k = s.find(from);
        ASSERT_NE(k, std::string::npos) << "no '" << from << "' in " << file;
        s.replace(k, from.size(), to);
        write(dir + "/" + file, s);
    }
    void expect_error(std::initializer_list<const char *> pieces) { expect_load_error(dir, pieces); }
    std::string dir;
};

}  // namespace test_files
