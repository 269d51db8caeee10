// The tokenizers Hugging Face checkpoints ship, behind Tokenizer::Impl:
//   gpt2    vocab.json + merges.txt, or tokenizer.json (byte_level_bpe.h);
//           nothing added around an input; bos / eos dropped when decoding
//   marian  source.spm (text → pieces), vocab.json (pieces ↔ ids),
//           target.spm (pieces → text): MarianTokenizer's way; a leading
//           language code (">>fra<<", multilingual OPUS-MT) is one token; a
//           piece the vocabulary lacks is <unk>; eos after each input;
//           decoding drops pad, eos and unk (skip_special_tokens)
//   t5      spiece.model + tokenizer_config.json's extra_ids (sentinels
//           <extra_id_i> at the top of the vocabulary); eos after each input
// The special ids come from config.json (Config), as the model uses them.
#include "backend.h"
#include "byte_level_bpe.h"
#include "tokenizer_json.h"
#include "wordpiece.h"

#include "../model/hf/family.h"
#include "halformer/config.h"
#include "halformer/error.h"
#include "halformer/files.h"
#include "halformer/gguf.h"
#include "halformer/json.h"

#include <sentencepiece_processor.h>

#include <algorithm>
#include <fstream>
#include <map>
#include <sstream>

namespace halformer {
namespace text {
namespace {

json::Value read_json(const std::string &path) {
    std::ifstream in(path, std::ios::binary);
    if (!in) throw Error(path + ": cannot open");
    std::stringstream ss;
    ss << in.rdbuf();
    return json::parse(ss.str(), path);
}

// Removes the ids in `drop` (the special tokens a decode leaves out).
Sequence without(const Sequence &ids, std::initializer_list<int> drop) {
    Sequence keep;
    for (int32_t id : ids) {
        bool special = false;
        for (int d : drop) special = special || (d >= 0 && id == d);
        if (!special) keep.push_back(id);
    }
    return keep;
}

// s without the spaces at its ends (Python's str.strip(" ")).
std::string strip_spaces(const std::string &s) {
    const size_t a = s.find_first_not_of(' '), b = s.find_last_not_of(' ');
    return a == std::string::npos ? "" : s.substr(a, b - a + 1);
}

struct Gpt2Impl : Tokenizer::Impl {
    explicit Gpt2Impl(ByteLevelBpe b) : bpe(std::move(b)) {}
    Sequence encode(const std::string &text) const override { return bpe.encode(text); }
    std::string decode(const Sequence &ids, bool skip_special) const override {
        return bpe.decode(skip_special ? without(ids, {bos, eos}) : ids);
    }
    std::vector<std::string> pieces(const std::string &text) const override { return bpe.pieces(text); }
    int vocab_size() const override { return bpe.vocab_size(); }
    ByteLevelBpe bpe;
};

// A tokenizer.json of any kind (tokenizer_json.h): Llama 3, Qwen2, Gemma,
// Llama 2's and Mistral's as the hub ships them; the special ids its
// post-processor puts around an input (Llama 3's <|begin_of_text|>, Llama
// 2's <s>; Qwen2: none); decoding drops every special added token
// (skip_special_tokens).
struct JsonImpl : Tokenizer::Impl {
    explicit JsonImpl(TokenizerJson t) : tj(std::move(t)) {}
    Sequence encode(const std::string &text) const override { return tj.encode(text); }
    std::string decode(const Sequence &ids, bool skip_special) const override { return tj.decode(ids, skip_special); }
    std::vector<std::string> pieces(const std::string &text) const override { return tj.pieces(text); }
    int vocab_size() const override { return tj.vocab_size(); }
    TokenizerJson tj;
};

std::unique_ptr<Tokenizer::Impl> tokenizer_json(TokenizerJson t, const std::string &path, const Config &c) {
    auto impl = std::make_unique<JsonImpl>(std::move(t));
    impl->path = path;
    impl->bos = c.bos_id;
    impl->eos = c.eos_id;
    impl->pad = c.pad_id;
    impl->unk = impl->tj.unk_id();
    impl->prefix = impl->tj.template_prefix();
    impl->suffix = impl->tj.template_suffix();
    return impl;
}

std::unique_ptr<Tokenizer::Impl> gpt2(const std::string &dir, const Config &c) {
    const std::string vocab = dir + "/vocab.json", merges = dir + "/merges.txt", tj = dir + "/tokenizer.json";
    std::unique_ptr<Gpt2Impl> t;
    if (files::exists(vocab) && files::exists(merges)) {
        t = std::make_unique<Gpt2Impl>(ByteLevelBpe::load(vocab, merges));
        t->path = vocab;
    } else if (files::exists(tj)) {
        return tokenizer_json(TokenizerJson::load(tj), tj, c);
    } else {
        return nullptr;
    }
    t->bos = c.bos_id;
    t->eos = c.eos_id;
    t->pad = c.pad_id;
    return t;
}

// BERT: WordPiece from vocab.txt (+ tokenizer_config.json's options); an
// input is [CLS] … [SEP]; decoding drops [CLS], [SEP] and [PAD] (or writes
// them among the words, as BertTokenizer does with skip_special_tokens
// false); the clean-up of spaces is Tokenizer::decode's.
struct BertImpl : Tokenizer::Impl {
    explicit BertImpl(WordPiece w) : wp(std::move(w)) {}
    Sequence encode(const std::string &text) const override { return wp.encode(text); }
    std::string decode(const Sequence &ids, bool skip_special) const override {
        return wp.decode(skip_special ? without(ids, {wp.cls_id(), wp.sep_id(), wp.pad_id()}) : ids, false);
    }
    std::vector<std::string> pieces(const std::string &text) const override { return wp.pieces(text); }
    int vocab_size() const override { return wp.vocab_size(); }
    WordPiece wp;
};

std::unique_ptr<Tokenizer::Impl> bert(const std::string &dir, const Config &c) {
    const std::string vocab = dir + "/vocab.txt", cfg = dir + "/tokenizer_config.json";
    if (!files::exists(vocab)) return nullptr;
    auto t = std::make_unique<BertImpl>(files::exists(cfg) ? WordPiece::load(vocab, cfg) : WordPiece::load(vocab));
    t->path = vocab;
    t->unk = t->wp.unk_id();
    t->mask = t->wp.mask_id();
    t->pad = c.pad_id;
    const int32_t cls = t->wp.cls_id(), sep = t->wp.sep_id();
    if (cls < 0 || sep < 0) throw Error(vocab + ": no " + (cls < 0 ? "[CLS]" : "[SEP]") + " token");
    t->prefix = {cls};
    t->suffix = {sep};
    t->clean_up_spaces = t->wp.clean_up_tokenization_spaces();
    return t;
}

// pieces ↔ ids of a Marian vocab.json.
struct Vocab {
    std::map<std::string, int32_t> ids;
    std::vector<std::string> pieces;  // by id
    static Vocab load(const std::string &path) {
        json::Value root = read_json(path);
        if (!root.is_object()) throw Error(path + ": not a JSON object of pieces to ids");
        Vocab v;
        for (auto &[piece, id] : root.object) {
            if (!id.is_number() || id.number < 0 || id.number >= (1 << 24) || id.number != (int32_t)id.number) {
                throw Error(path + ": the id of '" + piece + "' is not an integer in [0, 2^24)");
            }
            const int32_t i = (int32_t)id.number;
            if ((size_t)i >= v.pieces.size()) v.pieces.resize((size_t)i + 1);
            if (!v.pieces[(size_t)i].empty()) {
                throw Error(path + ": id " + std::to_string(i) + " is both '" + v.pieces[(size_t)i] + "' and '" + piece + "'");
            }
            v.pieces[(size_t)i] = piece;
            v.ids[piece] = i;
        }
        return v;
    }
    int32_t id(const std::string &piece, const std::string &what) const {
        auto it = ids.find(piece);
        if (it == ids.end()) throw Error(what + ": no '" + piece + "' in the vocabulary");
        return it->second;
    }
};

struct MarianImpl : Tokenizer::Impl {
    sentencepiece::SentencePieceProcessor source, target;
    Vocab vocab;

