// The tuning journal, WORK/state.jsonl: one JSON line per measurement,
// appended as the search goes, so that a stopped run resumes (--resume)
// without measuring anything twice and with its time counted.
#pragma once

#include <cmath>
#include <fstream>
#include <string>
#include <vector>

namespace tune {

struct Entry {
    std::string task, kind, key;  // kind: hand | mullapudi2016 | adams2019 | adams-sample | confirm
    bool ok = false;
    std::string error;
    std::vector<double> ms;
    double score = INFINITY;
    double t = 0;  // tuning seconds spent when it finished
};

// The entry as one line of state.jsonl (no newline).
std::string entry_json(const Entry &e);

// The entries of a state.jsonl; a line cut short by a kill is skipped.
std::vector<Entry> load_state(const std::string &path);

class Journal {
public:
    // Reads the entries already in path (--resume).
    void load(const std::string &path) { entries_ = load_state(path); }
    // Appends every entry from now on to path.
    void open(const std::string &path) { out_.open(path, std::ios::app); }
    // The entry of this task, kind and key, or null when it was not measured.
    const Entry *find(const std::string &task, const std::string &kind, const std::string &key) const;
    void append(const Entry &e);
    const std::vector<Entry> &entries() const { return entries_; }

private:
    std::vector<Entry> entries_;
    std::ofstream out_;
};

}  // namespace tune
