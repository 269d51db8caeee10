// The parser: a recursive-descent parser of a tag's expression
// (ExprParser), and of the statements the pieces make (Parser).
#include "parse.h"

#include "halformer/error.h"

#include <algorithm>
#include <sstream>

namespace halformer::jinja {

namespace {

// --------------------------------------------------------- expressions

class ExprParser {
public:
    ExprParser(std::vector<Tok> t, Where at) : t_(std::move(t)), at_(at) {}
    NodeP expression() { return conditional(); }
    // A for loop's iterable: no conditional (its "if" filters the loop).
    NodeP expression_no_cond() { return or_expr(); }
    bool at_end() const { return t_[k_].kind == Tok::End; }
    // The tokens not read yet (the last End).
    std::vector<Tok> rest() const { return std::vector<Tok>(t_.begin() + (long)k_, t_.end()); }
    const Tok &peek(size_t ahead = 0) const { return t_[std::min(k_ + ahead, t_.size() - 1)]; }
    bool accept(const std::string &op) {
        if ((peek().kind == Tok::Op || peek().kind == Tok::Name) && peek().text == op) {
            k_++;
            return true;
        }
        return false;
    }
    void expect(const std::string &op) {
        if (!accept(op)) fail("expected '" + op + "', found " + describe(peek()));
    }
    std::string name() {
        if (peek().kind != Tok::Name) fail("expected a name, found " + describe(peek()));
        return t_[k_++].text;
    }
    [[noreturn]] void fail(const std::string &msg) const { throw Error("chat template: " + at_.str() + ": " + msg); }
    static std::string describe(const Tok &t) { return t.kind == Tok::End ? "the end of the tag" : "'" + t.text + "'"; }

private:
    static NodeP make(Node::Kind k) {
        auto n = std::make_shared<Node>();
        n->kind = k;
        return n;
    }
    // Nesting is bounded (a template of 100,000 parentheses is an Error, not
    // a stack overflow).
    struct Depth {
        ExprParser &p;
        explicit Depth(ExprParser &q) : p(q) {
            if (++p.depth_ > 200) p.fail("expressions nested more than 200 deep");
        }
        ~Depth() { p.depth_--; }
    };
    int depth_ = 0;
    NodeP conditional() {
        Depth guard(*this);
        NodeP a = or_expr();
        if (peek().kind == Tok::Name && peek().text == "if") {
            k_++;
            NodeP c = or_expr();
            NodeP b;
            if (accept("else")) b = conditional();
            auto n = make(Node::Cond);
            n->kids = {c, a, b};
            return n;
        }
        return a;
    }
    NodeP or_expr() {
        NodeP a = and_expr();
        while (accept("or")) {
            auto n = make(Node::Or);
            n->kids = {a, and_expr()};
            a = n;
        }
        return a;
    }
    NodeP and_expr() {
        NodeP a = not_expr();
        while (accept("and")) {
            auto n = make(Node::And);
            n->kids = {a, not_expr()};
            a = n;
        }
        return a;
    }
    NodeP not_expr() {
        if (accept("not")) {
            auto n = make(Node::Not);
            n->kids = {not_expr()};
            return n;
        }
        return comparison();
    }
    NodeP comparison() {
        NodeP a = concat();
        for (;;) {
            std::string op;
            if (peek().kind == Tok::Op && (peek().text == "==" || peek().text == "!=" || peek().text == "<" ||
                                           peek().text == ">" || peek().text == "<=" || peek().text == ">=")) {
                op = t_[k_++].text;
            } else if (peek().kind == Tok::Name && peek().text == "in") {
                k_++;
                op = "in";
            } else if (peek().kind == Tok::Name && peek().text == "not" && peek(1).kind == Tok::Name &&
                       peek(1).text == "in") {
                k_ += 2;
                op = "not in";
            } else if (peek().kind == Tok::Name && peek().text == "is") {
                k_++;
                auto n = make(Node::Test);
                n->negated = accept("not");
                n->name = name();
                n->kids = {a};
                if (peek().kind == Tok::Op && peek().text == "(") {
                    k_++;
                    args(n);
                } else if (peek().kind == Tok::Str || peek().kind == Tok::Int || peek().kind == Tok::Float ||
                           (peek().kind == Tok::Name && peek().text != "and" && peek().text != "or" &&
                            peek().text != "else" && peek().text != "if")) {
                    n->kids.push_back(primary());  // "is divisibleby 3", "is sameas x"
                }
                a = n;
                continue;
            } else {
                return a;
            }
            auto n = make(Node::Bin);
            n->name = op;
            n->kids = {a, concat()};
            a = n;
        }
    }
    NodeP concat() {
        NodeP a = additive();
        while (accept("~")) {
            auto n = make(Node::Bin);
            n->name = "~";
            n->kids = {a, additive()};
            a = n;
        }
        return a;
    }
    NodeP additive() {
        NodeP a = multiplicative();
        while (peek().kind == Tok::Op && (peek().text == "+" || peek().text == "-")) {
            auto n = make(Node::Bin);
            n->name = t_[k_++].text;
            n->kids = {a, multiplicative()};
            a = n;
        }
        return a;
    }
    NodeP multiplicative() {
        NodeP a = unary();
        while (peek().kind == Tok::Op &&
               (peek().text == "*" || peek().text == "/" || peek().text == "//" || peek().text == "%")) {
            auto n = make(Node::Bin);
            n->name = t_[k_++].text;
            n->kids = {a, unary()};
            a = n;
        }
        return a;
    }
    // As jinja2: a unary minus binds tighter than filters (-3|abs is 3),
    // attributes, items and calls tighter than it.
    NodeP unary(bool with_filter = true) {
        Depth guard(*this);
        NodeP n;
        if (peek().kind == Tok::Op && peek().text == "-") {
            k_++;
            n = make(Node::Neg);
            n->kids = {unary(false)};
        } else if (peek().kind == Tok::Op && peek().text == "+") {
            k_++;
            n = unary(false);
        } else {
            n = postfix(primary(), false);
        }
        return with_filter ? postfix(n, true) : n;
    }
    void args(const NodeP &n) {
        if (accept(")")) return;
        for (;;) {
            if (accept(")")) return;  // (a trailing comma)
            if (peek().kind == Tok::Name && peek(1).kind == Tok::Op && peek(1).text == "=") {
                std::string key = name();
                k_++;
                n->kwargs.emplace_back(key, expression());
            } else {
                n->kids.push_back(expression());
            }
            if (accept(")")) return;
            expect(",");
        }
    }
    NodeP postfix(NodeP a, bool filters) {
        for (;;) {
            if (accept(".")) {
                auto n = make(Node::Attr);
                n->name = name();
                n->kids = {a};
                a = n;
            } else if (accept("[")) {
                NodeP lo, hi, step;
                bool slice = false;
                if (!(peek().kind == Tok::Op && peek().text == ":")) lo = expression();
                if (accept(":")) {
                    slice = true;
                    if (!(peek().kind == Tok::Op && (peek().text == "]" || peek().text == ":"))) hi = expression();
                    if (accept(":") && !(peek().kind == Tok::Op && peek().text == "]")) step = expression();
                }
                expect("]");
                auto n = make(slice ? Node::Slice : Node::Item);
                n->kids = {a, lo, hi, step};
                a = n;
            } else if (peek().kind == Tok::Op && peek().text == "(") {
                k_++;
                auto n = make(Node::Call);
                n->kids = {a};
                args(n);
                a = n;
            } else if (filters && peek().kind == Tok::Op && peek().text == "|") {
                k_++;
                auto n = make(Node::Filter);
                n->name = name();
                n->kids = {a};
                if (accept("(")) args(n);
                a = n;
            } else {
                return a;
            }
        }
    }
    NodeP primary() {
        const Tok &t = peek();
        if (t.kind == Tok::Str) {
            k_++;
            std::string s = t.text;
            while (peek().kind == Tok::Str) s += t_[k_++].text;  // adjacent literals join
            auto n = make(Node::Lit);
            n->lit = Value::str(s);
            return n;
        }
        if (t.kind == Tok::Int || t.kind == Tok::Float) {
            k_++;
            auto n = make(Node::Lit);
            n->lit = t.kind == Tok::Int ? Value::integer(t.i) : Value::real(t.f);
            return n;
        }
        if (t.kind == Tok::Name) {
            k_++;
            auto n = make(Node::Lit);
            if (t.text == "true" || t.text == "True") n->lit = Value::boolean(true);
            else if (t.text == "false" || t.text == "False") n->lit = Value::boolean(false);
            else if (t.text == "none" || t.text == "None") n->lit = Value::none();
            else {
                n->kind = Node::Name;
                n->name = t.text;
            }
            return n;
        }
        if (accept("(")) {
            NodeP e = expression();
            if (accept(",")) {  // a tuple
                auto n = make(Node::ListLit);
                n->name = "tuple";
                n->kids = {e};
                while (!accept(")")) {
                    n->kids.push_back(expression());
                    if (!accept(",")) {
                        expect(")");
                        break;
                    }
                }
                return n;
            }
            expect(")");
            return e;
        }
        if (accept("[")) {
            auto n = make(Node::ListLit);
            while (!accept("]")) {
                n->kids.push_back(expression());
                if (!accept(",")) {
                    expect("]");
                    break;
                }
            }
            return n;
        }
        if (accept("{")) {
            auto n = make(Node::DictLit);
            while (!accept("}")) {
                n->kids.push_back(expression());
                expect(":");
                n->kids.push_back(expression());
                if (!accept(",")) {
                    expect("}");
                    break;
                }
            }
            return n;
        }
        fail("unexpected " + describe(t));
    }

