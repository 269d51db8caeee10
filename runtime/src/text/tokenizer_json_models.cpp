// tokenizer.json's models (tokenizer_json_internal.h), written from the
// tokenizers library's models/: BPE (model.rs merge_word, word.rs
// merge_all), Unigram (model.rs encode_optimized: SentencePiece's Viterbi),
// WordPiece and WordLevel.
#include "tokenizer_json_internal.h"

#include "byte_level_bpe_internal.h"

#include "halformer/error.h"

#include <cmath>
#include <limits>
#include <queue>

namespace halformer::text::tj {

void Model::add(const std::string &token, int32_t id) {
    if ((size_t)id >= tokens.size()) {
        tokens.resize(id + 1);
        has.resize(id + 1, 0);
    }
    if (has[id]) throw Error(what + ": " + json::quote(tokens[id]) + " and " + json::quote(token) + " both have id " + std::to_string(id));
    if (!vocab.emplace(token, id).second) throw Error(what + ": " + json::quote(token) + " is in the vocabulary twice");
    tokens[id] = token;
    has[id] = 1;
}

namespace {

size_t char_len(unsigned char c) { return c < 0x80 ? 1 : c < 0xE0 ? 2 : c < 0xF0 ? 3 : 4; }

int32_t read_id(const json::Value &v, const std::string &what) {
    if (!v.is_number() || v.number != std::floor(v.number) || v.number < 0 || v.number >= kMaxId) {
        throw Error(what + " is " + (v.is_number() ? std::to_string(v.number) : json::kind_name(v.kind)) +
                    ", expected an id from 0 to " + std::to_string(kMaxId - 1));
    }
    return (int32_t)v.number;
}

// vocab as {token: id}.
void read_vocab_object(Model &m, const json::Value &model, const std::string &at) {
    const json::Value *vocab = json::member(model, "vocab");
    if (!vocab || !vocab->is_object()) throw Error(at + ".vocab is missing or is not an object of token → id");
    m.vocab.reserve(vocab->object.size());
    for (const auto &[token, id] : vocab->object) m.add(token, read_id(id, at + ".vocab[" + json::quote(token) + "]"));
}

int32_t unk_of(const Model &m, const json::Value &model, const std::string &at) {
    const std::string unk = get_string(model, "unk_token", "", at);
    if (unk.empty()) return -1;
    auto it = m.vocab.find(unk);
    if (it == m.vocab.end()) throw Error(at + ".unk_token " + json::quote(unk) + " is not in the vocabulary");
    return it->second;
}

// ---- BPE ----

struct Bpe : Model {
    bpe::Merges merges;
    std::string prefix, suffix;  // continuing_subword_prefix, end_of_word_suffix
    bool fuse_unk = false, byte_fallback = false, ignore_merges = false;
    int32_t byte_ids[256];

    void tokenize(const std::string &word, std::vector<int32_t> &ids) const override {
        if (ignore_merges) {
            auto it = vocab.find(word);
            if (it != vocab.end()) {
                ids.push_back(it->second);
                return;
            }
        }
        std::vector<int32_t> sym;
        bool last_unk = false;
        for (size_t i = 0; i < word.size();) {
            const size_t len = char_len((unsigned char)word[i]);
            std::string s = word.substr(i, len);
            if (i != 0) s = prefix + s;
            if (i + len == word.size()) s += suffix;
            auto it = vocab.find(s);
            if (it != vocab.end()) {
                sym.push_back(it->second);
                last_unk = false;
            } else if (byte_fallback && std::all_of(s.begin(), s.end(), [&](char b) { return byte_ids[(unsigned char)b] >= 0; })) {
                for (unsigned char b : s) sym.push_back(byte_ids[b]);
                last_unk = false;
            } else if (unk >= 0) {
                if (!(fuse_unk && last_unk)) sym.push_back(unk);
                last_unk = true;
            } else {
                throw Error(what + ": the text needs " + json::quote(word.substr(i, len)) +
                            ", which the vocabulary lacks (and there is no unk_token)");
            }
            i += len;
        }
        merge_all(sym);
        ids.insert(ids.end(), sym.begin(), sym.end());
    }

