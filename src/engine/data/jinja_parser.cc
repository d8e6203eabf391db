// Jinja parser: segments from the lexer (jinja_lexer.h) -> syntax tree (jinja_ast.h).
// Expressions use jinja2's precedence: or < and < not < comparisons <
// + - < ~ < * / // % < unary < postfix (. [] ()) and filters / tests.
#include <fmt/format.h>

#include <cctype>
#include <set>

#include "engine/data/jinja.h"
#include "engine/data/jinja_ast.h"
#include "engine/data/jinja_lexer.h"

namespace air::engine::jinja {
namespace {

// ---- expressions ----

class ExprParser {
 public:
  ExprParser(std::vector<Token> tokens, int line) : t_(std::move(tokens)), line_(line) {}

  Result<ExprPtr> Expression() { return Ternary(); }
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

  Result<ExprPtr> Or() {
    AIR_ASSIGN_OR_RETURN(ExprPtr left, And());
    while (AtName("or")) {
      ++p_;
      AIR_ASSIGN_OR_RETURN(ExprPtr right, And());
      left = Make(Expr::Kind::kOr, "", {left, right});
    }
    return left;
  }

 private:
  ExprPtr Make(Expr::Kind kind, std::string name, std::vector<ExprPtr> args) {
    auto e = std::make_shared<Expr>();
    e->kind = kind;
    e->name = std::move(name);
    e->args = std::move(args);
    e->line = line_;
    return e;
  }

