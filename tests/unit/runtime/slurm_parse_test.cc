// The Slurm backend's pure parts: scontrol record parsing, job state phases, GPU counts in Gres,
// the sbatch command line and batch script of an attempt, the --time format, and the `slurm:`
// block of AIR_HOME/config.yaml (through the registry's loader).
#include <gtest/gtest.h>

#include <algorithm>

#include "backends/cluster_registry.h"
#include "backends/slurm/batch_script.h"
#include "backends/slurm/slurm_cli.h"
#include "test_util.h"

namespace air::backends {
namespace {

using slurm::JobPhase;

bool Has(const std::vector<std::string>& argv, const std::string& item) {
  return std::find(argv.begin(), argv.end(), item) != argv.end();
}

TEST(SlurmParseTest, RecordValuesMayHoldSpaces) {
  auto r = slurm::ParseRecord(
      "JobId=42 JobName=air-3-0 JobState=PENDING "
      "Reason=Resources Dependency=(null) "
      "Command=/tmp/a b/job.sbatch WorkDir=/tmp/a b "
      "NodeList=(null) ExitCode=0:0");
  EXPECT_EQ(r["JobId"], "42");
  EXPECT_EQ(r["JobState"], "PENDING");
  EXPECT_EQ(r["Reason"], "Resources");
  EXPECT_EQ(r["Command"], "/tmp/a b/job.sbatch");
  EXPECT_EQ(r["WorkDir"], "/tmp/a b");
  slurm::JobInfo info = slurm::JobInfoFromRecord(r);
  EXPECT_EQ(info.phase, JobPhase::kQueued);
  EXPECT_EQ(info.nodes, "");  // (null)
  EXPECT_EQ(info.exit_code, "0:0");
}

TEST(SlurmParseTest, RecordsOnePerLine) {
  auto records = slurm::ParseRecords(
      "NodeName=node1 Arch=x86_64 CPUTot=2 Gres=(null) "
      "State=IDLE Partitions=debug\n"
      "NodeName=node2 CPUTot=8 Gres=gpu:a100:4(S:0-1) "
      "State=DOWN* Partitions=debug,gpu\n\n");
  ASSERT_EQ(records.size(), 2u);
  EXPECT_EQ(records[1]["State"], "DOWN*");
  EXPECT_EQ(slurm::GpusInGres(records[0]["Gres"]), 0);
  EXPECT_EQ(slurm::GpusInGres(records[1]["Gres"]), 4);
  EXPECT_EQ(slurm::GpusInGres("gpu:2,gpu:v100:1,shard:8"), 3);
}

TEST(SlurmParseTest, JobStatePhases) {
  EXPECT_EQ(slurm::PhaseOfState("PENDING"), JobPhase::kQueued);
  EXPECT_EQ(slurm::PhaseOfState("CONFIGURING"), JobPhase::kQueued);
  EXPECT_EQ(slurm::PhaseOfState("RUNNING"), JobPhase::kRunning);
  EXPECT_EQ(slurm::PhaseOfState("COMPLETING"), JobPhase::kRunning);
  for (const char* ended : {"COMPLETED", "FAILED", "TIMEOUT", "NODE_FAIL", "OUT_OF_MEMORY"}) {
    EXPECT_EQ(slurm::PhaseOfState(ended), JobPhase::kEnded) << ended;
  }
  EXPECT_EQ(slurm::PhaseOfState("CANCELLED by 0"), JobPhase::kEnded);
}

TEST(SlurmParseTest, SbatchJobId) {
  EXPECT_EQ(*slurm::ParseSbatchJobId("42\n"), "42");
  EXPECT_EQ(*slurm::ParseSbatchJobId("42;cluster\n"), "42");
  EXPECT_FALSE(slurm::ParseSbatchJobId("sbatch: error: Batch job submission failed").ok());
}

TEST(SlurmMappingTest, CpuShapeBecomesOneTaskPerNodeWithItsCpus) {
  slurm::JobRequest r;
  r.run_id = 7;
  r.attempt = 1;
  r.nodes = 2;
  r.cpus_per_node = 4;
  r.time_limit_seconds = 90;
  r.attempt_dir = "/shared/air/runs/7/attempt_1";
  r.air_binary = "/shared/bin/air";
  r.config.partition = "debug";
  r.config.account = "ml";
  r.config.qos = "high";
  r.config.sbatch_options = {"--exclusive"};
  auto argv = slurm::SbatchArgv(r, "/shared/air/runs/7/attempt_1/job.sbatch");
  EXPECT_EQ(argv.front(), "sbatch");
  EXPECT_EQ(argv.back(), "/shared/air/runs/7/attempt_1/job.sbatch");
  for (const char* want :
       {"--parsable", "--job-name=air-7-1", "--nodes=2", "--ntasks-per-node=1", "--cpus-per-task=4",
        "--time=2", "--partition=debug", "--account=ml", "--qos=high", "--exclusive",
        "--no-requeue", "--output=/shared/air/runs/7/attempt_1/slurm-%j.out"}) {
    EXPECT_TRUE(Has(argv, want)) << want;
  }
  for (const auto& arg : argv) EXPECT_EQ(arg.find("--gres"), std::string::npos) << arg;
}

TEST(SlurmMappingTest, GpuShapeAsksForGresAndNoTimeWithoutTimeout) {
  slurm::JobRequest r;
  r.nodes = 2;
  r.gpus_per_node = 8;
  r.attempt_dir = "/d";
  auto argv = slurm::SbatchArgv(r, "/d/job.sbatch");
  EXPECT_TRUE(Has(argv, "--gres=gpu:8"));
  for (const auto& arg : argv) {
    EXPECT_EQ(arg.find("--time"), std::string::npos) << arg;
    EXPECT_EQ(arg.find("--cpus-per-task"), std::string::npos) << arg;
    EXPECT_EQ(arg.find("--partition"), std::string::npos) << arg;
  }
}

TEST(SlurmMappingTest, BatchScriptRunsOneSrunStepOfTheAgentOnEveryNode) {
  slurm::JobRequest r;
  r.run_id = 3;
  r.nodes = 2;
  r.attempt_dir = "/shared/it's here/attempt_0";
  r.air_binary = "/opt/air/bin/air";
  std::string script = slurm::BatchScript(r);
  EXPECT_NE(script.find("scontrol show hostnames \"$SLURM_JOB_NODELIST\" | head -n 1"),
            std::string::npos);
  EXPECT_NE(script.find("export AIR_SLURM_MASTER_ADDR"), std::string::npos);
  EXPECT_NE(script.find("exec srun --nodes=2 --ntasks=2 --ntasks-per-node=1"), std::string::npos);
  EXPECT_NE(script.find("'/opt/air/bin/air' slurm-node '/shared/it'\\''s here/attempt_0'"),
            std::string::npos)
      << script;
}

TEST(SlurmMappingTest, TimeLimitIsWholeMinutesRoundedUp) {
  EXPECT_EQ(slurm::FormatTimeLimit(60), "1");
  EXPECT_EQ(slurm::FormatTimeLimit(5), "1");
  EXPECT_EQ(slurm::FormatTimeLimit(90), "2");
  EXPECT_EQ(slurm::FormatTimeLimit(7200), "120");
  EXPECT_EQ(slurm::FormatTimeLimit(0), "1");
}

class ConfigTest : public ::testing::Test {
 protected:
  Result<ClusterConfig> Load(const std::string& text, const std::string& flag = "") {
    EXPECT_TRUE(DefaultEnv()->WriteFileAtomic(dir_.path() + "/config.yaml", text).ok());
    return LoadClusterConfig(dir_.path(), flag, DefaultEnv());
  }
  air::testing::TempDir dir_;
};

TEST_F(ConfigTest, NoFileMeansLocal) {
  auto config = LoadClusterConfig(dir_.path(), "", DefaultEnv());
  ASSERT_TRUE(config.ok()) << config.status().message();
  EXPECT_EQ(config->name, "local");
  EXPECT_EQ(config->DataRoot(), dir_.path());
}

TEST_F(ConfigTest, SlurmBlockAndFlagOverride) {
  auto config = Load(
      "backend: slurm\nshared_root: /shared/air/\nslurm:\n  "
      "partition: gpu\n  account: ml\n"
      "  qos: normal\n  sbatch_options: [--exclusive, "
      "\"--constraint=a100\"]\n");
  ASSERT_TRUE(config.ok()) << config.status().message();
  EXPECT_EQ(config->name, "slurm");
  EXPECT_EQ(config->DataRoot(), "/shared/air");
  EXPECT_EQ(config->slurm.partition, "gpu");
  EXPECT_EQ(config->slurm.sbatch_options,
            (std::vector<std::string>{"--exclusive", "--constraint=a100"}));
  auto local = Load("backend: slurm\n", "local");
  ASSERT_TRUE(local.ok());
  EXPECT_EQ(local->name, "local");
}

TEST_F(ConfigTest, BadInputNamesTheLineAndWhatIsValid) {
  auto unknown = Load("backend: kubernetes\n");
  ASSERT_FALSE(unknown.ok());
  EXPECT_NE(unknown.status().message().find("config.yaml:1: backend: unknown backend "
                                            "'kubernetes'; valid: local, slurm"),
            std::string::npos)
      << unknown.status().message();
  auto key = Load("backend: slurm\nslurm:\n  partiton: gpu\n");
  ASSERT_FALSE(key.ok());
  EXPECT_NE(key.status().message().find("config.yaml:3: slurm: unknown key 'partiton'"),
            std::string::npos)
      << key.status().message();
  auto owned = Load("slurm:\n  sbatch_options: [\"--nodes=4\"]\n");
  ASSERT_FALSE(owned.ok());
  EXPECT_NE(owned.status().message().find("'--nodes=4' is set by air"), std::string::npos);
  auto relative = Load("shared_root: shared\n");
  ASSERT_FALSE(relative.ok());
  EXPECT_NE(relative.status().message().find("not an absolute path"), std::string::npos);
  auto flag = LoadClusterConfig(dir_.path() + "/none", "slurmm", DefaultEnv());
  ASSERT_FALSE(flag.ok());
  EXPECT_NE(flag.status().message().find("--backend: unknown backend 'slurmm'"), std::string::npos);
}

TEST_F(ConfigTest, VolumesRootAndTrackingServer) {
  auto config = Load(
      "shared_root: /shared/air\nvolumes_root: /shared/vols/\n"
      "tracking_server: {host: 0.0.0.0, port: 5005, advertise_host: login1}\n");
  ASSERT_TRUE(config.ok()) << config.status().message();
  EXPECT_EQ(config->volumes_root, "/shared/vols");
  EXPECT_EQ(config->tracking_server.host, "0.0.0.0");
  EXPECT_EQ(config->tracking_server.port, 5005);
  EXPECT_EQ(config->tracking_server.advertise_host, "login1");
  auto defaults = Load("backend: slurm\n");
  ASSERT_TRUE(defaults.ok());
  EXPECT_EQ(defaults->volumes_root, "");
  EXPECT_EQ(defaults->tracking_server.host, "127.0.0.1");
  auto port = Load("tracking_server:\n  port: 99999\n");
  ASSERT_FALSE(port.ok());
  EXPECT_NE(port.status().message().find("config.yaml:2: tracking_server.port: '99999' is not a "
                                         "port"),
            std::string::npos)
      << port.status().message();
  auto key = Load("tracking_server:\n  bind: 0.0.0.0\n");
  ASSERT_FALSE(key.ok());
  EXPECT_NE(key.status().message().find("tracking_server: unknown key 'bind'; valid: host, port, "
                                        "advertise_host"),
            std::string::npos)
      << key.status().message();
  auto relative = Load("volumes_root: vols\n");
  ASSERT_FALSE(relative.ok());
  EXPECT_NE(relative.status().message().find("config.yaml:1: volumes_root: 'vols' is not an "
                                             "absolute path"),
            std::string::npos)
      << relative.status().message();
}

TEST(SlurmParseTest, AJobCommentCarriesANodeError) {
  auto record = slurm::ParseRecord(
      "JobId=7 JobName=air-3-0 JobState=RUNNING Reason=None "
      "Comment=air-node-error: node 1 (node2) cannot write the shared root: /s/runs/3/attempt_0: "
      "Read-only file system (every node must see shared_root, read-write, at the same path) "
      "NodeList=node[1-3] ExitCode=0:0");
  slurm::JobInfo info = slurm::JobInfoFromRecord(record);
  EXPECT_EQ(info.comment,
            "air-node-error: node 1 (node2) cannot write the shared root: /s/runs/3/attempt_0: "
            "Read-only file system (every node must see shared_root, read-write, at the same "
            "path)");
  EXPECT_EQ(info.nodes, "node[1-3]");
  EXPECT_EQ(slurm::JobInfoFromRecord(slurm::ParseRecord("JobId=7 Comment=(null)")).comment, "");
}

}  // namespace
}  // namespace air::backends
