// The chat templates' lexer and tokenizer (internal to chat_template.cpp):
// the source cut into text, {{ }} and {% %} pieces, and a tag's inside cut
// into tokens.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace halformer::jinja {

struct Where {
    int line = 1, col = 1;
    std::string str() const { return "line " + std::to_string(line) + ", column " + std::to_string(col); }
};

struct Piece {
    enum Kind { Text, Expr, Stmt } kind;
    std::string text;  // Text: the text; Expr / Stmt: the tag's inside
    Where at;
};

// The template's pieces, with jinja2's whitespace rules as transformers sets
// them.
std::vector<Piece> lex(const std::string &src);

struct Tok {
    enum Kind { Name, Str, Int, Float, Op, End } kind;
    std::string text;
    int64_t i = 0;
    double f = 0;
};

// A tag's inside as tokens, the last End; errors name `at`.
std::vector<Tok> tokenize(const std::string &s, const Where &at);

}  // namespace halformer::jinja
