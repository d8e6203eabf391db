// Jinja evaluation: expressions and statements over a scope stack (see jinja.h).
//
// Scopes follow jinja2: the template has one scope; each for-loop iteration and each macro call
// gets a child scope, so `set` inside a loop does not leak out (templates use namespace() objects
// for that). `loop` is a fresh dict per iteration.
#include <fmt/format.h>

#include <unordered_map>

#include "engine/data/jinja.h"
#include "engine/data/jinja_ast.h"
#include "engine/data/jinja_builtins.h"

namespace air::engine::jinja {
namespace {

enum class Flow { kNormal, kBreak, kContinue };

// Scopes open at once (macro calls and loops nested at run time) before rendering stops.
constexpr size_t kMaxScopes = 200;

class Renderer {
 public:
  explicit Renderer(const nlohmann::json& context) {
    scopes_.emplace_back();
    for (auto& [name, value] : Globals()) scopes_.back()[name] = value;
    if (context.is_object()) {
      for (const auto& [k, v] : context.items()) scopes_.back()[k] = Value::FromJson(v);
    }
  }

  // Renders the template body into `out`, the template's output.
  Result<Flow> ExecRoot(const std::vector<Node>& nodes, std::string* out) {
    root_ = out;
    return Exec(nodes, out);
  }

  std::vector<std::pair<size_t, size_t>> TakeGenerationSpans() {
    return std::move(generation_spans_);
  }

  Result<Flow> Exec(const std::vector<Node>& nodes, std::string* out) {
    for (const Node& node : nodes) {
      AIR_ASSIGN_OR_RETURN(Flow flow, ExecOne(node, out));
      if (flow != Flow::kNormal) return flow;
    }
    return Flow::kNormal;
  }

 private:
  Status At(int line, const Status& s) {
    if (s.message().starts_with("line ")) return s;
    return Status(s.code(), fmt::format("line {}: {}", line, s.message()));
  }

  Value Lookup(const std::string& name) const {
    for (auto it = scopes_.rbegin(); it != scopes_.rend(); ++it) {
      auto found = it->find(name);
      if (found != it->end()) return found->second;
    }
    return Value::Undefined();
  }

  Result<CallArgs> Arguments(const Expr& e, size_t first) {
    CallArgs args;
    for (size_t i = first; i < e.args.size(); ++i) {
      AIR_ASSIGN_OR_RETURN(Value v, Eval(*e.args[i]));
      args.positional.push_back(std::move(v));
    }
    for (const auto& [k, x] : e.kwargs) {
      AIR_ASSIGN_OR_RETURN(Value v, Eval(*x));
      args.keyword.emplace_back(k, std::move(v));
    }
    return args;
  }

  Result<Value> Eval(const Expr& e) {
    auto result = EvalInner(e);
    if (!result.ok()) return At(e.line, result.status());
    return result;
  }

