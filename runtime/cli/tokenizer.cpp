// halformer tokenizer: trains and runs SentencePiece tokenizers.
//
//   halformer tokenizer train tok.model --input train.en --input train.de --vocab-size 8000 [--type bpe]
//   halformer tokenizer encode tok.model ["text"] [--pieces]   # one line of ids per input line
//     (tok.model: a SentencePiece model, a model directory, a Hugging Face
//     checkpoint's with or without its weights, or a GGUF file)
//   halformer tokenizer decode tok.model ["5 6 7"] [--keep-special] [--clean-up|--no-clean-up]
//                                                              # ids back to text
//   halformer tokenizer count tok.model ["text"]               # tokens a line (stdin: then the total)
//   halformer tokenizer pairs tok.model --src train.en --tgt train.de --out train.ids [--max-len 126]
//
// `pairs` writes the token-id file `halformer train --train` reads (source
// ids, a tab, target ids; one pair a line, no bos/eos). Pairs with an empty
// side, a side longer than --max-len tokens, or text that is not UTF-8 are
// left out and counted (the first few bad ones named by line); the two files must have
// the same number of lines. Without --tgt it writes one id sequence a line
// (decoder-only data). Nothing is written over an existing file without --force.
#include "common.h"
#include "halformer/config.h"
#include "halformer/files.h"
#include "halformer/tokenizer.h"

#include <CLI/CLI.hpp>

#include <cstdio>
#include <fstream>
#include <iostream>
#include <sstream>
#include <sys/stat.h>

