// Volume path parsing and discovery (see volume_paths.h).
#include "spec/volume_paths.h"

#include <fmt/format.h>

#include <cstring>

namespace air::spec {
namespace {

constexpr std::string_view kDbfsScheme = "dbfs:";

bool IsNameChar(char c) {
  return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '_' ||
         c == '-';
}

// Characters that end a path inside a shell command or a YAML/JSON value.
bool EndsPath(char c) {
  return std::strchr(" \t\r\n'\"`;|&()<>,$*?[]{}", c) != nullptr || c == '\0';
}

// Characters after which a "/Volumes/" starts a new word.
bool StartsWord(char c) { return std::strchr(" \t\r\n'\"`=:,([{", c) != nullptr; }

constexpr const char* kLevels[] = {"catalog", "schema", "volume"};

}  // namespace

bool IsValidVolumeName(std::string_view name) {
  if (name.empty() || name.size() > 255 || name[0] == '-') return false;
  for (char c : name) {
    if (!IsNameChar(c)) return false;
  }
  return true;
}

Result<std::vector<std::string>> ParseVolumePath(std::string_view path) {
  std::string_view rest = path;
  if (rest.substr(0, kDbfsScheme.size()) == kDbfsScheme) rest.remove_prefix(kDbfsScheme.size());
  const std::string_view prefix = kVolumesPrefix;
  if (rest.substr(0, prefix.size()) != prefix ||
      (rest.size() > prefix.size() && rest[prefix.size()] != '/')) {
    return InvalidArgument(fmt::format(
        "'{}' is not a volume path; write /Volumes/<catalog>/<schema>/<volume>/...", path));
  }
  if (rest.find('\0') != std::string_view::npos) {
    return InvalidArgument(fmt::format("volume path '{}' contains a NUL byte", path));
  }
  rest.remove_prefix(prefix.size());
  std::vector<std::string> parts;
  while (!rest.empty()) {
    size_t slash = rest.find('/');
    std::string_view part = rest.substr(0, slash);
    rest = slash == std::string_view::npos ? std::string_view() : rest.substr(slash + 1);
    if (part.empty()) continue;  // "//" or a trailing '/'
    if (part == "." || part == "..") {
      return InvalidArgument(fmt::format(
          "volume path '{}' contains '{}'; volume paths must not step out of or around their "
          "directories, write the path without it",
          path, part));
    }
    if (parts.size() < 3 && !IsValidVolumeName(part)) {
      return InvalidArgument(fmt::format(
          "volume path '{}': '{}' is not a valid {} name (1-255 letters, digits, '_' or '-', not "
          "starting with '-')",
          path, part, kLevels[parts.size()]));
    }
    parts.emplace_back(part);
  }
  return parts;
}

std::vector<TextSpan> FindVolumePathSpans(std::string_view text) {
  std::vector<TextSpan> out;
  const std::string_view needle = "/Volumes/";
  size_t pos = 0;
  while ((pos = text.find(needle, pos)) != std::string_view::npos) {
    size_t start = pos;
    if (start >= kDbfsScheme.size() &&
        text.substr(start - kDbfsScheme.size(), kDbfsScheme.size()) == kDbfsScheme) {
      start -= kDbfsScheme.size();
    }
    if (start > 0 && !StartsWord(text[start - 1])) {
      pos += needle.size();
      continue;
    }
    size_t end = pos + needle.size();
    while (end < text.size() && !EndsPath(text[end])) ++end;
    out.push_back({start, end - start});
    pos = end;
  }
  return out;
}

std::vector<std::string> FindVolumePaths(std::string_view text) {
  std::vector<std::string> out;
  for (const TextSpan& span : FindVolumePathSpans(text)) {
    out.emplace_back(text.substr(span.offset, span.length));
  }
  return out;
}

std::vector<VolumeProblem> CheckVolumeReferences(const WorkloadSpec& spec) {
  std::vector<VolumeProblem> problems;
  for (const auto& ref : FindVolumeReferences(spec)) {
    auto parts = ParseVolumePath(ref.path);
    if (!parts.ok()) problems.push_back({ref.field, parts.status().message()});
  }
  return problems;
}

std::vector<VolumeReference> FindVolumeReferences(const WorkloadSpec& spec) {
  std::vector<VolumeReference> refs;
  for (auto& path : FindVolumePaths(spec.command)) refs.push_back({"command", std::move(path)});
  for (const auto& [name, value] : spec.env_variables) {
    for (auto& path : FindVolumePaths(value)) {
      refs.push_back({"env_variables." + name, std::move(path)});
    }
  }
  if (spec.parameters_yaml) {
    for (auto& path : FindVolumePaths(*spec.parameters_yaml)) {
      refs.push_back({"parameters", std::move(path)});
    }
  }
  return refs;
}

}  // namespace air::spec
