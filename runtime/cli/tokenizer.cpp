// halformer tokenizer: trains and runs SentencePiece tokenizers.
//
//   halformer tokenizer train tok.model --input train.en --input train.de --vocab-size 8000 [--type bpe]
//   halformer tokenizer encode tok.model ["text"] [--pieces]   # one line of ids per input line
//   halformer tokenizer decode tok.model ["5 6 7"]             # ids back to text
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
#include "halformer/tokenizer.h"

#include <CLI/CLI.hpp>

#include <cstdio>
#include <fstream>
#include <iostream>
#include <sstream>
#include <sys/stat.h>

namespace halformer {
namespace {

bool exists(const std::string &p) {
    struct stat st;
    return stat(p.c_str(), &st) == 0;
}

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

int run_pairs(const std::string &model, const std::string &src, const std::string &tgt, const std::string &out,
              int max_len, bool force) {
    Tokenizer tok = Tokenizer::load(model);
    std::ifstream fs(src), ft;
    if (!fs) throw Error(src + ": cannot open");
    if (!tgt.empty()) {
        ft.open(tgt);
        if (!ft) throw Error(tgt + ": cannot open");
    }
    if (exists(out) && !force) throw Error(out + " exists: not replacing it (--force replaces it)");
    std::ofstream o(out + ".part", std::ios::trunc);
    if (!o) throw Error(out + ": cannot write");
    int64_t line = 0, written = 0, empty = 0, too_long = 0, bad = 0, src_tokens = 0, tgt_tokens = 0;
    int shown = 0;
    auto report = [&](const std::string &why) {
        if (shown++ < 5) std::fprintf(stderr, "  line %lld left out: %s\n", (long long)line, why.c_str());
    };
    std::string a, b;
    for (;;) {
        const bool ha = (bool)std::getline(fs, a);
        const bool hb = tgt.empty() ? ha : (bool)std::getline(ft, b);
        if (ha != hb) {
            o.close();
            std::remove((out + ".part").c_str());
            throw Error(src + " and " + tgt + " differ in length: one ends at line " + std::to_string(line + 1));
        }
        if (!ha) break;
        line++;
        strip_cr(a);
        strip_cr(b);
        Sequence sa, sb;
        try {
            sa = tok.encode(a);
            if (!tgt.empty()) sb = tok.encode(b);
        } catch (const Error &e) {
            bad++;
            report(e.what());
            continue;
        }
        if (sa.empty() || (!tgt.empty() && sb.empty())) {
            empty++;
            report("an empty side");
            continue;
        }
        if ((int)sa.size() > max_len || (int)sb.size() > max_len) {
            too_long++;
            continue;
        }
        o << join_ids(sa);
        if (!tgt.empty()) o << '\t' << join_ids(sb);
        o << '\n';
        written++;
        src_tokens += (int64_t)sa.size();
        tgt_tokens += (int64_t)sb.size();
    }
    o.close();
    if (!o || std::rename((out + ".part").c_str(), out.c_str()) != 0) throw Error(out + ": cannot write");
    std::printf("%s: %lld of %lld lines written (%lld source, %lld target tokens); left out: %lld longer than %d "
                "tokens, %lld with an empty side, %lld not UTF-8\n",
                out.c_str(), (long long)written, (long long)line, (long long)src_tokens, (long long)tgt_tokens,
                (long long)too_long, max_len, (long long)empty, (long long)bad);
    return 0;
}

}  // namespace

int cmd_tokenizer(int argc, char **argv) {
    CLI::App app{"halformer tokenizer: train and run SentencePiece tokenizers", "halformer tokenizer"};
    app.require_subcommand(1);

    TokenizerTrainOptions to;
    std::string train_out;
    auto *tr = app.add_subcommand("train", "train a joint tokenizer on text files (one sentence a line)");
    tr->add_option("out", train_out, "the model file to write (e.g. DIR/tokenizer.model)")->required();
    tr->add_option("--input", to.inputs, "text files (all languages: one shared vocabulary)")->required();
    tr->add_option("--vocab-size", to.vocab_size, "pieces in the vocabulary")->check(CLI::Range(8, 1 << 20));
    tr->add_option("--type", to.type, "bpe or unigram")->check(CLI::IsMember({"bpe", "unigram"}));
    tr->add_option("--character-coverage", to.character_coverage, "share of characters covered")
        ->check(CLI::Range(0.9, 1.0));
    tr->add_option("--max-sentences", to.max_sentences, "sentences sampled for training")->check(CLI::PositiveNumber);
    tr->add_option("--threads", to.threads, "threads");
    tr->add_option("--seed", to.seed, "sampling seed");

    std::string model, text;
    bool show_pieces = false;
    auto *enc = app.add_subcommand("encode", "text to ids (the argument, or one line of stdin at a time)");
    enc->add_option("model", model, "tokenizer.model, or a model directory")->required();
    enc->add_option("text", text, "text to encode (default: read lines from stdin)");
    enc->add_flag("--pieces", show_pieces, "print the pieces instead of ids");

    auto *dec = app.add_subcommand("decode", "ids to text (the argument, or one line of stdin at a time)");
    dec->add_option("model", model, "tokenizer.model, or a model directory")->required();
    dec->add_option("ids", text, "space-separated ids (default: read lines from stdin)");

    std::string src, tgt, out;
    int max_len = 126;
    bool force = false;
    auto *pairs = app.add_subcommand("pairs", "parallel text files to the token-id file halformer train reads");
    pairs->add_option("model", model, "tokenizer.model, or a model directory")->required();
    pairs->add_option("--src", src, "source text, one sentence a line")->required();
    pairs->add_option("--tgt", tgt, "target text, line by line with --src (omit for decoder-only data)");
    pairs->add_option("--out", out, "the token-id file to write")->required();
    pairs->add_option("--max-len", max_len, "leave out pairs with a longer side (tokens)")->check(CLI::PositiveNumber);
    pairs->add_flag("--force", force, "replace --out");

    try {
        app.parse(argc, argv);
    } catch (const CLI::ParseError &e) {
        return app.exit(e);
    }
    // A model directory names its tokenizer in config.json.
    auto resolve = [](const std::string &m) {
        struct stat st;
        if (stat(m.c_str(), &st) != 0 || !S_ISDIR(st.st_mode)) return m;
        const Config c = Config::from_file(m + "/config.json");
        if (c.tokenizer.empty()) throw Error(m + "/config.json names no tokenizer");
        return m + "/" + c.tokenizer;
    };
    if (tr->parsed()) {
        Tokenizer::train(to, train_out);
        Tokenizer t = Tokenizer::load(train_out);
        std::printf("%s: %d pieces (pad %d, bos %d, eos %d, unk %d)\n", train_out.c_str(), t.vocab_size(), t.pad_id(),
                    t.bos_id(), t.eos_id(), t.unk_id());
        return 0;
    }
    if (pairs->parsed()) return run_pairs(resolve(model), src, tgt, out, max_len, force);

    Tokenizer t = Tokenizer::load(resolve(model));
    const bool from_stdin = (enc->parsed() ? enc->count("text") : dec->count("ids")) == 0;
    int failures = 0;
    int64_t line = 0;
    auto one = [&](const std::string &s) {
        line++;
        try {
            if (enc->parsed()) {
                if (show_pieces) {
                    auto p = t.pieces(s);
                    for (size_t i = 0; i < p.size(); i++) std::printf("%s%s", i ? " " : "", p[i].c_str());
                    std::printf("\n");
                } else {
                    std::printf("%s\n", join_ids(t.encode(s)).c_str());
                }
            } else {
                std::printf("%s\n", one_line(t.decode(parse_ids(s))).c_str());
            }
        } catch (const Error &e) {
            failures++;
            std::printf("\n");  // the output stays line for line with the input
            std::fprintf(stderr, "halformer tokenizer: line %lld: %s\n", (long long)line, e.what());
        }
    };
    if (!from_stdin) {
        one(text);
    } else {
        std::string s;
        while (std::getline(std::cin, s)) {
            strip_cr(s);
            one(s);
        }
    }
    return failures ? 1 : 0;
}

}  // namespace halformer