  Result<Value> EvalInner(const Expr& e) {
    switch (e.kind) {
      case Expr::Kind::kLiteral:
        return e.literal;
      case Expr::Kind::kName:
        return Lookup(e.name);
      case Expr::Kind::kAttr: {
        AIR_ASSIGN_OR_RETURN(Value object, Eval(*e.args[0]));
        if (object.is_undefined()) {
          return InvalidArgument(
              fmt::format("'{}' is undefined (reading .{})", Describe(*e.args[0]), e.name));
        }
        return GetAttribute(object, e.name);
      }
      case Expr::Kind::kItem: {
        AIR_ASSIGN_OR_RETURN(Value object, Eval(*e.args[0]));
        AIR_ASSIGN_OR_RETURN(Value key, Eval(*e.args[1]));
        if (object.is_undefined()) {
          return InvalidArgument(fmt::format("'{}' is undefined", Describe(*e.args[0])));
        }
        return GetItem(object, key);
      }
      case Expr::Kind::kSlice: {
        AIR_ASSIGN_OR_RETURN(Value object, Eval(*e.args[0]));
        Value parts[3];
        for (int i = 0; i < 3; ++i) {
          if (e.args[i + 1]) {
            AIR_ASSIGN_OR_RETURN(parts[i], Eval(*e.args[i + 1]));
          }
        }
        return Slice(object, parts[0], parts[1], parts[2]);
      }
      case Expr::Kind::kCall: {
        AIR_ASSIGN_OR_RETURN(Value callee, Eval(*e.args[0]));
        AIR_ASSIGN_OR_RETURN(CallArgs args, Arguments(e, 1));
        if (callee.kind != Value::Kind::kFunction) {
          return InvalidArgument(fmt::format("'{}' is not callable", Describe(*e.args[0])));
        }
        return (*callee.function)(args);
      }
      case Expr::Kind::kFilter: {
        AIR_ASSIGN_OR_RETURN(Value value, Eval(*e.args[0]));
        AIR_ASSIGN_OR_RETURN(CallArgs args, Arguments(e, 1));
        return ApplyFilter(e.name, value, args);
      }
      case Expr::Kind::kTest: {
        AIR_ASSIGN_OR_RETURN(Value value, Eval(*e.args[0]));
        AIR_ASSIGN_OR_RETURN(CallArgs args, Arguments(e, 1));
        AIR_ASSIGN_OR_RETURN(bool passed, ApplyTest(e.name, value, args));
        return Value::Bool(passed != e.negated);
      }
      case Expr::Kind::kUnary: {
        AIR_ASSIGN_OR_RETURN(Value v, Eval(*e.args[0]));
        if (e.name == "not") return Value::Bool(!v.Truthy());
        if (v.kind == Value::Kind::kInt) return Value::Int(e.name == "-" ? -v.integer : v.integer);
        if (v.kind == Value::Kind::kFloat) return Value::Float(e.name == "-" ? -v.real : v.real);
        return InvalidArgument(
            fmt::format("bad operand type for unary {}: '{}'", e.name, v.TypeName()));
      }
      case Expr::Kind::kBinary: {
        AIR_ASSIGN_OR_RETURN(Value a, Eval(*e.args[0]));
        AIR_ASSIGN_OR_RETURN(Value b, Eval(*e.args[1]));
        return BinaryOp(e.name, a, b);
      }
      case Expr::Kind::kAnd:
      case Expr::Kind::kOr: {
        AIR_ASSIGN_OR_RETURN(Value a, Eval(*e.args[0]));
        bool short_circuit = e.kind == Expr::Kind::kAnd ? !a.Truthy() : a.Truthy();
        if (short_circuit) return a;
        return Eval(*e.args[1]);
      }
      case Expr::Kind::kTernary: {
        AIR_ASSIGN_OR_RETURN(Value condition, Eval(*e.args[1]));
        if (condition.Truthy()) return Eval(*e.args[0]);
        return e.args[2] ? Eval(*e.args[2]) : Value::Undefined();
      }
      case Expr::Kind::kList: {
        List items;
        for (const auto& x : e.args) {
          AIR_ASSIGN_OR_RETURN(Value v, Eval(*x));
          items.push_back(std::move(v));
        }
        return Value::MakeList(std::move(items));
      }
      case Expr::Kind::kDict: {
        Value d = Value::MakeDict();
        for (size_t i = 0; i + 1 < e.args.size(); i += 2) {
          AIR_ASSIGN_OR_RETURN(Value k, Eval(*e.args[i]));
          AIR_ASSIGN_OR_RETURN(Value v, Eval(*e.args[i + 1]));
          d.Set(k.Str(), std::move(v));
        }
        return d;
      }
    }
    return Internal("unknown expression");
  }

  static std::string Describe(const Expr& e) {
    if (e.kind == Expr::Kind::kName) return e.name;
    if (e.kind == Expr::Kind::kAttr) return Describe(*e.args[0]) + "." + e.name;
    if (e.kind == Expr::Kind::kItem) return Describe(*e.args[0]) + "[...]";
    return "expression";
  }

  Result<Flow> ExecOne(const Node& node, std::string* out) {
    switch (node.kind) {
      case Node::Kind::kText:
        *out += node.text;
        return Flow::kNormal;
      case Node::Kind::kOutput: {
        AIR_ASSIGN_OR_RETURN(Value v, Eval(*node.expr));
        *out += v.Str();
        return Flow::kNormal;
      }
      case Node::Kind::kIf:
        for (const auto& [condition, body] : node.branches) {
          AIR_ASSIGN_OR_RETURN(Value c, Eval(*condition));
          if (c.Truthy()) return Exec(body, out);
        }
        return Exec(node.else_body, out);
      case Node::Kind::kFor:
        return ExecFor(node, out);
      case Node::Kind::kSet: {
        Value value;
        if (node.expr) {
          AIR_ASSIGN_OR_RETURN(value, Eval(*node.expr));
        } else {
          std::string captured;
          AIR_ASSIGN_OR_RETURN(Flow ignored, Exec(node.body, &captured));
          (void)ignored;
          value = Value::Str(captured);
        }
        if (node.targets.size() == 1) {
          scopes_.back()[node.targets[0]] = std::move(value);
          return Flow::kNormal;
        }
        Value ns = Lookup(node.targets[0]);
        if (!ns.is_dict()) {
          return At(node.line, InvalidArgument(
                                   fmt::format("cannot set '{}.{}': '{}' is not a namespace",
                                               node.targets[0], node.targets[1], node.targets[0])));
        }
        ns.Set(node.targets[1], std::move(value));  // shared: visible to every scope
        return Flow::kNormal;
      }
      case Node::Kind::kBreak:
        return Flow::kBreak;
      case Node::Kind::kContinue:
        return Flow::kContinue;
      case Node::Kind::kGeneration: {
        // As transformers' AssistantTracker: the span of the block's output in the rendered
        // template (blocks inside a macro or a {% set %} capture render into a string that is not
        // the template's output, so they record nothing).
        const size_t begin = out->size();
        AIR_ASSIGN_OR_RETURN(Flow flow, Exec(node.body, out));
        if (out == root_) generation_spans_.emplace_back(begin, out->size());
        return flow;
      }
      case Node::Kind::kMacro:
        scopes_.back()[node.name] = MakeMacro(node);
        return Flow::kNormal;
    }
    return Flow::kNormal;
  }

