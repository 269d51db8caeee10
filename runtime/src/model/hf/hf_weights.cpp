// A Hugging Face directory's weights under the parameter table's names
// (params.h: PyTorch nn.Transformer's). Each family is a table of rules, one
// per tensor of ours: which of the file's tensors it comes from and how —
// as it is, transposed (GPT-2's Conv1D keeps [in, out]), several stacked
// (separate Q, K and V projections → one [3D, D] in_proj), scaled, offset
// (Gemma's 1 + w), a slice read in place (one expert of a fused tensor), or
// its rows reordered and scaled (Phi-3's heads: families/phi3.cpp). What is
// made is made once, at load; the calls read it as any weight.
// The file's tensors that no rule reads are an Error naming them, unless
// transformers keeps them beside the weights (buffers, unused heads).
#include "family.h"
#include "hf.h"

#include "../model_weights.h"
#include "../params.h"
#include "halformer/error.h"
#include "halformer/files.h"

#include <algorithm>
#include <cmath>
#include <fstream>
#include <map>
#include <regex>
#include <set>
#include <sstream>
#include <sys/mman.h>

namespace halformer {
namespace hf {
namespace {

// A directory's safetensors files, in one or several shards.
class Files : public TensorFiles {
public:
    explicit Files(const std::string &dir) {
        const std::string single = dir + "/model.safetensors", index = dir + "/model.safetensors.index.json";
        if (files::exists(single)) {
            open(single);
        } else if (files::exists(index)) {
            for (const std::string &shard : shards(index)) open(dir + "/" + shard);
        } else if (files::exists(dir + "/pytorch_model.bin") || files::exists(dir + "/pytorch_model.bin.index.json")) {
            throw Error(dir + ": holds pytorch_model.bin but no model.safetensors: Halformer reads safetensors only. "
                              "Save the model with transformers' model.save_pretrained(dir, safe_serialization=True) "
                              "(the default since transformers 4.35)");
        } else {
            throw Error(dir + ": no model.safetensors (nor model.safetensors.index.json with its shards)");
        }
    }
    const std::vector<int64_t> *shape(const std::string &name) const override {
        const TensorInfo *t = find(name, nullptr);
        return t ? &t->shape : nullptr;
    }
    const float *f32(const std::string &name) override {
        SafeTensors *f = nullptr;
        const TensorInfo *t = find(name, &f);
        if (!t) throw Error("internal: no tensor '" + name + "' in " + where());
        return f->f32(*t);
    }
    std::vector<std::string> names() const override {
        std::vector<std::string> out;
        for (auto &f : files_)
            for (auto &t : f->tensors()) out.push_back(t.name);
        return out;
    }
    std::string where() const override { return files_.size() == 1 ? files_[0]->path() : dir_of_shards_; }

private:
    const TensorInfo *find(const std::string &name, SafeTensors **file) const {
        auto it = where_.find(name);
        if (it == where_.end()) return nullptr;
        if (file) *file = files_[it->second].get();
        return files_[it->second]->find(name);
    }
    std::vector<std::string> shards(const std::string &index) {
        dir_of_shards_ = index;
        std::ifstream in(index, std::ios::binary);
        std::stringstream ss;
        ss << in.rdbuf();
        json::Value root = json::parse(ss.str(), index);
        const json::Value *map = root.is_object() ? root.find("weight_map") : nullptr;
        if (!map || !map->is_object()) throw Error(index + ": no \"weight_map\" object");
        std::vector<std::string> out;
        for (auto &[name, file] : map->object) {
            if (!file.is_string() || file.string.find('/') != std::string::npos || file.string.empty() ||
                file.string[0] == '.') {
                throw Error(index + ": tensor '" + name + "' maps to no shard file name in this directory");
            }
            if (std::find(out.begin(), out.end(), file.string) == out.end()) out.push_back(file.string);
            expected_[name] = file.string;
        }
        if (out.empty()) throw Error(index + ": \"weight_map\" is empty");
        return out;
    }
    void open(const std::string &path) {
        files_.push_back(std::make_unique<SafeTensors>(path, true));
        const std::string base = path.substr(path.rfind('/') + 1);
        for (auto &t : files_.back()->tensors()) {
            if (where_.count(t.name)) throw Error(path + ": tensor '" + t.name + "' is in another shard too");
            auto e = expected_.find(t.name);
            if (!expected_.empty() && (e == expected_.end() || e->second != base)) {
                throw Error(path + ": tensor '" + t.name + "' is not where " + dir_of_shards_ + " puts it");
            }
            where_[t.name] = files_.size() - 1;
        }
        if (!expected_.empty() && files_.size() == count_shards()) {
            for (auto &[name, file] : expected_) {
                if (!where_.count(name)) throw Error(dir_of_shards_ + ": tensor '" + name + "' is missing from " + file);
            }
        }
    }
    size_t count_shards() const {
        std::set<std::string> s;
        for (auto &kv : expected_) s.insert(kv.second);
        return s.size();
    }

