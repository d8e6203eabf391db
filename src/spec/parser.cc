// Loading and validating workload files (see parser.h).
#include "spec/parser.h"

#include <fmt/format.h>

#include <filesystem>

#include "base/strings.h"
#include "spec/validator.h"
#include "spec/yaml_emit.h"
#include "spec/yaml_tree.h"

namespace air::spec {
namespace {

std::string AbsolutePath(const std::string& path) {
  std::error_code ec;
  std::filesystem::path abs = std::filesystem::absolute(path, ec);
  if (ec) return path;
  return abs.lexically_normal().string();
}

// 1-based line and character column of byte `offset` in `text`.
SourceLocation LocationOfOffset(std::string_view text, size_t offset) {
  SourceLocation at{1, 1};
  size_t line_start = 0;
  for (size_t i = 0; i < offset && i < text.size(); ++i) {
    if (text[i] == '\n') {
      ++at.line;
      line_start = i + 1;
    }
  }
  for (size_t i = line_start; i < offset; ++i) {
    at.column += (static_cast<unsigned char>(text[i]) & 0xC0) != 0x80;
  }
  return at;
}

Status Summary(const LoadReport& report) {
  size_t n = report.diagnostics.size();
  return InvalidArgument(
      fmt::format("{} has {} error{}", report.diagnostics.file(), n, n == 1 ? "" : "s"));
}

}  // namespace

Result<WorkloadSpec> ParseWorkloadSpec(std::string_view text, const std::string& path,
                                       const std::vector<std::string>& overrides, Env* env,
                                       LoadReport* report) {
  report->diagnostics.set_file(path);
  WorkloadSpec spec;
  spec.source_path = AbsolutePath(path);
  spec.source_dir = std::filesystem::path(spec.source_path).parent_path().string();

  if (text.size() > kMaxWorkloadFileBytes) {
    report->diagnostics.Add(
        {1, 1}, "",
        fmt::format("the file is {}; a workload file may be at most {}", HumanBytes(text.size()),
                    HumanBytes(kMaxWorkloadFileBytes)));
    return Summary(*report);
  }
  size_t bad = 0;
  if (!IsValidUtf8(text, &bad)) {
    SourceLocation at = LocationOfOffset(text, bad);
    report->diagnostics.Add(
        at, "",
        fmt::format("invalid UTF-8 at byte offset {} (byte 0x{:02x}); a workload file must be "
                    "UTF-8 text",
                    bad, static_cast<unsigned char>(text[bad])));
    return Summary(*report);
  }
  if (size_t nul = text.find('\0'); nul != std::string_view::npos) {
    report->diagnostics.Add(LocationOfOffset(text, nul), "",
                            fmt::format("NUL byte at byte offset {}; a workload file must be UTF-8 "
                                        "text (is it UTF-16 or binary?)",
                                        nul));
    return Summary(*report);
  }
  YamlNode root;
  bool is_empty = true;
  if (!ParseYamlDocument(text, &report->diagnostics, &root, &is_empty)) return Summary(*report);
  if (is_empty || root.IsNull()) {
    report->diagnostics.Add({1, 1}, "",
                            "the file is empty; a workload needs at least experiment_name, "
                            "compute and command (see docs/workload-spec.md)");
    return Summary(*report);
  }
  if (!root.IsMapping()) {
    report->diagnostics.Add(root.location, "",
                            "expected a mapping of workload keys (experiment_name, compute, "
                            "command, ...), got " +
                                DescribeNode(root));
    return Summary(*report);
  }
  bool parameters_changed =
      ApplyOverrides(overrides, &root, &report->diagnostics, &report->changes);

  SpecValidator validator(&report->diagnostics, env);
  validator.Validate(root, &spec);
  if (!report->diagnostics.empty()) return Summary(*report);

  if (const YamlNode* parameters = root.Find("parameters")) {
    spec.parameters_yaml =
        parameters_changed ? EmitYaml(*parameters) : ParametersText(text, *parameters);
  }
  return spec;
}

Result<WorkloadSpec> LoadWorkloadSpec(const std::string& path,
                                      const std::vector<std::string>& overrides, Env* env,
                                      LoadReport* report) {
  report->diagnostics.set_file(path);
  if (env->IsDirectory(path)) {
    return InvalidArgument(fmt::format(
        "{} is a directory; give the workload YAML file (e.g. {}/train.yaml)", path, path));
  }
  if (Result<uint64_t> size = env->FileSize(path); size.ok() && *size > kMaxWorkloadFileBytes) {
    return InvalidArgument(fmt::format("{} is {}; a workload file may be at most {}", path,
                                       HumanBytes(*size), HumanBytes(kMaxWorkloadFileBytes)));
  }
  Result<std::string> text = env->ReadFile(path);
  if (!text.ok()) {
    return InvalidArgument(
        fmt::format("cannot read the workload file: {}", text.status().message()));
  }
  return ParseWorkloadSpec(*text, path, overrides, env, report);
}

}  // namespace air::spec