    Sequence encode(const std::string &text) const override {
        Sequence ids;
        for (const std::string &p : pieces(text)) {
            auto it = vocab.ids.find(p);
            ids.push_back(it == vocab.ids.end() ? unk : it->second);
        }
        return ids;
    }
    // MarianTokenizer.convert_tokens_to_string with skip_special_tokens
    // false: a special piece and a space after it, the ends stripped.
    std::string decode(const Sequence &ids, bool skip_special) const override {
        auto run = [&](const Sequence &part) {
            std::vector<std::string> ps;
            for (int32_t id : part) ps.push_back(vocab.pieces[(size_t)id]);
            std::string out;
            auto st = target.Decode(ps, &out);
            if (!st.ok()) throw Error("tokenizer: " + st.ToString());
            return out;
        };
        if (skip_special) return run(without(ids, {pad, eos, unk}));
        const std::string text = decode_around(
            ids, [&](int32_t id) { return id == pad || id == eos || id == unk; },
            [&](int32_t id, bool) { return vocab.pieces[(size_t)id] + " "; }, run);
        return strip_spaces(text);
    }
    // MarianTokenizer.remove_language_code: re.match(">>.+<<", text) — from
    // the start, the last "<<" that follows (greedy) — is one piece, and
    // the rest of the text (the code removed) goes through source.spm.
    std::vector<std::string> pieces(const std::string &text) const override {
        std::vector<std::string> p;
        std::string rest = text;
        if (text.compare(0, 2, ">>") == 0) {
            const size_t end = text.rfind("<<");
            if (end != std::string::npos && end > 2) {
                p.push_back(text.substr(0, end + 2));
                rest = text.substr(end + 2);
            }
        }
        std::vector<std::string> body;
        auto st = source.Encode(rest, &body);
        if (!st.ok()) throw Error("tokenizer: " + st.ToString());
        p.insert(p.end(), body.begin(), body.end());
        return p;
    }
    int vocab_size() const override { return (int)vocab.pieces.size(); }
};

void load_spm(sentencepiece::SentencePieceProcessor &sp, const std::string &path) {
    auto st = sp.Load(path);
    if (!st.ok()) throw Error(path + ": not a SentencePiece model (" + st.ToString() + ")");
}

std::unique_ptr<Tokenizer::Impl> marian(const std::string &dir, const Config &c) {
    const std::string src = dir + "/source.spm", tgt = dir + "/target.spm", vocab = dir + "/vocab.json";
    if (!files::exists(src) && !files::exists(tgt)) return nullptr;
    for (const std::string &f : {src, tgt, vocab}) {
        if (!files::exists(f)) throw Error(dir + ": has a Marian tokenizer but no " + f.substr(dir.size() + 1));
    }
    const std::string cfg = dir + "/tokenizer_config.json";
    if (files::exists(cfg)) {
        json::Value root = read_json(cfg);
        const json::Value *s = root.is_object() ? root.find("separate_vocabs") : nullptr;
        if (s && s->is_bool() && s->boolean) {
            throw Error(cfg + ": separate_vocabs (a target_vocab.json of its own) is not supported by Halformer");
        }
    }
    auto t = std::make_unique<MarianImpl>();
    load_spm(t->source, src);
    load_spm(t->target, tgt);
    t->vocab = Vocab::load(vocab);
    t->path = dir;
    t->unk = t->vocab.id("<unk>", vocab);
    t->pad = c.pad_id;
    t->bos = c.bos_id;
    t->eos = c.eos_id;
    t->suffix = {c.eos_id};
    for (size_t i = 0; i < t->vocab.pieces.size(); i++) {
        if (t->vocab.pieces[i].empty()) throw Error(vocab + ": no piece has id " + std::to_string(i));
    }
    return t;
}

// T5Tokenizer: spiece.model's pieces and ids, then `extra_ids` sentinels
// <extra_id_0> … <extra_id_{n-1}> counting down from the top (id of
// <extra_id_i> = pieces + n − 1 − i). In text, the sentinels and the
// special pieces (</s>, <pad>, <unk>) are single tokens, the whitespace
// around them dropped (transformers' AddedToken lstrip/rstrip); the text
// between them goes through spiece.model. Inputs end in eos.
struct T5Impl : Tokenizer::Impl {
    sentencepiece::SentencePieceProcessor sp;
    int extra = 0;

