// Builds YamlNode trees from libyaml's event stream (see yaml_tree.h).
#include "spec/yaml_tree.h"

#include <fmt/format.h>
#include <yaml.h>

#include <algorithm>
#include <map>
#include <memory>

namespace air::spec {
namespace {

constexpr size_t kMaxNodes = 200000;  // after alias expansion; stops "billion laughs" files
// Scalar text after alias expansion: few nodes can still be gigabytes when each alias repeats a
// long anchored string (the parameters block is written out as YAML for every run).
constexpr size_t kMaxExpandedBytes = 16 << 20;
// Nesting of lists and mappings. The tree is built and walked recursively, so a file of
// 10,000 '[' would otherwise overflow the stack; real workloads nest a handful of levels.
constexpr int kMaxDepth = 512;
constexpr char kStrTag[] = "tag:yaml.org,2002:str";
constexpr char kNullTag[] = "tag:yaml.org,2002:null";

// libyaml counts marks in characters; this maps a character index to a byte offset.
class CharOffsets {
 public:
  explicit CharOffsets(std::string_view text) {
    size_t i = 0;
    if (text.substr(0, 3) == "\xEF\xBB\xBF") i = 3;  // libyaml skips a BOM without counting it
    for (; i < text.size(); ++i) {
      if ((static_cast<unsigned char>(text[i]) & 0xC0) != 0x80) offsets_.push_back(i);
    }
    offsets_.push_back(text.size());
  }
  size_t ByteOffset(size_t char_index) const {
    return char_index < offsets_.size() ? offsets_[char_index] : offsets_.back();
  }

 private:
  std::vector<size_t> offsets_;
};

struct ParserDeleter {
  void operator()(yaml_parser_t* p) const {
    yaml_parser_delete(p);
    delete p;
  }
};

struct EventGuard {
  yaml_event_t event;
  bool live = false;
  ~EventGuard() {
    if (live) yaml_event_delete(&event);
  }
};

SourceLocation ToLocation(const yaml_mark_t& mark) {
  return {static_cast<int>(mark.line) + 1, static_cast<int>(mark.column) + 1};
}

ScalarStyle ToStyle(yaml_scalar_style_t style) {
  switch (style) {
    case YAML_SINGLE_QUOTED_SCALAR_STYLE:
      return ScalarStyle::kSingleQuoted;
    case YAML_DOUBLE_QUOTED_SCALAR_STYLE:
      return ScalarStyle::kDoubleQuoted;
    case YAML_LITERAL_SCALAR_STYLE:
      return ScalarStyle::kLiteral;
    case YAML_FOLDED_SCALAR_STYLE:
      return ScalarStyle::kFolded;
    default:
      return ScalarStyle::kPlain;
  }
}

std::string SyntaxMessage(const yaml_parser_t& parser, std::string_view text,
                          const CharOffsets& offsets) {
  std::string problem = parser.problem ? parser.problem : "unknown problem";
  std::string message = "YAML syntax error: " + problem;
  if (parser.context) {
    message += fmt::format(" ({} that starts at line {}, column {})", parser.context,
                           parser.context_mark.line + 1, parser.context_mark.column + 1);
  }
  size_t at = offsets.ByteOffset(parser.problem_mark.index);
  if (at < text.size() && text[at] == '\t') {
    message += "; tabs are not allowed for indentation in YAML, use spaces";
  } else if (problem.find("mapping values are not allowed") != std::string::npos) {
    message += "; check this line's indentation, or quote a value that contains ': '";
  } else if (problem.find("could not find expected ':'") != std::string::npos) {
    message += "; a key needs ': ' after it, or the line above has an unclosed quote";
  }
  return message;
}

class TreeBuilder {
 public:
  TreeBuilder(std::string_view text, const CharOffsets& offsets) : text_(text), offsets_(offsets) {}