    // word.rs merge_all: the lowest-rank pair first, leftmost among equals;
    // a merge's new pairs join the queue at once.
    void merge_all(std::vector<int32_t> &sym) const { bpe::merge_by_rank(sym, merges, false); }
};

std::pair<std::string, std::string> merge_pair(const json::Value &m, const std::string &where) {
    if (m.is_string()) {
        const size_t sp = m.string.find(' ');
        if (sp == std::string::npos || sp == 0 || sp + 1 == m.string.size() || m.string.find(' ', sp + 1) != std::string::npos) {
            throw Error(where + " is " + json::quote(m.string) + ", expected \"left right\"");
        }
        return {m.string.substr(0, sp), m.string.substr(sp + 1)};
    }
    if (m.is_array() && m.array.size() == 2 && m.array[0].is_string() && m.array[1].is_string()) {
        return {m.array[0].string, m.array[1].string};
    }
    throw Error(where + " is neither \"left right\" nor [left, right]");
}

std::unique_ptr<Model> bpe(const json::Value &v, const std::string &at) {
    only_keys(v, {"dropout", "unk_token", "continuing_subword_prefix", "end_of_word_suffix", "fuse_unk",
                  "byte_fallback", "ignore_merges", "vocab", "merges"},
              at);
    if (const json::Value *d = json::member(v, "dropout")) {
        if (!d->is_number() || d->number != 0) throw Error(at + ".dropout is set: BPE dropout (random merges) is not supported");
    }
    auto m = std::make_unique<Bpe>();
    m->what = at;
    read_vocab_object(*m, v, at);
    m->unk = unk_of(*m, v, at);
    m->prefix = get_string(v, "continuing_subword_prefix", "", at);
    m->suffix = get_string(v, "end_of_word_suffix", "", at);
    m->fuse_unk = get_bool(v, "fuse_unk", false, at);
    m->byte_fallback = get_bool(v, "byte_fallback", false, at);
    m->ignore_merges = get_bool(v, "ignore_merges", false, at);
    for (int b = 0; b < 256; b++) {
        auto it = m->vocab.find(byte_token((unsigned char)b));
        m->byte_ids[b] = it == m->vocab.end() ? -1 : it->second;
    }
    if (const json::Value *merges = json::member(v, "merges")) {
        if (!merges->is_array()) throw Error(at + ".merges is not an array");
        m->merges.reserve(merges->array.size());
        for (size_t i = 0; i < merges->array.size(); i++) {
            const std::string where = at + ".merges[" + std::to_string(i) + "]";
            const std::pair<std::string, std::string> lr = merge_pair(merges->array[i], where);
            const std::string &left = lr.first, &right = lr.second;
            auto id = [&](const std::string &t, const char *role) {
                auto it = m->vocab.find(t);
                if (it == m->vocab.end()) {
                    throw Error(where + ": the merge " + json::quote(left + " " + right) + " " + role + " " + json::quote(t) +
                                ", which the vocabulary does not have");
                }
                return it->second;
            };
            // The merged token drops the right side's continuing_subword_prefix.
            const std::string joined =
                left + (!m->prefix.empty() && right.compare(0, m->prefix.size(), m->prefix) == 0 ? right.substr(m->prefix.size()) : right);
            const int32_t l = id(left, "names"), r = id(right, "names");
            m->merges.emplace(bpe::pair_key(l, r), bpe::Merge{(int32_t)i, id(joined, "makes")});
        }
    }
    return m;
}

// ---- Unigram ----

struct Unigram : Model {
    std::vector<double> scores;
    double unk_score = 0;
    bool byte_fallback = false;
    int32_t byte_ids[256];
    // A byte trie of the pieces: node → sorted (byte, child), and the id a node ends.
    struct Node {
        std::vector<std::pair<unsigned char, int32_t>> next;
        int32_t id = -1;
    };
    std::vector<Node> trie{Node{}};