  Result<ExprPtr> Ternary() {
    AIR_ASSIGN_OR_RETURN(ExprPtr value, Or());
    if (!AtName("if")) return value;
    ++p_;
    AIR_ASSIGN_OR_RETURN(ExprPtr condition, Or());
    ExprPtr otherwise;
    if (AtName("else")) {
      ++p_;
      AIR_ASSIGN_OR_RETURN(otherwise, Ternary());
    }
    return Make(Expr::Kind::kTernary, "", {value, condition, otherwise});
  }
  Result<ExprPtr> And() {
    AIR_ASSIGN_OR_RETURN(ExprPtr left, Not());
    while (AtName("and")) {
      ++p_;
      AIR_ASSIGN_OR_RETURN(ExprPtr right, Not());
      left = Make(Expr::Kind::kAnd, "", {left, right});
    }
    return left;
  }
  Result<ExprPtr> Not() {
    if (AtName("not")) {
      ++p_;
      AIR_ASSIGN_OR_RETURN(ExprPtr operand, Not());
      return Make(Expr::Kind::kUnary, "not", {operand});
    }
    return Compare();
  }
  Result<ExprPtr> Compare() {
    AIR_ASSIGN_OR_RETURN(ExprPtr left, Sum());
    while (true) {
      std::string op;
      if (t_[p_].kind == Token::Kind::kOp &&
          (AtOp("==") || AtOp("!=") || AtOp("<") || AtOp("<=") || AtOp(">") || AtOp(">="))) {
        op = Next().text;
      } else if (AtName("in")) {
        ++p_;
        op = "in";
      } else if (AtName("not") && t_[p_ + 1].kind == Token::Kind::kName &&
                 t_[p_ + 1].text == "in") {
        p_ += 2;
        op = "not in";
      } else {
        return left;
      }
      AIR_ASSIGN_OR_RETURN(ExprPtr right, Sum());
      left = Make(Expr::Kind::kBinary, op, {left, right});
    }
  }
  Result<ExprPtr> Sum() {
    AIR_ASSIGN_OR_RETURN(ExprPtr left, Concat());
    while (AtOp("+") || AtOp("-")) {
      std::string op = Next().text;
      AIR_ASSIGN_OR_RETURN(ExprPtr right, Concat());
      left = Make(Expr::Kind::kBinary, op, {left, right});
    }
    return left;
  }
  Result<ExprPtr> Concat() {
    AIR_ASSIGN_OR_RETURN(ExprPtr left, Product());
    while (AtOp("~")) {
      ++p_;
      AIR_ASSIGN_OR_RETURN(ExprPtr right, Product());
      left = Make(Expr::Kind::kBinary, "~", {left, right});
    }
    return left;
  }
  Result<ExprPtr> Product() {
    AIR_ASSIGN_OR_RETURN(ExprPtr left, Unary(true));
    while (AtOp("*") || AtOp("/") || AtOp("//") || AtOp("%")) {
      std::string op = Next().text;
      AIR_ASSIGN_OR_RETURN(ExprPtr right, Unary(true));
      left = Make(Expr::Kind::kBinary, op, {left, right});
    }
    return left;
  }
  Result<ExprPtr> Unary(bool with_filters) {
    ExprPtr node;
    if (AtOp("-") || AtOp("+")) {
      std::string op = Next().text;
      AIR_ASSIGN_OR_RETURN(ExprPtr operand, Unary(false));
      node = Make(Expr::Kind::kUnary, op, {operand});
    } else {
      AIR_ASSIGN_OR_RETURN(node, Primary());
    }
    AIR_ASSIGN_OR_RETURN(node, Postfix(node));
    if (with_filters) return Filters(node);
    return node;
  }
  Result<ExprPtr> Primary() {
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
  Status CallArguments(Expr* call) {
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
  Result<ExprPtr> Postfix(ExprPtr node) {
    while (true) {
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
  }
  bool StartsOperand() const {
    static const std::set<std::string> kKeywords = {"and", "or", "not", "if", "else", "in", "is"};
    const Token& t = t_[p_];
    if (t.kind == Token::Kind::kString || t.kind == Token::Kind::kInt ||
        t.kind == Token::Kind::kFloat) {
      return true;
    }
    return t.kind == Token::Kind::kName && !kKeywords.count(t.text);
  }
  Result<ExprPtr> Filters(ExprPtr node) {
    while (true) {
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
  }

  std::vector<Token> t_;
  size_t p_ = 0;
  int line_;
};

// ---- statements ----

class Parser {
 public:
  explicit Parser(std::vector<Segment> segments) : s_(std::move(segments)) {}

  // Parses nodes until a statement whose keyword is in `ends` (returned in *end, with its
  // parser positioned after the keyword) or the end of the template (ends must then be empty).
  Status Body(const std::set<std::string>& ends, std::vector<Node>* out, std::string* end,
              std::unique_ptr<ExprParser>* end_tag) {
    while (pos_ < s_.size()) {
      const Segment& seg = s_[pos_++];
      Node node;
      node.line = seg.line;
      if (seg.kind == Segment::Kind::kText) {
        node.text = seg.text;
        out->push_back(std::move(node));
        continue;
      }
      AIR_ASSIGN_OR_RETURN(auto tokens, Tokenize(seg.text, seg.line));
      auto p = std::make_unique<ExprParser>(std::move(tokens), seg.line);
      if (seg.kind == Segment::Kind::kOutput) {
        node.kind = Node::Kind::kOutput;
        AIR_ASSIGN_OR_RETURN(node.expr, p->Expression());
        AIR_RETURN_IF_ERROR(p->ExpectEnd());
        out->push_back(std::move(node));
        continue;
      }
      AIR_ASSIGN_OR_RETURN(std::string keyword, p->Name());
      if (ends.count(keyword)) {
        *end = keyword;
        *end_tag = std::move(p);
        return Status::Ok();
      }
      AIR_RETURN_IF_ERROR(Statement(keyword, *p, &node));
      out->push_back(std::move(node));
    }
    if (!ends.empty()) {
      std::string closing = *ends.begin();
      for (const std::string& e : ends) {
        if (e.starts_with("end")) closing = e;
      }
      return InvalidArgument(fmt::format("end of template: missing {{% {} %}}", closing));
    }
    return Status::Ok();
  }

 private:
  Status Statement(const std::string& keyword, ExprParser& p, Node* node) {
    std::string end;
    std::unique_ptr<ExprParser> end_tag;
    if (keyword == "if") {
      node->kind = Node::Kind::kIf;
      AIR_ASSIGN_OR_RETURN(ExprPtr condition, p.Expression());
      AIR_RETURN_IF_ERROR(p.ExpectEnd());
      while (true) {
        std::vector<Node> body;
        AIR_RETURN_IF_ERROR(Body({"elif", "else", "endif"}, &body, &end, &end_tag));
        node->branches.emplace_back(condition, std::move(body));
        if (end == "elif") {
          AIR_ASSIGN_OR_RETURN(condition, end_tag->Expression());
          AIR_RETURN_IF_ERROR(end_tag->ExpectEnd());
          continue;
        }
        if (end == "else") {
          AIR_RETURN_IF_ERROR(Body({"endif"}, &node->else_body, &end, &end_tag));
        }
        return Status::Ok();
      }
    }
    if (keyword == "for") {
      node->kind = Node::Kind::kFor;
      do {
        AIR_ASSIGN_OR_RETURN(std::string target, p.Name());
        node->targets.push_back(target);
      } while (p.AtOp(",") && (p.Next(), true));
      if (!p.AtName("in")) return p.Error("expected 'in'");
      p.Next();
      AIR_ASSIGN_OR_RETURN(node->iterable, p.Or());
      if (p.AtName("if")) {
        p.Next();
        AIR_ASSIGN_OR_RETURN(node->condition, p.Expression());
      }
      AIR_RETURN_IF_ERROR(p.ExpectEnd());
      AIR_RETURN_IF_ERROR(Body({"else", "endfor"}, &node->body, &end, &end_tag));
      if (end == "else") AIR_RETURN_IF_ERROR(Body({"endfor"}, &node->else_body, &end, &end_tag));
      return Status::Ok();
    }
    if (keyword == "set") {
      node->kind = Node::Kind::kSet;
      AIR_ASSIGN_OR_RETURN(std::string target, p.Name());
      node->targets.push_back(target);
      if (p.AtOp(".")) {
        p.Next();
        AIR_ASSIGN_OR_RETURN(std::string attr, p.Name());
        node->targets.push_back(attr);
      }
      if (p.AtEnd() && node->targets.size() == 1) {  // {% set x %}...{% endset %}
        return Body({"endset"}, &node->body, &end, &end_tag);
      }
      AIR_RETURN_IF_ERROR(p.Expect("="));
      AIR_ASSIGN_OR_RETURN(node->expr, p.Expression());
      return p.ExpectEnd();
    }
    if (keyword == "macro") {
      node->kind = Node::Kind::kMacro;
      AIR_ASSIGN_OR_RETURN(node->name, p.Name());
      AIR_RETURN_IF_ERROR(p.Expect("("));
      while (!p.AtOp(")")) {
        AIR_ASSIGN_OR_RETURN(std::string param, p.Name());
        ExprPtr default_value;
        if (p.AtOp("=")) {
          p.Next();
          AIR_ASSIGN_OR_RETURN(default_value, p.Expression());
        }
        node->parameters.emplace_back(param, default_value);
        if (!p.AtOp(",")) break;
        p.Next();
      }
      AIR_RETURN_IF_ERROR(p.Expect(")"));
      AIR_RETURN_IF_ERROR(p.ExpectEnd());
      return Body({"endmacro"}, &node->body, &end, &end_tag);
    }
    if (keyword == "generation") {
      node->kind = Node::Kind::kBlock;
      AIR_RETURN_IF_ERROR(p.ExpectEnd());
      return Body({"endgeneration"}, &node->body, &end, &end_tag);
    }
    if (keyword == "break" || keyword == "continue") {
      node->kind = keyword == "break" ? Node::Kind::kBreak : Node::Kind::kContinue;
      return p.ExpectEnd();
    }
    return InvalidArgument(
        fmt::format("line {}: the {{% {} %}} statement is not supported", node->line, keyword));
  }

  std::vector<Segment> s_;
  size_t pos_ = 0;
};

}  // namespace

Result<JinjaTemplate> JinjaTemplate::Parse(std::string_view source) {
  AIR_ASSIGN_OR_RETURN(std::vector<Segment> segments, Lex(source));
  Parser parser(std::move(segments));
  auto body = std::make_shared<std::vector<Node>>();
  std::string end;
  std::unique_ptr<ExprParser> end_tag;
  AIR_RETURN_IF_ERROR(parser.Body({}, body.get(), &end, &end_tag));
  JinjaTemplate t;
  t.body_ = std::move(body);
  return t;
}

}  // namespace air::engine::jinja