  // Consumes events until the end of the current node; `first` is the node's first event.
  // Returns false with *error set on an undefined alias or a node budget overrun.
  bool BuildNode(yaml_parser_t* parser, yaml_event_t& first, YamlNode* out, std::string* error,
                 SourceLocation* error_at) {
    if (++node_count_ > kMaxNodes) {
      *error =
          fmt::format("the document has more than {} nodes (after expanding aliases)", kMaxNodes);
      *error_at = ToLocation(first.start_mark);
      return false;
    }
    out->location = ToLocation(first.start_mark);
    out->begin_offset = offsets_.ByteOffset(first.start_mark.index);
    const char* anchor = nullptr;
    switch (first.type) {
      case YAML_ALIAS_EVENT: {
        std::string name = reinterpret_cast<const char*>(first.data.alias.anchor);
        auto it = anchors_.find(name);
        if (it == anchors_.end()) {
          *error = fmt::format("YAML alias '*{}' refers to an anchor that is not defined", name);
          *error_at = ToLocation(first.start_mark);
          return false;
        }
        SourceLocation at = out->location;
        size_t begin = out->begin_offset;
        *out = it->second;
        out->location = at;  // errors inside point at the alias's use
        out->begin_offset = begin;
        out->end_offset = offsets_.ByteOffset(first.end_mark.index);
        node_count_ += CountNodes(*out);
        scalar_bytes_ += ScalarBytes(*out);
        if (depth_ + Height(*out) > kMaxDepth) {
          *error = fmt::format(
              "lists and mappings are nested more than {} levels deep (after expanding aliases)",
              kMaxDepth);
          *error_at = at;
          return false;
        }
        if (node_count_ > kMaxNodes) {
          *error = fmt::format("the document has more than {} nodes (after expanding aliases)",
                               kMaxNodes);
          *error_at = at;
          return false;
        }
        if (scalar_bytes_ > kMaxExpandedBytes) {
          *error = fmt::format(
              "the document's values add up to more than {} MiB of text (after expanding "
              "aliases: '*{}' repeats {} bytes)",
              kMaxExpandedBytes >> 20, name, ScalarBytes(*out));
          *error_at = at;
          return false;
        }
        return true;
      }
      case YAML_SCALAR_EVENT: {
        out->kind = YamlKind::kScalar;
        out->value.assign(reinterpret_cast<const char*>(first.data.scalar.value),
                          first.data.scalar.length);
        out->style = ToStyle(first.data.scalar.style);
        if (first.data.scalar.tag) out->tag = reinterpret_cast<const char*>(first.data.scalar.tag);
        out->end_offset = offsets_.ByteOffset(first.end_mark.index);
        scalar_bytes_ += out->value.size();
        anchor = reinterpret_cast<const char*>(first.data.scalar.anchor);
        break;
      }
      case YAML_SEQUENCE_START_EVENT:
      case YAML_MAPPING_START_EVENT: {
        bool is_map = first.type == YAML_MAPPING_START_EVENT;
        out->kind = is_map ? YamlKind::kMapping : YamlKind::kSequence;
        out->flow = is_map ? first.data.mapping_start.style == YAML_FLOW_MAPPING_STYLE
                           : first.data.sequence_start.style == YAML_FLOW_SEQUENCE_STYLE;
        const yaml_char_t* tag =
            is_map ? first.data.mapping_start.tag : first.data.sequence_start.tag;
        if (tag) out->tag = reinterpret_cast<const char*>(tag);
        anchor = reinterpret_cast<const char*>(is_map ? first.data.mapping_start.anchor
                                                      : first.data.sequence_start.anchor);
        std::string anchor_name = anchor ? anchor : "";
        if (depth_ >= kMaxDepth) {
          *error = fmt::format("lists and mappings are nested more than {} levels deep", kMaxDepth);
          *error_at = ToLocation(first.start_mark);
          return false;
        }
        DepthGuard guard(&depth_);
        yaml_event_type_t end_type = is_map ? YAML_MAPPING_END_EVENT : YAML_SEQUENCE_END_EVENT;
        while (true) {
          EventGuard next;
          if (!Next(parser, &next, error, error_at)) return false;
          if (next.event.type == end_type) {
            out->end_offset = offsets_.ByteOffset(next.event.end_mark.index);
            break;
          }
          YamlNode child;
          if (!BuildNode(parser, next.event, &child, error, error_at)) return false;
          if (!is_map) {
            out->items.push_back(std::move(child));
            continue;
          }
          EventGuard value_event;
          if (!Next(parser, &value_event, error, error_at)) return false;
          YamlNode value;
          if (!BuildNode(parser, value_event.event, &value, error, error_at)) return false;
          out->entries.emplace_back(std::move(child), std::move(value));
        }
        if (!anchor_name.empty()) anchors_[anchor_name] = *out;
        return true;
      }
      default:
        *error = "YAML syntax error: unexpected event in the document";
        *error_at = ToLocation(first.start_mark);
        return false;
    }
    if (anchor) anchors_[anchor] = *out;
    return true;
  }

