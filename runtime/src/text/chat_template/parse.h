// The chat templates' parse tree (internal to chat_template.cpp):
// expressions (Node) and statements (Stmt), and the parser that builds
// the tree from the lexer's pieces.
#pragma once

#include "lex.h"
#include "value.h"

#include <memory>
#include <string>
#include <utility>
#include <vector>

namespace halformer::jinja {

struct Node;
using NodeP = std::shared_ptr<Node>;
struct Node {
    enum Kind { Lit, Name, Attr, Item, Slice, Call, Filter, Test, Not, Neg, Bin, And, Or, Cond, ListLit, DictLit } kind;
    Value lit;
    std::string name;  // Name, Attr, Filter, Test, Bin's operator
    std::vector<NodeP> kids;  // operands; Call: callee then args; Filter/Test: operand then args
    std::vector<std::pair<std::string, NodeP>> kwargs;
    bool negated = false;  // Test: "is not"
};

// The name a {% filter %} or {% set x | f %} block's text is bound to for its filters.
inline const char *const kBlockName = "\x01block";

struct Stmt;
using StmtP = std::shared_ptr<Stmt>;
using Body = std::vector<StmtP>;
struct Stmt {
    enum Kind { Text, Output, If, For, Set, Break, Continue, Macro, CallBlock, FilterBlock } kind;
    std::string text;
    NodeP expr;                                 // Output, Set's value, For's iterable
    std::vector<std::pair<NodeP, Body>> branches;  // If: (condition, body); the else: condition null
    std::vector<std::string> targets;           // For: loop variables; Set: name (or namespace, attribute);
                                                // Macro: its name, then its parameters
    std::vector<NodeP> defaults;                // Macro: each parameter's default (null: none)
    NodeP filter;                               // For: "if" condition; FilterBlock and block Set: the filters,
                                                // applied to the name kBlockName (the body's text)
    Body body, else_body;                       // For; Macro, CallBlock, FilterBlock, block Set: body
    bool block = false;                         // Set: {% set x %}...{% endset %}
    Where at;
};

// The template's statements from its pieces; throws Error naming the line
// and column of what it cannot parse.
Body parse(std::vector<Piece> pieces);

}  // namespace halformer::jinja
