// Loading workload files: the seed's train.yaml, defaults, YAML typing of values, and the
// parameters block kept exactly as written.
#include "spec/parser.h"

#include <gtest/gtest.h>

#include "spec/compute_shapes.h"
#include "spec_test_util.h"

namespace air::spec {
namespace {

using testing::SourceDir;
using testing::TempDir;

const char kSeedParameters[] =
    "model_name: meta-llama/Llama-3.1-8B\n"
    "dataset_name: tatsu-lab/alpaca\n"
    "max_seq_len: 1024\n"
    "per_device_batch_size: 4\n"
    "gradient_accumulation_steps: 2\n"
    "learning_rate: 0.00002\n"
    "max_steps: 100\n"
    "output_dir: /Volumes/main/default/air_checkpoints/llama31-8b-sft\n";

Result<WorkloadSpec> Load(const std::string& path, LoadReport* report,
                          const std::vector<std::string>& overrides = {}) {
  return LoadWorkloadSpec(path, overrides, DefaultEnv(), report);
}

std::string Errors(const LoadReport& report) {
  std::string out;
  for (const auto& d : report.diagnostics.Sorted()) out += d.ToString() + "\n";
  return out;
}

TEST(Parser, LoadsTheSeedWorkloadCompletely) {
  std::string path = (SourceDir() / "examples/multinode_llm_sft/train.yaml").string();
  LoadReport report;
  Result<WorkloadSpec> spec = Load(path, &report);
  ASSERT_TRUE(spec.ok()) << Errors(report);
  EXPECT_EQ(spec->experiment_name, "air-multinode-llama-sft");
  EXPECT_EQ(spec->compute.accelerator_type, "GPU_8xH100");
  EXPECT_EQ(spec->compute.num_accelerators, 16);
  EXPECT_EQ(spec->compute.per_node, 8);
  EXPECT_EQ(spec->compute.num_nodes, 2);
  EXPECT_EQ(spec->compute.device_model, "H100");
  EXPECT_EQ(spec->compute.kind, AcceleratorKind::kGpu);
  EXPECT_EQ(DescribeCompute(spec->compute), "2 nodes \u00d7 8 GPUs (GPU_8xH100)");
  ASSERT_TRUE(spec->environment.has_value());
  EXPECT_EQ(spec->environment->version, "4");
  EXPECT_EQ(
      spec->environment->dependencies,
      (std::vector<std::string>{"transformers>=4.45", "datasets>=3.0", "huggingface_hub>=0.34",
                                "accelerate>=0.34", "fsspec>=2024.6.1"}));
  ASSERT_TRUE(spec->code_source.has_value());
  EXPECT_EQ(spec->code_source->snapshot.root_path, ".");
  EXPECT_EQ(spec->code_source->snapshot.resolved_root,
            std::filesystem::path(spec->source_path).parent_path().string());
  EXPECT_TRUE(spec->command.starts_with("cd $CODE_SOURCE_PATH\n"));
  EXPECT_TRUE(spec->command.ends_with("\\\n  train.py\n")) << spec->command;
  EXPECT_EQ(spec->env_variables, (std::vector<std::pair<std::string, std::string>>{
                                     {"NCCL_SOCKET_IFNAME", "eth0"}, {"HF_HOME", "/tmp/hf"}}));
  ASSERT_EQ(spec->secrets.size(), 1u);
  EXPECT_EQ(spec->secrets[0].first, "HF_TOKEN");
  EXPECT_EQ(spec->secrets[0].second.ToString(), "my_scope/hf_token");
  EXPECT_EQ(spec->max_retries, 1);
  EXPECT_EQ(spec->timeout_minutes, 120);
  ASSERT_TRUE(spec->parameters_yaml.has_value());
  EXPECT_EQ(*spec->parameters_yaml, kSeedParameters);
  EXPECT_EQ(spec->LocationOf("compute.num_accelerators").line, 16);
  EXPECT_EQ(spec->LocationOf("compute.num_accelerators").column, 21);
}

TEST(Parser, DefaultsAndValuesAsWritten) {
  TempDir dir;
  std::string path = dir.Write("w.yaml",
                               "experiment_name: 2024\n"
                               "compute: {accelerator_type: CPU_2, num_accelerators: 2}\n"
                               "command: echo hi\n"
                               "env_variables:\n"
                               "  A: yes\n"
                               "  B: 010\n"
                               "  C: ''\n"
                               "  D: 1e3\n");
  LoadReport report;
  Result<WorkloadSpec> spec = Load(path, &report);
  ASSERT_TRUE(spec.ok()) << Errors(report);
  EXPECT_EQ(spec->experiment_name, "2024");
  EXPECT_EQ(spec->max_retries, 3);
  EXPECT_FALSE(spec->timeout_minutes.has_value());
  EXPECT_FALSE(spec->parameters_yaml.has_value());
  EXPECT_FALSE(spec->code_source.has_value());
  EXPECT_EQ(spec->compute.kind, AcceleratorKind::kCpu);
  EXPECT_EQ(spec->compute.num_nodes, 1);
  EXPECT_EQ(spec->env_variables, (std::vector<std::pair<std::string, std::string>>{
                                     {"A", "yes"}, {"B", "010"}, {"C", ""}, {"D", "1e3"}}));
}

TEST(Parser, RelativeRootPathResolvesAgainstTheWorkloadFile) {
  TempDir dir;
  dir.Write("proj/code/train.py", "x");
  std::string path = dir.Write("proj/cfg/w.yaml",
                               "experiment_name: demo\n"
                               "compute: {accelerator_type: GPU_1xA10, num_accelerators: 1}\n"
                               "code_source: {type: snapshot, snapshot: {root_path: ../code}}\n"
                               "command: python train.py\n");
  LoadReport report;
  Result<WorkloadSpec> spec = Load(path, &report);
  ASSERT_TRUE(spec.ok()) << Errors(report);
  EXPECT_EQ(spec->code_source->snapshot.resolved_root, dir.path() + "/proj/code");
}

TEST(Parser, ParametersKeepTheirTextCommentsAndTypes) {
  TempDir dir;
  std::string path = dir.Write("w.yaml",
                               "experiment_name: demo\n"
                               "compute: {accelerator_type: GPU_1xA10, num_accelerators: 1}\n"
                               "command: echo hi\n"
                               "parameters:\n"
                               "    lr: 0.00002   # small\n"
                               "    tag: '4'\n"
                               "    flags: [on, off]\n"
                               "    nested:\n"
                               "        list:\n"
                               "          - {a: 1}\n"
                               "# a comment before the next key\n"
                               "\n"
                               "max_retries: 0\n");
  LoadReport report;
  Result<WorkloadSpec> spec = Load(path, &report);
  ASSERT_TRUE(spec.ok()) << Errors(report);
  EXPECT_EQ(*spec->parameters_yaml,
            "lr: 0.00002   # small\n"
            "tag: '4'\n"
            "flags: [on, off]\n"
            "nested:\n"
            "    list:\n"
            "      - {a: 1}\n");
}

TEST(Parser, FlowParametersAreKeptToo) {
  TempDir dir;
  std::string path = dir.Write("w.yaml",
                               "experiment_name: demo\n"
                               "compute: {accelerator_type: GPU_1xA10, num_accelerators: 1}\n"
                               "command: echo hi\n"
                               "parameters: {lr: 1e-4, name: \"x\"}  # inline\n");
  LoadReport report;
  Result<WorkloadSpec> spec = Load(path, &report);
  ASSERT_TRUE(spec.ok()) << Errors(report);
  EXPECT_EQ(*spec->parameters_yaml, "{lr: 1e-4, name: \"x\"}\n");
}

TEST(Parser, ByteOrderMarkAndCrlfLineEndingsAreAccepted) {
  TempDir dir;
  std::string path = dir.Write("w.yaml",
                               "\xEF\xBB\xBF"
                               "experiment_name: demo\r\n"
                               "compute: {accelerator_type: CPU_2, num_accelerators: 4}\r\n"
                               "command: echo hi\r\n"
                               "max_retries: x\r\n");
  LoadReport report;
  Result<WorkloadSpec> spec = Load(path, &report);
  ASSERT_FALSE(spec.ok());
  std::vector<SpecDiagnostic> errors = report.diagnostics.Sorted();
  ASSERT_EQ(errors.size(), 1u) << Errors(report);
  EXPECT_EQ(errors[0].line, 4);
  EXPECT_EQ(errors[0].column, 14);
  std::string fixed = dir.Write("ok.yaml",
                                "\xEF\xBB\xBF"
                                "experiment_name: demo\r\n"
                                "compute: {accelerator_type: CPU_2, num_accelerators: 4}\r\n"
                                "command: echo hi\r\n");
  LoadReport ok_report;
  Result<WorkloadSpec> ok = Load(fixed, &ok_report);
  ASSERT_TRUE(ok.ok()) << Errors(ok_report);
  EXPECT_EQ(ok->experiment_name, "demo");
  EXPECT_EQ(ok->command, "echo hi");
}

TEST(Parser, MissingAndDirectoryFilesAreInvalidInput) {
  LoadReport report;
  Result<WorkloadSpec> missing = Load("/nonexistent/air/w.yaml", &report);
  ASSERT_FALSE(missing.ok());
  EXPECT_EQ(missing.status().code(), ErrorCode::kInvalidArgument);
  EXPECT_NE(missing.status().message().find("/nonexistent/air/w.yaml"), std::string::npos);
  TempDir dir;
  Result<WorkloadSpec> directory = Load(dir.path(), &report);
  ASSERT_FALSE(directory.ok());
  EXPECT_NE(directory.status().message().find("is a directory"), std::string::npos);
}

TEST(Parser, ValidCpuAndSingleGpuShapes) {
  for (const auto& [type, count, nodes, per] :
       std::vector<std::tuple<std::string, int, int, int>>{{"CPU_2", 4, 2, 2},
                                                           {"CPU_1", 3, 3, 1},
                                                           {"GPU_1xH100", 2, 2, 1},
                                                           {"GPU_8xH200", 32, 4, 8}}) {
    TempDir dir;
    std::string path = dir.Write(
        "w.yaml", "experiment_name: demo\ncompute: {accelerator_type: " + type +
                      ", num_accelerators: " + std::to_string(count) + "}\ncommand: echo hi\n");
    LoadReport report;
    Result<WorkloadSpec> spec = Load(path, &report);
    ASSERT_TRUE(spec.ok()) << Errors(report);
    EXPECT_EQ(spec->compute.num_nodes, nodes) << type;
    EXPECT_EQ(spec->compute.per_node, per) << type;
  }
}

TEST(Parser, ShapeNamesInTheWrongCaseGetTheRightSpelling) {
  EXPECT_EQ(ShapeWithCorrectCase("gpu_8xh100"), "GPU_8xH100");
  EXPECT_EQ(ShapeWithCorrectCase("GPU_8XH200"), "GPU_8xH200");
  EXPECT_EQ(ShapeWithCorrectCase("cpu_4"), "CPU_4");
  EXPECT_EQ(ShapeWithCorrectCase("cpu_0"), "");
  EXPECT_EQ(ShapeWithCorrectCase("gpu_8xa100"), "");
}

TEST(Parser, TrailingBlankLinesOfACommandDoNotCountTowardTheLimit) {
  // A `|+` block keeps its trailing blank lines; 1000 lines of text plus two blank ones pass.
  std::string body;
  for (int i = 0; i < 1000; ++i) body += "  echo " + std::to_string(i) + "\n";
  TempDir dir;
  std::string head =
      "experiment_name: demo\ncompute: {accelerator_type: CPU_1, num_accelerators: 1}\n";
  LoadReport report;
  Result<WorkloadSpec> spec =
      Load(dir.Write("keep.yaml", head + "command: |+\n" + body + "\n\n"), &report);
  ASSERT_TRUE(spec.ok()) << Errors(report);
  EXPECT_EQ(CountCommandLines(spec->command), 1000u);
  LoadReport too_long;
  ASSERT_FALSE(
      Load(dir.Write("long.yaml", head + "command: |\n" + body + "  echo last\n"), &too_long).ok());
  EXPECT_NE(Errors(too_long).find("command: has 1001 lines; at most 1000"), std::string::npos)
      << Errors(too_long);
}

}  // namespace
}  // namespace air::spec
