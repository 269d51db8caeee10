// Text through the runtime: UTF-8 validation, the SentencePiece tokenizer
// (training, round trips, byte fallback, errors), Model's text API
// (translate / continue_text / embed on small random models whose directory
// names a tokenizer) and the translation metrics (13a tokenization, BLEU,
// chrF; checked against NLTK in tests/check_metrics.py as well).
#include "halformer/translation_quality.h"
#include "halformer/model.h"
#include "halformer/tokenizer.h"
#include "halformer/train.h"

#define HALFORMER_SCRATCH_PREFIX "halformer_text"
#include "scratch.h"

#include <gtest/gtest.h>

#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <filesystem>
#include <fstream>
#include <map>
#include <numeric>
#include <sstream>
#include <string>
#include <vector>

using namespace halformer;
namespace fs = std::filesystem;

namespace {

std::string read_file(const std::string &path) {
    std::ifstream in(path, std::ios::binary);
    std::stringstream ss;
    ss << in.rdbuf();
    return ss.str();
}
void write_file(const std::string &path, const std::string &bytes) {
    std::ofstream out(path, std::ios::binary | std::ios::trunc);
    out << bytes;
}

// Runs f, which must throw Error with every piece in its message.
template <typename F>
void expect_error(F f, std::initializer_list<std::string> pieces) {
    try {
        f();
        ADD_FAILURE() << "no error";
    } catch (const Error &e) {
        const std::string msg = e.what();
        for (const std::string &p : pieces) EXPECT_NE(msg.find(p), std::string::npos) << "'" << p << "' not in: " << msg;
    }
}

// A deterministic English-like and German-like corpus: words, digits,
// umlauts and punctuation, one sentence a line.
uint64_t next(uint64_t &s) {
    s = s * 6364136223846793005ull + 1442695040888963407ull;
    return s >> 33;
}
const std::vector<std::string> kEnglish = {
    "open", "the", "file", "save", "changes", "to", "document", "folder", "print", "settings", "network", "error",
    "window", "close", "delete", "copy", "paste", "search", "user", "password", "update", "install", "system",
    "server", "message", "new", "old", "please", "wait", "now", "cannot", "be", "found", "was", "is", "not", "and",
    "or", "of", "in", "for", "with", "this", "that", "your", "all", "files", "version", "size", "key", "page",
    "line", "disk", "remove", "select", "show", "hide", "name", "value", "list"};
const std::vector<std::string> kGerman = {
    "Öffne", "die", "Datei", "speichere", "Änderungen", "am", "Dokument", "Ordner", "drucken", "Einstellungen",
    "Netzwerk", "Fehler", "Fenster", "schließen", "löschen", "kopieren", "einfügen", "suchen", "Benutzer",
    "Passwort", "aktualisieren", "installieren", "System", "Server", "Nachricht", "neue", "alte", "bitte", "warten",
    "jetzt", "kann", "nicht", "gefunden", "wurde", "ist", "und", "oder", "von", "in", "für", "mit", "diese", "das",
    "Ihre", "alle", "Dateien", "Version", "Größe", "Schlüssel", "Übersicht", "Seite", "Zeile", "Platte", "entfernen",
    "wählen", "zeigen", "verbergen", "Name", "Wert", "Liste", "Grüße", "müssen", "Straße"};
std::string sentence(const std::vector<std::string> &words, uint64_t &s) {
    const int n = 3 + (int)(next(s) % 10);
    std::string out;
    for (int i = 0; i < n; i++) {
        if (i) out += (next(s) % 9 == 0) ? ", " : " ";
        switch (next(s) % 14) {
        case 0: out += std::to_string(next(s) % 1000); break;
        case 1: out += std::to_string(next(s) % 10) + "." + std::to_string(next(s) % 100); break;
        case 2: out += "(" + words[next(s) % words.size()] + ")"; break;
        case 3: out += "„" + words[next(s) % words.size()] + "“"; break;
        default: out += words[next(s) % words.size()];
        }
    }
    static const char *const ends[] = {".", "!", "?", ":", "...", ""};
    return out + ends[next(s) % 6];
}
void write_corpus(const std::string &path, const std::vector<std::string> &words, uint64_t seed, int lines) {
    std::string text;
    for (int i = 0; i < lines; i++) text += sentence(words, seed) + "\n";
    write_file(path, text);
}
std::vector<std::string> corpus_files() {
    static const std::vector<std::string> files = [] {
        const std::string en = scratch() + "/corpus.en", de = scratch() + "/corpus.de";
        write_corpus(en, kEnglish, 7, 300);
        write_corpus(de, kGerman, 11, 300);
        return std::vector<std::string>{en, de};
    }();
    return files;
}

// 800 bpe pieces: 260 for the specials and the bytes, the characters, and
// enough merges for whole words (the corpus allows at most ~570 unigram pieces).
TokenizerTrainOptions train_options(const std::string &type, int vocab = 800) {
    TokenizerTrainOptions o;
    o.inputs = corpus_files();
    o.vocab_size = vocab;
    o.type = type;
    o.threads = 1;
    return o;
}

// The bpe tokenizer most tests share: trained once.
const std::string &bpe_path() {
    static const std::string path = [] {
        const std::string p = scratch() + "/bpe.model";
        Tokenizer::train(train_options("bpe"), p);
        return p;
    }();
    return path;
}
const Tokenizer &bpe() {
    static const Tokenizer tok = Tokenizer::load(bpe_path());
    return tok;
}

// Sentences that must survive encode → decode: single spaces, no leading or
// trailing space (SentencePiece normalizes whitespace); unseen words, and
// characters the training text never had (byte fallback).
const std::vector<std::string> kRoundTrip = {
    "open the file",
    "Öffne die Datei, bitte!",
    "Die Größe der Datei ist 3.5 MB (ungefähr).",
    "Grüße aus der Straße 42: „Übersicht“ und Schlüssel...",
    "Zyxwvut qwopflarg unbekannt",
    "Ein Wort wie Ærøskøbing oder Ćevapčići",
    "日本",
    "a smiley 😀 and a € sign",
    "tabs? no; but #hash, @at, ~tilde, [brackets] and {braces} = ok",
};

// ----------------------------------------------------------------------
// UTF-8 validation

TEST(Utf8, ValidText) {
    EXPECT_EQ(utf8_error_offset(""), -1);
    EXPECT_EQ(utf8_error_offset("plain ASCII, with digits 0123 and ~"), -1);
    EXPECT_EQ(utf8_error_offset("\xC3\xA4"), -1);              // ä
    EXPECT_EQ(utf8_error_offset("Gr\xC3\xB6\xC3\x9F" "e"), -1);  // Größe
    EXPECT_EQ(utf8_error_offset("\xE2\x82\xAC"), -1);          // €
    EXPECT_EQ(utf8_error_offset("\xF0\x9F\x98\x80"), -1);      // 😀
    EXPECT_EQ(utf8_error_offset("\xE0\xA0\x80"), -1);          // U+0800, the first 3-byte code point
    EXPECT_EQ(utf8_error_offset("\xED\x9F\xBF"), -1);          // U+D7FF, just below the surrogates
    EXPECT_EQ(utf8_error_offset("\xEE\x80\x80"), -1);          // U+E000, just above them
    EXPECT_EQ(utf8_error_offset("\xF4\x8F\xBF\xBF"), -1);      // U+10FFFF, the last code point
    EXPECT_EQ(utf8_error_offset(std::string("a\0b", 3)), -1);  // NUL is a valid character
}

TEST(Utf8, HostileBytes) {
    EXPECT_EQ(utf8_error_offset("ab\x80"), 2);                  // lone continuation byte
    EXPECT_EQ(utf8_error_offset("\xBF" "abc"), 0);
    EXPECT_EQ(utf8_error_offset("x\xC3"), 1);                   // truncated at the end
    EXPECT_EQ(utf8_error_offset("ab\xE2\x82"), 2);              // truncated 3-byte sequence
    EXPECT_EQ(utf8_error_offset("\xF0\x9F\x98"), 0);            // truncated 4-byte sequence
    EXPECT_EQ(utf8_error_offset("\xC3(x"), 0);                  // lead byte without its continuation
    EXPECT_EQ(utf8_error_offset("\xC0\xAF"), 0);                // overlong '/'
    EXPECT_EQ(utf8_error_offset("ok \xC1\xBF"), 3);             // overlong
    EXPECT_EQ(utf8_error_offset("\xE0\x80\xAF"), 0);            // overlong 3-byte
    EXPECT_EQ(utf8_error_offset("\xF0\x80\x80\xAF"), 0);        // overlong 4-byte
    EXPECT_EQ(utf8_error_offset("a\xED\xA0\x80"), 1);           // surrogate U+D800
    EXPECT_EQ(utf8_error_offset("\xED\xBF\xBF"), 0);            // surrogate U+DFFF
    EXPECT_EQ(utf8_error_offset("ab\xF4\x90\x80\x80"), 2);      // U+110000, past the last code point
    EXPECT_EQ(utf8_error_offset("\xF8\x88\x80\x80\x80"), 0);    // 5-byte form
    EXPECT_EQ(utf8_error_offset("\xFF"), 0);
    EXPECT_EQ(utf8_error_offset("\xC3\xA4\xFE"), 2);            // after a valid ä
    EXPECT_EQ(utf8_error_offset("\xE2\x82\xAC ok \x80"), 7);    // the first bad byte after € and ASCII
}

// ----------------------------------------------------------------------
// Tokenizer

TEST(Tokenizer, SpecialIds) {
    const Tokenizer &t = bpe();
    EXPECT_EQ(t.vocab_size(), 800);
    EXPECT_EQ(t.pad_id(), 0);
    EXPECT_EQ(t.bos_id(), 1);
    EXPECT_EQ(t.eos_id(), 2);
    EXPECT_EQ(t.unk_id(), 3);
    EXPECT_EQ(t.path(), bpe_path());
    // Ordinary text never encodes to a special id.
    for (const std::string &s : kRoundTrip) {
        for (int32_t id : t.encode(s)) {
            EXPECT_GT(id, 3) << s;
            EXPECT_LT(id, t.vocab_size()) << s;
        }
    }
}

TEST(Tokenizer, RoundTrip) {
    for (const std::string &s : kRoundTrip) {
        const Sequence ids = bpe().encode(s);
        EXPECT_FALSE(ids.empty()) << s;
        EXPECT_EQ(bpe().decode(ids), s);
    }
    // Lines of the training text come back too, in fewer tokens than bytes.
    std::istringstream in(read_file(corpus_files()[1]));
    int lines = 0;
    for (std::string line; std::getline(in, line) && lines < 50; lines++) {
        const Sequence ids = bpe().encode(line);
        EXPECT_EQ(bpe().decode(ids), line);
        EXPECT_LT(ids.size(), line.size()) << line;
    }
    EXPECT_EQ(lines, 50);
    EXPECT_TRUE(bpe().encode("").empty());
    EXPECT_EQ(bpe().decode({}), "");
}

TEST(Tokenizer, ByteFallback) {
    // 日本 is in no training line: its six bytes become byte pieces, not unk.
    const Sequence ids = bpe().encode("日本");
    EXPECT_GE(ids.size(), 6u);
    EXPECT_EQ(std::count(ids.begin(), ids.end(), bpe().unk_id()), 0);
    EXPECT_EQ(bpe().decode(ids), "日本");
    const Sequence emoji = bpe().encode("😀");
    EXPECT_EQ(std::count(emoji.begin(), emoji.end(), bpe().unk_id()), 0);
    EXPECT_EQ(bpe().decode(emoji), "😀");
}

TEST(Tokenizer, Pieces) {
    const std::string s = "Öffne die Datei";
    const auto pieces = bpe().pieces(s);
    EXPECT_EQ(pieces.size(), bpe().encode(s).size());
    std::string joined;
    for (const std::string &p : pieces) joined += p;
    // Pieces mark a word start with U+2581 (▁).
    std::string spaced;
    for (size_t i = 0; i < joined.size();) {
        if (joined.compare(i, 3, "\xE2\x96\x81") == 0) spaced += ' ', i += 3;
        else spaced += joined[i++];
    }
    EXPECT_EQ(spaced, " " + s);
}

TEST(Tokenizer, DecodeDropsPadBosEos) {
    const std::string s = "Die Datei wurde gefunden.";
    Sequence ids = bpe().encode(s);
    Sequence framed = {bpe().bos_id()};
    framed.insert(framed.end(), ids.begin(), ids.end());
    framed.push_back(bpe().eos_id());
    framed.push_back(bpe().pad_id());
    framed.push_back(bpe().pad_id());
    EXPECT_EQ(bpe().decode(framed), s);
    // pad in the middle is dropped as well.
    Sequence mid = ids;
    mid.insert(mid.begin() + 1, bpe().pad_id());
    EXPECT_EQ(bpe().decode(mid), s);
    EXPECT_EQ(bpe().decode({bpe().bos_id(), bpe().eos_id(), bpe().pad_id()}), "");
}

TEST(Tokenizer, DecodeKeepsSpecialTokensWhenAsked) {
    const std::string s = "Die Datei wurde gefunden.";
    Sequence framed = {bpe().bos_id()};
    const Sequence ids = bpe().encode(s);
    framed.insert(framed.end(), ids.begin(), ids.end());
    framed.push_back(bpe().eos_id());
    framed.push_back(bpe().pad_id());
    DecodeOptions keep;
    keep.skip_special_tokens = false;
    EXPECT_EQ(bpe().decode(framed, keep), "<s>" + s + "</s><pad>");
    // A SentencePiece model of Halformer's own cleans up no spaces unless told.
    EXPECT_FALSE(bpe().clean_up_tokenization_spaces());
    const Sequence spaced = bpe().encode("Datei , bitte .");
    EXPECT_EQ(bpe().decode(spaced), "Datei , bitte .");
    DecodeOptions clean;
    clean.clean_up_tokenization_spaces = true;
    EXPECT_EQ(bpe().decode(spaced, clean), "Datei, bitte.");
}

TEST(Tokenizer, DecodeOutOfRangeIdThrows) {
    expect_error([] { bpe().decode({5, 800}); }, {"800", "vocabulary of 800"});
    expect_error([] { bpe().decode({-1}); }, {"-1"});
    EXPECT_NO_THROW(bpe().decode({799}));
}

TEST(Tokenizer, InvalidUtf8Throws) {
    expect_error([] { bpe().encode("ab\xFF" "cd"); }, {"UTF-8", "byte 2"});
    expect_error([] { bpe().encode("Gr\xC3\xB6\xC3"); }, {"UTF-8", "byte 4"});
    expect_error([] { bpe().encode("\xED\xA0\x80"); }, {"UTF-8", "byte 0"});
    expect_error([] { bpe().pieces("x\xC0\xAF"); }, {"UTF-8", "byte 1"});
}

TEST(Tokenizer, Unigram) {
    const std::string path = scratch() + "/unigram.model";
    Tokenizer::train(train_options("unigram", 500), path);
    Tokenizer t = Tokenizer::load(path);
    EXPECT_EQ(t.vocab_size(), 500);
    EXPECT_EQ(t.pad_id(), 0);
    EXPECT_EQ(t.bos_id(), 1);
    EXPECT_EQ(t.eos_id(), 2);
    EXPECT_EQ(t.unk_id(), 3);
    for (const std::string &s : kRoundTrip) EXPECT_EQ(t.decode(t.encode(s)), s);
    // A different algorithm: some sentence splits differently from bpe.
    bool differs = false;
    for (const std::string &s : kRoundTrip) differs |= t.pieces(s) != bpe().pieces(s);
    EXPECT_TRUE(differs);
}

TEST(Tokenizer, TrainNeverReplacesAFile) {
    const std::string path = scratch() + "/existing.model";
    write_file(path, "keep me");
    expect_error([&] { Tokenizer::train(train_options("bpe"), path); }, {path, "exists"});
    EXPECT_EQ(read_file(path), "keep me");
}

TEST(Tokenizer, TrainErrors) {
    const std::string dir = scratch() + "/train_errors";
    fs::create_directories(dir);
    const std::string out = dir + "/tok.model";
    auto opts = train_options("bpe");
    opts.inputs.push_back(dir + "/missing.txt");
    expect_error([&] { Tokenizer::train(opts, out); }, {dir + "/missing.txt"});
    opts = train_options("wordpiece");
    expect_error([&] { Tokenizer::train(opts, out); }, {"wordpiece"});
    opts = train_options("bpe");
    opts.inputs.clear();
    expect_error([&] { Tokenizer::train(opts, out); }, {"no input"});
    // Too small for the 256 byte pieces: SentencePiece's own error, and
    // nothing left behind (no model, no temporary files).
    opts = train_options("bpe", 100);
    expect_error([&] { Tokenizer::train(opts, out); }, {"tokenizer training failed"});
    EXPECT_TRUE(fs::is_empty(dir)) << "files left in " << dir;
}

TEST(Tokenizer, LoadErrors) {
    const std::string missing = scratch() + "/nope/tokenizer.model";
    expect_error([&] { Tokenizer::load(missing); }, {missing});
    const std::string garbage = scratch() + "/garbage.model";
    write_file(garbage, "this is not a SentencePiece model\n\x01\x02\x03");
    expect_error([&] { Tokenizer::load(garbage); }, {garbage});
    const std::string empty = scratch() + "/empty.model";
    write_file(empty, "");
    expect_error([&] { Tokenizer::load(empty); }, {empty});
}

// ----------------------------------------------------------------------
// Model's text API

Config small_config(Architecture a, int vocab) {
    Config c;
    c.architecture = a;
    c.d_model = 32;
    c.num_heads = 2;
    c.d_ff = 48;
    c.num_encoder_layers = 1;
    c.num_decoder_layers = 1;
    c.src_vocab_size = c.tgt_vocab_size = vocab;
    c.max_positions = 24;
    c.pad_id = 0;
    c.bos_id = 1;
    c.eos_id = 2;
    return c;
}

// A model directory with random weights; with_tokenizer copies the bpe model
// in as tokenizer.model and names it in config.json.
std::string make_model(const std::string &name, Config c, bool with_tokenizer = true) {
    const std::string dir = scratch() + "/" + name;
    if (with_tokenizer) c.tokenizer = "tokenizer.model";
    TrainOptions o;
    o.seed = 5;
    if (c.architecture == Architecture::Encoder) o.head_rows = 5;  // training needs one; embed() ignores it
    Trainer::create(c, o, Device::CPU).save(dir, /*weights_only=*/true);
    if (with_tokenizer) fs::copy_file(bpe_path(), dir + "/tokenizer.model", fs::copy_options::overwrite_existing);
    return dir;
}

const std::string &ed_dir() {
    static const std::string dir = make_model("ed", small_config(Architecture::EncoderDecoder, 800));
    return dir;
}

// Ten lines of different token lengths, none longer than 24 tokens.
const std::vector<std::string> kLines = {
    "Öffne die Datei.",
    "open the file and save all changes to the document now",
    "Fehler",
    "Die Größe der Datei ist 3.5 MB.",
    "please wait",
    "Speichere die Änderungen am Dokument (bitte) jetzt!",
    "the server cannot be found",
    "Grüße",
    "delete the old files in this folder?",
    "Liste aller Dateien: 42",
};

TEST(Text, ModelLoadsItsTokenizer) {
    Model m = Model::load(ed_dir());
    EXPECT_TRUE(m.has_tokenizer());
    EXPECT_EQ(m.config().tokenizer, "tokenizer.model");
    EXPECT_EQ(m.tokenizer().vocab_size(), 800);
    EXPECT_EQ(m.tokenizer().encode("Öffne die Datei"), bpe().encode("Öffne die Datei"));
}

// translate() sorts lines by length, decodes batch_size at a time and
// returns them in input order: the same as fixed batches by hand with
// generate() (a line answers as alone, whatever its batch).
TEST(Text, TranslateSortsBatchesAndRestoresOrder) {
    Model m = Model::load(ed_dir());
    const Tokenizer &tok = m.tokenizer();
    const int batch = 3;
    std::vector<Sequence> ids;
    for (const std::string &s : kLines) ids.push_back(tok.encode(s));
    std::vector<size_t> order(kLines.size());
    std::iota(order.begin(), order.end(), 0);
    std::stable_sort(order.begin(), order.end(), [&](size_t a, size_t b) { return ids[a].size() < ids[b].size(); });
    // The lengths differ, so sorting really reorders.
    ASSERT_FALSE(std::is_sorted(order.begin(), order.end()));
    std::vector<std::string> want(kLines.size());
    std::vector<int> want_tokens(kLines.size());
    for (size_t at = 0; at < order.size(); at += batch) {
        const size_t n = std::min(order.size() - at, (size_t)batch);
        std::vector<Sequence> src;
        GenerateOptions o;
        o.max_new_tokens = m.config().max_positions;
        for (size_t k = 0; k < n; k++) {
            src.push_back(ids[order[at + k]]);
            // Each line's own limit: 2 × its source + 10, at most 256 (not
            // the batch's longest: a line answers as it would alone).
            o.max_new_tokens_each.push_back(std::min({2 * (int)src.back().size() + 10, 256, m.config().max_positions}));
        }
        auto hyps = m.generate(src, o);
        for (size_t k = 0; k < n; k++) {
            want[order[at + k]] = tok.decode(hyps[k][0].tokens);
            want_tokens[order[at + k]] = (int)hyps[k][0].tokens.size();
        }
    }
    // Distinct outputs, or the order would not be tested.
    std::vector<std::string> distinct = want;
    std::sort(distinct.begin(), distinct.end());
    EXPECT_GE(std::unique(distinct.begin(), distinct.end()) - distinct.begin(), 5);

    const auto got = m.translate(kLines, GenerateOptions{}, batch);
    ASSERT_EQ(got.size(), kLines.size());
    for (size_t i = 0; i < kLines.size(); i++) {
        EXPECT_TRUE(got[i].ok()) << i << ": " << got[i].error;
        EXPECT_EQ(got[i].text, want[i]) << "line " << i;
        EXPECT_EQ(got[i].input_tokens, (int)ids[i].size()) << "line " << i;
        EXPECT_EQ(got[i].output_tokens, want_tokens[i]) << "line " << i;
        EXPECT_TRUE(got[i].alternatives.empty());
    }
}

TEST(Text, BatchOfOneEqualsSingleCalls) {
    Model m = Model::load(ed_dir());
    const auto all = m.translate(kLines, GenerateOptions{}, 1);
    ASSERT_EQ(all.size(), kLines.size());
    for (size_t i = 0; i < kLines.size(); i++) {
        const auto one = m.translate({kLines[i]}, GenerateOptions{}, 1);
        ASSERT_EQ(one.size(), 1u);
        EXPECT_TRUE(one[0].ok());
        EXPECT_EQ(all[i].text, one[0].text) << "line " << i;
        EXPECT_EQ(all[i].output_tokens, one[0].output_tokens) << "line " << i;
    }
}

// The lines run as one call whose batch the next line joins as room frees
// (continuous batching); each line answers what it does alone, sampled
// ones included: a line's seed is its own (options.seeds, or the call's
// seed and the line's index), whatever the batch size. The callbacks see
// line indices.
TEST(Text, LinesJoinOneBatchAndEachAnswersAsAlone) {
    Model m = Model::load(ed_dir());
    GenerateOptions g;
    g.sample = true;
    g.temperature = 1.5f;
    g.seed = 11;
    std::map<int, int> streamed;  // line → tokens streamed
    g.on_token = [&](int line, int32_t) { streamed[line]++; };
    const auto by3 = m.translate(kLines, g, 3);
    // One call: more steps than any line's tokens (fixed batches of 3 would
    // leave the last batch's steps only).
    int longest = 0, total = 0;
    for (const auto &r : by3) {
        longest = std::max(longest, r.output_tokens);
        total += r.output_tokens;
    }
    EXPECT_GE((int)m.step_rows().size(), total / 3);
    EXPECT_GT((int)m.step_rows().size(), longest + 1);
    EXPECT_EQ(*std::max_element(m.step_rows().begin(), m.step_rows().end()), 3);
    for (size_t i = 0; i < kLines.size(); i++) EXPECT_EQ(streamed[(int)i], by3[i].output_tokens) << "line " << i;
    g.on_token = nullptr;
    const auto by1 = m.translate(kLines, g, 1), by10 = m.translate(kLines, g, 10);
    std::vector<std::string> texts;
    for (size_t i = 0; i < kLines.size(); i++) {
        EXPECT_EQ(by3[i].text, by1[i].text) << "line " << i;
        EXPECT_EQ(by3[i].text, by10[i].text) << "line " << i;
        EXPECT_EQ(by3[i].score, by10[i].score) << "line " << i;
        texts.push_back(by3[i].text);
    }
    // With seeds per line: the line alone with its seed.
    for (size_t i = 0; i < kLines.size(); i++) g.seeds.push_back(1000 + i);
    const auto seeded = m.translate(kLines, g, 4);
    for (size_t i = 0; i < kLines.size(); i++) {
        GenerateOptions one = g;
        one.seeds = {1000 + i};
        EXPECT_EQ(seeded[i].text, m.translate({kLines[i]}, one)[0].text) << "line " << i;
    }
    // (Sampling at temperature 1.5 from random weights: the lines differ.)
    std::sort(texts.begin(), texts.end());
    EXPECT_GE(std::unique(texts.begin(), texts.end()) - texts.begin(), 5);
}

TEST(Text, BeamNBestComesBackAsAlternatives) {
    Model m = Model::load(ed_dir());
    GenerateOptions g;
    g.beam = 3;
    g.n_best = 2;
    g.max_new_tokens = 6;
    const auto got = m.translate({kLines[0], kLines[1]}, g, 2);
    const auto hyps = m.generate({m.tokenizer().encode(kLines[0]), m.tokenizer().encode(kLines[1])}, g);
    for (size_t i = 0; i < 2; i++) {
        ASSERT_EQ(got[i].alternatives.size(), 1u);
        EXPECT_EQ(got[i].text, m.tokenizer().decode(hyps[i][0].tokens));
        EXPECT_EQ(got[i].alternatives[0], m.tokenizer().decode(hyps[i][1].tokens));
        EXPECT_DOUBLE_EQ(got[i].score, hyps[i][0].score);
    }
}

TEST(Text, BadLinesGetErrorsTheOthersTranslate) {
    Model m = Model::load(ed_dir());
    std::string too_long;
    for (int i = 0; i < 30; i++) too_long += std::string(i ? " " : "") + kEnglish[(size_t)i * 7 % kEnglish.size()];
    const int long_tokens = (int)m.tokenizer().encode(too_long).size();
    ASSERT_GT(long_tokens, 24);
    const std::vector<std::string> lines = {kLines[0], "", kLines[3], "   ", "ab\xFF" "cd", kLines[6], too_long, "\t"};
    const std::vector<size_t> good = {0, 2, 5};
    const std::vector<std::string> good_lines = {kLines[0], kLines[3], kLines[6]};
    for (int batch : {1, 32}) {
        SCOPED_TRACE("batch " + std::to_string(batch));
        const auto got = m.translate(lines, GenerateOptions{}, batch);
        ASSERT_EQ(got.size(), lines.size());
        for (size_t i : {1, 3, 7}) {
            EXPECT_FALSE(got[i].ok());
            EXPECT_NE(got[i].error.find("empty"), std::string::npos) << got[i].error;
            EXPECT_EQ(got[i].text, "");
        }
        EXPECT_NE(got[4].error.find("UTF-8"), std::string::npos) << got[4].error;
        EXPECT_NE(got[4].error.find("byte 2"), std::string::npos) << got[4].error;
        EXPECT_EQ(got[4].text, "");
        EXPECT_NE(got[6].error.find(std::to_string(long_tokens) + " tokens"), std::string::npos) << got[6].error;
        EXPECT_NE(got[6].error.find("24"), std::string::npos) << got[6].error;
        EXPECT_EQ(got[6].text, "");
        // The good lines: exactly what they give on their own (in the same
        // batches: alone with batch 1, together with batch 32).
        const auto alone = m.translate(good_lines, GenerateOptions{}, batch);
        for (size_t k = 0; k < good.size(); k++) {
            EXPECT_TRUE(got[good[k]].ok()) << got[good[k]].error;
            EXPECT_EQ(got[good[k]].text, alone[k].text) << "line " << good[k];
            if (batch == 1) EXPECT_EQ(got[good[k]].text, m.translate({good_lines[k]})[0].text);
        }
    }
    // A call with only bad lines runs nothing and still answers each.
    const auto none = m.translate({"", "\xC0\xAF"});
    ASSERT_EQ(none.size(), 2u);
    EXPECT_FALSE(none[0].ok());
    EXPECT_FALSE(none[1].ok());
    EXPECT_TRUE(m.translate({}).empty());
    expect_error([&] { m.translate(kLines, GenerateOptions{}, 0); }, {"batch size"});
}

TEST(Text, ModelWithoutTokenizer) {
    const std::string dir = make_model("no_tokenizer", small_config(Architecture::EncoderDecoder, 800), false);
    Model m = Model::load(dir);
    EXPECT_FALSE(m.has_tokenizer());
    EXPECT_TRUE(m.config().tokenizer.empty());
    expect_error([&] { m.translate({"open the file"}); }, {"tokenizer"});
    expect_error([&] { m.tokenizer(); }, {"tokenizer"});
    expect_error([&] { m.embed({"open the file"}); }, {"tokenizer"});
    // Token ids still work.
    GenerateOptions g;
    g.max_new_tokens = 3;
    g.stop_at_eos = false;
    EXPECT_EQ(m.generate({{5, 6, 7}}, g)[0][0].tokens.size(), 3u);
}

TEST(Text, ConfigTokenizerMustBeAFileName) {
    const std::string dir = make_model("bad_name", small_config(Architecture::EncoderDecoder, 800), false);
    const std::string config = read_file(dir + "/config.json");
    ASSERT_EQ(config.front(), '{');
    for (const std::string name : {"../x", "..", "sub/tokenizer.model", "/etc/passwd", "a b"}) {
        SCOPED_TRACE(name);
        write_file(dir + "/config.json", "{\"tokenizer\": \"" + name + "\", " + config.substr(1));
        expect_error([&] { Model::load(dir); }, {"tokenizer", name});
    }
    // Config::validate says the same for a Config built in code.
    Config c = small_config(Architecture::EncoderDecoder, 800);
    c.tokenizer = "../x";
    expect_error([&] { c.validate(); }, {"tokenizer", "../x"});
}

TEST(Text, ConfigNamesAMissingTokenizer) {
    const std::string dir = make_model("missing_tokenizer", small_config(Architecture::EncoderDecoder, 800));
    fs::remove(dir + "/tokenizer.model");
    expect_error([&] { Model::load(dir); }, {dir + "/tokenizer.model"});
    write_file(dir + "/tokenizer.model", "garbage");
    expect_error([&] { Model::load(dir); }, {dir + "/tokenizer.model"});
}

TEST(Text, TokenizerMustFitTheModel) {
    // 800 pieces into a 500-token vocabulary.
    const std::string dir = make_model("small_vocab", small_config(Architecture::EncoderDecoder, 500));
    expect_error([&] { Model::load(dir); }, {"800", "500"});
    // Special ids that differ from the tokenizer's.
    Config c = small_config(Architecture::EncoderDecoder, 800);
    c.eos_id = 5;
    const std::string dir2 = make_model("other_eos", c);
    expect_error([&] { Model::load(dir2); }, {"eos"});
    // A larger model vocabulary loads; an id it generates past the
    // tokenizer's 800 pieces is that line's error, never the call's.
    Model big = Model::load(make_model("big_vocab", small_config(Architecture::EncoderDecoder, 1024)));
    EXPECT_TRUE(big.has_tokenizer());
    GenerateOptions g;
    g.sample = true;  // random weights: about 22% of sampled ids are past 800
    g.max_new_tokens = 8;
    g.seed = 3;
    std::vector<std::string> lines;
    for (int i = 0; i < 16; i++) lines.push_back("open file " + std::to_string(i));
    std::vector<TextResult> res;
    ASSERT_NO_THROW(res = big.translate(lines, g, 4));
    int bad = 0;
    for (const TextResult &r : res) {
        if (r.ok()) continue;
        bad++;
        EXPECT_NE(r.error.find("cannot be decoded"), std::string::npos) << r.error;
        EXPECT_NE(r.error.find("outside the tokenizer"), std::string::npos) << r.error;
        EXPECT_TRUE(r.text.empty());
    }
    EXPECT_GT(bad, 0);
    EXPECT_LT(bad, 16);  // (1 - 0.22)^8 ≈ 14% of lines decode: some do
    // An explicit limit past the model's positions is refused up front.
    GenerateOptions too_many;
    too_many.max_new_tokens = 25;
    expect_error([&] { big.translate({"open file"}, too_many); }, {"max_new_tokens 25", "max_positions 24"});
}

TEST(Text, EncoderOnlyEmbeds) {
    Model m = Model::load(make_model("encoder", small_config(Architecture::Encoder, 800)));
    ASSERT_TRUE(m.has_tokenizer());
    const std::vector<std::string> texts = {"Öffne die Datei.", "please wait"};
    const auto out = m.embed(texts);
    ASSERT_EQ(out.size(), 2u);
    std::vector<Sequence> ids;
    for (const std::string &t : texts) ids.push_back(m.tokenizer().encode(t));
    ASSERT_NE(ids[0].size(), ids[1].size());
    const auto want = m.encode(ids);
    for (size_t i = 0; i < 2; i++) {
        EXPECT_EQ(out[i].shape, (std::vector<int64_t>{(int64_t)ids[i].size(), 32}));
        ASSERT_EQ(out[i].data.size(), ids[i].size() * 32);
        for (float v : out[i].data) ASSERT_TRUE(std::isfinite(v));
        EXPECT_EQ(out[i].data, want[i].data);
    }
    expect_error([&] { m.embed({"fine", ""}); }, {"text 1", "empty"});
    expect_error([&] { m.translate({"please wait"}); }, {"encoder-decoder"});
}

TEST(Text, DecoderOnlyContinues) {
    Model m = Model::load(make_model("decoder", small_config(Architecture::Decoder, 800)));
    ASSERT_TRUE(m.has_tokenizer());
    // The continuation is what decoding prompt + new ids adds to the
    // prompt's own text: it keeps the space SentencePiece marks on its
    // first piece ("Die Datei wurde" + " gespeichert").
    auto continuation = [&](const Sequence &prompt, const Sequence &out) {
        Sequence all = prompt;
        all.insert(all.end(), out.begin(), out.end());
        const std::string whole = m.tokenizer().decode(all), head = m.tokenizer().decode(prompt);
        EXPECT_EQ(whole.compare(0, head.size(), head), 0);
        return whole.substr(head.size());
    };
    const std::vector<std::string> prompts = {"Die Datei wurde", "open the file and save"};
    GenerateOptions g;
    g.max_new_tokens = 5;
    const auto got = m.continue_text(prompts, g, 1);
    ASSERT_EQ(got.size(), 2u);
    for (size_t i = 0; i < 2; i++) {
        ASSERT_TRUE(got[i].ok()) << got[i].error;
        const auto hyps = m.generate({m.tokenizer().encode(prompts[i])}, g);
        EXPECT_EQ(got[i].text, continuation(m.tokenizer().encode(prompts[i]), hyps[0][0].tokens));
        EXPECT_EQ(got[i].text.substr(0, 1), " ");
        EXPECT_EQ(got[i].output_tokens, (int)hyps[0][0].tokens.size());
        EXPECT_EQ(got[i].input_tokens, (int)m.tokenizer().encode(prompts[i]).size());
    }
    // Both in one batch: sorted by length (the longer prompt comes first
    // here), results in input order.
    const Sequence a = m.tokenizer().encode(prompts[1]), b = m.tokenizer().encode(prompts[0]);
    ASSERT_GT(a.size(), b.size());
    const auto both = m.continue_text({prompts[1], prompts[0]}, g, 2);
    const auto hyps = m.generate({b, a}, g);
    EXPECT_EQ(both[0].text, continuation(a, hyps[1][0].tokens));
    EXPECT_EQ(both[1].text, continuation(b, hyps[0][0].tokens));
    EXPECT_NE(both[0].text, both[1].text);
    // The prompt must leave room for one new token: 24 tokens is too long.
    std::string long_prompt;
    for (int i = 0; i < 40; i++) long_prompt += "open ";
    long_prompt.pop_back();
    ASSERT_GE(m.tokenizer().encode(long_prompt).size(), 24u);
    const auto bad = m.continue_text({long_prompt, prompts[0]}, g);
    EXPECT_FALSE(bad[0].ok());
    EXPECT_TRUE(bad[1].ok());
    expect_error([&] { m.translate({"Die Datei"}); }, {"encoder-decoder", "decoder"});
    expect_error([&] { m.embed({"Die Datei"}); }, {"decoder-only"});
    // And continue_text on an encoder-decoder model is an error.
    Model ed = Model::load(ed_dir());
    expect_error([&] { ed.continue_text({"Die Datei"}); }, {"decoder-only"});
}

// ----------------------------------------------------------------------
// Metrics (the expected strings and scores are sacreBLEU 2.x's own)

TEST(Metrics, Tokenize13a) {
    EXPECT_EQ(tokenize_13a("Hello, world."), "Hello , world .");
    EXPECT_EQ(tokenize_13a("3.5 and 1,000"), "3.5 and 1,000");
    EXPECT_EQ(tokenize_13a("a-b 5-3"), "a-b 5 - 3");
    EXPECT_EQ(tokenize_13a("AT&amp;T &lt;b&gt; &quot;x&quot;"), "AT & T < b > \" x \"");
    EXPECT_EQ(tokenize_13a("(x)"), "( x )");
    EXPECT_EQ(tokenize_13a("It costs 5."), "It costs 5 .");
    EXPECT_EQ(tokenize_13a("end.Start v1.2.3 x.5"), "end . Start v1.2.3 x . 5");
    EXPECT_EQ(tokenize_13a("don't e-mail a/b 50%"), "don't e-mail a / b 50 %");
    EXPECT_EQ(tokenize_13a("Größe: 5 €."), "Größe : 5 € .");
    EXPECT_EQ(tokenize_13a("Wait... what?!"), "Wait . . . what ? !");
    EXPECT_EQ(tokenize_13a("line <skipped> here"), "line here");
    EXPECT_EQ(tokenize_13a("x [y] {z} ~ ^ ` | $ # @ ;"), "x [ y ] { z } ~ ^ ` | $ # @ ;");
    EXPECT_EQ(tokenize_13a("  lots   of\tspace  "), "lots of space");
    // A no-break space separates words, as Python's str.split() does.
    EXPECT_EQ(tokenize_13a("Seite\xC2\xA0" "2"), "Seite 2");
    EXPECT_EQ(tokenize_13a(""), "");
}

TEST(Metrics, Bleu) {
    const std::vector<std::string> refs = {"The cat sat on the mat.", "Die Datei wurde gespeichert.", "x = 5-3"};
    const BleuScore same = corpus_bleu(refs, refs);
    EXPECT_DOUBLE_EQ(same.score, 100.0);
    EXPECT_DOUBLE_EQ(same.bp, 1.0);
    for (double p : same.precisions) EXPECT_DOUBLE_EQ(p, 100.0);
    EXPECT_EQ(same.hyp_len, 7 + 5 + 5);
    EXPECT_EQ(same.ref_len, same.hyp_len);

    const BleuScore empty = corpus_bleu({"", "", ""}, refs);
    EXPECT_EQ(empty.score, 0.0);
    EXPECT_EQ(empty.hyp_len, 0);
    EXPECT_EQ(empty.bp, 0.0);
    EXPECT_EQ(corpus_bleu({}, {}).score, 0.0);

    // sacreBLEU: 16.341219448835542 66.7/20.0/12.5/8.3 (BP = 0.846)
    const BleuScore b = corpus_bleu({"the cat sat on the mat"}, {"the cats sat on a mat here"});
    EXPECT_NEAR(b.score, 16.341219448835542, 1e-9);
    EXPECT_NEAR(b.bp, 0.846481724890614, 1e-12);
    EXPECT_EQ(b.hyp_len, 6);
    EXPECT_EQ(b.ref_len, 7);
    EXPECT_EQ(b.correct[0], 4);
    EXPECT_EQ(b.total[3], 3);

    // An order without a match: "exp" smoothing. sacreBLEU: 22.333699645390876
    // 83.3/40.0/12.5/8.3 (BP = 0.920).
    const BleuScore s = corpus_bleu({"Die Datei wurde gespeichert.", "Öffne das Menü „Datei“, bitte!", ""},
                                    {"Die Datei ist gespeichert.", "Öffne bitte das Menü „Datei“!", "Fertig."});
    EXPECT_NEAR(s.score, 22.333699645390876, 1e-9);
    EXPECT_EQ(s.correct[3], 0);
    EXPECT_NEAR(s.precisions[3], 100.0 / (2 * 6), 1e-12);

    // No match at any order: 0, as sacreBLEU (not the smoothed precisions).
    EXPECT_EQ(corpus_bleu({"a b c d"}, {"e f g h"}).score, 0.0);
    // Fewer than 4 tokens in all: no 4-grams, 0.
    EXPECT_EQ(corpus_bleu({"a b c"}, {"a b c"}).score, 0.0);

    expect_error([&] { corpus_bleu({"a", "b"}, {"a"}); }, {"2 hypotheses", "1 references"});
}

TEST(Metrics, Chrf) {
    const std::vector<std::string> refs = {"The cat sat on the mat.", "Die Größe ist 3.5 MB.", "日本"};
    EXPECT_DOUBLE_EQ(corpus_chrf(refs, refs), 100.0);
    // Whitespace does not count.
    EXPECT_DOUBLE_EQ(corpus_chrf({"Thecat saton the mat ."}, {"The cat sat on the mat."}), 100.0);
    // sacreBLEU's chrF2 (its default: precision and recall averaged over the
    // orders, then F-beta).
    EXPECT_NEAR(corpus_chrf({"the cat sat on the mat"}, {"the cats sat on a mat here"}), 48.74877881892141, 1e-9);
    EXPECT_NEAR(corpus_chrf({"Die Datei wurde gespeichert.", "Öffne das Menü „Datei“, bitte!", ""},
                            {"Die Datei ist gespeichert.", "Öffne bitte das Menü „Datei“!", "Fertig."}),
                67.72100942730175, 1e-9);
    EXPECT_NEAR(corpus_chrf({"one two three four five"}, {"one two three four six"}), 80.2879715787464, 1e-9);
    EXPECT_EQ(corpus_chrf({"", ""}, {"abc", "def"}), 0.0);
    EXPECT_EQ(corpus_chrf({"abc"}, {"xyz"}), 0.0);
    EXPECT_EQ(corpus_chrf({}, {}), 0.0);
    // beta weighs recall: a hypothesis that is a prefix of its reference
    // has precision 1 and scores higher with a smaller beta.
    EXPECT_GT(corpus_chrf({"the cat"}, {"the cat sat down"}, 6, 1.0), corpus_chrf({"the cat"}, {"the cat sat down"}));
    expect_error([&] { corpus_chrf({"a"}, {"a", "b"}); }, {"1 hypotheses", "2 references"});
}

}  // namespace
