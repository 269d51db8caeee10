// libFuzzer target: a model's weights file (safetensors: 8-byte header
// length, JSON header, data). The input is the whole file. Parsing must end
// in a valid index or a halformer::Error, never a crash, a wild read (ASan)
// or undefined behaviour (UBSan); every tensor the index accepts must be
// readable as float32 within the file.
#include "halformer/error.h"
#include "halformer/safetensors.h"

#include <cstdint>
#include <cstdio>
#include <string>
#include <sys/mman.h>
#include <unistd.h>

extern "C" int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    // The loader reads a file: hand it one in memory (memfd), by path.
    static const int fd = memfd_create("halformer-fuzz", MFD_CLOEXEC);
    if (fd < 0) return 0;
    if (ftruncate(fd, 0) != 0 || pwrite(fd, data, size, 0) != (ssize_t)size) return 0;
    const std::string path = "/proc/self/fd/" + std::to_string(fd);
    try {
        halformer::SafeTensors st(path);
        // Every tensor the index accepts lies inside the file (checked here
        // too, not only by ASan: the bounds are the loader's to keep).
        uint64_t header = 0;
        for (int k = 7; k >= 0; k--) header = header << 8 | data[k];
        volatile float sink = 0;
        for (const auto &t : st.tensors()) {
            if (t.begin > t.end || 8 + header + t.end > size) __builtin_trap();
            const float *p = st.f32(t);
            const int64_t n = t.numel();
            if (n > 0) sink = sink + p[0] + p[n - 1];
            if (st.find(t.name) != &t) __builtin_trap();  // the index finds what it lists
        }
    } catch (const halformer::Error &) {
        // A clear error is the expected answer to a bad file.
    }
    return 0;
}
