// halformer tune: runs halformer-tune, built next to this program, with the
// same arguments (it parses them: halformer tune --help). The tuner links
// libHalide to compile candidate schedules, which the runtime (and every
// application linking it) must not need.
#include "halformer/error.h"

#include <cerrno>
#include <cstring>
#include <string>
#include <unistd.h>
#include <vector>

namespace halformer {

int cmd_tune(int argc, char **argv) {
    char self[4096];
    ssize_t n = readlink("/proc/self/exe", self, sizeof(self) - 1);
    if (n <= 0) throw Error("tune: cannot find this program's path");
    std::string dir(self, (size_t)n);
    dir = dir.substr(0, dir.rfind('/'));
    std::string tuner = dir + "/halformer-tune";
    if (access(tuner.c_str(), X_OK) != 0)
        throw Error("tune: " + tuner + " is missing (it is built with the project: ./scripts/build.sh)");
    std::vector<char *> args{const_cast<char *>(tuner.c_str())};
    for (int i = 1; i < argc; i++) args.push_back(argv[i]);
    args.push_back(nullptr);
    execv(tuner.c_str(), args.data());
    throw Error("tune: cannot run " + tuner + ": " + std::strerror(errno));
}

}  // namespace halformer
