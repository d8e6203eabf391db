// YamlNode: a YAML document as a plain tree that keeps what the workload validator needs and
// generic YAML loaders throw away: every key of a mapping in order (duplicates included, so they
// can be reported), each node's line, column and byte span in the source, and each scalar's
// style (plain or quoted) so that `'4'` stays a string while `4` is an integer.
//
// Built from libyaml's event parser (ParseYamlDocument). Scalars are not typed here; see
// spec/scalar_types.h for how air types them (YAML 1.2 core schema). Aliases are expanded into
// copies of their anchored node, up to a node budget that stops "billion laughs" documents.
// Thread safety: plain values.
#pragma once

#include <cstddef>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "base/status.h"
#include "spec/diagnostics.h"
#include "spec/workload_spec.h"

namespace air::spec {

enum class YamlKind { kScalar, kSequence, kMapping };

enum class ScalarStyle { kPlain, kSingleQuoted, kDoubleQuoted, kLiteral, kFolded };

struct YamlNode {
  YamlKind kind = YamlKind::kScalar;
  std::string value;  // scalars: the text after unescaping and folding
  ScalarStyle style = ScalarStyle::kPlain;
  std::string tag;          // explicit tag as resolved by libyaml ("tag:yaml.org,2002:str"), or ""
  SourceLocation location;  // 1-based start (0:0 for nodes made by an override)
  size_t begin_offset = 0;  // byte span [begin, end) of the node in the source text
  size_t end_offset = 0;
  bool flow = false;            // collections written in flow style ({...} or [...])
  std::string origin;           // "--override FIELD=VALUE" for nodes made by an override
  std::vector<YamlNode> items;  // sequences
  std::vector<std::pair<YamlNode, YamlNode>> entries;  // mappings: (key, value), as written

  bool IsScalar() const { return kind == YamlKind::kScalar; }
  bool IsMapping() const { return kind == YamlKind::kMapping; }
  bool IsSequence() const { return kind == YamlKind::kSequence; }
  // A plain untagged scalar spelled "", "~", "null", "Null" or "NULL" (or tagged !!null).
  bool IsNull() const;
  // A scalar that a YAML loader reads as text no matter how it looks: quoted, block, or !!str.
  bool IsQuotedOrTaggedString() const;

  // The value of the first entry whose key is the scalar `key`, or nullptr.
  const YamlNode* Find(std::string_view key) const;
  YamlNode* Find(std::string_view key);
};

// "a mapping", "a list", "null (no value)", "the string '4'", "5" ... for error messages.
std::string DescribeNode(const YamlNode& node);

// "SOURCE:LINE" of node: where an error message about it points.
std::string SourceLine(const std::string& source, const YamlNode& node);

// Parses a single YAML document. Returns false and adds one diagnostic (syntax error with its
// line and column, a second document, an undefined alias, too many nodes) on failure. An empty
// document (nothing but comments or whitespace) yields *is_empty = true and a null root.
bool ParseYamlDocument(std::string_view text, Diagnostics* diagnostics, YamlNode* root,
                       bool* is_empty);

// The one YAML loader of every other reader (AIR_HOME/config.yaml, `air train`'s parameters,
// `air model` configs): ParseYamlDocument with its limits (nodes after alias expansion, bytes,
// nesting depth). An empty document is a null scalar. The error reads
// "SOURCE:LINE:COL: invalid YAML: ..." (syntax, an alias bomb, too deep, a second document).
Result<YamlNode> LoadYaml(std::string_view text, const std::string& source);

// Parses a standalone value (an --override's VALUE) the same way; errors are returned as text.
bool ParseYamlValue(std::string_view text, YamlNode* root, std::string* error);

// True when a and b have the same shape, keys, scalar values and string-ness (plain vs quoted
// where it changes the type); positions are ignored.
bool SameYamlContent(const YamlNode& a, const YamlNode& b);

}  // namespace air::spec