namespace halformer {
namespace {

std::string join_ids(const Sequence &ids) {
    std::string s;
    for (size_t i = 0; i < ids.size(); i++) {
        if (i) s += ' ';
        s += std::to_string(ids[i]);
    }
    return s;
}

void strip_cr(std::string &line) {
    if (!line.empty() && line.back() == '\r') line.pop_back();
}

Sequence parse_ids(const std::string &text) {
    Sequence ids;
    std::istringstream in(text);
    std::string tok;
    while (in >> tok) {
        char *end = nullptr;
        long v = std::strtol(tok.c_str(), &end, 10);
        if (*end || v < 0 || v > 0x7FFFFFFF) throw Error("'" + tok + "' is not a token id");
        ids.push_back((int32_t)v);
    }
    return ids;
}

// Every subcommand's options.
struct Args {
    TokenizerTrainOptions train;
    std::string train_out;
    std::string model, text;  // encode, decode (text: the text or the ids); model also pairs
    bool pieces = false;
    bool keep_special = false, clean_up = false, no_clean_up = false;  // decode
    std::string src, tgt, out;  // pairs
    int max_len = 126;
    bool force = false;
};

struct Subcommands {
    CLI::App *train, *encode, *decode, *count, *pairs;
};

Subcommands add_subcommands(CLI::App &app, Args &a) {
    Subcommands s;
    s.train = app.add_subcommand("train", "train a joint tokenizer on text files (one sentence a line)");
    s.train->add_option("out", a.train_out, "the model file to write (e.g. DIR/tokenizer.model)")->required();
    s.train->add_option("--input", a.train.inputs, "text files (all languages: one shared vocabulary)")->required();
    s.train->add_option("--vocab-size", a.train.vocab_size, "pieces in the vocabulary")->check(CLI::Range(8, 1 << 20));
    s.train->add_option("--type", a.train.type, "bpe or unigram")->check(CLI::IsMember({"bpe", "unigram"}));
    s.train->add_option("--character-coverage", a.train.character_coverage, "share of characters covered")
        ->check(CLI::Range(0.9, 1.0));
    s.train->add_option("--max-sentences", a.train.max_sentences, "sentences sampled for training")
        ->check(at_least(1));
    s.train->add_option("--threads", a.train.threads, "threads");
    s.train->add_option("--seed", a.train.seed, "sampling seed");

    s.encode = app.add_subcommand("encode", "text to ids (the argument, or one line of stdin at a time)");
    s.encode->add_option("model", a.model, "tokenizer.model, a model directory (weights not needed) or a GGUF file")
        ->required();
    s.encode->add_option("text", a.text, "text to encode (default: read lines from stdin)");
    s.encode->add_flag("--pieces", a.pieces, "print the pieces instead of ids");

    s.decode = app.add_subcommand("decode", "ids to text (the argument, or one line of stdin at a time)");
    s.decode->add_option("model", a.model, "tokenizer.model, a model directory (weights not needed) or a GGUF file")
        ->required();
    s.decode->add_option("ids", a.text, "space-separated ids (default: read lines from stdin)");
    s.decode->add_flag("--keep-special", a.keep_special, "write special tokens (bos, eos, ...) instead of dropping them");
    auto *on = s.decode->add_flag("--clean-up", a.clean_up,
                                  "remove the space before . , ! ? and contractions (default: as tokenizer_config.json says)");
    s.decode->add_flag("--no-clean-up", a.no_clean_up, "keep the spaces as decoded")->excludes(on);

    s.count = app.add_subcommand("count", "tokens in text (the argument, or each line of stdin, then the total on stderr)");
    s.count->add_option("model", a.model, "tokenizer.model, a model directory (weights not needed) or a GGUF file")
        ->required();
    s.count->add_option("text", a.text, "text to count (default: read lines from stdin)");

    s.pairs = app.add_subcommand("pairs", "parallel text files to the token-id file halformer train reads");
    s.pairs->add_option("model", a.model, "tokenizer.model, or a model directory")->required();
    s.pairs->add_option("--src", a.src, "source text, one sentence a line")->required();
    s.pairs->add_option("--tgt", a.tgt, "target text, line by line with --src (omit for decoder-only data)");
    s.pairs->add_option("--out", a.out, "the token-id file to write")->required();
    s.pairs->add_option("--max-len", a.max_len, "leave out pairs with a longer side (tokens)")
        ->check(at_least(1));
    s.pairs->add_flag("--force", a.force, "replace --out");
    return s;
}

int run_train(const Args &a) {
    Tokenizer::train(a.train, a.train_out);
    Tokenizer t = Tokenizer::load(a.train_out);
    std::printf("%s: %d pieces (pad %d, bos %d, eos %d, unk %d)\n", a.train_out.c_str(), t.vocab_size(), t.pad_id(),
                t.bos_id(), t.eos_id(), t.unk_id());
    return 0;
}

// What `pairs` wrote and left out.
struct PairCounts {
    int64_t line = 0, written = 0, empty = 0, too_long = 0, bad = 0, src_tokens = 0, tgt_tokens = 0;
    int shown = 0;  // left-out lines named on stderr
    void left_out(const std::string &why) {
        if (shown++ < 5) std::fprintf(stderr, "  line %lld left out: %s\n", (long long)line, why.c_str());
    }
};

// Writes the pairs of fs (and ft, when a.tgt is given) to path.
void write_pairs(const Tokenizer &tok, std::istream &fs, std::istream &ft, const Args &a, const std::string &path,
                 PairCounts &n) {
    std::ofstream o(path, std::ios::trunc);
    if (!o) throw Error(a.out + ": cannot write");
    const bool two = !a.tgt.empty();
    std::string sa_text, sb_text;
    for (;;) {
        const bool ha = (bool)std::getline(fs, sa_text);
        const bool hb = two ? (bool)std::getline(ft, sb_text) : ha;
        if (ha != hb) {
            throw Error(a.src + " and " + a.tgt + " differ in length: one ends at line " + std::to_string(n.line + 1));
        }
        if (!ha) break;
        n.line++;
        strip_cr(sa_text);
        strip_cr(sb_text);
        Sequence sa, sb;
        try {
            sa = tok.encode(sa_text);
            if (two) sb = tok.encode(sb_text);
        } catch (const Error &e) {
            n.bad++;
            n.left_out(e.what());
            continue;
        }
        if (sa.empty() || (two && sb.empty())) {
            n.empty++;
            n.left_out("an empty side");
            continue;
        }
        if ((int)sa.size() > a.max_len || (int)sb.size() > a.max_len) {
            n.too_long++;
            continue;
        }
        o << join_ids(sa) << (two ? "\t" + join_ids(sb) : "") << '\n';
        n.written++;
        n.src_tokens += (int64_t)sa.size();
        n.tgt_tokens += (int64_t)sb.size();
    }
    o.close();
    if (!o) throw Error(a.out + ": cannot write");
}

int run_pairs(const Args &a) {
    Tokenizer tok = Tokenizer::load_for(a.model);
    std::ifstream fs(a.src), ft;
    if (!fs) throw Error(a.src + ": cannot open");
    if (!a.tgt.empty()) {
        ft.open(a.tgt);
        if (!ft) throw Error(a.tgt + ": cannot open");
    }
    PairCounts n;
    files::write_atomic(a.out, [&](const std::string &tmp) { write_pairs(tok, fs, ft, a, tmp, n); }, a.force);
    std::printf("%s: %lld of %lld lines written (%lld source, %lld target tokens); left out: %lld longer than %d "
                "tokens, %lld with an empty side, %lld not UTF-8\n",
                a.out.c_str(), (long long)n.written, (long long)n.line, (long long)n.src_tokens,
                (long long)n.tgt_tokens, (long long)n.too_long, a.max_len, (long long)n.empty, (long long)n.bad);
    return 0;
}

// encode or decode: the argument, or stdin line by line. A line that fails
// gives an empty output line (the output stays line for line with the
// input) and a message; the exit status is then 1.
enum class Mode { Encode, Pieces, Decode, Count };

int run_lines(const Tokenizer &t, Mode mode, const DecodeOptions &decode, const std::string *text) {
    int failures = 0;
    int64_t line = 0, total = 0;
    auto one = [&](const std::string &s) {
        line++;
        try {
            if (mode == Mode::Count) {
                const size_t n = t.encode(s).size();
                total += (int64_t)n;
                std::printf("%zu\n", n);
            } else if (mode == Mode::Decode) {
                std::printf("%s\n", one_line(t.decode(parse_ids(s), decode)).c_str());
            } else if (mode == Mode::Pieces) {
                auto p = t.pieces(s);
                for (size_t i = 0; i < p.size(); i++) std::printf("%s%s", i ? " " : "", p[i].c_str());
                std::printf("\n");
            } else {
                std::printf("%s\n", join_ids(t.encode(s)).c_str());
            }
        } catch (const Error &e) {
            failures++;
            std::printf("\n");
            std::fprintf(stderr, "halformer tokenizer: line %lld: %s\n", (long long)line, e.what());
        }
    };
    if (text) {
        one(*text);
    } else {
        for (std::string s; std::getline(std::cin, s);) {
            strip_cr(s);
            one(s);
        }
        if (mode == Mode::Count) std::fprintf(stderr, "total: %lld tokens in %lld lines\n", (long long)total, (long long)line);
    }
    return failures ? 1 : 0;
}

}  // namespace

int cmd_tokenizer(int argc, char **argv) {
    CLI::App app{"halformer tokenizer: train and run SentencePiece tokenizers", "halformer tokenizer"};
    app.require_subcommand(1);
    Args a;
    const Subcommands s = add_subcommands(app, a);
    if (!parse_command(app, argc, argv)) return 0;
    if (s.train->parsed()) return run_train(a);
    if (s.pairs->parsed()) return run_pairs(a);
    const Mode mode = s.count->parsed()    ? Mode::Count
                      : s.decode->parsed() ? Mode::Decode
                      : a.pieces           ? Mode::Pieces
                                           : Mode::Encode;
    const bool from_stdin = (mode == Mode::Decode   ? s.decode->count("ids")
                             : mode == Mode::Count  ? s.count->count("text")
                                                    : s.encode->count("text")) == 0;
    const Tokenizer t = Tokenizer::load_for(a.model);
    DecodeOptions decode;
    decode.skip_special_tokens = !a.keep_special;
    if (a.clean_up || a.no_clean_up) decode.clean_up_tokenization_spaces = a.clean_up;
    return run_lines(t, mode, decode, from_stdin ? nullptr : &a.text);
}

}  // namespace halformer
