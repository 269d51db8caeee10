// The tokenizers Hugging Face checkpoints ship, behind Tokenizer::Impl:
//   gpt2    vocab.json + merges.txt, or tokenizer.json (byte_level_bpe.h);
//           nothing added around an input; bos / eos dropped when decoding
//   marian  source.spm (text → pieces), vocab.json (pieces ↔ ids),
//           target.spm (pieces → text): MarianTokenizer's way; a leading
//           language code (">>fra<<", multilingual OPUS-MT) is one token; a
//           piece the vocabulary lacks is <unk>; eos after each input;
//           decoding drops pad, eos and unk (skip_special_tokens)
// The special ids come from config.json (Config), as the model uses them.
#include "backend.h"
#include "byte_level_bpe.h"
#include "wordpiece.h"

#include "halformer/config.h"
#include "halformer/error.h"
#include "halformer/files.h"
#include "halformer/json.h"

#include <sentencepiece_processor.h>

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

struct Gpt2Impl : Tokenizer::Impl {
    explicit Gpt2Impl(ByteLevelBpe b) : bpe(std::move(b)) {}
    Sequence encode(const std::string &text) const override { return bpe.encode(text); }
    std::string decode(const Sequence &ids) const override { return bpe.decode(without(ids, {bos, eos})); }
    std::vector<std::string> pieces(const std::string &text) const override { return bpe.pieces(text); }
    int vocab_size() const override { return bpe.vocab_size(); }
    ByteLevelBpe bpe;
};

std::unique_ptr<Tokenizer::Impl> gpt2(const std::string &dir, const Config &c) {
    const std::string vocab = dir + "/vocab.json", merges = dir + "/merges.txt", tj = dir + "/tokenizer.json";
    std::unique_ptr<Gpt2Impl> t;
    if (files::exists(vocab) && files::exists(merges)) {
        t = std::make_unique<Gpt2Impl>(ByteLevelBpe::load(vocab, merges));
        t->path = vocab;
    } else if (files::exists(tj)) {
        t = std::make_unique<Gpt2Impl>(ByteLevelBpe::load_tokenizer_json(tj));
        t->path = tj;
    } else {
        return nullptr;
    }
    t->bos = c.bos_id;
    t->eos = c.eos_id;
    t->pad = c.pad_id;
    return t;
}

// BERT: WordPiece from vocab.txt (+ tokenizer_config.json's options); an
// input is [CLS] … [SEP]; decoding drops [CLS], [SEP] and [PAD].
struct BertImpl : Tokenizer::Impl {
    explicit BertImpl(WordPiece w) : wp(std::move(w)) {}
    Sequence encode(const std::string &text) const override { return wp.encode(text); }
    std::string decode(const Sequence &ids) const override {
        return wp.decode(without(ids, {wp.cls_id(), wp.sep_id(), wp.pad_id()}));
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
    t->pad = c.pad_id;
    const int32_t cls = t->wp.cls_id(), sep = t->wp.sep_id();
    if (cls < 0 || sep < 0) throw Error(vocab + ": no " + (cls < 0 ? "[CLS]" : "[SEP]") + " token");
    t->prefix = {cls};
    t->suffix = {sep};
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
    std::string decode(const Sequence &ids) const override {
        std::vector<std::string> ps;
        for (int32_t id : without(ids, {pad, eos, unk})) ps.push_back(vocab.pieces[(size_t)id]);
        std::string out;
        auto st = target.Decode(ps, &out);
        if (!st.ok()) throw Error("tokenizer: " + st.ToString());
        return out;
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

}  // namespace

std::unique_ptr<Tokenizer::Impl> load_hf_tokenizer(const std::string &dir, const Config &c) {
    if (c.family == "gpt2") return gpt2(dir, c);
    if (c.family == "marian") return marian(dir, c);
    if (c.family == "bert") return bert(dir, c);
    return nullptr;
}

}  // namespace text
}  // namespace halformer
