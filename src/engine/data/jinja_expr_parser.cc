// The Jinja expression parser: one method per precedence level (see jinja_expr_parser.h).
#include "engine/data/jinja_expr_parser.h"

#include <set>

namespace air::engine::jinja {

Result<ExprPtr> ExprParser::Expression() {
  if (++nesting_ > kMaxExpressionDepth) return TooDeep();
  Result<ExprPtr> e = Ternary();
  --nesting_;
  if (too_deep_) return TooDeep();
  return e;
}

Result<ExprPtr> ExprParser::Or() {
  AIR_ASSIGN_OR_RETURN(ExprPtr left, And());
  while (!too_deep_ && AtName("or")) {
    ++p_;
    AIR_ASSIGN_OR_RETURN(ExprPtr right, And());
    left = Make(Expr::Kind::kOr, "", {left, right});
  }
  return left;
}

Result<ExprPtr> ExprParser::Ternary() {
  AIR_ASSIGN_OR_RETURN(ExprPtr value, Or());
  if (!AtName("if")) return value;
  ++p_;
  AIR_ASSIGN_OR_RETURN(ExprPtr condition, Or());
  ExprPtr otherwise;
  if (AtName("else")) {
    ++p_;
    if (++nesting_ > kMaxExpressionDepth) return TooDeep();
    AIR_ASSIGN_OR_RETURN(otherwise, Ternary());
    --nesting_;
  }
  return Make(Expr::Kind::kTernary, "", {value, condition, otherwise});
}

Result<ExprPtr> ExprParser::And() {
  AIR_ASSIGN_OR_RETURN(ExprPtr left, Not());
  while (!too_deep_ && AtName("and")) {
    ++p_;
    AIR_ASSIGN_OR_RETURN(ExprPtr right, Not());
    left = Make(Expr::Kind::kAnd, "", {left, right});
  }
  return left;
}

Result<ExprPtr> ExprParser::Not() {
  if (AtName("not")) {
    ++p_;
    if (++nesting_ > kMaxExpressionDepth) return TooDeep();
    AIR_ASSIGN_OR_RETURN(ExprPtr operand, Not());
    --nesting_;
    return Make(Expr::Kind::kUnary, "not", {operand});
  }
  return Compare();
}

Result<ExprPtr> ExprParser::Compare() {
  AIR_ASSIGN_OR_RETURN(ExprPtr left, Sum());
  while (!too_deep_) {
    std::string op;
    if (t_[p_].kind == Token::Kind::kOp &&
        (AtOp("==") || AtOp("!=") || AtOp("<") || AtOp("<=") || AtOp(">") || AtOp(">="))) {
      op = Next().text;
    } else if (AtName("in")) {
      ++p_;
      op = "in";
    } else if (AtName("not") && t_[p_ + 1].kind == Token::Kind::kName && t_[p_ + 1].text == "in") {
      p_ += 2;
      op = "not in";
    } else {
      return left;
    }
    AIR_ASSIGN_OR_RETURN(ExprPtr right, Sum());
    left = Make(Expr::Kind::kBinary, op, {left, right});
  }
  return left;
}

Result<ExprPtr> ExprParser::Sum() {
  AIR_ASSIGN_OR_RETURN(ExprPtr left, Concat());
  while (!too_deep_ && (AtOp("+") || AtOp("-"))) {
    std::string op = Next().text;
    AIR_ASSIGN_OR_RETURN(ExprPtr right, Concat());
    left = Make(Expr::Kind::kBinary, op, {left, right});
  }
  return left;
}

Result<ExprPtr> ExprParser::Concat() {
  AIR_ASSIGN_OR_RETURN(ExprPtr left, Product());
  while (!too_deep_ && AtOp("~")) {
    ++p_;
    AIR_ASSIGN_OR_RETURN(ExprPtr right, Product());
    left = Make(Expr::Kind::kBinary, "~", {left, right});
  }
  return left;
}

Result<ExprPtr> ExprParser::Product() {
  AIR_ASSIGN_OR_RETURN(ExprPtr left, Unary(true));
  while (!too_deep_ && (AtOp("*") || AtOp("/") || AtOp("//") || AtOp("%"))) {
    std::string op = Next().text;
    AIR_ASSIGN_OR_RETURN(ExprPtr right, Unary(true));
    left = Make(Expr::Kind::kBinary, op, {left, right});
  }
  return left;
}

Result<ExprPtr> ExprParser::Unary(bool with_filters) {
  ExprPtr node;
  if (AtOp("-") || AtOp("+")) {
    std::string op = Next().text;
    if (++nesting_ > kMaxExpressionDepth) return TooDeep();
    AIR_ASSIGN_OR_RETURN(ExprPtr operand, Unary(false));
    --nesting_;
    node = Make(Expr::Kind::kUnary, op, {operand});
  } else {
    AIR_ASSIGN_OR_RETURN(node, Primary());
  }
  AIR_ASSIGN_OR_RETURN(node, Postfix(node));
  if (with_filters) return Filters(node);
  return node;
}

Result<ExprPtr> ExprParser::Primary() {
  const Token& tok = t_[p_];
  if (tok.kind == Token::Kind::kString) {
    // Adjacent string literals concatenate, as in Python.
    std::string value;
    while (t_[p_].kind == Token::Kind::kString) value += t_[p_++].literal.text;
    auto e = Make(Expr::Kind::kLiteral, "", {});
    std::const_pointer_cast<Expr>(e)->literal = Value::Str(value);
    return e;
  }
  if (tok.kind == Token::Kind::kInt || tok.kind == Token::Kind::kFloat) {
    auto e = std::const_pointer_cast<Expr>(Make(Expr::Kind::kLiteral, "", {}));
    e->literal = Next().literal;
    return ExprPtr(e);
  }
  if (tok.kind == Token::Kind::kName) {
    std::string name = Next().text;
    auto e = std::const_pointer_cast<Expr>(Make(Expr::Kind::kLiteral, "", {}));
    if (name == "true" || name == "True") {
      e->literal = Value::Bool(true);
    } else if (name == "false" || name == "False") {
      e->literal = Value::Bool(false);
    } else if (name == "none" || name == "None") {
      e->literal = Value::None();
    } else {
      e->kind = Expr::Kind::kName;
      e->name = name;
    }
    return ExprPtr(e);
  }
  if (AtOp("(")) {
    ++p_;
    AIR_ASSIGN_OR_RETURN(ExprPtr inner, Expression());
    if (!AtOp(",")) {
      AIR_RETURN_IF_ERROR(Expect(")"));
      return inner;
    }
    std::vector<ExprPtr> items = {inner};  // a tuple: kept as a list
    while (AtOp(",")) {
      ++p_;
      if (AtOp(")")) break;
      AIR_ASSIGN_OR_RETURN(ExprPtr item, Expression());
      items.push_back(item);
    }
    AIR_RETURN_IF_ERROR(Expect(")"));
    return Make(Expr::Kind::kList, "", items);
  }
  if (AtOp("[")) {
    ++p_;
    std::vector<ExprPtr> items;
    while (!AtOp("]")) {
      AIR_ASSIGN_OR_RETURN(ExprPtr item, Expression());
      items.push_back(item);
      if (!AtOp(",")) break;
      ++p_;
    }
    AIR_RETURN_IF_ERROR(Expect("]"));
    return Make(Expr::Kind::kList, "", items);
  }
  if (AtOp("{")) {
    ++p_;
    std::vector<ExprPtr> items;
    while (!AtOp("}")) {
      AIR_ASSIGN_OR_RETURN(ExprPtr key, Expression());
      AIR_RETURN_IF_ERROR(Expect(":"));
      AIR_ASSIGN_OR_RETURN(ExprPtr value, Expression());
      items.push_back(key);
      items.push_back(value);
      if (!AtOp(",")) break;
      ++p_;
    }
    AIR_RETURN_IF_ERROR(Expect("}"));
    return Make(Expr::Kind::kDict, "", items);
  }
  return Error("expected an expression");
}

Status ExprParser::CallArguments(Expr* call) {
  AIR_RETURN_IF_ERROR(Expect("("));
  while (!AtOp(")")) {
    if (t_[p_].kind == Token::Kind::kName && t_[p_ + 1].kind == Token::Kind::kOp &&
        t_[p_ + 1].text == "=") {
      std::string key = Next().text;
      ++p_;
      AIR_ASSIGN_OR_RETURN(ExprPtr value, Expression());
      call->kwargs.emplace_back(key, value);
    } else {
      AIR_ASSIGN_OR_RETURN(ExprPtr value, Expression());
      call->args.push_back(value);
    }
    if (!AtOp(",")) break;
    ++p_;
  }
  return Expect(")");
}

Result<ExprPtr> ExprParser::Postfix(ExprPtr node) {
  while (!too_deep_) {
    if (AtOp(".")) {
      ++p_;
      AIR_ASSIGN_OR_RETURN(std::string attr, Name());
      node = Make(Expr::Kind::kAttr, attr, {node});
    } else if (AtOp("[")) {
      ++p_;
      ExprPtr parts[3];
      bool slice = false;
      for (int i = 0; i < 3; ++i) {
        if (!AtOp(":") && !AtOp("]")) {
          AIR_ASSIGN_OR_RETURN(parts[i], Expression());
        }
        if (i < 2 && AtOp(":")) {
          ++p_;
          slice = true;
        } else {
          break;
        }
      }
      AIR_RETURN_IF_ERROR(Expect("]"));
      node = slice ? Make(Expr::Kind::kSlice, "", {node, parts[0], parts[1], parts[2]})
                   : Make(Expr::Kind::kItem, "", {node, parts[0]});
    } else if (AtOp("(")) {
      auto call = std::const_pointer_cast<Expr>(Make(Expr::Kind::kCall, "", {node}));
      AIR_RETURN_IF_ERROR(CallArguments(call.get()));
      node = call;
    } else {
      return node;
    }
  }
  return node;
}

bool ExprParser::StartsOperand() const {
  static const std::set<std::string> kKeywords = {"and", "or", "not", "if", "else", "in", "is"};
  const Token& t = t_[p_];
  if (t.kind == Token::Kind::kString || t.kind == Token::Kind::kInt ||
      t.kind == Token::Kind::kFloat) {
    return true;
  }
  return t.kind == Token::Kind::kName && !kKeywords.count(t.text);
}

Result<ExprPtr> ExprParser::Filters(ExprPtr node) {
  while (!too_deep_) {
    if (AtOp("|")) {
      ++p_;
      AIR_ASSIGN_OR_RETURN(std::string name, Name());
      auto f = std::const_pointer_cast<Expr>(Make(Expr::Kind::kFilter, name, {node}));
      if (AtOp("(")) AIR_RETURN_IF_ERROR(CallArguments(f.get()));
      node = f;
    } else if (AtName("is")) {
      ++p_;
      auto test = std::const_pointer_cast<Expr>(Make(Expr::Kind::kTest, "", {node}));
      if (AtName("not")) {
        ++p_;
        test->negated = true;
      }
      AIR_ASSIGN_OR_RETURN(test->name, Name());
      if (AtOp("(")) {
        AIR_RETURN_IF_ERROR(CallArguments(test.get()));
      } else if (StartsOperand()) {
        AIR_ASSIGN_OR_RETURN(ExprPtr arg, Unary(false));
        test->args.push_back(arg);
      }
      node = test;
    } else {
      return node;
    }
  }
  return node;
}

}  // namespace air::engine::jinja