    int pieces_in_model() const { return sp.GetPieceSize(); }
    // The special token at text[at] (returning its id and length), if any.
    bool special_at(const std::string &text, size_t at, int32_t &id, size_t &len) const {
        if (text[at] != '<') return false;
        const size_t end = text.find('>', at);
        if (end == std::string::npos) return false;
        const std::string tok = text.substr(at, end - at + 1);
        len = tok.size();
        if (tok == "</s>") return id = eos, true;
        if (tok == "<pad>") return id = pad, true;
        if (tok == "<unk>") return id = unk, true;
        static const std::string sentinel = "<extra_id_";
        if (tok.compare(0, sentinel.size(), sentinel) != 0) return false;
        const std::string num = tok.substr(sentinel.size(), tok.size() - sentinel.size() - 1);
        if (num.empty() || num.size() > 6 || num.find_first_not_of("0123456789") != std::string::npos ||
            (num.size() > 1 && num[0] == '0')) {
            return false;
        }
        const int i = std::stoi(num);
        if (i >= extra) return false;
        id = pieces_in_model() + extra - 1 - i;
        return true;
    }
    // Text split at its special tokens: (text, -1) chunks and (token, id) ones.
    std::vector<std::pair<std::string, int32_t>> split(const std::string &text) const {
        std::vector<std::pair<std::string, int32_t>> out;
        std::string chunk;
        for (size_t at = 0; at < text.size();) {
            int32_t id;
            size_t len;
            if (special_at(text, at, id, len)) {
                out.push_back({chunk, -1});
                out.push_back({text.substr(at, len), id});
                chunk.clear();
                at += len;
            } else {
                chunk += text[at++];
            }
        }
        out.push_back({chunk, -1});
        return out;
    }
    static bool blank(const std::string &s) { return s.find_first_not_of(" \t\n\r") == std::string::npos; }