    void insert(const std::string &s, int32_t id) {
        int32_t node = 0;
        for (unsigned char c : s) {
            auto &nx = trie[node].next;
            auto it = std::lower_bound(nx.begin(), nx.end(), std::make_pair(c, int32_t(-1)));
            if (it != nx.end() && it->first == c) {
                node = it->second;
            } else {
                const auto child = (int32_t)trie.size();
                nx.insert(it, {c, child});
                trie.emplace_back();
                node = child;
            }
        }
        trie[node].id = id;
    }

    void tokenize(const std::string &s, std::vector<int32_t> &ids) const override {
        const size_t n = s.size();
        struct Best {
            double score = 0;
            int64_t start = -1;  // -1: no path ends here yet
            int32_t id = 0;
        };
        std::vector<Best> best(n + 1);
        for (size_t at = 0; at < n;) {
            const double here = best[at].score;
            const size_t mblen = char_len((unsigned char)s[at]);
            bool single = false;
            int32_t node = 0;
            for (size_t i = at; i < n; i++) {
                const auto &nx = trie[node].next;
                const auto c = (unsigned char)s[i];
                auto it = std::lower_bound(nx.begin(), nx.end(), std::make_pair(c, int32_t(-1)));
                if (it == nx.end() || it->first != c) break;
                node = it->second;
                const int32_t id = trie[node].id;
                if (id < 0) continue;
                Best &target = best[i + 1];
                const double cand = here + scores[id];
                if (target.start < 0 || cand > target.score) target = {cand, (int64_t)at, id};
                if (i + 1 - at == mblen) single = true;
            }
            if (!single) {
                if (unk < 0) throw Error(what + ": the text needs " + json::quote(s.substr(at, mblen)) + ", and there is no unk_id");
                Best &target = best[at + mblen];
                const double cand = here + unk_score;
                if (target.start < 0 || cand > target.score) target = {cand, (int64_t)at, unk};
            }
            at += mblen;
        }
        // Back from the end; unknown stretches next to each other fused (fuse_unk).
        std::vector<std::pair<size_t, size_t>> spans;
        for (size_t end = n; end > 0;) {
            const Best &b = best[end];
            const auto start = (size_t)b.start;
            if (b.id == unk && !spans.empty() && best[spans.back().second].id == unk) spans.back().first = start;
            else spans.push_back({start, end});
            end = start;
        }
        for (size_t k = spans.size(); k-- > 0;) {
            const auto [a, b] = spans[k];
            const std::string piece = s.substr(a, b - a);
            auto it = vocab.find(piece);
            if (it != vocab.end()) {
                ids.push_back(it->second);
            } else if (byte_fallback && std::all_of(piece.begin(), piece.end(), [&](char c) { return byte_ids[(unsigned char)c] >= 0; })) {
                for (unsigned char c : piece) ids.push_back(byte_ids[c]);
            } else {
                ids.push_back(unk);
            }
        }
    }
};

std::unique_ptr<Model> unigram(const json::Value &v, const std::string &at) {
    only_keys(v, {"unk_id", "vocab", "byte_fallback"}, at);
    auto m = std::make_unique<Unigram>();
    m->what = at;
    const json::Value *vocab = json::member(v, "vocab");
    if (!vocab || !vocab->is_array()) throw Error(at + ".vocab is missing or is not an array of [piece, score]");
    if ((int64_t)vocab->array.size() >= kMaxId) throw Error(at + ".vocab has too many pieces");
    double min_score = std::numeric_limits<double>::infinity();
    for (size_t i = 0; i < vocab->array.size(); i++) {
        const json::Value &e = vocab->array[i];
        if (!e.is_array() || e.array.size() != 2 || !e.array[0].is_string() || !e.array[1].is_number() ||
            !std::isfinite(e.array[1].number)) {
            throw Error(at + ".vocab[" + std::to_string(i) + "] is not [piece, score]");
        }
        m->add(e.array[0].string, (int32_t)i);
        m->scores.push_back(e.array[1].number);
        min_score = std::min(min_score, e.array[1].number);
        if (!e.array[0].string.empty()) m->insert(e.array[0].string, (int32_t)i);
    }
    m->unk_score = (vocab->array.empty() ? 0.0 : min_score) - 10.0;  // K_UNK_PENALTY
    m->unk = (int32_t)get_int(v, "unk_id", -1, -1, (int64_t)vocab->array.size() - 1, at);
    m->byte_fallback = get_bool(v, "byte_fallback", false, at);
    for (int b = 0; b < 256; b++) {
        auto it = m->vocab.find(byte_token((unsigned char)b));
        m->byte_ids[b] = it == m->vocab.end() ? -1 : it->second;
    }
    return m;
}

// ---- WordPiece and WordLevel ----

struct WordPieceModel : Model {
    std::string prefix;
    int64_t max_chars = 100;

