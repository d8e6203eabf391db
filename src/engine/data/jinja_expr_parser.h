// The Jinja expression parser (jinja.h): the tokens of one tag (jinja_lexer.h) -> an expression
// tree (jinja_ast.h), with jinja2's precedence: or < and < not < comparisons < + - < ~ <
// * / // % < unary < postfix (. [] ()) and filters / tests. jinja_parser.cc drives it for every
// {{ }} and {% %} tag. Nesting is bounded (kMaxExpressionDepth) so that no template, however
// hostile, can overflow the stack of the parser, the renderer or the tree's destructor.
// Internal to src/engine/data. Thread safety: one parser per tag, used by one thread.
#pragma once

#include <fmt/format.h>

#include <algorithm>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "base/status.h"
#include "engine/data/jinja_ast.h"
#include "engine/data/jinja_lexer.h"

namespace air::engine::jinja {

// How deep an expression may nest — parentheses, brackets, `not`/`-` chains, and the left-leaning
// trees of long operator, filter and attribute chains — before the template is refused: far
// beyond any real template, and well within the stack that parsing, rendering and destroying
// such a tree need.
constexpr int kMaxExpressionDepth = 200;

class ExprParser {
 public:
  ExprParser(std::vector<Token> tokens, int line) : t_(std::move(tokens)), line_(line) {}

  Result<ExprPtr> Expression();
  bool AtName(std::string_view name) const {
    return t_[p_].kind == Token::Kind::kName && t_[p_].text == name;
  }
  bool AtOp(std::string_view op) const {
    return t_[p_].kind == Token::Kind::kOp && t_[p_].text == op;
  }
  bool AtEnd() const { return t_[p_].kind == Token::Kind::kEnd; }
  const Token& Next() { return t_[p_++]; }
  Status Expect(std::string_view op) {
    if (!AtOp(op)) return Error(fmt::format("expected '{}'", op));
    ++p_;
    return Status::Ok();
  }
  Result<std::string> Name() {
    if (t_[p_].kind != Token::Kind::kName) return Error("expected a name");
    return t_[p_++].text;
  }
  Status Error(const std::string& what) const {
    std::string near =
        AtEnd() ? "end of tag"
                : (t_[p_].kind == Token::Kind::kString ? "a string" : "'" + t_[p_].text + "'");
    return InvalidArgument(fmt::format("line {}: {} (at {})", line_, what, near));
  }
  Status ExpectEnd() { return AtEnd() ? Status::Ok() : Error("unexpected text"); }
  Status TooDeep() const {
    return InvalidArgument(fmt::format("line {}: the expression nests more than {} levels deep",
                                       line_, kMaxExpressionDepth));
  }

  Result<ExprPtr> Or();

 private:
  ExprPtr Make(Expr::Kind kind, std::string name, std::vector<ExprPtr> args) {
    auto e = std::make_shared<Expr>();
    e->kind = kind;
    e->name = std::move(name);
    e->args = std::move(args);
    e->line = line_;
    for (const ExprPtr& arg : e->args) {
      if (arg) e->depth = std::max(e->depth, arg->depth + 1);
    }
    // Past the limit the chain stops growing (the grammar's loops check too_deep_) and
    // Expression() reports it.
    too_deep_ |= e->depth > kMaxExpressionDepth;
    return e;
  }

  Result<ExprPtr> Ternary();
  Result<ExprPtr> And();
  Result<ExprPtr> Not();
  Result<ExprPtr> Compare();
  Result<ExprPtr> Sum();
  Result<ExprPtr> Concat();
  Result<ExprPtr> Product();
  Result<ExprPtr> Unary(bool with_filters);
  Result<ExprPtr> Primary();
  Status CallArguments(Expr* call);
  Result<ExprPtr> Postfix(ExprPtr node);
  bool StartsOperand() const;
  Result<ExprPtr> Filters(ExprPtr node);

  std::vector<Token> t_;
  size_t p_ = 0;
  int line_;
  int nesting_ = 0;        // Expression() calls in progress
  bool too_deep_ = false;  // a node past kMaxExpressionDepth was made
};

}  // namespace air::engine::jinja