    Sequence encode(const std::string &text) const override {
        Sequence ids;
        for (auto &[chunk, id] : split(text)) {
            if (id >= 0) {
                ids.push_back(id);
            } else if (!blank(chunk)) {
                std::vector<int> part;
                auto st = sp.Encode(chunk, &part);
                if (!st.ok()) throw Error("tokenizer: " + st.ToString());
                ids.insert(ids.end(), part.begin(), part.end());
            }
        }
        return ids;
    }
    std::vector<std::string> pieces(const std::string &text) const override {
        std::vector<std::string> out;
        for (auto &[chunk, id] : split(text)) {
            if (id >= 0) {
                out.push_back(chunk);
            } else if (!blank(chunk)) {
                std::vector<std::string> part;
                auto st = sp.Encode(chunk, &part);
                if (!st.ok()) throw Error("tokenizer: " + st.ToString());
                out.insert(out.end(), part.begin(), part.end());
            }
        }
        return out;
    }
    // Special ids dropped (or, with skip_special false, written as their
    // pieces like the sentinels); sentinels kept, written as transformers'
    // T5Tokenizer.convert_tokens_to_string writes them (a space before a
    // sentinel that follows pieces, none after it, the ends stripped: "the
    // <extra_id_0> house" → "the<extra_id_0> house"); ids past the
    // tokenizer's (the model's vocabulary is often padded past it: t5-small's
    // 32128 against 32100) dropped.
    std::string decode(const Sequence &ids, bool skip_special) const override {
        std::string out;
        std::vector<int> run;
        bool prev_sentinel = false;
        auto pieces_text = [&] {
            std::string text;
            auto st = sp.Decode(run, &text);
            if (!st.ok()) throw Error("tokenizer: " + st.ToString());
            run.clear();
            return text;
        };
        for (int32_t id : skip_special ? without(ids, {pad, eos, unk}) : ids) {
            const bool named = id == pad || id == eos || id == unk;
            if (id < pieces_in_model() && !named) {
                run.push_back(id);
                prev_sentinel = false;
            } else if (id < pieces_in_model() + extra) {
                if (!prev_sentinel) out += " ";
                out += pieces_text() +
                       (named ? sp.IdToPiece(id) : "<extra_id_" + std::to_string(pieces_in_model() + extra - 1 - id) + ">");
                prev_sentinel = true;
            }
        }
        out += pieces_text();
        return strip_spaces(out);
    }
    // The model's rows: ids past the tokenizer's decode to nothing.
    int vocab_size() const override { return std::max(pieces_in_model() + extra, model_vocab); }
    int model_vocab = 0;
};

std::unique_ptr<Tokenizer::Impl> t5(const std::string &dir, const Config &c) {
    const std::string model = dir + "/spiece.model";
    if (!files::exists(model)) return nullptr;
    auto t = std::make_unique<T5Impl>();
    load_spm(t->sp, model);
    t->extra = 100;  // T5Tokenizer's default
    const std::string cfg = dir + "/tokenizer_config.json";
    if (files::exists(cfg)) {
        json::Value root = read_json(cfg);
        const json::Value *e = root.is_object() ? root.find("extra_ids") : nullptr;
        if (e && (!e->is_number() || e->number < 0 || e->number > 100000 || e->number != (int)e->number)) {
            throw Error(cfg + ": \"extra_ids\" is not an integer in [0, 100000]");
        }
        if (e) t->extra = (int)e->number;
    }
    t->path = model;
    t->pad = c.pad_id;
    t->eos = c.eos_id;
    t->bos = c.bos_id;
    t->unk = t->sp.unk_id();
    t->model_vocab = c.tgt_vocab_size;
    t->suffix = {c.eos_id};
    if (t->pieces_in_model() + t->extra > c.tgt_vocab_size) {
        throw Error(model + ": " + std::to_string(t->pieces_in_model()) + " pieces + " + std::to_string(t->extra) +
                    " extra ids are more than the model's vocab_size " + std::to_string(c.tgt_vocab_size));
    }
    return t;
}

// Llama 2, Mistral (and the small models built on them): SentencePiece's
// own model, tokenizer.model (BPE with byte_fallback: a character the
// vocabulary lacks becomes its UTF-8 bytes' <0xNN> pieces, which decode
// back whole), as LlamaTokenizer runs it: bos before each input and no eos
// (tokenizer_config.json's add_bos_token, add_eos_token), the special
// tokens' own spellings ("<s>", "</s>", "<unk>") matched whole in the text;
// decoding drops bos, eos and pad.
struct LlamaSpmImpl : Tokenizer::Impl {
    sentencepiece::SentencePieceProcessor sp;
    std::vector<std::pair<std::string, int32_t>> specials;