    std::vector<std::unique_ptr<SafeTensors>> files_;
    std::map<std::string, size_t> where_;
    std::map<std::string, std::string> expected_;
    std::string dir_of_shards_;
};

std::string replace_all(std::string s, const std::string &from, const std::string &to) {
    for (size_t k = s.find(from); k != std::string::npos; k = s.find(from, k + to.size())) s.replace(k, from.size(), to);
    return s;
}

class HfSource : public TensorSource {
public:
    HfSource(std::unique_ptr<TensorFiles> files, const Family &family, Rules rules)
        : files_(std::move(files)), unused_(family.unused), rules_(std::move(rules)) {}

    bool has(const std::string &name) const override {
        const Rule *r = rule(name);
        if (!r) return false;
        for (auto &t : r->theirs)
            if (!files_->shape(subst(name, t))) return false;
        return true;
    }
    std::vector<int64_t> shape(const std::string &name) const override {
        const Rule &r = *rule(name);
        std::vector<int64_t> s = *files_->shape(subst(name, r.theirs[0]));
        switch (r.how) {
        case How::Same: break;
        case How::Transposed:
            if (s.size() != 2) bad_shape(subst(name, r.theirs[0]), s, "2 dimensions (Conv1D [in, out])");
            std::swap(s[0], s[1]);
            break;
        case How::Stacked:
            for (size_t k = 1; k < r.theirs.size(); k++) {
                auto sk = *files_->shape(subst(name, r.theirs[k]));
                if (sk.empty() || sk.size() != s.size() || !std::equal(sk.begin() + 1, sk.end(), s.begin() + 1)) {
                    bad_shape(subst(name, r.theirs[k]), sk, "the shape of '" + subst(name, r.theirs[0]) + "' " + shape_string(s));
                }
                s[0] += sk[0];
            }
            break;
        case How::Flat: s = {numel(s)}; break;
        case How::Scaled: break;
        case How::Offset: break;
        case How::Rows:
            if (s.empty() || (int64_t)r.rows.size() != s[0] ||
                (!r.row_factors.empty() && r.row_factors.size() != r.rows.size())) {
                bad_shape(subst(name, r.theirs[0]), s, std::to_string(r.rows.size()) + " rows (" + name +
                                                           " reorders them)");
            }
            break;
        case How::Slice:
            if (r.first < 0 || r.first + numel(r.shape) > numel(s)) {
                bad_shape(subst(name, r.theirs[0]), s, "at least " + std::to_string(r.first + numel(r.shape)) +
                                                           " values (" + name + " is a slice of it)");
            }
            s = r.shape;
            break;
        }
        return s;
    }
    ~HfSource() override {
        for (auto &[at, d] : deferred_) munmap(const_cast<float *>(at), d.bytes);
    }
    const float *data(const std::string &name) override {
        const float *d = values(name);
        given_[d] = {name, (size_t)numel(shape(name))};
        return d;
    }
    void defer_quantized() override { defer_ = true; }
    // A projection the file holds in Q8_0, when deferring: an address
    // reserved for its float32 values and nothing behind it (reading it
    // faults) until materialize(); the int8 packing takes the file's codes.
    const float *projection(const std::string &name) override {
        if (!defer_ || !quantized_copy(name)) return data(name);
        const size_t count = (size_t)numel(shape(name)), bytes = std::max<size_t>(count * sizeof(float), 1);
        void *at = mmap(nullptr, bytes, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
        if (at == MAP_FAILED) return data(name);
        const float *d = static_cast<const float *>(at);
        deferred_[d] = {name, bytes, false};
        given_[d] = {name, count};
        return d;
    }
    void materialize(const float *inside) override {
        std::lock_guard<std::mutex> lock(mu_);
        auto it = deferred_.upper_bound(inside);
        if (it == deferred_.begin()) return;
        --it;
        Deferred &d = it->second;
        if (d.done || (const char *)inside >= (const char *)it->first + d.bytes) return;
        float *to = const_cast<float *>(it->first);
        if (mprotect(to, d.bytes, PROT_READ | PROT_WRITE) != 0) {
            throw Error("cannot map the float32 values of " + origin(d.name) + " (" + std::to_string(d.bytes) + " bytes)");
        }
        const float *v = values(d.name);
        std::copy(v, v + d.bytes / sizeof(float), to);
        made_.erase(d.name);
        mprotect(to, d.bytes, PROT_READ);
        d.done = true;
    }
    void materialize_all() override {
        std::vector<const float *> all;
        for (auto &[at, d] : deferred_) all.push_back(at);
        for (const float *at : all) materialize(at);
    }
    std::vector<uint8_t> q8_0(const float *rows, int N, int K) override {
        return file_rows(rows, N, K, 34, [&](const std::string &key, int64_t row) { return files_->q8_0_row(key, row); });
    }
    std::vector<uint8_t> q4_0(const float *rows, int N, int K) override {
        return file_rows(rows, N, K, 18, [&](const std::string &key, int64_t row) { return files_->q4_0_row(key, row); });
    }
    std::vector<uint8_t> q4_1(const float *rows, int N, int K) override {
        return file_rows(rows, N, K, 20, [&](const std::string &key, int64_t row) { return files_->q4_1_row(key, row); });
    }
    // The N rows at `rows` as the file's blocks of `block_bytes` per 32
    // values, each row fetched by `row_of` (null: not so held): empty
    // unless every row is.
    template <typename RowOf>
    std::vector<uint8_t> file_rows(const float *rows, int N, int K, size_t block_bytes, RowOf row_of) {
        // The tensor `rows` lies in, and its first row there.
        auto it = given_.upper_bound(rows);
        if (it == given_.begin() || N <= 0 || K <= 0 || K % 32 != 0) return {};
        --it;
        const std::string &name = it->second.first;
        const size_t count = it->second.second;
        const size_t at = (size_t)(rows - it->first);
        if (at % (size_t)K != 0 || at + (size_t)N * K > count) return {};
        const std::vector<int64_t> s = shape(name);
        if (s.size() != 2 || s[1] != K) return {};
        const Rule &r = *rule(name);
        const int64_t first = (int64_t)(at / (size_t)K);
        // Each row's file tensor and row there; only the ways of reading a
        // tensor that keep the file's values as they are.
        auto source_row = [&](int64_t row, std::string &key) -> int64_t {
            key = subst(name, r.theirs[0]);
            switch (r.how) {
            case How::Same: return row;
            case How::Rows: return r.row_factors.empty() ? r.rows[(size_t)row] : -1;
            case How::Slice: {
                const auto *fs = files_->shape(key);
                return fs && fs->size() == 2 && (*fs)[1] == K && r.first % K == 0 ? r.first / K + row : -1;
            }
            case How::Stacked:
                for (auto &t : r.theirs) {
                    key = subst(name, t);
                    const int64_t part = (*files_->shape(key))[0];
                    if (row < part) return row;
                    row -= part;
                }
                return -1;
            default: return -1;
            }
        };
        const size_t row_bytes = (size_t)K / 32 * block_bytes;
        std::vector<uint8_t> out((size_t)N * row_bytes);
        std::string key;
        std::set<std::string> read_from;
        for (int i = 0; i < N; i++) {
            const int64_t from = source_row(first + i, key);
            const uint8_t *src = from < 0 ? nullptr : row_of(key, from);
            if (!src) return {};
            std::copy(src, src + row_bytes, out.begin() + (ptrdiff_t)(i * row_bytes));
            read_from.insert(key);
        }
        // (Packed from this copy: the file's pages need not stay resident.)
        for (const std::string &k : read_from) files_->evict(k);
        return out;
    }
    void release(const float *rows) override {
        auto it = given_.upper_bound(rows);
        if (it == given_.begin()) return;
        --it;
        if (rows >= it->first + it->second.second) return;
        const std::string &name = it->second.first;
        const Rule *r = rule(name);
        // Only values read where they lie in the file (not a copy made at load).
        if (!r || (r->how != How::Same && r->how != How::Slice && r->how != How::Flat)) return;
        files_->evict(subst(name, r->theirs[0]));
    }
    // Whether every value of `name` is one of the file's block-quantized
    // values (Q8_0, or a type transcoded to it), rows taken as they are
    // (q8_0() then gives them all).
    bool quantized_copy(const std::string &name) const {
        const Rule *r = rule(name);
        const std::vector<int64_t> s = shape(name);
        if (!r || s.size() != 2 || s[1] % 32 != 0) return false;
        if (r->how != How::Same && r->how != How::Stacked && !(r->how == How::Rows && r->row_factors.empty())) return false;
        for (auto &t : r->theirs)
            if (!files_->holds_q8_0(subst(name, t))) return false;
        return true;
    }
    const float *values(const std::string &name) {
        const Rule &r = *rule(name);
        const std::string key = subst(name, r.theirs[0]);
        if (r.how == How::Same || r.how == How::Flat) return read(key);
        if (r.how == How::Slice) {
            (void)shape(name);  // (checks the slice lies inside)
            return read(key) + r.first;
        }
        auto &made = made_[name];
        if (!made.empty()) return made.data();
        const std::vector<int64_t> s = shape(name);
        made.resize((size_t)numel(s));
        if (r.how == How::Scaled) {
            const float *src = read(key);
            for (size_t k = 0; k < made.size(); k++) made[k] = src[k] * r.factor;
        } else if (r.how == How::Offset) {  // Gemma's gains: the file holds w, the norm multiplies by 1 + w
            const float *src = read(key);
            for (size_t k = 0; k < made.size(); k++) made[k] = src[k] + r.factor;
        } else if (r.how == How::Rows) {  // row j ← row rows[j], once
            const float *src = read(key);
            const size_t width = made.size() / r.rows.size();
            for (size_t j = 0; j < r.rows.size(); j++) {
                const int64_t from = r.rows[j];
                if (from < 0 || from >= (int64_t)r.rows.size()) throw Error("internal: a row order past the rows of " + key);
                const float f = r.row_factors.empty() ? 1.0f : r.row_factors[j];
                for (size_t c = 0; c < width; c++) made[j * width + c] = src[(size_t)from * width + c] * f;
            }
        } else if (r.how == How::Transposed) {  // [in, out] → [out, in], once
            const float *src = read(key);
            const int64_t out = s[0], in = s[1];
            for (int64_t i = 0; i < in; i++)
                for (int64_t o = 0; o < out; o++) made[(size_t)(o * in + i)] = src[i * out + o];
        } else {  // Stacked: the parts' rows one after another
            size_t at = 0;
            for (auto &t : r.theirs) {
                const std::string part = subst(name, t);
                const size_t n = (size_t)numel(*files_->shape(part));
                std::copy(read(part), read(part) + n, made.begin() + (ptrdiff_t)at);
                at += n;
            }
        }
        return made.data();
    }
    // Ours for each rule whose tensors the file holds, and the file's own
    // name for every tensor that no rule reads and transformers would not
    // keep: bind() names those as unused.
    std::vector<std::string> names() const override {
        std::set<std::string> used;
        std::vector<std::string> out;
        for (auto &[name, ours] : used_by_) {
            used.insert(name);
            if (has(ours) && std::find(out.begin(), out.end(), ours) == out.end()) out.push_back(ours);
        }
        for (auto &n : files_->names()) {
            if (!used.count(n) && !std::regex_match(n, unused_) && !ignore_.count(n)) out.push_back(n);
        }
        return out;
    }
    std::string where() const override { return files_->where(); }
    std::string origin(const std::string &name) const override {
        const Rule *r = rule(name);
        if (!r) return "'" + name + "'";
        std::string out;
        for (auto &t : r->theirs) out += (out.empty() ? "'" : " + '") + files_->spelled(subst(name, t)) + "'";
        if (r->how == How::Transposed) out += " (transposed)";
        if (r->how == How::Scaled) out += " (scaled)";
        if (r->how == How::Offset) out += " (plus " + std::to_string(r->factor) + ")";
        if (r->how == How::Rows) out += r->row_factors.empty() ? " (rows reordered)" : " (rows reordered and scaled)";
        if (r->how == How::Slice) out += " (from value " + std::to_string(r->first) + ", " + shape_string(r->shape) + ")";
        return out;
    }

    // A tensor of the file that this model does not read.
    void ignore(const std::string &theirs) { ignore_.insert(theirs); }
    // Every tensor of ours a model of these layers may read: maps each of
    // the file's names it would use to ours (for names()).
    void expect(const std::vector<std::string> &ours) {
        for (auto &n : ours) {
            const Rule *r = rule(n);
            if (!r) continue;
            for (auto &t : r->theirs) used_by_[subst(n, t)] = n;
        }
    }

private:
    // What data() gave: each tensor's address, name and size (q8_0 finds
    // the tensor a projection's rows lie in).
    std::map<const float *, std::pair<std::string, size_t>> given_;
    // The projections whose float32 values wait for materialize().
    struct Deferred {
        std::string name;
        size_t bytes = 0;
        bool done = false;
    };
    bool defer_ = false;
    std::map<const float *, Deferred> deferred_;
    std::mutex mu_;

    // "decoder.layers.3.linear1.weight" → its rule and the layer "3".
    const Rule *rule(const std::string &name) const {
        auto it = rules_.find(generic(name));
        return it == rules_.end() ? nullptr : &it->second;
    }
    static std::string generic(const std::string &name) {
        static const std::regex layer(R"(\.layers\.(\d+)\.)");
        return std::regex_replace(name, layer, ".layers.{i}.");
    }
    static std::string layer_of(const std::string &name) {
        static const std::regex layer(R"(\.layers\.(\d+)\.)");
        std::smatch m;
        return std::regex_search(name, m, layer) ? m[1].str() : "";
    }
    static std::string subst(const std::string &ours, const std::string &theirs) {
        return replace_all(theirs, "{i}", layer_of(ours));
    }
    const float *read(const std::string &theirs) { return files_->f32(theirs); }
    [[noreturn]] void bad_shape(const std::string &t, const std::vector<int64_t> &s, const std::string &want) const {
        throw Error(where() + ": tensor '" + t + "' has shape " + shape_string(s) + ", expected " + want);
    }

    std::unique_ptr<TensorFiles> files_;
    std::regex unused_;
    Rules rules_;
    std::map<std::string, std::string> used_by_;
    std::set<std::string> ignore_;
    std::map<std::string, std::vector<float>> made_;
};

}  // namespace

std::unique_ptr<TensorSource> open_weights(std::unique_ptr<TensorFiles> files, Config &cfg, const json::Value &root,
                                           const std::string &what) {
    const Family *family = find_family(cfg.family);
    if (!family) throw Error(files->where() + ": internal: no weight names for model_type \"" + cfg.family + "\"");
    const TensorFiles &held = *files;
    const Fields fields{root, what};
    WeightRules w = family->weights(cfg, fields, [&](const std::string &name) { return held.shape(name) != nullptr; });
    auto src = std::make_unique<HfSource>(std::move(files), *family, std::move(w.rules));
    for (const std::string &name : w.ignore) src->ignore(name);
    std::vector<std::string> ours;
    for (const ParamSpec &s : param_specs(cfg)) ours.push_back(s.name);
    src->expect(ours);
    return src;
}

std::unique_ptr<TensorSource> open_weights(const std::string &dir, Config &cfg) {
    auto files = std::make_unique<Files>(dir);
    const std::string config_path = dir + "/config.json";
    std::ifstream in(config_path, std::ios::binary);
    std::stringstream text;
    text << in.rdbuf();
    const json::Value root = json::parse(text.str(), config_path);
    return open_weights(std::move(files), cfg, root, config_path);
}

}  // namespace hf
}  // namespace halformer
