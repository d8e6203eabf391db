// The syntax tree of the Jinja interpreter (jinja.h): expressions and statements as parsed by
// jinja_parser.cc and evaluated by jinja_render.cc. Internal to src/engine/data.
// Thread safety: immutable after parsing.
#pragma once

#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "engine/data/jinja_value.h"

namespace air::engine::jinja {

struct Expr;
using ExprPtr = std::shared_ptr<const Expr>;

struct Expr {
  enum class Kind {
    kLiteral,  // literal
    kName,     // name
    kAttr,     // args[0].name
    kItem,     // args[0][args[1]]
    kSlice,    // args[0][args[1]:args[2]:args[3]] (null parts allowed)
    kCall,     // args[0](args[1..], kwargs)
    kFilter,   // args[0] | name(args[1..], kwargs)
    kTest,     // args[0] is [not] name(args[1..])
    kUnary,    // name ("not", "-", "+") args[0]
    kBinary,   // args[0] name args[1]: + - * / // % ~ == != < <= > >= in "not in"
    kAnd,
    kOr,
    kTernary,  // args[0] if args[1] else args[2] (args[2] may be null)
    kList,     // [args...]
    kDict,     // {kwargs keys are expressions: args[2i] : args[2i+1]}
  };
  Kind kind = Kind::kLiteral;
  Value literal;
  std::string name;
  bool negated = false;  // kTest: "is not"
  std::vector<ExprPtr> args;
  std::vector<std::pair<std::string, ExprPtr>> kwargs;
  int line = 0;
  int depth = 1;  // 1 + the deepest of args (the parser bounds it)
};

struct Node {
  enum class Kind {
    kText,
    kOutput,
    kIf,
    kFor,
    kSet,
    kBreak,
    kContinue,
    kGeneration,  // {% generation %}...{% endgeneration %}: rendered as its body, span recorded
    kMacro
  };
  Kind kind = Kind::kText;
  int line = 0;
  std::string text;  // kText
  ExprPtr expr;      // kOutput, kSet value
  // kIf: (condition, body) per if/elif; else_body for else.
  std::vector<std::pair<ExprPtr, std::vector<Node>>> branches;
  std::vector<Node> else_body;       // kIf, kFor
  std::vector<std::string> targets;  // kFor loop variables; kSet: {name} or {ns, attr}
  ExprPtr iterable;                  // kFor
  ExprPtr condition;                 // kFor "if" filter
  std::vector<Node> body;            // kFor, kGeneration, kMacro
  std::string name;                  // kMacro
  std::vector<std::pair<std::string, ExprPtr>> parameters;  // kMacro (default may be null)
};

}  // namespace air::engine::jinja