  bool Next(yaml_parser_t* parser, EventGuard* guard, std::string* error,
            SourceLocation* error_at) {
    if (!yaml_parser_parse(parser, &guard->event)) {
      *error = SyntaxMessage(*parser, text_, offsets_);
      *error_at = ToLocation(parser->problem_mark);
      return false;
    }
    guard->live = true;
    return true;
  }

 private:
  // Levels of lists and mappings in `node` (0 for a scalar); bounded by kMaxDepth.
  static int Height(const YamlNode& node) {
    int below = 0;
    for (const auto& item : node.items) below = std::max(below, Height(item));
    for (const auto& [k, v] : node.entries) below = std::max({below, Height(k), Height(v)});
    return node.IsScalar() ? 0 : below + 1;
  }

  static size_t CountNodes(const YamlNode& node) {
    size_t n = 1;
    for (const auto& item : node.items) n += CountNodes(item);
    for (const auto& [k, v] : node.entries) n += CountNodes(k) + CountNodes(v);
    return n;
  }

  static size_t ScalarBytes(const YamlNode& node) {
    size_t n = node.value.size();
    for (const auto& item : node.items) n += ScalarBytes(item);
    for (const auto& [k, v] : node.entries) n += ScalarBytes(k) + ScalarBytes(v);
    return n;
  }

  struct DepthGuard {
    explicit DepthGuard(int* depth) : depth(depth) { ++*depth; }
    ~DepthGuard() { --*depth; }
    int* depth;
  };

