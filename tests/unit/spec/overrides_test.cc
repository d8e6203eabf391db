// --override FIELD=VALUE: changing and adding values, typed values, unknown fields, and
// results that fail validation (reported with the override as their origin).
#include "spec/overrides.h"

#include <gtest/gtest.h>

#include "spec/parser.h"
#include "spec_test_util.h"

namespace air::spec {
namespace {

using testing::SourceDir;
using testing::TempDir;

std::string SeedPath() { return (SourceDir() / "examples/multinode_llm_sft/train.yaml").string(); }

std::string Errors(const LoadReport& report) {
  std::string out;
  for (const auto& d : report.diagnostics.Sorted()) out += d.ToString() + "\n";
  return out;
}

TEST(Overrides, ChangeAValue) {
  LoadReport report;
  Result<WorkloadSpec> spec = LoadWorkloadSpec(
      SeedPath(), {"max_retries=0", "compute.num_accelerators=8"}, DefaultEnv(), &report);
  ASSERT_TRUE(spec.ok()) << Errors(report);
  EXPECT_EQ(spec->max_retries, 0);
  EXPECT_EQ(spec->compute.num_nodes, 1);
  ASSERT_EQ(report.changes.size(), 2u);
  EXPECT_EQ(report.changes[0].field, "max_retries");
  EXPECT_EQ(report.changes[0].before, "1");
  EXPECT_EQ(report.changes[0].after, "0");
  EXPECT_EQ(report.changes[1].before, "16");
  EXPECT_EQ(report.changes[1].after, "8");
  // An overridden value has no position in the file.
  EXPECT_EQ(spec->LocationOf("max_retries").line, 0);
}

TEST(Overrides, AddAValueAndCreateMissingSections) {
  LoadReport report;
  Result<WorkloadSpec> spec = LoadWorkloadSpec(
      SeedPath(),
      {"env_variables.FOO=bar", "timeout_minutes=30",
       "code_source.snapshot.include_paths=[train.py]", "mlflow_run_name=first try: lr sweep"},
      DefaultEnv(), &report);
  ASSERT_TRUE(spec.ok()) << Errors(report);
  ASSERT_EQ(spec->env_variables.size(), 3u);
  EXPECT_EQ(spec->env_variables[2], (std::pair<std::string, std::string>{"FOO", "bar"}));
  EXPECT_EQ(report.changes[0].before, "(unset)");
  EXPECT_EQ(report.changes[0].after, "bar");
  EXPECT_EQ(spec->timeout_minutes, 30);
  EXPECT_EQ(spec->code_source->snapshot.include_paths, std::vector<std::string>{"train.py"});
  EXPECT_EQ(spec->mlflow_run_name, "first try: lr sweep");  // text fields are taken literally
}

TEST(Overrides, ParametersAreTypedAndTheRestKeepsItsText) {
  LoadReport report;
  Result<WorkloadSpec> spec =
      LoadWorkloadSpec(SeedPath(),
                       {"parameters.learning_rate=1e-4", "parameters.optim.betas=[0.9, 0.95]",
                        "parameters.run_tag='7'"},
                       DefaultEnv(), &report);
  ASSERT_TRUE(spec.ok()) << Errors(report);
  EXPECT_EQ(report.changes[0].before, "0.00002");
  EXPECT_EQ(report.changes[0].after, "1e-4");
  EXPECT_EQ(report.changes[2].after, "'7'");
  const std::string& text = *spec->parameters_yaml;
  EXPECT_NE(text.find("learning_rate: 1e-4\n"), std::string::npos) << text;
  EXPECT_NE(text.find("max_seq_len: 1024\n"), std::string::npos) << text;
  EXPECT_NE(text.find("optim:\n  betas:\n    - 0.9\n    - 0.95\n"), std::string::npos) << text;
  EXPECT_NE(text.find("run_tag: \"7\"\n"), std::string::npos) << text;
}

TEST(Overrides, UnknownFieldListsTheValidOnes) {
  LoadReport report;
  Result<WorkloadSpec> spec =
      LoadWorkloadSpec(SeedPath(), {"compute.num_gpus=8"}, DefaultEnv(), &report);
  ASSERT_FALSE(spec.ok());
  std::vector<SpecDiagnostic> errors = report.diagnostics.Sorted();
  ASSERT_EQ(errors.size(), 1u) << Errors(report);
  EXPECT_EQ(errors[0].origin, "--override compute.num_gpus=8");
  EXPECT_EQ(errors[0].field, "compute.num_gpus");
  EXPECT_TRUE(errors[0].message.starts_with(
      "unknown field 'compute.num_gpus'; valid fields: experiment_name, compute, "
      "compute.accelerator_type, compute.num_accelerators,"))
      << errors[0].message;
  EXPECT_NE(errors[0].message.find("env_variables.NAME"), std::string::npos);
  EXPECT_NE(errors[0].message.find("parameters.KEY[.KEY...]"), std::string::npos);
  EXPECT_EQ(errors[0].ToString().rfind(
                SeedPath() + ": --override compute.num_gpus=8: compute.num_gpus: ", 0),
            0u);

  LoadReport typo;
  ASSERT_FALSE(LoadWorkloadSpec(SeedPath(), {"max_retry=0"}, DefaultEnv(), &typo).ok());
  ASSERT_EQ(typo.diagnostics.size(), 1u);
  EXPECT_TRUE(typo.diagnostics.Sorted()[0].message.starts_with(
      "unknown field 'max_retry' (did you mean 'max_retries'?); valid fields: "))
      << typo.diagnostics.Sorted()[0].message;
}

TEST(Overrides, InvalidResultsAreValidationErrorsNamingTheOverride) {
  LoadReport report;
  Result<WorkloadSpec> spec = LoadWorkloadSpec(
      SeedPath(), {"max_retries=-1", "compute.num_accelerators=12", "env_variables.NODE_RANK=3"},
      DefaultEnv(), &report);
  ASSERT_FALSE(spec.ok());
  std::vector<SpecDiagnostic> errors = report.diagnostics.Sorted();
  ASSERT_EQ(errors.size(), 3u) << Errors(report);
  EXPECT_EQ(errors[0].ToString(),
            SeedPath() +
                ": --override compute.num_accelerators=12: compute.num_accelerators: 12 is not a "
                "multiple of 8, the GPUs per node of GPU_8xH100; use 8 or 16");
  EXPECT_EQ(errors[1].origin, "--override env_variables.NODE_RANK=3");
  EXPECT_EQ(
      errors[2].ToString(),
      SeedPath() +
          ": --override max_retries=-1: max_retries: must be between 0 and 1000, got -1 (0 = no "
          "retries)");
  // The changes were still applied and reported.
  EXPECT_EQ(report.changes.size(), 3u);
}

TEST(Overrides, MalformedOverridesAndPathsThroughScalars) {
  LoadReport report;
  Result<WorkloadSpec> spec = LoadWorkloadSpec(
      SeedPath(),
      {"max_retries", "command.x=1", "parameters.max_steps.inner=2", "a..b=1", "max_retries=[1"},
      DefaultEnv(), &report);
  ASSERT_FALSE(spec.ok());
  std::vector<SpecDiagnostic> errors = report.diagnostics.Sorted();
  ASSERT_EQ(errors.size(), 5u) << Errors(report);
  EXPECT_EQ(errors[0].message, "expected FIELD=VALUE, e.g. --override max_retries=0");
  EXPECT_TRUE(errors[1].message.starts_with("unknown field 'command.x'")) << errors[1].message;
  EXPECT_EQ(errors[2].message,
            "cannot set 'parameters.max_steps.inner': 'parameters.max_steps' is '100' (line 56), "
            "not a mapping");
  EXPECT_TRUE(errors[3].message.starts_with("has an empty part")) << errors[3].message;
  EXPECT_TRUE(errors[4].message.starts_with("VALUE '[1' is not valid YAML")) << errors[4].message;
}

TEST(Overrides, ValuesThatAreNotUtf8AreRejected) {
  // The file must be UTF-8; an override (argv) must be too, or it would reach the plan and the
  // JSON output (which cannot carry it) unchecked.
  LoadReport report;
  Result<WorkloadSpec> spec = LoadWorkloadSpec(
      SeedPath(), {"env_variables.NAME=caf\xE9", "experiment_name=ok"}, DefaultEnv(), &report);
  ASSERT_FALSE(spec.ok());
  std::vector<SpecDiagnostic> errors = report.diagnostics.Sorted();
  ASSERT_EQ(errors.size(), 1u) << Errors(report);
  EXPECT_EQ(errors[0].message,
            "invalid UTF-8 at byte 22 (0xe9); an override must be UTF-8 text, like the workload "
            "file");
  EXPECT_EQ(errors[0].origin, "--override env_variables.NAME=caf\xE9");
  ASSERT_EQ(report.changes.size(), 1u);
  EXPECT_EQ(report.changes[0].field, "experiment_name");
}

TEST(Overrides, FieldNestingIsBounded) {
  // 50,000 parts created 50,000 nested mappings and overflowed the stack of the validator.
  std::string deep = "parameters";
  for (int i = 0; i < 50000; ++i) deep += ".a";
  std::string ok = "parameters";
  for (int i = 0; i < 63; ++i) ok += ".a";
  LoadReport report;
  Result<WorkloadSpec> spec =
      LoadWorkloadSpec(SeedPath(), {deep + "=1", ok + "=1"}, DefaultEnv(), &report);
  ASSERT_FALSE(spec.ok());
  std::vector<SpecDiagnostic> errors = report.diagnostics.Sorted();
  ASSERT_EQ(errors.size(), 1u) << Errors(report);
  EXPECT_EQ(errors[0].message, "FIELD has 50001 dotted parts; at most 64 are allowed");
  EXPECT_EQ(report.changes.size(), 1u);  // the 64-part field was applied
}

TEST(Overrides, OverridableFieldsCoverEverySection) {
  std::vector<std::string> fields = OverridableFields();
  for (const char* f : {"experiment_name", "compute.num_accelerators", "environment.dependencies",
                        "code_source.snapshot.git.branch", "command", "env_variables.NAME",
                        "secrets.NAME", "max_retries", "timeout_minutes", "parameters.KEY[.KEY...]",
                        "idempotency_token", "permissions"}) {
    EXPECT_NE(std::find(fields.begin(), fields.end(), f), fields.end()) << f;
  }
}

}  // namespace
}  // namespace air::spec
