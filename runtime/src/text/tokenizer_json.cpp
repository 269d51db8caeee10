// tokenizer.json's pipeline (tokenizer_json.h): the added tokens, then the
// normalizer, pre-tokenizer, model and decoder that tokenizer_json_steps.cpp
// and tokenizer_json_models.cpp read.
#include "tokenizer_json.h"

#include "added_tokens.h"
#include "byte_level_bpe_internal.h"
#include "tokenizer_json_internal.h"

#include "halformer/error.h"
#include "halformer/files.h"
#include "halformer/tokenizer.h"

#include <unordered_map>

namespace halformer::text {

struct TokenizerJson::Impl {
    std::string what;
    tj::Normalizer normalizer;
    tj::PreTokenizer pre_tokenizer;
    tj::Decoder decoder;
    std::unique_ptr<tj::Model> model;
    std::vector<AddedToken> added;
    std::unordered_map<std::string, int32_t> added_ids;
    enum Kind : uint8_t { None, Vocab, Added, Special };
    std::vector<std::string> tokens;  // id → token, the model's and the added ones
    std::vector<uint8_t> kind;
    AddedTokenMatcher raw, normalized;
    std::vector<int32_t> prefix, suffix;

    void read_added(const json::Value &root);
    std::vector<int32_t> run(const std::string &utf8) const;
};

namespace {

json::Value read_tokenizer_json(const std::string &path) {
    if (!files::exists(path)) throw Error(path + ": no such file");
    return json::parse(files::read_text(path), path);
}

}  // namespace

void TokenizerJson::Impl::read_added(const json::Value &root) {
    const std::string at = what + ": added_tokens";
    if (const json::Value *list = json::member(root, "added_tokens")) {
        if (!list->is_array()) throw Error(at + " is " + json::kind_name(list->kind) + ", expected an array");
        for (size_t i = 0; i < list->array.size(); i++) {
            const json::Value &e = list->array[i];
            const std::string where = at + "[" + std::to_string(i) + "]";
            if (!e.is_object()) throw Error(where + " is " + json::kind_name(e.kind) + ", expected an object");
            AddedToken t;
            t.content = tj::get_string(e, "content", "", where);
            t.id = (int32_t)tj::get_int(e, "id", -1, 0, tj::kMaxId - 1, where);
            if (t.id < 0) throw Error(where + " has no \"id\"");
            t.special = tj::get_bool(e, "special", false, where);
            t.lstrip = tj::get_bool(e, "lstrip", false, where);
            t.rstrip = tj::get_bool(e, "rstrip", false, where);
            t.single_word = tj::get_bool(e, "single_word", false, where);
            t.normalized = tj::get_bool(e, "normalized", !t.special, where);
            const std::string name = where + " " + json::quote(t.content);
            if (t.content.empty()) throw Error(where + ": the content is empty");
            if (utf8_error_offset(t.content) >= 0) throw Error(where + ": the content is not UTF-8");
            auto in_vocab = model->vocab.find(t.content);
            if (in_vocab != model->vocab.end() && in_vocab->second != t.id) {
                throw Error(name + " has id " + std::to_string(t.id) + ", but the model's vocabulary gives it id " +
                            std::to_string(in_vocab->second));
            }
            if ((size_t)t.id >= tokens.size()) {
                tokens.resize(t.id + 1);
                kind.resize(t.id + 1, None);
            }
            if (kind[t.id] >= Added) {
                throw Error(name + " has id " + std::to_string(t.id) + ", as " + json::quote(tokens[t.id]) + " does");
            }
            if (kind[t.id] == Vocab && tokens[t.id] != t.content) {
                throw Error(name + " has id " + std::to_string(t.id) + ", which the model's vocabulary gives to " +
                            json::quote(tokens[t.id]));
            }
            if (!added_ids.emplace(t.content, t.id).second) throw Error(name + " is listed twice");
            tokens[t.id] = t.content;
            kind[t.id] = t.special ? Special : Added;
            (t.normalized ? normalized : raw).insert(t.content, (int32_t)added.size());
            added.push_back(std::move(t));
        }
    }
}

namespace {
// Every string in v (keys too) is UTF-8, or an Error naming where (the
// member path from the root) it is not.
void check_json_utf8(const json::Value &v, const std::string &what, const std::string &path) {
    if (v.is_string() && utf8_error_offset(v.string) >= 0) throw Error(what + ": " + path + " is not UTF-8");
    for (size_t i = 0; i < v.array.size(); i++) check_json_utf8(v.array[i], what, path + "[" + std::to_string(i) + "]");
    for (const auto &kv : v.object) {
        if (utf8_error_offset(kv.first) >= 0) throw Error(what + ": a key in " + (path.empty() ? "the root" : path) + " is not UTF-8");
        check_json_utf8(kv.second, what, (path.empty() ? "" : path + ".") + kv.first);
    }
}
}  // namespace

TokenizerJson TokenizerJson::load(const std::string &path) { return from_json(read_tokenizer_json(path), path); }

TokenizerJson TokenizerJson::from_json(const json::Value &root, const std::string &what) {
    if (!root.is_object()) throw Error(what + ": expected an object, found " + json::kind_name(root.kind));
    check_json_utf8(root, what, "");
    auto impl = std::make_shared<Impl>();
    impl->what = what;
    const json::Value *model = json::member(root, "model");
    if (!model) throw Error(what + ": no \"model\"");
    impl->model = tj::read_model(*model, what + ": model");
    impl->tokens = impl->model->tokens;
    impl->kind.assign(impl->tokens.size(), Impl::None);
    for (size_t i = 0; i < impl->kind.size(); i++) {
        if (impl->model->has[i]) impl->kind[i] = Impl::Vocab;
    }
    impl->read_added(root);
    if (impl->tokens.empty()) throw Error(what + ": the vocabulary is empty");
    auto part = [&](const char *key) -> const json::Value & {
        static const json::Value null;
        const json::Value *v = root.find(key);
        return v ? *v : null;
    };
    impl->normalizer = tj::read_normalizer(part("normalizer"), what + ": normalizer");
    impl->pre_tokenizer = tj::read_pre_tokenizer(part("pre_tokenizer"), what + ": pre_tokenizer");
    impl->decoder = tj::read_decoder(part("decoder"), what + ": decoder");
    const Impl &self = *impl;
    tj::read_post_processor(
        part("post_processor"), what + ": post_processor",
        [&self](const std::string &t) {
            auto a = self.added_ids.find(t);
            if (a != self.added_ids.end()) return a->second;
            auto v = self.model->vocab.find(t);
            return v == self.model->vocab.end() ? -1 : v->second;
        },
        impl->prefix, impl->suffix);
    return TokenizerJson(std::move(impl));
}

std::vector<int32_t> TokenizerJson::Impl::run(const std::string &utf8) const {
    bpe::check_utf8(utf8);
    std::vector<int32_t> ids;
    std::vector<std::pair<std::string, int32_t>> raw_parts, parts;
    raw.split(utf8, added, raw_parts);
    bool first = true;  // the next stretch starts the input
    for (auto &r : raw_parts) {
        if (r.second >= 0) {
            ids.push_back(r.second);
            first = false;
            continue;
        }
        parts.clear();
        normalized.split(normalizer ? normalizer(r.first) : r.first, added, parts);
        for (auto &p : parts) {
            if (p.second >= 0) {
                ids.push_back(p.second);
                first = false;
                continue;
            }
            std::vector<tj::Piece> words{{std::move(p.first), first}};
            first = false;
            if (pre_tokenizer) pre_tokenizer(words);
            for (const tj::Piece &w : words) {
                if (!w.text.empty()) model->tokenize(w.text, ids);
            }
        }
    }
    return ids;
}

std::vector<int32_t> TokenizerJson::encode(const std::string &utf8) const { return impl_->run(utf8); }

std::vector<std::string> TokenizerJson::pieces(const std::string &utf8) const {
    std::vector<std::string> out;
    for (int32_t id : impl_->run(utf8)) out.push_back(impl_->tokens[id]);
    return out;
}

std::string TokenizerJson::decode(const std::vector<int32_t> &ids, bool skip_special) const {
    const Impl &m = *impl_;
    std::vector<std::string> tokens;
    tokens.reserve(ids.size());
    for (int32_t id : ids) {
        if (id < 0 || (size_t)id >= m.tokens.size() || m.kind[id] == Impl::None) {
            throw Error("token id " + std::to_string(id) +
                        (id < 0 || (size_t)id >= m.tokens.size() ? " is outside" : " has no token in") +
                        " the vocabulary of " + std::to_string(m.tokens.size()) + " (" + m.what + ")");
        }
        if (skip_special && m.kind[id] == Impl::Special) continue;
        tokens.push_back(m.tokens[id]);
    }
    if (m.decoder) m.decoder(tokens);
    std::string out;
    for (size_t i = 0; i < tokens.size(); i++) {
        if (i && !m.decoder) out += ' ';
        out += tokens[i];
    }
    return out;
}

int TokenizerJson::vocab_size() const { return (int)impl_->tokens.size(); }

int32_t TokenizerJson::id_of(const std::string &token) const {
    auto a = impl_->added_ids.find(token);
    if (a != impl_->added_ids.end()) return a->second;
    auto v = impl_->model->vocab.find(token);
    return v == impl_->model->vocab.end() ? -1 : v->second;
}

const std::vector<AddedToken> &TokenizerJson::added_tokens() const { return impl_->added; }
const std::vector<int32_t> &TokenizerJson::template_prefix() const { return impl_->prefix; }
const std::vector<int32_t> &TokenizerJson::template_suffix() const { return impl_->suffix; }
int32_t TokenizerJson::unk_id() const { return impl_->model->unk; }
const std::string &TokenizerJson::model_type() const { return impl_->model->type; }

}  // namespace halformer::text
