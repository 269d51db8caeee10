#include "journal.h"

#include "halformer/json.h"

#include <cstdio>
#include <sstream>

namespace tune {

namespace {

Entry parse_entry(const halformer::json::Value &v) {
    Entry e;
    auto str = [&](const char *k) { auto *x = v.find(k); return x && x->is_string() ? x->string : std::string(); };
    e.task = str("task");
    e.kind = str("kind");
    e.key = str("key");
    e.error = str("error");
    if (auto *x = v.find("ok")) e.ok = x->boolean;
    if (auto *x = v.find("ms"))
        for (const auto &y : x->array) e.ms.push_back(y.number);
    if (auto *x = v.find("score")) e.score = x->number < 0 ? INFINITY : x->number;
    if (auto *x = v.find("t")) e.t = x->number;
    return e;
}

}  // namespace

std::string entry_json(const Entry &e) {
    using halformer::json::quote;
    std::ostringstream o;
    o << "{\"task\":" << quote(e.task) << ",\"kind\":" << quote(e.kind) << ",\"key\":" << quote(e.key)
      << ",\"ok\":" << (e.ok ? "true" : "false") << ",\"error\":" << quote(e.error) << ",\"ms\":[";
    for (size_t i = 0; i < e.ms.size(); i++) o << (i ? "," : "") << e.ms[i];
    o << "],\"score\":" << (std::isfinite(e.score) ? e.score : -1) << ",\"t\":" << e.t << "}";
    return o.str();
}

std::vector<Entry> load_state(const std::string &path) {
    std::vector<Entry> out;
    std::ifstream in(path);
    std::string line;
    int n = 0;
    while (std::getline(in, line)) {
        n++;
        if (line.empty()) continue;
        halformer::json::Value v;
        try {
            v = halformer::json::parse(line, path + " line " + std::to_string(n));
        } catch (const std::exception &) {
            // A line cut short by a kill: everything before it stands.
            std::fprintf(stderr, "halformer tune: %s line %d is incomplete; ignoring it\n", path.c_str(), n);
            continue;
        }
        out.push_back(parse_entry(v));
    }
    return out;
}

const Entry *Journal::find(const std::string &task, const std::string &kind, const std::string &key) const {
    for (const auto &e : entries_)
        if (e.task == task && e.kind == kind && e.key == key) return &e;
    return nullptr;
}

void Journal::append(const Entry &e) {
    entries_.push_back(e);
    out_ << entry_json(e) << "\n";
    out_.flush();
}

}  // namespace tune
