// YAML text from YamlNode trees (see yaml_emit.h).
#include "spec/yaml_emit.h"

#include <fmt/format.h>

#include <algorithm>

#include "base/strings.h"
#include "spec/scalar_types.h"

namespace air::spec {
namespace {

constexpr char kYamlTagPrefix[] = "tag:yaml.org,2002:";

std::string DoubleQuoted(std::string_view s) {
  std::string out = "\"";
  for (char c : s) {
    auto u = static_cast<unsigned char>(c);
    switch (c) {
      case '"':
        out += "\\\"";
        break;
      case '\\':
        out += "\\\\";
        break;
      case '\n':
        out += "\\n";
        break;
      case '\t':
        out += "\\t";
        break;
      case '\r':
        out += "\\r";
        break;
      default:
        if (u < 0x20 || u == 0x7f) {
          out += fmt::format("\\x{:02x}", u);
        } else {
          out += c;
        }
    }
  }
  return out + "\"";
}

// The tag prefix to write before a node ("!!binary ", "!local "), or "".
std::string TagPrefix(const YamlNode& node) {
  if (node.tag.empty() || node.tag == "!") return "";
  std::string_view tag = node.tag;
  if (StartsWith(tag, kYamlTagPrefix)) {
    std::string_view name = tag.substr(sizeof(kYamlTagPrefix) - 1);
    // str is expressed by quoting; the types a loader infers need no tag.
    if (name == "str" || name == "map" || name == "seq") return "";
    return "!!" + std::string(name) + " ";
  }
  if (tag[0] == '!') return std::string(tag) + " ";
  return "!<" + std::string(tag) + "> ";
}

bool PlainIsSafe(const YamlNode& node) {
  if (node.style != ScalarStyle::kPlain || node.IsQuotedOrTaggedString()) return false;
  const std::string& v = node.value;
  if (v.empty()) return true;  // an empty plain scalar is null
  return v.find('\n') == std::string::npos && v.front() != ' ' && v.back() != ' ';
}

std::string Scalar(const YamlNode& node) {
  if (PlainIsSafe(node)) return TagPrefix(node) + node.value;
  return TagPrefix(node) + DoubleQuoted(node.value);
}

void Emit(const YamlNode& node, int indent, std::string* out) {
  std::string pad(static_cast<size_t>(indent), ' ');
  auto emit_child = [&](const YamlNode& child) {
    if (child.IsScalar()) {
      std::string s = Scalar(child);
      *out += s.empty() ? "\n" : " " + s + "\n";
    } else if (child.IsMapping() && child.entries.empty()) {
      *out += " " + TagPrefix(child) + "{}\n";
    } else if (child.IsSequence() && child.items.empty()) {
      *out += " " + TagPrefix(child) + "[]\n";
    } else {
      std::string tag = TagPrefix(child);
      if (!tag.empty()) tag.pop_back();
      *out += (tag.empty() ? "" : " " + tag) + "\n";
      Emit(child, indent + 2, out);
    }
  };
  if (node.IsMapping()) {
    for (const auto& [key, value] : node.entries) {
      *out += pad + (key.IsScalar() ? Scalar(key) : DoubleQuoted(RenderInline(key, 1000))) + ":";
      emit_child(value);
    }
  } else if (node.IsSequence()) {
    for (const auto& item : node.items) {
      *out += pad + "-";
      emit_child(item);
    }
  } else {
    *out += pad + Scalar(node) + "\n";
  }
}

bool IsBlankOrComment(std::string_view line) {
  std::string_view t = Trim(line);
  return t.empty() || t[0] == '#';
}

// True when `line` holds only node properties (&anchor, !tag) and maybe a comment, as in
// `params: &defaults` before a block on the next lines.
bool OnlyPropertiesOrComment(std::string_view line) {
  for (const std::string& token : Split(line, ' ')) {
    if (token.empty() || token[0] == '&' || token[0] == '!') continue;
    return token[0] == '#';
  }
  return true;
}

// The block's own text, de-indented; "" when it cannot be cut out cleanly.
std::string ExtractSource(std::string_view source, const YamlNode& node) {
  if (node.end_offset <= node.begin_offset || node.end_offset > source.size()) return "";
  size_t line_start =
      node.begin_offset == 0 ? std::string_view::npos : source.rfind('\n', node.begin_offset - 1);
  line_start = line_start == std::string_view::npos ? 0 : line_start + 1;
  std::string_view prefix = source.substr(line_start, node.begin_offset - line_start);
  bool block = prefix.find_first_not_of(' ') == std::string_view::npos;
  size_t start = block ? line_start : node.begin_offset;
  size_t indent = block ? prefix.size() : 0;
  size_t eol = source.find('\n', node.begin_offset);
  if (!block && eol != std::string_view::npos && eol < node.end_offset &&
      OnlyPropertiesOrComment(source.substr(node.begin_offset, eol - node.begin_offset))) {
    // The content starts on the next lines: take those, indented as the first of them.
    block = true;
    start = eol + 1;
    indent = std::string_view::npos;
    for (const std::string& line : Split(source.substr(start, node.end_offset - start), '\n')) {
      if (IsBlankOrComment(line)) continue;
      indent = line.find_first_not_of(' ');
      break;
    }
    if (indent == std::string_view::npos) return "";
  }
  std::vector<std::string> lines = Split(source.substr(start, node.end_offset - start), '\n');
  while (!lines.empty() && IsBlankOrComment(lines.back())) lines.pop_back();
  std::string text;
  for (size_t i = 0; i < lines.size(); ++i) {
    std::string_view line = lines[i];
    if (block) {
      size_t spaces = line.find_first_not_of(' ');
      if (spaces == std::string_view::npos) spaces = line.size();
      if (spaces >= indent) {
        line.remove_prefix(indent);
      } else if (IsBlankOrComment(line)) {
        line.remove_prefix(spaces);
      } else {
        return "";
      }
    }
    text.append(line);
    text += '\n';
  }
  return text;
}

}  // namespace

std::string EmitYaml(const YamlNode& node) {
  std::string out;
  if (node.IsMapping() && node.entries.empty()) return TagPrefix(node) + "{}\n";
  if (node.IsSequence() && node.items.empty()) return TagPrefix(node) + "[]\n";
  Emit(node, 0, &out);
  return out;
}

std::string RenderInline(const YamlNode& node, size_t max_chars) {
  std::string out;
  if (node.IsScalar()) {
    if (node.value.find('\n') != std::string::npos) {
      size_t lines = static_cast<size_t>(std::count(node.value.begin(), node.value.end(), '\n'));
      if (node.value.back() != '\n') ++lines;
      out = fmt::format("<{} lines>", lines);
    } else if (node.IsQuotedOrTaggedString() &&
               ResolveScalarType(YamlNode{.value = node.value}) != ScalarType::kString) {
      out = "'" + node.value + "'";
    } else if (node.IsNull()) {
      out = "null";
    } else {
      out = node.value;
    }
  } else if (node.IsSequence()) {
    out = "[";
    for (size_t i = 0; i < node.items.size(); ++i) {
      out += (i ? ", " : "") + RenderInline(node.items[i], max_chars);
    }
    out += "]";
  } else {
    out = "{";
    for (size_t i = 0; i < node.entries.size(); ++i) {
      out += (i ? ", " : "") + RenderInline(node.entries[i].first, max_chars) + ": " +
             RenderInline(node.entries[i].second, max_chars);
    }
    out += "}";
  }
  return ShortenText(out, max_chars);
}

std::string ParametersText(std::string_view source, const YamlNode& node) {
  std::string text = ExtractSource(source, node);
  if (!text.empty()) {
    YamlNode reread;
    std::string error;
    if (ParseYamlValue(text, &reread, &error) && SameYamlContent(reread, node)) return text;
  }
  return EmitYaml(node);
}

}  // namespace air::spec
