// halformer::files: the few file-system steps the runtime, the commands and
// the tuner share. Every failure is a halformer::Error naming the path.
#pragma once

#include <functional>
#include <string>

namespace halformer::files {

bool exists(const std::string &path);
// True for a directory with no entries; false for anything else.
bool is_empty_dir(const std::string &path);
// mkdir -p: creates path and its missing parents (0755).
void make_dirs(const std::string &path);
std::string read_text(const std::string &path);

// Writes path through a temporary file beside it, then moves it into place,
// so a reader never sees half a file. write(tmp) writes the temporary file;
// if it throws, the temporary file is removed and path is untouched. With
// replace false an existing path is an Error, and so is one that appears
// while writing: nothing the user has is overwritten.
void write_atomic(const std::string &path, const std::function<void(const std::string &tmp)> &write,
                  bool replace = true);
void write_text(const std::string &path, const std::string &text, bool replace = true);

}  // namespace halformer::files