    std::vector<Tok> t_;
    size_t k_ = 0;
    Where at_;
};

// ------------------------------------------------------------ statements

class Parser {
public:
    explicit Parser(std::vector<Piece> p) : p_(std::move(p)) {}
    Body parse() {
        Body b = block({});
        if (k_ < p_.size()) fail(p_[k_].at, "unexpected {% " + head(p_[k_]) + " %}");
        return b;
    }

private:
    [[noreturn]] static void fail(const Where &at, const std::string &msg) {
        throw Error("chat template: " + at.str() + ": " + msg);
    }
    static std::string head(const Piece &p) {
        std::istringstream in(p.text);
        std::string w;
        in >> w;
        return w;
    }
    // Statements up to one whose keyword is in `ends` (left unconsumed).
    int depth_ = 0;
    Body block(const std::vector<std::string> &ends) {
        if (++depth_ > 200) fail(k_ < p_.size() ? p_[k_].at : Where{}, "blocks nested more than 200 deep");
        struct Leave {
            int &d;
            ~Leave() { d--; }
        } leave{depth_};
        Body out;
        while (k_ < p_.size()) {
            const Piece &p = p_[k_];
            if (p.kind == Piece::Text) {
                auto s = std::make_shared<Stmt>();
                s->kind = Stmt::Text;
                s->text = p.text;
                out.push_back(s);
                k_++;
                continue;
            }
            if (p.kind == Piece::Expr) {
                ExprParser e(tokenize(p.text, p.at), p.at);
                auto s = std::make_shared<Stmt>();
                s->kind = Stmt::Output;
                s->expr = e.expression();
                if (!e.at_end()) e.fail("unexpected " + ExprParser::describe(e.peek()) + " in {{ }}");
                s->at = p.at;
                out.push_back(s);
                k_++;
                continue;
            }
            const std::string kw = head(p);
            if (std::find(ends.begin(), ends.end(), kw) != ends.end()) return out;
            out.push_back(statement(kw));
        }
        if (!ends.empty()) {
            fail(p_.empty() ? Where{} : p_.back().at, "the template ends inside a block: expected {% " + ends.back() + " %}");
        }
        return out;
    }
    StmtP statement(const std::string &kw) {
        const Piece &p = p_[k_];
        ExprParser e(tokenize(p.text, p.at), p.at);
        e.name();  // the keyword
        auto s = std::make_shared<Stmt>();
        s->at = p.at;
        k_++;
        if (kw == "if") {
            s->kind = Stmt::If;
            NodeP cond = e.expression();
            end_of_tag(e);
            for (;;) {
                Body b = block({"elif", "else", "endif"});
                s->branches.emplace_back(cond, std::move(b));
                if (k_ >= p_.size()) fail(s->at, "{% if %} without {% endif %}");
                const std::string next = head(p_[k_]);
                ExprParser n(tokenize(p_[k_].text, p_[k_].at), p_[k_].at);
                n.name();
                k_++;
                if (next == "elif") {
                    cond = n.expression();
                    end_of_tag(n);
                } else if (next == "else") {
                    end_of_tag(n);
                    Body eb = block({"endif"});
                    s->branches.emplace_back(nullptr, std::move(eb));
                    ExprParser x(tokenize(p_[k_].text, p_[k_].at), p_[k_].at);
                    x.name();
                    end_of_tag(x);
                    k_++;
                    return s;
                } else {
                    end_of_tag(n);
                    return s;
                }
            }
        }
        if (kw == "for") {
            s->kind = Stmt::For;
            s->targets.push_back(e.name());
            while (e.accept(",")) s->targets.push_back(e.name());
            e.expect("in");
            s->expr = e.expression_no_cond();
            if (e.accept("if")) s->filter = e.expression();
            if (e.accept("recursive")) e.fail("recursive loops are not supported");
            end_of_tag(e);
            s->body = block({"else", "endfor"});
            if (k_ < p_.size() && head(p_[k_]) == "else") {
                k_++;
                s->else_body = block({"endfor"});
            }
            k_++;
            return s;
        }
        if (kw == "set") {
            s->kind = Stmt::Set;
            s->targets.push_back(e.name());
            if (e.accept(".")) s->targets.push_back(e.name());
            if (e.accept("=")) {
                s->expr = e.expression();
                end_of_tag(e);
                return s;
            }
            // {% set x %}...{% endset %}, or {% set x | filters %}...{% endset %}
            s->block = true;
            if (!e.at_end()) {
                if (!(e.peek().kind == Tok::Op && e.peek().text == "|")) e.fail("expected '=' or '|', found " + ExprParser::describe(e.peek()));
                s->filter = block_filters(e, p.at, false);
            }
            s->body = block({"endset"});
            close_block("endset");
            return s;
        }
        if (kw == "filter") {
            s->kind = Stmt::FilterBlock;
            if (e.at_end()) e.fail("{% filter %} without a filter");
            s->filter = block_filters(e, p.at, true);
            s->body = block({"endfilter"});
            close_block("endfilter");
            return s;
        }
        if (kw == "macro") {
            s->kind = Stmt::Macro;
            s->targets.push_back(e.name());
            e.expect("(");
            while (!e.accept(")")) {
                s->targets.push_back(e.name());
                s->defaults.push_back(e.accept("=") ? e.expression() : nullptr);
                if (!s->defaults.back() && std::count(s->defaults.begin(), s->defaults.end(), nullptr) != (long)s->defaults.size()) {
                    e.fail("a parameter without a default after one with a default");
                }
                if (e.accept(")")) break;
                e.expect(",");
            }
            end_of_tag(e);
            s->body = block({"endmacro"});
            close_block("endmacro");
            return s;
        }
        if (kw == "call") {
            s->kind = Stmt::CallBlock;
            if (e.peek().kind == Tok::Op && e.peek().text == "(") e.fail("{% call(args) %} (a caller with parameters) is not supported");
            s->expr = e.expression();
            if (s->expr->kind != Node::Call) e.fail("{% call %} needs a macro call");
            end_of_tag(e);
            s->body = block({"endcall"});
            close_block("endcall");
            return s;
        }
        if (kw == "break" || kw == "continue") {
            s->kind = kw == "break" ? Stmt::Break : Stmt::Continue;
            end_of_tag(e);
            return s;
        }
        if (kw == "endfor" || kw == "endif" || kw == "elif" || kw == "else" || kw == "endset" || kw == "endmacro" ||
            kw == "endfilter" || kw == "endcall") {
            fail(p.at, "unexpected {% " + kw + " %}");
        }
        if (kw == "generation" || kw == "endgeneration") {  // transformers' AssistantTracker: markers only
            s->kind = Stmt::Text;
            return s;
        }
        fail(p.at, "{% " + kw + " %} is not supported by Halformer's chat templates");
    }
    // The filters of a {% filter f|g %} or {% set x | f %} tag (`bare`: no
    // leading '|'), as filters of the name kBlockName.
    static NodeP block_filters(ExprParser &e, const Where &at, bool bare) {
        std::vector<Tok> t{{Tok::Name, kBlockName}};
        if (bare) t.push_back({Tok::Op, "|"});
        for (const Tok &x : e.rest()) t.push_back(x);
        ExprParser f(std::move(t), at);
        NodeP n = f.expression();
        end_of_tag(f);
        if (n->kind != Node::Filter) f.fail("expected filters");
        return n;
    }
    // The {% end... %} that block() stopped at.
    void close_block(const std::string &kw) {
        ExprParser x(tokenize(p_[k_].text, p_[k_].at), p_[k_].at);
        x.name();
        if (kw == "endmacro" && x.peek().kind == Tok::Name) x.name();  // {% endmacro name %}
        end_of_tag(x);
        k_++;
    }
    static void end_of_tag(ExprParser &e) {
        if (!e.at_end()) e.fail("unexpected " + ExprParser::describe(e.peek()));
    }

    std::vector<Piece> p_;
    size_t k_ = 0;
};

}  // namespace

Body parse(std::vector<Piece> pieces) {
    return Parser(std::move(pieces)).parse();
}

}  // namespace halformer::jinja
