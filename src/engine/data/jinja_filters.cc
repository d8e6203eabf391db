// Jinja filters and tests (see jinja_builtins.h).
#include <fmt/format.h>

#include <cmath>
#include <optional>

#include "engine/data/jinja_builtins.h"
#include "engine/data/jinja_methods.h"

namespace air::engine::jinja {

Result<bool> ApplyTest(const std::string& name, const Value& v, const CallArgs& args) {
  const Value* arg = Arg(args, 0, "");
  if (name == "defined") return !v.is_undefined();
  if (name == "undefined") return v.is_undefined();
  if (name == "none") return v.is_none();
  if (name == "string") return v.is_string();
  if (name == "number") return v.is_number();
  if (name == "integer") return v.kind == Value::Kind::kInt;
  if (name == "float") return v.kind == Value::Kind::kFloat;
  if (name == "boolean") return v.kind == Value::Kind::kBool;
  if (name == "true") return v.kind == Value::Kind::kBool && v.boolean;
  if (name == "false") return v.kind == Value::Kind::kBool && !v.boolean;
  if (name == "mapping") return v.is_dict();
  if (name == "sequence") return v.is_list() || v.is_string() || v.is_dict();
  if (name == "iterable") return v.is_list() || v.is_string() || v.is_dict();
  if (name == "callable") return v.kind == Value::Kind::kFunction;
  if (name == "odd" || name == "even") {
    if (v.kind != Value::Kind::kInt) return InvalidArgument("test '" + name + "' needs an int");
    return (v.integer % 2 != 0) == (name == "odd");
  }
  if (name == "lower" || name == "upper") {
    std::string mapped = MapAscii(v.Str(), name == "lower" ? ::tolower : ::toupper);
    return v.is_string() && mapped == v.text;
  }
  if (arg == nullptr) return InvalidArgument("test '" + name + "' is not supported");
  if (name == "eq" || name == "equalto" || name == "==" || name == "sameas") return Equal(v, *arg);
  if (name == "ne" || name == "!=") return !Equal(v, *arg);
  if (name == "in") {
    AIR_ASSIGN_OR_RETURN(Value r, BinaryOp("in", v, *arg));
    return r.boolean;
  }
  if (name == "divisibleby" && v.kind == Value::Kind::kInt && arg->kind == Value::Kind::kInt &&
      arg->integer != 0) {
    return v.integer % arg->integer == 0;
  }
  return InvalidArgument("test '" + name + "' is not supported");
}

Result<Value> ApplyFilter(const std::string& name, const Value& v, const CallArgs& args) {
  const Value* a0 = Arg(args, 0, "");
  if (name == "trim") {
    if (!v.is_string()) return Value::Str(Strip(v.Str(), a0, true, true));
    return Value::Str(Strip(v.text, a0, true, true));
  }
  if (name == "length" || name == "count") return Length(v);
  if (name == "tojson") {
    const Value* indent = Arg(args, 0, "indent");
    std::optional<int> spaces;
    if (indent != nullptr && indent->kind == Value::Kind::kInt)
      spaces = static_cast<int>(indent->integer);
    AIR_ASSIGN_OR_RETURN(std::string json, v.ToJson(spaces));
    return Value::Str(json);
  }
  if (name == "string") return Value::Str(v.Str());
  if (name == "upper" || name == "lower" || name == "title" || name == "capitalize") {
    return Method(Value::Str(v.Str()), name).function->operator()(CallArgs{});
  }
  if (name == "default" || name == "d") {
    const Value* boolean = Arg(args, 1, "boolean");
    bool use_default = v.is_undefined() || (boolean != nullptr && boolean->Truthy() && !v.Truthy());
    return use_default ? (a0 != nullptr ? *a0 : Value::Str("")) : v;
  }
  if (name == "first" || name == "last") {
    AIR_ASSIGN_OR_RETURN(List items, Iterate(v));
    if (items.empty()) return Value::Undefined();
    return name == "first" ? items.front() : items.back();
  }
  if (name == "join") {
    AIR_ASSIGN_OR_RETURN(List items, Iterate(v));
    std::string sep = a0 != nullptr ? a0->Str() : "";
    std::string out;
    for (size_t i = 0; i < items.size(); ++i) out += (i ? sep : "") + items[i].Str();
    return Value::Str(out);
  }
  if (name == "list") {
    AIR_ASSIGN_OR_RETURN(List items, Iterate(v));
    return Value::MakeList(std::move(items));
  }
  if (name == "reverse") {
    AIR_ASSIGN_OR_RETURN(Value all, Slice(v, Value(), Value(), Value::Int(-1)));
    return all;
  }
  if (name == "items") return Method(v, "items").function->operator()(CallArgs{});
  if (name == "int") {
    if (v.kind == Value::Kind::kFloat) return Value::Int(static_cast<int64_t>(v.real));
    if (v.kind == Value::Kind::kInt) return v;
    try {
      return Value::Int(std::stoll(v.Str()));
    } catch (...) {
      return Value::Int(a0 != nullptr ? a0->integer : 0);
    }
  }
  if (name == "abs" && v.is_number()) {
    return v.kind == Value::Kind::kInt ? Value::Int(std::llabs(v.integer))
                                       : Value::Float(std::fabs(v.real));
  }
  if (name == "replace") {
    if (args.positional.size() < 2) return InvalidArgument("replace needs two arguments");
    return Value::Str(Replace(v.Str(), args.positional[0].Str(), args.positional[1].Str(),
                              IntArg(args, 2, "count", -1)));
  }
  if (name == "safe") return v;
  if (name == "e" || name == "escape") return Value::Str(HtmlEscape(v.Str()));
  if (name == "selectattr" || name == "rejectattr") {
    if (a0 == nullptr) return InvalidArgument(name + " needs an attribute name");
    AIR_ASSIGN_OR_RETURN(List items, Iterate(v));
    CallArgs test_args;
    for (size_t i = 2; i < args.positional.size(); ++i)
      test_args.positional.push_back(args.positional[i]);
    List out;
    for (const Value& item : items) {
      AIR_ASSIGN_OR_RETURN(Value attr, GetAttribute(item, a0->Str()));
      bool keep;
      if (args.positional.size() > 1) {
        AIR_ASSIGN_OR_RETURN(keep, ApplyTest(args.positional[1].Str(), attr, test_args));
      } else {
        keep = attr.Truthy();
      }
      if (keep == (name == "selectattr")) out.push_back(item);
    }
    return Value::MakeList(std::move(out));
  }
  if (name == "select" || name == "reject") {
    AIR_ASSIGN_OR_RETURN(List items, Iterate(v));
    CallArgs test_args;
    for (size_t i = 1; i < args.positional.size(); ++i) {
      test_args.positional.push_back(args.positional[i]);
    }
    List out;
    for (const Value& item : items) {
      bool keep = item.Truthy();
      if (a0 != nullptr) {
        AIR_ASSIGN_OR_RETURN(keep, ApplyTest(a0->Str(), item, test_args));
      }
      if (keep == (name == "select")) out.push_back(item);
    }
    return Value::MakeList(std::move(out));
  }
  if (name == "map") {
    AIR_ASSIGN_OR_RETURN(List items, Iterate(v));
    const Value* attribute = args.Keyword("attribute");
    List out;
    for (const Value& item : items) {
      if (attribute != nullptr) {
        AIR_ASSIGN_OR_RETURN(Value attr, GetAttribute(item, attribute->Str()));
        out.push_back(attr);
      } else if (a0 != nullptr) {
        CallArgs rest;
        rest.positional.assign(args.positional.begin() + 1, args.positional.end());
        AIR_ASSIGN_OR_RETURN(Value mapped, ApplyFilter(a0->Str(), item, rest));
        out.push_back(mapped);
      }
    }
    return Value::MakeList(std::move(out));
  }
  return InvalidArgument("filter '" + name + "' is not supported");
}

}  // namespace air::engine::jinja
