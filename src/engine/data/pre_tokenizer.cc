// Pre-tokenizer: regex splits and the ByteLevel step (see pre_tokenizer.h).
#include "engine/data/pre_tokenizer.h"

#include <fmt/format.h>

namespace air::engine {
namespace {

// A regex that matches `literal` exactly.
std::string QuoteLiteral(std::string_view literal) {
  std::string out;
  for (char c : literal) {
    if (std::string_view("\\^$.|?*+()[]{}-").find(c) != std::string_view::npos) out.push_back('\\');
    out.push_back(c);
  }
  return out;
}

Status SplitPieces(const Regex& regex, std::string_view text, bool keep_matches,
                   std::vector<PreTokenPiece>* out) {
  AIR_ASSIGN_OR_RETURN(auto matches, regex.FindAll(text));
  size_t last = 0;
  for (const auto& [begin, end] : matches) {
    if (begin > last) out->push_back({last, begin, false});
    if (keep_matches && end > begin) out->push_back({begin, end, false});
    last = end;
  }
  if (last < text.size()) out->push_back({last, text.size(), false});
  return Status::Ok();
}

}  // namespace

Status PreTokenizer::AddSteps(const nlohmann::json& json, const std::string& where,
                              std::vector<Step>* steps, bool* seen_byte_level) {
  if (!json.is_object() || !json.contains("type") || !json["type"].is_string()) {
    return InvalidArgument(where + ": expected an object with a string \"type\"");
  }
  const std::string type = json["type"];
  if (type == "Sequence") {
    if (!json.contains("pretokenizers") || !json["pretokenizers"].is_array()) {
      return InvalidArgument(where + ".pretokenizers: expected a list of pre-tokenizers");
    }
    const auto& list = json["pretokenizers"];
    for (size_t i = 0; i < list.size(); ++i) {
      AIR_RETURN_IF_ERROR(
          AddSteps(list[i], fmt::format("{}.pretokenizers[{}]", where, i), steps, seen_byte_level));
    }
    return Status::Ok();
  }
  if (type == "Split") {
    if (*seen_byte_level) {
      return InvalidArgument(where +
                             ": a Split after ByteLevel is not supported; ByteLevel must "
                             "be the last pre-tokenizer step");
    }
    if (json.value("invert", false)) {
      return InvalidArgument(where + ".invert: only false is supported");
    }
    const std::string behavior = json.value("behavior", "");
    Step::Kind kind;
    if (behavior == "Isolated") {
      kind = Step::Kind::kSplitIsolated;
    } else if (behavior == "Removed") {
      kind = Step::Kind::kSplitRemoved;
    } else {
      return InvalidArgument(fmt::format(
          "{}.behavior: \"{}\" is not supported (supported: Isolated, Removed)", where, behavior));
    }
    const auto& pattern = json.value("pattern", nlohmann::json());
    std::string regex_text;
    if (pattern.is_object() && pattern.contains("Regex") && pattern["Regex"].is_string()) {
      regex_text = pattern["Regex"];
    } else if (pattern.is_object() && pattern.contains("String") && pattern["String"].is_string()) {
      regex_text = QuoteLiteral(pattern["String"].get<std::string>());
    } else {
      return InvalidArgument(where +
                             ".pattern: expected {\"Regex\": \"...\"} or "
                             "{\"String\": \"...\"}");
    }
    AIR_ASSIGN_OR_RETURN(Regex regex, Regex::Compile(regex_text, where + ".pattern"));
    steps->push_back(Step{kind, std::move(regex)});
    return Status::Ok();
  }
  if (type == "ByteLevel") {
    if (*seen_byte_level) return InvalidArgument(where + ": a second ByteLevel step");
    *seen_byte_level = true;
    bool use_regex = json.value("use_regex", true);
    AIR_ASSIGN_OR_RETURN(Regex regex, Regex::Compile(kGpt2SplitPattern, "GPT-2 split pattern"));
    Step step{Step::Kind::kByteLevel, std::move(regex)};
    step.use_regex = use_regex;
    step.add_prefix_space = json.value("add_prefix_space", false);
    steps->push_back(std::move(step));
    return Status::Ok();
  }
  return InvalidArgument(fmt::format(
      "{}: pre-tokenizer type \"{}\" is not supported (supported: Sequence, Split, ByteLevel)",
      where, type));
}

Result<PreTokenizer> PreTokenizer::FromJson(const nlohmann::json& json, const std::string& where) {
  PreTokenizer pre;
  bool seen_byte_level = false;
  if (json.is_null()) {
    return InvalidArgument(where +
                           ": is null, but a byte-level BPE tokenizer needs a ByteLevel "
                           "pre-tokenizer");
  }
  AIR_RETURN_IF_ERROR(AddSteps(json, where, &pre.steps_, &seen_byte_level));
  if (!seen_byte_level) {
    return InvalidArgument(where +
                           ": has no ByteLevel step; only byte-level BPE tokenizers "
                           "(GPT-2, Llama 3, Qwen2 style) are supported");
  }
  return pre;
}

Result<std::vector<PreTokenPiece>> PreTokenizer::Split(std::string_view text) const {
  std::vector<PreTokenPiece> pieces;
  if (!text.empty()) pieces.push_back({0, text.size(), false});
  std::vector<PreTokenPiece> next;
  std::vector<PreTokenPiece> local;
  for (const Step& step : steps_) {
    next.clear();
    for (const PreTokenPiece& piece : pieces) {
      std::string_view piece_text = text.substr(piece.begin, piece.end - piece.begin);
      if (step.kind != Step::Kind::kByteLevel) {
        local.clear();
        AIR_RETURN_IF_ERROR(
            SplitPieces(step.regex, piece_text, step.kind == Step::Kind::kSplitIsolated, &local));
        for (const auto& p : local) next.push_back({piece.begin + p.begin, piece.begin + p.end});
        continue;
      }
      bool prefix = step.add_prefix_space && !piece_text.starts_with(' ');
      if (!step.use_regex) {
        next.push_back({piece.begin, piece.end, prefix});
        continue;
      }
      // With a virtual leading space the regex runs over " " + piece; offsets shift by one.
      std::string with_space;
      std::string_view subject = piece_text;
      if (prefix) {
        with_space = " ";
        with_space.append(piece_text);
        subject = with_space;
      }
      local.clear();
      AIR_RETURN_IF_ERROR(SplitPieces(step.regex, subject, true, &local));
      size_t shift = prefix ? 1 : 0;
      for (const auto& p : local) {
        bool has_virtual_space = prefix && p.begin == 0;
        size_t begin = p.begin == 0 ? 0 : p.begin - shift;
        next.push_back({piece.begin + begin, piece.begin + p.end - shift, has_virtual_space});
      }
    }
    pieces.swap(next);
  }
  return pieces;
}

}  // namespace air::engine
