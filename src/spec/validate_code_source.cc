// The validator's code_source section: type, snapshot root_path, include_paths and the git
// revision (see validator.h, docs/workload-spec.md).
#include <fmt/format.h>

#include <algorithm>
#include <filesystem>

#include "base/strings.h"
#include "spec/validator.h"

namespace air::spec {
namespace {

bool IsHex(std::string_view s) {
  return std::all_of(s.begin(), s.end(),
                     [](char c) { return isxdigit(static_cast<unsigned char>(c)); });
}

// A branch name git accepts (the parts of git check-ref-format that matter) and that cannot
// be mistaken for a command-line option.
std::string BranchNameProblem(std::string_view name) {
  if (name[0] == '-') return "must not start with '-'";
  for (char c : name) {
    if (static_cast<unsigned char>(c) <= ' ' || c == 0x7f)
      return "must not contain spaces or control characters";
    if (c == '~' || c == '^' || c == ':' || c == '?' || c == '*' || c == '[' || c == '\\') {
      return fmt::format("must not contain '{}'", c);
    }
  }
  if (name.find("..") != std::string_view::npos) return "must not contain '..'";
  if (name.find("@{") != std::string_view::npos) return "must not contain '@{'";
  if (name.back() == '/' || name.back() == '.' || EndsWith(name, ".lock")) {
    return "must not end with '/', '.' or '.lock'";
  }
  return "";
}

}  // namespace

void SpecValidator::ValidateCodeSource(const YamlNode& node, WorkloadSpec* spec) {
  MappingView view;
  if (!CheckMapping(node, "code_source", {"type", "snapshot"}, "type and snapshot", &view)) return;
  CodeSourceSpec code;
  bool type_ok = false;
  if (Require(view, node, "code_source", "type", "the only type is 'snapshot'")) {
    const YamlNode& type = *view.Get("type");
    if (ReadString(type, "code_source.type", &code.type)) {
      type_ok = code.type == "snapshot";
      if (!type_ok) {
        Error(type, "code_source.type",
              fmt::format("unknown code source type '{}'; the only type is 'snapshot'", code.type));
      }
    }
  }
  if (Require(view, node, "code_source", "snapshot",
              "e.g. snapshot: {root_path: .} to upload the workload's directory")) {
    ValidateSnapshot(*view.Get("snapshot"), "code_source.snapshot", &code.snapshot, spec);
  }
  if (type_ok) spec->code_source = code;
}

void SpecValidator::ValidateSnapshot(const YamlNode& node, const std::string& field,
                                     SnapshotSpec* snapshot, WorkloadSpec* spec) {
  MappingView view;
  if (!CheckMapping(node, field, {"root_path", "include_paths", "git", "max_size_mb"},
                    "root_path, include_paths, git and max_size_mb", &view)) {
    return;
  }
  if (const YamlNode* limit = view.Get("max_size_mb")) {
    int64_t mb = 0;
    if (ReadInt(*limit, field + ".max_size_mb", &mb)) {
      Remember(field + ".max_size_mb", *limit, spec);
      if (mb < 1 || mb > (int64_t{1} << 30)) {
        Error(*limit, field + ".max_size_mb",
              fmt::format("must be a size in MiB from 1 to {}, got {}", int64_t{1} << 30, mb));
      } else {
        snapshot->max_size_mb = mb;
      }
    }
  }
  if (Require(view, node, field, "root_path",
              "the directory to upload, relative to this file (e.g. '.')")) {
    const YamlNode& root = *view.Get("root_path");
    if (ReadString(root, field + ".root_path", &snapshot->root_path)) {
      Remember(field + ".root_path", root, spec);
      snapshot->resolved_root = ResolveAgainst(spec->source_dir, snapshot->root_path);
      if (!env_->IsDirectory(snapshot->resolved_root)) {
        Error(root, field + ".root_path",
              fmt::format("'{}' is not an existing directory (resolved to {} against the "
                          "workload file's directory)",
                          snapshot->root_path, snapshot->resolved_root));
      }
    }
  }
  if (const YamlNode* paths = view.Get("include_paths")) {
    std::string pfield = field + ".include_paths";
    Remember(pfield, *paths, spec);
    if (!paths->IsSequence()) {
      Error(*paths, pfield, "expected a list of relative paths, got " + DescribeNode(*paths));
    } else if (paths->items.empty()) {
      Error(*paths, pfield, "is an empty list; list paths under root_path or remove the key");
    }
    for (size_t i = 0; paths->IsSequence() && i < paths->items.size(); ++i) {
      const YamlNode& item = paths->items[i];
      std::string item_field = fmt::format("{}[{}]", pfield, i);
      std::string path;
      if (!ReadString(item, item_field, &path)) continue;
      std::vector<std::string> parts = Split(path, '/');
      if (path[0] == '/') {
        Error(item, item_field,
              fmt::format("'{}' is absolute; give a path relative to root_path", path));
      } else if (std::find(parts.begin(), parts.end(), "..") != parts.end()) {
        Error(item, item_field,
              fmt::format("'{}' contains '..'; include paths must stay inside root_path", path));
      } else if (std::find(snapshot->include_paths.begin(), snapshot->include_paths.end(),
                           std::filesystem::path(path).lexically_normal().string()) !=
                 snapshot->include_paths.end()) {
        Error(item, item_field, fmt::format("'{}' is listed twice", path));
      } else {
        snapshot->include_paths.push_back(std::filesystem::path(path).lexically_normal().string());
        Remember(item_field, item, spec);
      }
    }
  }
  if (const YamlNode* git = view.Get("git")) {
    GitRefSpec ref;
    ValidateGitRef(*git, field + ".git", &ref, spec);
    snapshot->git = ref;
  }
}

void SpecValidator::ValidateGitRef(const YamlNode& node, const std::string& field, GitRefSpec* git,
                                   WorkloadSpec* spec) {
  MappingView view;
  if (!CheckMapping(node, field, {"branch", "commit"}, "branch or commit", &view)) return;
  const YamlNode* branch = view.Get("branch");
  const YamlNode* commit = view.Get("commit");
  if (branch && commit) {
    Error(*view.KeyNode("commit"), field + ".commit",
          fmt::format("give exactly one of branch and commit, not both (branch is at line {})",
                      view.KeyNode("branch")->location.line));
    return;
  }
  if (!branch && !commit) {
    Error(node, field, "give exactly one of branch and commit, e.g. git: {branch: main}");
    return;
  }
  std::string value;
  if (branch && ReadString(*branch, field + ".branch", &value)) {
    Remember(field + ".branch", *branch, spec);
    std::string problem = BranchNameProblem(value);
    if (!problem.empty()) {
      Error(*branch, field + ".branch",
            fmt::format("'{}' is not a valid branch name: {}", value, problem));
    } else {
      git->branch = value;
    }
  }
  if (commit && ReadString(*commit, field + ".commit", &value)) {
    Remember(field + ".commit", *commit, spec);
    if (value.size() < 4 || value.size() > 64 || !IsHex(value)) {
      Error(
          *commit, field + ".commit",
          fmt::format("'{}' is not a commit hash; give 4 to 64 hex digits (or use branch)", value));
    } else {
      git->commit = value;
    }
  }
}

}  // namespace air::spec