    void tokenize(const std::string &word, std::vector<int32_t> &ids) const override {
        if ((int64_t)utf8_to_u32(word).size() > max_chars) {
            ids.push_back(unk);
            return;
        }
        std::vector<int32_t> out;
        for (size_t start = 0; start < word.size();) {
            size_t end = word.size();
            int32_t found = -1;
            while (end > start) {
                std::string sub = word.substr(start, end - start);
                if (start > 0) sub = prefix + sub;
                auto it = vocab.find(sub);
                if (it != vocab.end()) {
                    found = it->second;
                    break;
                }
                do end--;  // back one character
                while (end > start && ((unsigned char)word[end] & 0xC0) == 0x80);
            }
            if (found < 0) {
                ids.push_back(unk);
                return;
            }
            out.push_back(found);
            start = end;
        }
        ids.insert(ids.end(), out.begin(), out.end());
    }
};

std::unique_ptr<Model> wordpiece(const json::Value &v, const std::string &at) {
    only_keys(v, {"unk_token", "continuing_subword_prefix", "max_input_chars_per_word", "vocab"}, at);
    auto m = std::make_unique<WordPieceModel>();
    m->what = at;
    read_vocab_object(*m, v, at);
    m->unk = unk_of(*m, v, at);
    if (m->unk < 0) throw Error(at + ".unk_token is missing (WordPiece needs one)");
    m->prefix = get_string(v, "continuing_subword_prefix", "##", at);
    m->max_chars = get_int(v, "max_input_chars_per_word", 100, 1, kMaxId, at);
    return m;
}

struct WordLevel : Model {
    void tokenize(const std::string &word, std::vector<int32_t> &ids) const override {
        auto it = vocab.find(word);
        if (it != vocab.end()) ids.push_back(it->second);
        else if (unk >= 0) ids.push_back(unk);
        else throw Error(what + ": " + json::quote(word) + " is not in the vocabulary (and there is no unk_token)");
    }
};

std::unique_ptr<Model> wordlevel(const json::Value &v, const std::string &at) {
    only_keys(v, {"unk_token", "vocab"}, at);
    auto m = std::make_unique<WordLevel>();
    m->what = at;
    read_vocab_object(*m, v, at);
    m->unk = unk_of(*m, v, at);
    return m;
}

}  // namespace

std::unique_ptr<Model> read_model(const json::Value &v, const std::string &what) {
    if (!v.is_object()) throw Error(what + " is missing or is not an object");
    // Old files leave out the type; the library then guesses it by the keys.
    std::string type = json::member(v, "type") ? type_of(v, what)
                       : json::member(v, "merges")  ? "BPE"
                       : json::member(v, "unk_id")  ? "Unigram"
                                                     : "";
    const std::string at = what + " (" + type + ")";
    std::unique_ptr<Model> m;
    if (type == "BPE") m = bpe(v, at);
    else if (type == "Unigram") m = unigram(v, at);
    else if (type == "WordPiece") m = wordpiece(v, at);
    else if (type == "WordLevel") m = wordlevel(v, at);
    else unknown_type(what, type, "BPE, Unigram, WordPiece, WordLevel");
    m->type = type;
    return m;
}

}  // namespace halformer::text::tj
