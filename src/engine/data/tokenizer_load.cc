// Loading a Tokenizer from tokenizer.json, tokenizer_config.json and chat_template.jinja (see
// tokenizer.h). Each unsupported or malformed setting is an error naming the file and JSON path.
#include <fmt/format.h>

#include <algorithm>

#include "engine/data/json_util.h"
#include "engine/data/tokenizer.h"
#include "engine/data/tokenizer_impl.h"

namespace air::engine {
namespace {

using nlohmann::json;

Result<std::vector<AddedToken>> ParseAddedTokens(const json& list, const std::string& where) {
  std::vector<AddedToken> tokens;
  if (list.is_null()) return tokens;
  if (!list.is_array()) return InvalidArgument(where + ": expected a list");
  for (size_t i = 0; i < list.size(); ++i) {
    const json& t = list[i];
    std::string at = fmt::format("{}[{}]", where, i);
    if (!t.is_object() || !t.contains("id") || !t["id"].is_number_integer() ||
        !t.contains("content") || !t["content"].is_string()) {
      return InvalidArgument(at + ": expected {\"id\": <int>, \"content\": <string>, ...}");
    }
    AddedToken token;
    token.id = t["id"].get<int32_t>();
    token.content = t["content"];
    token.special = t.value("special", false);
    token.single_word = t.value("single_word", false);
    token.lstrip = t.value("lstrip", false);
    token.rstrip = t.value("rstrip", false);
    token.normalized = t.value("normalized", !token.special);
    if (token.id < 0) return InvalidArgument(at + ".id: expected a non-negative id");
    tokens.push_back(std::move(token));
  }
  return tokens;
}

// Adds the post-processor's "single" template to impl (TemplateProcessing), or nothing for the
// processors that add no tokens (ByteLevel).
Status ParsePostProcessor(const json& pp, const std::string& where,
                          std::vector<TemplateItem>* single_template) {
  if (pp.is_null()) return Status::Ok();
  std::string type = pp.is_object() ? pp.value("type", "") : "";
  if (type == "ByteLevel") return Status::Ok();
  if (type == "Sequence") {
    const json& list = pp.value("processors", json::array());
    for (size_t i = 0; i < list.size(); ++i) {
      AIR_RETURN_IF_ERROR(
          ParsePostProcessor(list[i], fmt::format("{}.processors[{}]", where, i), single_template));
    }
    return Status::Ok();
  }
  if (type != "TemplateProcessing") {
    return InvalidArgument(fmt::format(
        "{}: post-processor type \"{}\" is not supported (supported: TemplateProcessing, "
        "ByteLevel, Sequence, null)",
        where, type));
  }
  if (!single_template->empty()) {
    return InvalidArgument(where + ": more than one TemplateProcessing");
  }
  const json& single = pp.value("single", json::array());
  const json& specials = pp.value("special_tokens", json::object());
  bool has_sequence = false;
  for (size_t i = 0; i < single.size(); ++i) {
    std::string at = fmt::format("{}.single[{}]", where, i);
    const json& item = single[i];
    if (item.contains("Sequence")) {
      if (item["Sequence"].value("id", "A") != "A") {
        return InvalidArgument(at + ".Sequence.id: only \"A\" is meaningful for one text");
      }
      single_template->push_back({true, {}});
      has_sequence = true;
    } else if (item.contains("SpecialToken") && item["SpecialToken"].contains("id")) {
      std::string name = item["SpecialToken"]["id"];
      if (!specials.contains(name) || !specials[name].contains("ids") ||
          !specials[name]["ids"].is_array()) {
        return InvalidArgument(fmt::format(
            "{}: special token \"{}\" is not defined in {}.special_tokens", at, name, where));
      }
      single_template->push_back({false, specials[name]["ids"].get<std::vector<int32_t>>()});
    } else {
      return InvalidArgument(at + ": expected {\"Sequence\": ...} or {\"SpecialToken\": ...}");
    }
  }
  if (!has_sequence)
    return InvalidArgument(where + ".single: has no {\"Sequence\": {\"id\": \"A\"}}");
  return Status::Ok();
}

Status CheckDecoder(const json& decoder, const std::string& where) {
  std::string type = decoder.is_object() ? decoder.value("type", "") : "null";
  if (type == "ByteLevel") return Status::Ok();
  if (type == "Sequence") {
    const json& list = decoder.value("decoders", json::array());
    if (list.size() == 1) return CheckDecoder(list[0], where + ".decoders[0]");
  }
  return InvalidArgument(fmt::format(
      "{}: decoder \"{}\" is not supported; byte-level BPE tokenizers use ByteLevel", where, type));
}

// A token setting of tokenizer_config.json: a string, {"content": ...} (an AddedToken dict), or
// null. Returns "" for null/absent.
Result<std::string> TokenSetting(const json& config, const std::string& key,
                                 const std::string& where) {
  if (!config.contains(key) || config[key].is_null()) return std::string();
  const json& v = config[key];
  if (v.is_string()) return v.get<std::string>();
  if (v.is_object() && v.contains("content") && v["content"].is_string()) {
    return v["content"].get<std::string>();
  }
  return InvalidArgument(fmt::format(
      "{}: {}: expected a string or {{\"content\": \"...\"}}, got {}", where, key, v.dump()));
}

}  // namespace

Result<Tokenizer> Tokenizer::FromFiles(const Files& files) {
  auto impl = std::make_unique<Impl>();
  impl->origin = files.origin;
  const std::string tj = files.origin + "/tokenizer.json";
  AIR_ASSIGN_OR_RETURN(json root, ParseJson(files.tokenizer_json, tj));
  if (!root.is_object()) return InvalidArgument(tj + ": expected a JSON object");

  AIR_ASSIGN_OR_RETURN(impl->normalizer,
                       Normalizer::FromJson(root.value("normalizer", json()), tj + ": normalizer"));
  AIR_ASSIGN_OR_RETURN(PreTokenizer pre, PreTokenizer::FromJson(root.value("pre_tokenizer", json()),
                                                                tj + ": pre_tokenizer"));
  impl->pre_tokenizer.emplace(std::move(pre));
  if (!root.contains("model")) return InvalidArgument(tj + ": model: missing");
  AIR_ASSIGN_OR_RETURN(BpeModel model, BpeModel::FromJson(root["model"], tj + ": model"));
  impl->model.emplace(std::move(model));
  AIR_RETURN_IF_ERROR(ParsePostProcessor(root.value("post_processor", json()),
                                         tj + ": post_processor", &impl->single_template));
  AIR_RETURN_IF_ERROR(CheckDecoder(root.value("decoder", json()), tj + ": decoder"));

  AIR_ASSIGN_OR_RETURN(auto added,
                       ParseAddedTokens(root.value("added_tokens", json()), tj + ": added_tokens"));
  std::vector<std::string> normalized_contents;
  impl->id_limit = impl->model->id_limit();
  for (const AddedToken& t : added) {
    impl->id_limit = std::max(impl->id_limit, t.id + 1);
    if (t.normalized) {
      AIR_ASSIGN_OR_RETURN(std::string n, impl->normalizer.Apply(t.content, nullptr));
      normalized_contents.push_back(std::move(n));
    } else {
      normalized_contents.push_back(t.content);
    }
  }
  impl->added = AddedVocabulary(std::move(added), normalized_contents);

  Tokenizer tokenizer(std::move(impl));
  Impl& m = *tokenizer.impl_;
  const std::string tc = files.origin + "/tokenizer_config.json";
  json config = json::object();
  if (!files.config_json.empty()) {
    AIR_ASSIGN_OR_RETURN(config, ParseJson(files.config_json, tc));
    if (!config.is_object()) return InvalidArgument(tc + ": expected a JSON object");
  }
  std::optional<SpecialToken>* slots[] = {&m.bos, &m.eos, &m.pad};
  const char* keys[] = {"bos_token", "eos_token", "pad_token"};
  for (int i = 0; i < 3; ++i) {
    AIR_ASSIGN_OR_RETURN(std::string content, TokenSetting(config, keys[i], tc));
    if (content.empty()) continue;
    auto id = tokenizer.TokenToId(content);
    if (!id) {
      return InvalidArgument(
          fmt::format("{}: {}: \"{}\" is not a token of {}", tc, keys[i], content, tj));
    }
    *slots[i] = SpecialToken{content, *id};
  }
  // Without a configured BOS, a template that starts with a special token names it.
  if (!m.bos && !m.single_template.empty() && !m.single_template[0].is_sequence &&
      m.single_template[0].ids.size() == 1) {
    int32_t id = m.single_template[0].ids[0];
    if (auto content = tokenizer.IdToToken(id)) m.bos = SpecialToken{*content, id};
  }
  if (config.contains("chat_template")) {
    const json& t = config["chat_template"];
    if (t.is_string()) {
      m.chat_template = t;
    } else if (t.is_array() && !t.empty()) {
      // [{"name": "default", "template": "..."}, {"name": "tool_use", ...}]: take "default".
      const json* chosen = &t[0];
      for (const json& entry : t) {
        if (entry.is_object() && entry.value("name", "") == "default") chosen = &entry;
      }
      if (!chosen->is_object() || !(*chosen).contains("template") ||
          !(*chosen)["template"].is_string()) {
        return InvalidArgument(tc +
                               ": chat_template: expected a string or a list of "
                               "{\"name\", \"template\"}");
      }
      m.chat_template = (*chosen)["template"];
    } else if (!t.is_null()) {
      return InvalidArgument(tc + ": chat_template: expected a string");
    }
  }
  if (!files.chat_template_jinja.empty()) m.chat_template = files.chat_template_jinja;
  return tokenizer;
}

Result<Tokenizer> Tokenizer::Load(const std::string& path, Env* env) {
  std::string dir;
  std::string tokenizer_path;
  if (env->IsDirectory(path)) {
    dir = path;
    tokenizer_path = path + "/tokenizer.json";
  } else {
    tokenizer_path = path;
    size_t slash = path.rfind('/');
    dir = slash == std::string::npos ? "." : path.substr(0, slash);
  }
  if (!env->FileExists(tokenizer_path)) {
    return NotFound(fmt::format(
        "{}: no tokenizer.json (a model directory needs tokenizer.json; tokenizer_config.json is "
        "optional)",
        tokenizer_path));
  }
  Files files;
  files.origin = dir;
  AIR_ASSIGN_OR_RETURN(files.tokenizer_json, env->ReadFile(tokenizer_path));
  if (env->FileExists(dir + "/tokenizer_config.json")) {
    AIR_ASSIGN_OR_RETURN(files.config_json, env->ReadFile(dir + "/tokenizer_config.json"));
  }
  if (env->FileExists(dir + "/chat_template.jinja")) {
    AIR_ASSIGN_OR_RETURN(files.chat_template_jinja, env->ReadFile(dir + "/chat_template.jinja"));
  }
  return FromFiles(files);
}

}  // namespace air::engine