  Result<Flow> ExecFor(const Node& node, std::string* out) {
    AIR_ASSIGN_OR_RETURN(Value iterable, Eval(*node.iterable));
    auto items = Iterate(iterable);
    if (!items.ok()) return At(node.line, items.status());
    List selected;
    for (Value& item : *items) {
      if (node.condition) {
        scopes_.emplace_back();
        Bind(node, item);
        auto keep = Eval(*node.condition);
        scopes_.pop_back();
        if (!keep.ok()) return keep.status();
        if (!keep->Truthy()) continue;
      }
      selected.push_back(std::move(item));
    }
    if (selected.empty()) return Exec(node.else_body, out);
    auto n = static_cast<int64_t>(selected.size());
    for (int64_t i = 0; i < n; ++i) {
      scopes_.emplace_back();
      Bind(node, selected[i]);
      Value loop = Value::MakeDict({{"index", Value::Int(i + 1)},
                                    {"index0", Value::Int(i)},
                                    {"revindex", Value::Int(n - i)},
                                    {"revindex0", Value::Int(n - i - 1)},
                                    {"first", Value::Bool(i == 0)},
                                    {"last", Value::Bool(i == n - 1)},
                                    {"length", Value::Int(n)},
                                    {"previtem", i > 0 ? selected[i - 1] : Value()},
                                    {"nextitem", i + 1 < n ? selected[i + 1] : Value()}});
      scopes_.back()["loop"] = loop;
      auto flow = Exec(node.body, out);
      scopes_.pop_back();
      if (!flow.ok()) return flow.status();
      if (*flow == Flow::kBreak) break;
    }
    return Flow::kNormal;
  }

  void Bind(const Node& node, const Value& item) {
    if (node.targets.size() == 1) {
      scopes_.back()[node.targets[0]] = item;
      return;
    }
    auto parts = Iterate(item);
    for (size_t t = 0; t < node.targets.size(); ++t) {
      scopes_.back()[node.targets[t]] =
          parts.ok() && t < parts->size() ? (*parts)[t] : Value::Undefined();
    }
  }

  Value MakeMacro(const Node& node) {
    const Node* macro = &node;
    return Value::MakeFunction([this, macro](const CallArgs& args) -> Result<Value> {
      // jinja2 would hit Python's recursion limit; stop before the C++ stack runs out.
      if (scopes_.size() > kMaxScopes) {
        return InvalidArgument(
            fmt::format("macro '{}': calls nest more than {} deep (a recursion that never ends?)",
                        macro->name, kMaxScopes));
      }
      scopes_.emplace_back();
      for (size_t i = 0; i < macro->parameters.size(); ++i) {
        const auto& [name, default_expr] = macro->parameters[i];
        Value v;
        if (i < args.positional.size()) {
          v = args.positional[i];
        } else if (const Value* kw = args.Keyword(name)) {
          v = *kw;
        } else if (default_expr) {
          auto d = Eval(*default_expr);
          if (!d.ok()) {
            scopes_.pop_back();
            return d.status();
          }
          v = *d;
        }
        scopes_.back()[name] = v;
      }
      std::string text;
      auto flow = Exec(macro->body, &text);
      scopes_.pop_back();
      if (!flow.ok()) return flow.status();
      return Value::Str(text);
    });
  }

  std::vector<std::unordered_map<std::string, Value>> scopes_;
  const std::string* root_ = nullptr;  // the template's output
  std::vector<std::pair<size_t, size_t>> generation_spans_;
};

}  // namespace

Result<std::string> JinjaTemplate::Render(const nlohmann::json& context) const {
  AIR_ASSIGN_OR_RETURN(RenderedTemplate rendered, RenderWithGenerationSpans(context));
  return std::move(rendered.text);
}

Result<RenderedTemplate> JinjaTemplate::RenderWithGenerationSpans(
    const nlohmann::json& context) const {
  Renderer renderer(context);
  RenderedTemplate rendered;
  AIR_ASSIGN_OR_RETURN(Flow flow, renderer.ExecRoot(*body_, &rendered.text));
  (void)flow;
  rendered.generation_spans = renderer.TakeGenerationSpans();
  return rendered;
}

}  // namespace air::engine::jinja