  std::string_view text_;
  const CharOffsets& offsets_;
  std::map<std::string, YamlNode> anchors_;
  size_t node_count_ = 0;
  size_t scalar_bytes_ = 0;  // of every scalar, aliases expanded
  int depth_ = 0;            // collections currently open
};

// Parses `text` as one document. Returns false with error/error_at on failure.
bool ParseOne(std::string_view text, YamlNode* root, bool* is_empty, std::string* error,
              SourceLocation* error_at) {
  CharOffsets offsets(text);
  std::unique_ptr<yaml_parser_t, ParserDeleter> parser(new yaml_parser_t);
  if (!yaml_parser_initialize(parser.get())) {
    *error = "could not initialize the YAML parser (out of memory?)";
    return false;
  }
  yaml_parser_set_input_string(parser.get(), reinterpret_cast<const unsigned char*>(text.data()),
                               text.size());
  TreeBuilder builder(text, offsets);
  *is_empty = true;
  *root = YamlNode();
  int documents = 0;
  while (true) {
    EventGuard ev;
    if (!builder.Next(parser.get(), &ev, error, error_at)) return false;
    switch (ev.event.type) {
      case YAML_STREAM_END_EVENT:
        return true;
      case YAML_DOCUMENT_START_EVENT:
        if (++documents > 1) {
          *error = "the file holds more than one YAML document ('---'); a workload is one document";
          *error_at = ToLocation(ev.event.start_mark);
          return false;
        }
        break;
      case YAML_STREAM_START_EVENT:
      case YAML_DOCUMENT_END_EVENT:
        break;
      default:
        *is_empty = false;
        if (!builder.BuildNode(parser.get(), ev.event, root, error, error_at)) return false;
        break;
    }
  }
}

}  // namespace

bool YamlNode::IsNull() const {
  if (kind != YamlKind::kScalar) return false;
  if (tag == kNullTag) return true;
  if (style != ScalarStyle::kPlain || !tag.empty()) return false;
  return value.empty() || value == "~" || value == "null" || value == "Null" || value == "NULL";
}

bool YamlNode::IsQuotedOrTaggedString() const {
  return kind == YamlKind::kScalar && (style != ScalarStyle::kPlain || tag == kStrTag);
}

const YamlNode* YamlNode::Find(std::string_view key) const {
  for (const auto& [k, v] : entries) {
    if (k.IsScalar() && k.value == key) return &v;
  }
  return nullptr;
}

YamlNode* YamlNode::Find(std::string_view key) {
  for (auto& [k, v] : entries) {
    if (k.IsScalar() && k.value == key) return &v;
  }
  return nullptr;
}

std::string SourceLine(const std::string& source, const YamlNode& node) {
  return fmt::format("{}:{}", source, node.location.line);
}

std::string DescribeNode(const YamlNode& node) {
  switch (node.kind) {
    case YamlKind::kMapping:
      return "a mapping";
    case YamlKind::kSequence:
      return "a list";
    case YamlKind::kScalar:
      break;
  }
  if (node.IsNull()) return "null (no value)";
  std::string shown = ShortenText(node.value, 40);
  if (shown.find('\n') != std::string::npos) return "a multi-line string";
  if (node.IsQuotedOrTaggedString()) return "the string '" + shown + "'";
  return "'" + shown + "'";
}

bool ParseYamlDocument(std::string_view text, Diagnostics* diagnostics, YamlNode* root,
                       bool* is_empty) {
  std::string error;
  SourceLocation at{1, 1};
  if (ParseOne(text, root, is_empty, &error, &at)) return true;
  diagnostics->Add(at, "", error);
  return false;
}

Result<YamlNode> LoadYaml(std::string_view text, const std::string& source) {
  std::string error;
  SourceLocation at{1, 1};
  YamlNode root;
  bool is_empty = true;
  if (!ParseOne(text, &root, &is_empty, &error, &at)) {
    return InvalidArgument(
        fmt::format("{}:{}:{}: invalid YAML: {}", source, at.line, at.column, error));
  }
  if (is_empty) return YamlNode();
  return root;
}

bool ParseYamlValue(std::string_view text, YamlNode* root, std::string* error) {
  bool is_empty = true;
  SourceLocation at;
  if (!ParseOne(text, root, &is_empty, error, &at)) return false;
  if (is_empty) *root = YamlNode();  // an empty VALUE is null
  return true;
}

bool SameYamlContent(const YamlNode& a, const YamlNode& b) {
  if (a.kind != b.kind) return false;
  switch (a.kind) {
    case YamlKind::kScalar:
      return a.value == b.value && a.IsQuotedOrTaggedString() == b.IsQuotedOrTaggedString() &&
             a.IsNull() == b.IsNull();
    case YamlKind::kSequence:
      if (a.items.size() != b.items.size()) return false;
      for (size_t i = 0; i < a.items.size(); ++i) {
        if (!SameYamlContent(a.items[i], b.items[i])) return false;
      }
      return true;
    case YamlKind::kMapping:
      if (a.entries.size() != b.entries.size()) return false;
      for (size_t i = 0; i < a.entries.size(); ++i) {
        if (!SameYamlContent(a.entries[i].first, b.entries[i].first) ||
            !SameYamlContent(a.entries[i].second, b.entries[i].second)) {
          return false;
        }
      }
      return true;
  }
  return false;
}

}  // namespace air::spec
