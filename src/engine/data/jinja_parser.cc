// Jinja parser: segments from the lexer (jinja_lexer.h) -> syntax tree (jinja_ast.h). The
// statements ({% if %}, {% for %}, ...) are parsed here; the expressions inside every tag by
// jinja_expr_parser.h.
#include <fmt/format.h>

#include <set>

#include "engine/data/jinja.h"
#include "engine/data/jinja_ast.h"
#include "engine/data/jinja_expr_parser.h"
#include "engine/data/jinja_lexer.h"

namespace air::engine::jinja {
namespace {

// How deep {% if %}/{% for %}/{% macro %}/... blocks may nest (parsing and rendering recurse).
constexpr int kMaxStatementDepth = 100;

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
      if (++nesting_ > kMaxStatementDepth) {
        return InvalidArgument(fmt::format("line {}: blocks nest more than {} levels deep",
                                           seg.line, kMaxStatementDepth));
      }
      AIR_RETURN_IF_ERROR(Statement(keyword, *p, &node));
      --nesting_;
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
      node->kind = Node::Kind::kGeneration;
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
  int nesting_ = 0;  // Statement() calls in progress
};

}  // namespace

namespace {

bool HasGeneration(const std::vector<Node>& nodes) {
  for (const Node& node : nodes) {
    if (node.kind == Node::Kind::kGeneration || HasGeneration(node.body) ||
        HasGeneration(node.else_body)) {
      return true;
    }
    for (const auto& [condition, body] : node.branches) {
      if (HasGeneration(body)) return true;
    }
  }
  return false;
}

}  // namespace

Result<JinjaTemplate> JinjaTemplate::Parse(std::string_view source) {
  AIR_ASSIGN_OR_RETURN(std::vector<Segment> segments, Lex(source));
  Parser parser(std::move(segments));
  auto body = std::make_shared<std::vector<Node>>();
  std::string end;
  std::unique_ptr<ExprParser> end_tag;
  AIR_RETURN_IF_ERROR(parser.Body({}, body.get(), &end, &end_tag));
  JinjaTemplate t;
  t.has_generation_blocks_ = HasGeneration(*body);
  t.body_ = std::move(body);
  return t;
}

}  // namespace air::engine::jinja