    // Text cut at the special tokens' spellings: (text, -1) and (token, id).
    std::vector<std::pair<std::string, int32_t>> split(const std::string &text) const {
        std::vector<std::pair<std::string, int32_t>> out;
        std::string chunk;
        for (size_t at = 0; at < text.size();) {
            bool hit = false;
            for (auto &[spelling, id] : specials) {
                if (text.compare(at, spelling.size(), spelling) == 0) {
                    out.push_back({chunk, -1});
                    out.push_back({spelling, id});
                    chunk.clear();
                    at += spelling.size();
                    hit = true;
                    break;
                }
            }
            if (!hit) chunk += text[at++];
        }
        out.push_back({chunk, -1});
        return out;
    }
    template <typename T>
    std::vector<T> run(const std::string &text, T (*special)(const std::pair<std::string, int32_t> &)) const {
        std::vector<T> out;
        for (auto &part : split(text)) {
            if (part.second >= 0) {
                out.push_back(special(part));
            } else if (!part.first.empty()) {
                std::vector<T> piece;
                auto st = sp.Encode(part.first, &piece);
                if (!st.ok()) throw Error("tokenizer: " + st.ToString());
                out.insert(out.end(), piece.begin(), piece.end());
            }
        }
        return out;
    }
    Sequence encode(const std::string &text) const override {
        auto ids = run<int>(text, [](const std::pair<std::string, int32_t> &p) { return (int)p.second; });
        return Sequence(ids.begin(), ids.end());
    }
    std::vector<std::string> pieces(const std::string &text) const override {
        return run<std::string>(text, [](const std::pair<std::string, int32_t> &p) { return p.first; });
    }
    // skip_special false: LlamaTokenizer.convert_tokens_to_string (legacy),
    // a special token written as its piece, with a space before it where it
    // follows ordinary pieces.
    std::string decode(const Sequence &ids, bool skip_special) const override {
        auto run = [&](const Sequence &part) {
            std::string text;
            auto st = sp.Decode(std::vector<int>(part.begin(), part.end()), &text);
            if (!st.ok()) throw Error("tokenizer: " + st.ToString());
            return text;
        };
        if (skip_special) return run(without(ids, {bos, eos, pad}));
        return decode_around(
            ids, [&](int32_t id) { return id == bos || id == eos || id == pad || sp.IsControl(id); },
            [&](int32_t id, bool after_run) { return (after_run ? " " : "") + sp.IdToPiece(id); }, run);
    }
    int vocab_size() const override { return sp.GetPieceSize(); }
};

// The Llama families' tokenizer: tokenizer.model where the checkpoint ships
// one (Llama 2, Mistral: SentencePiece), else tokenizer.json (Llama 3, Qwen2:
// byte-level BPE).
std::unique_ptr<Tokenizer::Impl> llama(const std::string &dir, const Config &c) {
    const std::string model = dir + "/tokenizer.model", tj = dir + "/tokenizer.json";
    if (!files::exists(model)) {
        if (!files::exists(tj)) return nullptr;
        return tokenizer_json(TokenizerJson::load(tj), tj, c);
    }
    auto t = std::make_unique<LlamaSpmImpl>();
    load_spm(t->sp, model);
    t->path = model;
    t->bos = c.bos_id;
    t->eos = c.eos_id;
    t->pad = c.pad_id;
    t->unk = t->sp.unk_id();
    bool add_bos = true, add_eos = false;
    const std::string cfg = dir + "/tokenizer_config.json";
    if (files::exists(cfg)) {
        json::Value root = read_json(cfg);
        for (auto [key, out] : {std::pair<const char *, bool *>{"add_bos_token", &add_bos}, {"add_eos_token", &add_eos}}) {
            const json::Value *v = root.is_object() ? root.find(key) : nullptr;
            if (v && v->kind != json::Value::Kind::Null && v->kind != json::Value::Kind::Bool) {
                throw Error(cfg + ": \"" + key + "\" is not true or false");
            }
            if (v && v->kind == json::Value::Kind::Bool) *out = v->boolean;
        }
    }
    if (add_bos && c.bos_id >= 0) t->prefix = {c.bos_id};
    if (add_eos && c.eos_id >= 0) t->suffix = {c.eos_id};
    for (int id : {t->sp.bos_id(), t->sp.eos_id(), t->sp.unk_id()}) {
        if (id >= 0) t->specials.push_back({t->sp.IdToPiece(id), id});
    }
    return t;
}

// A GGUF file's vocabulary as the tokenizer.json it was converted from:
// model BPE with tokenizer.ggml.tokens (id order) and merges ("a b"), the
// pre-tokenizer llama.cpp names in tokenizer.ggml.pre (GPT-2's, Llama 3's
// or Qwen2's split; Qwen2's tokenizer.json normalizes to NFC, which
// llama.cpp leaves out and transformers does not), and the control and
// user-defined tokens (tokenizer.ggml.token_type 3 and 4) as added tokens.
json::Value gguf_tokenizer_json(const Gguf &g) {
    using V = json::Value;
    auto str = [](const std::string &s) {
        V v;
        v.kind = V::Kind::String;
        v.string = s;
        return v;
    };
    auto num = [](double d) {
        V v;
        v.kind = V::Kind::Number;
        v.number = d;
        return v;
    };
    auto boolean = [](bool b) {
        V v;
        v.kind = V::Kind::Bool;
        v.boolean = b;
        return v;
    };
    auto obj = [](std::vector<std::pair<std::string, V>> members) {
        V v;
        v.kind = V::Kind::Object;
        v.object = std::move(members);
        return v;
    };
    auto arr = [](std::vector<V> items) {
        V v;
        v.kind = V::Kind::Array;
        v.array = std::move(items);
        return v;
    };
    const std::vector<std::string> tokens = g.strings("tokenizer.ggml.tokens");
    const std::vector<std::string> merges = g.strings("tokenizer.ggml.merges", {});
    std::vector<double> types = g.numbers("tokenizer.ggml.token_type", {});
    if (!types.empty() && types.size() != tokens.size()) {
        throw Error(g.name() + ": tokenizer.ggml.token_type has " + std::to_string(types.size()) + " entries for " +
                    std::to_string(tokens.size()) + " tokens");
    }
    std::vector<V> merge_items, added;
    V vocab = obj({});
    vocab.object.reserve(tokens.size());
    for (size_t id = 0; id < tokens.size(); id++) {
        const int type = types.empty() ? 1 : (int)types[id];
        if (type == 3 || type == 4) {  // CONTROL, USER_DEFINED: matched before the BPE
            added.push_back(obj({{"id", num((double)id)}, {"content", str(tokens[id])}, {"special", boolean(type == 3)}}));
        }
        vocab.object.emplace_back(tokens[id], num((double)id));
    }
    for (const std::string &m : merges) merge_items.push_back(str(m));
    const std::string pre = g.string("tokenizer.ggml.pre", "default");
    V pre_tokenizer, root = obj({});
    if (pre == "gpt-2" || pre == "default") {
        pre_tokenizer = obj({{"type", str("ByteLevel")}, {"add_prefix_space", boolean(false)}, {"use_regex", boolean(true)}});
    } else if (pre == "llama3" || pre == "llama-v3" || pre == "llama-bpe" || pre == "qwen2") {
        const int digits = pre == "qwen2" ? 1 : 3;
        pre_tokenizer = obj(
            {{"type", str("Sequence")},
             {"pretokenizers",
              arr({obj({{"type", str("Split")},
                        {"pattern", obj({{"Regex", str(ByteLevelBpe::split_pattern(digits))}})},
                        {"behavior", str("Isolated")},
                        {"invert", boolean(false)}}),
                   obj({{"type", str("ByteLevel")}, {"add_prefix_space", boolean(false)}, {"use_regex", boolean(false)}})})}});
        if (pre == "qwen2") root.object.emplace_back("normalizer", obj({{"type", str("NFC")}}));
    } else {
        throw Error(g.name() + ": tokenizer.ggml.pre \"" + pre +
                    "\" is not supported by Halformer (gpt-2, llama-bpe, qwen2)");
    }
    root.object.emplace_back("model", obj({{"type", str("BPE")}, {"vocab", std::move(vocab)},
                                           {"merges", arr(std::move(merge_items))}}));
    root.object.emplace_back("pre_tokenizer", std::move(pre_tokenizer));
    root.object.emplace_back("decoder", obj({{"type", str("ByteLevel")}}));
    root.object.emplace_back("added_tokens", arr(std::move(added)));
    return root;
}

}  // namespace

std::string decode_around(const Sequence &ids, const std::function<bool(int32_t)> &special,
                          const std::function<std::string(int32_t, bool)> &text_of,
                          const std::function<std::string(const Sequence &)> &run) {
    std::string out;
    Sequence part;
    bool after_run = false;
    for (int32_t id : ids) {
        if (!special(id)) {
            part.push_back(id);
            after_run = true;
            continue;
        }
        if (!part.empty()) out += run(part);
        part.clear();
        out += text_of(id, after_run);
        after_run = false;
    }
    if (!part.empty()) out += run(part);
    return out;
}

bool read_clean_up_spaces(const std::string &dir, bool fallback) {
    const std::string cfg = dir + "/tokenizer_config.json";
    if (!files::exists(cfg)) return fallback;
    const json::Value root = read_json(cfg);
    const json::Value *v = root.is_object() ? root.find("clean_up_tokenization_spaces") : nullptr;
    if (v == nullptr || v->kind == json::Value::Kind::Null) return fallback;
    if (!v->is_bool()) throw Error(cfg + ": \"clean_up_tokenization_spaces\" is not true or false");
    return v->boolean;
}

std::unique_ptr<Tokenizer::Impl> load_gguf_tokenizer(const std::string &path, const Config &c) {
    const Gguf g(path);
    if (!g.has("tokenizer.ggml.model")) return nullptr;
    const std::string model = g.string("tokenizer.ggml.model");
    if (model != "gpt2") {
        throw Error(path + ": tokenizer.ggml.model \"" + model +
                    "\" is not supported by Halformer (gpt2: byte-level BPE)");
    }
    auto t = tokenizer_json(TokenizerJson::from_json(gguf_tokenizer_json(g), path), path, c);
    t->prefix.clear();
    // What llama.cpp adds around an input; where the file does not say,
    // its default for byte-level BPE: a bos for Llama 3's split, none for
    // GPT-2's and Qwen2's.
    const std::string pre = g.string("tokenizer.ggml.pre", "default");
    const bool llama3 = pre == "llama3" || pre == "llama-v3" || pre == "llama-bpe";
    if (g.boolean("tokenizer.ggml.add_bos_token", llama3) && c.bos_id >= 0) t->prefix = {c.bos_id};
    if (g.boolean("tokenizer.ggml.add_eos_token", false) && c.eos_id >= 0) t->suffix = {c.eos_id};
    return t;
}

// `t` with tokenizer_config.json's clean_up_tokenization_spaces (where the
// file does not say: the backend's default, BERT's true, false elsewhere,
// as transformers has it).
std::unique_ptr<Tokenizer::Impl> with_clean_up(std::unique_ptr<Tokenizer::Impl> t, const std::string &dir) {
    if (t) t->clean_up_spaces = read_clean_up_spaces(dir, t->clean_up_spaces);
    return t;
}

// A directory of tokenizer files only (no config.json: a tokenizer the hub
// ships apart, or one copied out of a checkpoint): the kind by the files,
// the special ids by tokenizer_config.json's tokens.
std::unique_ptr<Tokenizer::Impl> load_tokenizer_files(const std::string &dir) {
    const std::string cfg = dir + "/tokenizer_config.json";
    json::Value root;
    if (files::exists(cfg)) root = read_json(cfg);
    // A special token's text: a string, or an object with "content".
    auto token = [&](const char *key) -> std::string {
        const json::Value *v = root.is_object() ? json::member(root, key) : nullptr;
        if (v == nullptr) return "";
        if (v->is_string()) return v->string;
        const json::Value *content = v->is_object() ? json::member(*v, "content") : nullptr;
        if (content && content->is_string()) return content->string;
        throw Error(cfg + ": \"" + std::string(key) + "\" is neither a string nor an object with \"content\"");
    };
    Config c;
    c.bos_id = c.eos_id = c.pad_id = -1;
    auto ids = [&](auto id_of) {
        for (auto [key, out] : {std::pair<const char *, int *>{"bos_token", &c.bos_id}, {"eos_token", &c.eos_id},
                                {"pad_token", &c.pad_id}}) {
            const std::string t = token(key);
            if (t.empty()) continue;
            *out = id_of(t);
            if (*out < 0) throw Error(cfg + ": " + key + " \"" + t + "\" is not in the vocabulary");
        }
    };
    if (files::exists(dir + "/tokenizer.json")) {
        TokenizerJson probe = TokenizerJson::load(dir + "/tokenizer.json");
        ids([&](const std::string &t) { return probe.id_of(t); });
        return with_clean_up(llama(dir, c), dir);
    }
    if (files::exists(dir + "/vocab.json") && files::exists(dir + "/merges.txt")) {
        ByteLevelBpe probe = ByteLevelBpe::load(dir + "/vocab.json", dir + "/merges.txt");
        ids([&](const std::string &t) { return probe.id_of(t); });
        return with_clean_up(gpt2(dir, c), dir);
    }
    if (files::exists(dir + "/vocab.txt")) return with_clean_up(bert(dir, c), dir);
    return nullptr;
}

std::unique_ptr<Tokenizer::Impl> load_hf_tokenizer(const std::string &dir, const Config &c) {
    // By the family's tokenizer kind (hf/family.h).
    using Loader = std::unique_ptr<Tokenizer::Impl> (*)(const std::string &, const Config &);
    static const std::map<std::string, Loader> kinds{
        {"byte_level_bpe", gpt2}, {"marian", marian}, {"wordpiece", bert}, {"t5", t5}, {"llama", llama}};
    const hf::Family *family = hf::find_family(c.family);
    auto it = family ? kinds.find(family->tokenizer) : kinds.end();
    return with_clean_up(it == kinds.end() ? nullptr : it->second(dir, c), dir);
}

}  // namespace text
}  // namespace halformer
