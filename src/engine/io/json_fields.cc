// Typed config.json field reads (see json_fields.h).
#include "engine/io/json_fields.h"

#include <cmath>
#include <utility>

#include "base/env.h"

namespace air::engine {

using nlohmann::json;

const json* JsonFields::Get(const char* field) const {
  auto it = obj_.find(field);
  if (it == obj_.end() || it->is_null()) return nullptr;
  return &*it;
}

Status JsonFields::Missing(const std::string& field, const std::string& what) const {
  return InvalidArgument(source_ + ": field '" + field + "' is required (" + what + ")");
}

Status JsonFields::WrongType(const std::string& field, const std::string& what,
                             const json& value) const {
  return InvalidArgument(source_ + ": field '" + field + "' must be " + what + ", got " +
                         value.type_name() + " " + value.dump());
}

Status JsonFields::Invalid(const std::string& field, const std::string& message) const {
  return InvalidArgument(source_ + ": field '" + field + "' " + message);
}

Status JsonFields::Int(const char* field, int64_t* out, std::optional<int64_t> fallback) const {
  const json* v = Get(field);
  if (v == nullptr) {
    if (!fallback) return Missing(field, "an integer");
    *out = *fallback;
    return Status::Ok();
  }
  if (v->is_number_integer()) {
    *out = v->get<int64_t>();
    return Status::Ok();
  }
  if (v->is_number_float() && std::floor(v->get<double>()) == v->get<double>() &&
      std::fabs(v->get<double>()) < 9.0e15) {
    *out = static_cast<int64_t>(v->get<double>());
    return Status::Ok();
  }
  return WrongType(field, "an integer", *v);
}

Status JsonFields::Double(const char* field, double* out, std::optional<double> fallback) const {
  const json* v = Get(field);
  if (v == nullptr) {
    if (!fallback) return Missing(field, "a number");
    *out = *fallback;
    return Status::Ok();
  }
  if (!v->is_number()) return WrongType(field, "a number", *v);
  *out = v->get<double>();
  return Status::Ok();
}

Status JsonFields::Bool(const char* field, bool* out, std::optional<bool> fallback) const {
  const json* v = Get(field);
  if (v == nullptr) {
    if (!fallback) return Missing(field, "true or false");
    *out = *fallback;
    return Status::Ok();
  }
  if (!v->is_boolean()) return WrongType(field, "true or false", *v);
  *out = v->get<bool>();
  return Status::Ok();
}

Status JsonFields::String(const char* field, std::string* out,
                          std::optional<std::string> fallback) const {
  const json* v = Get(field);
  if (v == nullptr) {
    if (!fallback) return Missing(field, "a string");
    *out = *fallback;
    return Status::Ok();
  }
  if (!v->is_string()) return WrongType(field, "a string", *v);
  *out = v->get<std::string>();
  return Status::Ok();
}

Status JsonFields::IntList(const char* field, std::vector<int64_t>* out) const {
  out->clear();
  const json* v = Get(field);
  if (v == nullptr) return Status::Ok();
  if (v->is_number_integer()) {
    out->push_back(v->get<int64_t>());
    return Status::Ok();
  }
  if (!v->is_array()) return WrongType(field, "an integer or a list of integers", *v);
  for (const json& e : *v) {
    if (!e.is_number_integer()) return WrongType(field, "a list of integers", *v);
    out->push_back(e.get<int64_t>());
  }
  return Status::Ok();
}

Status JsonFields::StringList(const char* field, std::vector<std::string>* out) const {
  out->clear();
  const json* v = Get(field);
  if (v == nullptr) return Status::Ok();
  if (!v->is_array()) return WrongType(field, "a list of strings", *v);
  for (const json& e : *v) {
    if (!e.is_string()) return WrongType(field, "a list of strings", *v);
    out->push_back(e.get<std::string>());
  }
  return Status::Ok();
}

Result<ConfigText> ReadModelConfigText(const std::string& model_dir) {
  ConfigText out{model_dir + "/config.json", ""};
  auto text = DefaultEnv()->ReadFile(out.path);
  if (!text.ok()) {
    return Status(text.status().code(),
                  "cannot read the model config " + out.path + ": " + text.status().message());
  }
  out.text = std::move(*text);
  return out;
}

void WriteTokenIds(nlohmann::ordered_json& j, int64_t bos, const std::vector<int64_t>& eos,
                   int64_t pad) {
  auto id_or_null = [](int64_t id) {
    return id >= 0 ? nlohmann::ordered_json(id) : nlohmann::ordered_json(nullptr);
  };
  j["bos_token_id"] = id_or_null(bos);
  if (eos.empty()) {
    j["eos_token_id"] = nullptr;
  } else if (eos.size() == 1) {
    j["eos_token_id"] = eos[0];
  } else {
    j["eos_token_id"] = eos;
  }
  j["pad_token_id"] = id_or_null(pad);
}

}  // namespace air::engine
