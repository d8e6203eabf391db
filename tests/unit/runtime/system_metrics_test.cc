// System metrics (docs/tracking.md "System metrics"): the metrics file's lines, what a real busy
// process reads as (CPU, memory) through the meter, the sampler's bound on samples, and the
// supervisor's ingester storing a node's samples in the run's MLflow run (real SQLite) under
// MLflow's names with the node as node_id, each note once.
#include <gtest/gtest.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <thread>

#include "agent/node_usage.h"
#include "agent/system_sample.h"
#include "agent/system_sampler.h"
#include "base/strings.h"
#include "base/subprocess.h"
#include "runtime/layout.h"
#include "runtime/system_metrics_ingest.h"
#include "runtime/system_metrics_view.h"
#include "store/store.h"
#include "test_util.h"
#include "tracking/tracking_store.h"

namespace air {
namespace {

using air::testing::TempDir;

TEST(SystemSampleTest, LinesRoundTripAndBadLinesNameTheFile) {
  agent::SystemSample sample{1796002627672293, {{"cpu_utilization_percentage", 12.5}}, ""};
  sample.metrics.emplace_back("gpu_0_power_usage_watts", 123.4564);
  const std::string line = agent::SystemSampleToLine(sample);
  EXPECT_EQ(line,
            "{\"ts_us\":1796002627672293,\"metrics\":{\"cpu_utilization_percentage\":12.5,"
            "\"gpu_0_power_usage_watts\":123.456}}\n");
  auto back = agent::SystemSampleFromLine(line.substr(0, line.size() - 1), "f");
  ASSERT_TRUE(back.ok()) << back.status().ToString();
  EXPECT_EQ(back->ts_us, sample.ts_us);
  ASSERT_EQ(back->metrics.size(), 2u);
  EXPECT_EQ(back->metrics[1].first, "gpu_0_power_usage_watts");
  EXPECT_DOUBLE_EQ(*back->Find("cpu_utilization_percentage"), 12.5);

  auto note = agent::SystemSampleFromLine(R"({"ts_us":5,"note":"no GPU metrics: why"})", "f");
  ASSERT_TRUE(note.ok());
  EXPECT_EQ(note->note, "no GPU metrics: why");

  auto bad = agent::SystemSampleFromLine("{\"ts_us\":5}", "/runs/1/attempt_0/node_0.metrics");
  EXPECT_EQ(bad.status().code(), ErrorCode::kDataLoss);
  EXPECT_NE(bad.status().message().find("/runs/1/attempt_0/node_0.metrics"), std::string::npos);
  EXPECT_FALSE(agent::SystemSampleFromLine("[1]", "f").ok());
  EXPECT_EQ(agent::SystemMetricPrefix(3), "system/node_3/");
}

// A child of this process (the meter's "agent") that holds ~40 MB and burns CPU.
RunningSubprocess StartBusyChild() {
  SubprocessOptions options;
  options.argv = {"bash", "-c",
                  "x=$(head -c 40000000 /dev/zero | tr '\\0' a); while :; do :; done"};
  auto child = StartSubprocess(options);
  EXPECT_TRUE(child.ok()) << child.status().ToString();
  return std::move(*child);
}

int64_t NowUs() { return DefaultEnv()->MonotonicMicros(); }

TEST(NodeUsageTest, ABusyProcessShowsItsCpuAndMemory) {
  TempDir dir;
  RunningSubprocess child = StartBusyChild();
  agent::NodeUsageSource source;
  source.kind = agent::TrackerKind::kSession;  // the node's processes: our descendants
  source.agent_pid = ::getpid();
  source.workdir = dir.path();
  agent::NodeUsageMeter meter(source, NowUs());
  // Wait (bounded) until the child holds its 40 MB and has used CPU since the baseline.
  std::vector<std::pair<std::string, double>> metrics;
  auto value = [&](const char* name) {
    for (const auto& [key, v] : metrics) {
      if (key == name) return v;
    }
    return -1.0;
  };
  for (int i = 0; i < 300; ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
    metrics = meter.Read(NowUs());
    if (value("system_memory_usage_megabytes") >= 40 && value("cpu_utilization_percentage") > 0) {
      break;
    }
  }
  ::kill(child.pid(), SIGKILL);
  ::waitpid(child.pid(), nullptr, 0);
  EXPECT_GE(value("system_memory_usage_megabytes"), 40) << "memory of the busy child";
  EXPECT_GT(value("cpu_utilization_percentage"), 0);
  EXPECT_LE(value("cpu_utilization_percentage"), 100.0 + 1e-9);
  EXPECT_GT(value("system_memory_usage_percentage"), 0);
  EXPECT_GT(value("disk_usage_megabytes"), 0);
  EXPECT_GT(value("disk_available_megabytes"), 0);
  for (const char* name : {"disk_read_megabytes", "disk_write_megabytes",
                           "network_receive_megabytes", "network_transmit_megabytes"}) {
    EXPECT_GE(value(name), 0) << name;
  }
  // With no process of the node left there is nothing to read.
  EXPECT_TRUE(meter.Read(NowUs()).empty());
}

TEST(SystemSamplerTest, StopsAtItsCapWithANote) {
  TempDir dir;
  RunningSubprocess child = StartBusyChild();
  agent::SystemSamplerOptions options;
  options.path = dir.path() + "/node_0.metrics";
  options.interval_us = 1000;
  options.usage.agent_pid = ::getpid();
  options.cuda_visible_devices = "";  // no GPU
  options.samples_per_stage = 2;      // then every 2 ms, 4 ms
  options.max_samples = 5;
  agent::SystemSampler sampler(options, DefaultEnv());
  std::vector<std::string> lines;
  for (int i = 0; i < 500; ++i) {
    auto text = DefaultEnv()->ReadFile(options.path);
    lines = text.ok() ? Split(*text, '\n') : std::vector<std::string>{};
    if (lines.size() >= 7) break;  // 5 samples, the note, and the final newline
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  sampler.Stop();
  ::kill(child.pid(), SIGKILL);
  ::waitpid(child.pid(), nullptr, 0);
  ASSERT_EQ(lines.size(), 7u) << Join(lines, "\n");
  for (int i = 0; i < 5; ++i) {
    auto sample = agent::SystemSampleFromLine(lines[i], options.path);
    ASSERT_TRUE(sample.ok()) << sample.status().ToString();
    EXPECT_TRUE(sample->note.empty());
    EXPECT_NE(sample->Find("cpu_utilization_percentage"), nullptr);
  }
  auto note = agent::SystemSampleFromLine(lines[5], options.path);
  ASSERT_TRUE(note.ok());
  EXPECT_EQ(note->note, "system metrics stopped after 5 samples (the cap per node and attempt)");
}

class IngestTest : public ::testing::Test {
 protected:
  void SetUp() override {
    auto store = store::Store::Open(layout_.DbPath(), DefaultEnv());
    ASSERT_TRUE(store.ok()) << store.status().ToString();
    store_ = std::move(*store);
    store::NewRun run;
    run.experiment = "e";
    run.spec_json = "{}";
    run.num_nodes = 2;
    run.mlflow_run_id = "m";
    run_id_ = store_->CreateRun(run)->run.id;
    ASSERT_TRUE(store_->TransitionRun(run_id_, store::RunState::kRunning, "go").ok());
    started_us_ = *store_->GetRun(run_id_)->started_us;
    tracking::TrackingStore tracking(store_->db(), DefaultEnv());
    auto experiment = tracking.GetOrCreateExperiment("e");
    ASSERT_TRUE(experiment.ok());
    tracking::NewRun tracking_run;
    tracking_run.experiment_id = experiment->experiment_id;
    auto info = tracking.CreateRun(tracking_run);
    ASSERT_TRUE(info.ok());
    mlflow_run_ = info->run_id;
    ASSERT_TRUE(
        tracking.PutLink({run_id_, "", mlflow_run_, experiment->experiment_id, "e", std::nullopt})
            .ok());
    ASSERT_TRUE(DefaultEnv()->CreateDirs(layout_.AttemptDir(run_id_, 0)).ok());
  }

  void Append(int node, const agent::SystemSample& sample) {
    ASSERT_TRUE(DefaultEnv()
                    ->AppendToFile(layout_.NodeMetricsFile(run_id_, 0, node),
                                   agent::SystemSampleToLine(sample))
                    .ok());
  }

  std::vector<tracking::Metric> History(const std::string& key) {
    tracking::TrackingStore tracking(store_->db(), DefaultEnv());
    auto history = tracking.GetMetricHistory(mlflow_run_, key);
    EXPECT_TRUE(history.ok()) << history.status().ToString();
    return history.ok() ? *history : std::vector<tracking::Metric>{};
  }

  std::vector<store::EventRecord> Events(const std::string& kind) {
    auto events = store_->ListEvents(run_id_);
    EXPECT_TRUE(events.ok()) << events.status().ToString();
    std::vector<store::EventRecord> out;
    if (!events.ok()) return out;
    for (const store::EventRecord& e : *events) {
      if (e.kind == kind) out.push_back(e);
    }
    return out;
  }

  TempDir dir_;
  runtime::Layout layout_{dir_.path()};
  std::unique_ptr<store::Store> store_;
  int64_t run_id_ = 0;
  int64_t started_us_ = 0;
  std::string mlflow_run_;
};

TEST_F(IngestTest, SamplesBecomeMlflowSystemMetricsPerNodeAndNotesEventsOnce) {
  runtime::SystemMetricsIngester ingester(store_.get(), layout_, run_id_, 0, 2, DefaultEnv());
  Append(0, {started_us_ + 2'500'000, {{"cpu_utilization_percentage", 50}}, ""});
  Append(1, {started_us_ + 3'000'000,
             {{"cpu_utilization_percentage", 25}, {"gpu_0_utilization_percentage", 97}},
             ""});
  const std::string nvml_note = "no GPU metrics: nvmlInit_v2: Driver Not Loaded (NVML error 9)";
  Append(0, {started_us_, {}, nvml_note});
  Append(1, {started_us_, {}, nvml_note});  // the same reason on node 1: no second event
  ingester.Poll(/*final=*/false);
  Append(0, {started_us_ + 4'000'000, {{"cpu_utilization_percentage", 75}}, ""});
  ingester.Poll(/*final=*/true);

  std::vector<tracking::Metric> node0 = History("system/node_0/cpu_utilization_percentage");
  ASSERT_EQ(node0.size(), 2u);
  EXPECT_EQ(node0[0].value, 50);
  EXPECT_EQ(node0[0].step, 2);  // whole seconds since the run started
  EXPECT_EQ(node0[0].timestamp, (started_us_ + 2'500'000) / 1000);
  EXPECT_EQ(node0[1].value, 75);
  EXPECT_EQ(node0[1].step, 4);
  std::vector<tracking::Metric> gpu = History("system/node_1/gpu_0_utilization_percentage");
  ASSERT_EQ(gpu.size(), 1u);
  EXPECT_EQ(gpu[0].value, 97);
  EXPECT_EQ(ingester.points_stored(), 4);
  auto events = Events("system_metrics");
  ASSERT_EQ(events.size(), 1u);
  EXPECT_EQ(events[0].message, "node 0: " + nvml_note);
  EXPECT_EQ(events[0].attempt, 0);

  // `air get`'s view: each node's last sample.
  runtime::RunDetails details;
  details.run = *store_->GetRun(run_id_);
  ASSERT_TRUE(store_->StartAttempt(run_id_, 0, 29500, 2).ok());
  details.attempts = *store_->ListAttempts(run_id_);
  auto latest = runtime::LoadLatestSystemSamples(layout_, details, DefaultEnv());
  ASSERT_EQ(latest.nodes.size(), 2u);
  EXPECT_EQ(*latest.nodes[0].sample.Find("cpu_utilization_percentage"), 75);
  nlohmann::json json = runtime::LatestSystemSamplesJson(latest);
  EXPECT_EQ(json["attempt"], 0);
  EXPECT_EQ(json["nodes"][1]["metrics"]["gpu_0_utilization_percentage"], 97);
  std::string text = runtime::LatestSystemSamplesText(latest);
  EXPECT_NE(text.find("node 0 at "), std::string::npos) << text;
  EXPECT_NE(text.find("cpu 75.0%"), std::string::npos) << text;
  EXPECT_NE(text.find("node 1 gpu 0: 97% busy"), std::string::npos) << text;
}

TEST_F(IngestTest, PointsThatCannotBeStoredAreTriedAgainWithOneEvent) {
  tracking::TrackingStore tracking(store_->db(), DefaultEnv());
  runtime::SystemMetricsIngester ingester(store_.get(), layout_, run_id_, 0, 1, DefaultEnv());
  Append(0, {started_us_ + 1'000'000, {{"cpu_utilization_percentage", 10}}, ""});
  // A deleted MLflow run refuses points (MLflow's rule): the batch fails.
  ASSERT_TRUE(tracking.SetRunLifecycle(mlflow_run_, "deleted").ok());
  ingester.Poll(/*final=*/false);
  EXPECT_EQ(ingester.points_stored(), 0);
  auto events = Events("system_metrics");
  ASSERT_EQ(events.size(), 1u);
  EXPECT_NE(events[0].message.find("system metrics could not be stored"), std::string::npos)
      << events[0].message;
  // Meanwhile the node samples on; once the run takes points again, nothing was lost.
  Append(0, {started_us_ + 2'000'000, {{"cpu_utilization_percentage", 20}}, ""});
  ASSERT_TRUE(tracking.SetRunLifecycle(mlflow_run_, "active").ok());
  ingester.Poll(/*final=*/true);
  EXPECT_EQ(ingester.points_stored(), 2);
  EXPECT_EQ(History("system/node_0/cpu_utilization_percentage").size(), 2u);
  EXPECT_EQ(Events("system_metrics").size(), 1u);
}

TEST_F(IngestTest, ARunWithoutATrackingRunStoresNothingAndGoesOn) {
  ASSERT_TRUE(store_->db()->Exec("DELETE FROM tracking_links").ok());
  runtime::SystemMetricsIngester ingester(store_.get(), layout_, run_id_, 0, 1, DefaultEnv());
  Append(0, {started_us_ + 1'000'000, {{"cpu_utilization_percentage", 50}}, ""});
  ingester.Poll(/*final=*/true);
  EXPECT_EQ(ingester.points_stored(), 0);
  EXPECT_TRUE(History("system/node_0/cpu_utilization_percentage").empty());
  EXPECT_TRUE(Events("system_metrics").empty());
}

}  // namespace
}  // namespace air
