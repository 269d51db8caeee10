#include "halformer/files.h"

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <sstream>
#include <sys/stat.h>
#include <unistd.h>
#include <dirent.h>

#include "halformer/error.h"

namespace halformer::files {

bool exists(const std::string &path) {
    struct stat st;
    return stat(path.c_str(), &st) == 0;
}

bool is_empty_dir(const std::string &path) {
    DIR *d = opendir(path.c_str());
    if (!d) return false;
    bool empty = true;
    while (const dirent *e = readdir(d)) {
        if (std::strcmp(e->d_name, ".") != 0 && std::strcmp(e->d_name, "..") != 0) {
            empty = false;
            break;
        }
    }
    closedir(d);
    return empty;
}

void make_dirs(const std::string &path) {
    std::string cur;
    std::stringstream ss(path);
    if (!path.empty() && path[0] == '/') cur = "/";
    for (std::string part; std::getline(ss, part, '/');) {
        if (part.empty()) continue;
        cur += part + "/";
        if (mkdir(cur.c_str(), 0755) == 0) continue;
        if (errno != EEXIST) throw Error(cur + ": cannot create directory: " + std::strerror(errno));
        struct stat st;
        if (stat(cur.c_str(), &st) != 0 || !S_ISDIR(st.st_mode)) {
            throw Error(cur.substr(0, cur.size() - 1) + " exists and is not a directory");
        }
    }
}

std::string read_text(const std::string &path) {
    std::ifstream f(path, std::ios::binary);
    if (!f) throw Error(path + ": cannot open");
    std::stringstream ss;
    ss << f.rdbuf();
    return ss.str();
}

void write_atomic(const std::string &path, const std::function<void(const std::string &tmp)> &write,
                  bool replace) {
    if (!replace && exists(path)) throw Error(path + " exists: not replacing it (--force replaces it)");
    const std::string tmp = path + ".tmp" + std::to_string(getpid());
    try {
        write(tmp);
    } catch (...) {
        std::remove(tmp.c_str());
        throw;
    }
    // link() fails with EEXIST rather than replacing; rename() replaces.
    const int rc = replace ? std::rename(tmp.c_str(), path.c_str()) : link(tmp.c_str(), path.c_str());
    const int err = errno;
    if (!replace || rc != 0) std::remove(tmp.c_str());
    if (rc != 0) {
        throw Error(path + (err == EEXIST ? " appeared meanwhile: not replacing it"
                                          : ": cannot write: " + std::string(std::strerror(err))));
    }
}

void write_text(const std::string &path, const std::string &text, bool replace) {
    write_atomic(
        path,
        [&](const std::string &tmp) {
            std::ofstream out(tmp, std::ios::binary | std::ios::trunc);
            out << text;
            out.close();
            if (!out) throw Error(path + ": cannot write");
        },
        replace);
}

}  // namespace halformer::files
