// The OOM killer's counter as alerts (agent/oom_watch.h) over directories laid out as the kernel
// lays out its cgroup files, in the kernel's own formats (cgroup v2 memory.events of Linux 6.x,
// memory.max "max" or bytes, memory.peak; v1 memory.oom_control and memory.stat): the watch
// finds the nearest cgroup with memory.events above the node's command, records one alert per
// rise with the smallest limit of the cgroup and its ancestors, says when the cgroup is shared,
// and falls back to the node's v1 memory cgroup. A real OOM kill under a real limit is
// tests/python/test_run_oom.py.
#include "agent/oom_watch.h"

#include <gtest/gtest.h>

#include "agent/alert_scanner.h"
#include "base/strings.h"
#include "test_util.h"

namespace air::agent {
namespace {

using air::testing::TempDir;

// Linux 6.x's cgroup v2 memory.events and v1 memory.oom_control, as read from a cgroup.
constexpr char kEventsNoKill[] = "low 0\nhigh 0\nmax 0\noom 0\noom_kill 0\noom_group_kill 0\n";
constexpr char kEventsTwoKills[] = "low 0\nhigh 0\nmax 118\noom 2\noom_kill 2\noom_group_kill 0\n";
constexpr char kOomControlOneKill[] = "oom_kill_disable 0\nunder_oom 0\noom_kill 1\n";

class OomWatchTest : public ::testing::Test {
 protected:
  // A directory that is a cgroup (cgroup.controllers) with `files`.
  std::string Cgroup(const std::string& rel,
                     const std::vector<std::pair<std::string, std::string>>& files) {
    const std::string dir = dir_.path() + "/" + rel;
    EXPECT_TRUE(env_->CreateDirs(dir).ok());
    EXPECT_TRUE(env_->WriteFileAtomic(dir + "/cgroup.controllers", "cpu memory pids\n").ok());
    for (const auto& [name, text] : files) Write(dir + "/" + name, text);
    return dir;
  }
  void Write(const std::string& path, const std::string& text) {
    ASSERT_TRUE(env_->WriteFileAtomic(path, text).ok());
  }
  std::vector<AlertRecord> Recorded() {
    std::vector<AlertRecord> out;
    auto text = env_->ReadFile(alerts_path_);
    if (!text.ok()) return out;
    for (const std::string& line : Split(*text, '\n')) {
      if (line.empty()) continue;
      auto record = AlertRecordFromJson(line);
      EXPECT_TRUE(record.ok()) << line;
      if (record.ok()) out.push_back(*record);
    }
    return out;
  }
  static std::string Field(const AlertRecord& r, const std::string& name) {
    for (const auto& [k, v] : r.fields) {
      if (k == name) return v;
    }
    return "<none>";
  }

  Env* env_ = DefaultEnv();
  TempDir dir_;
  std::string alerts_path_ = dir_.path() + "/node_1.alerts";
};

TEST_F(OomWatchTest, ParsesTheKernelsCounterFiles) {
  EXPECT_EQ(ParseOomKill(kEventsTwoKills), 2);
  EXPECT_EQ(ParseOomKill(kEventsNoKill), 0);
  EXPECT_EQ(ParseOomKill(kOomControlOneKill), 1);
  // Before Linux 4.13 memory.oom_control had no counter.
  EXPECT_EQ(ParseOomKill("oom_kill_disable 0\nunder_oom 0\n"), std::nullopt);
  EXPECT_EQ(ParseOomKill("oom_group_kill 3\n"), std::nullopt);  // not oom_kill
}

TEST_F(OomWatchTest, ARiseInTheNodesCgroupIsOneAlertWithTheSmallestLimit) {
  // The job's cgroup is limited to 1 GiB; the node's (below it) has no limit of its own; the
  // command's has no memory files (the controller is not enabled below the node).
  Cgroup("slice", {});
  Cgroup("slice/job", {{"memory.events", kEventsNoKill}, {"memory.max", "1073741824\n"}});
  const std::string node = Cgroup(
      "slice/job/node",
      {{"memory.events", kEventsNoKill}, {"memory.max", "max\n"}, {"memory.peak", "1073741824\n"}});
  Cgroup("slice/job/node/cmd", {});
  TrackerInfo tracker;
  tracker.kind = TrackerKind::kCgroup2;
  tracker.cgroup = node;
  std::optional<MemoryCgroup> found = NodeMemoryCgroup(tracker, env_);
  ASSERT_TRUE(found);
  EXPECT_EQ(found->dir, node);
  EXPECT_TRUE(found->v2 && found->own);

  AlertScanner alerts(alerts_path_, env_);
  OomWatch watch(*found, 1, env_);
  watch.Check(&alerts);
  EXPECT_TRUE(Recorded().empty());  // no kill yet
  Write(node + "/memory.events", kEventsTwoKills);
  watch.Check(&alerts);
  watch.Check(&alerts);  // the same value again: nothing new
  std::vector<AlertRecord> got = Recorded();
  ASSERT_EQ(got.size(), 1u);
  const AlertRecord& r = got[0];
  EXPECT_EQ(r.alert_class, "oom_killer");
  EXPECT_EQ(r.title, "killed by the kernel's OOM killer");
  EXPECT_TRUE(r.fatal);
  EXPECT_EQ(r.rank, 1);
  EXPECT_EQ(r.stream, "cgroup");
  EXPECT_GT(r.time_us, 0);
  EXPECT_EQ(Field(r, "count"), "2");
  EXPECT_EQ(Field(r, "memory_max"), "1.0 GiB");
  EXPECT_EQ(Field(r, "memory_peak"), "1.0 GiB");
  EXPECT_EQ(Field(r, "cgroup"), node);
  EXPECT_EQ(r.line,
            node + "/memory.events: oom_kill 2 (was 0); memory limit 1.0 GiB, peak 1.0 GiB");

  // A third kill later is one more alert, counted from the last value.
  Write(node + "/memory.events", "low 0\nhigh 0\nmax 130\noom 3\noom_kill 3\noom_group_kill 0\n");
  watch.Check(&alerts);
  got = Recorded();
  ASSERT_EQ(got.size(), 2u);
  EXPECT_EQ(Field(got[1], "count"), "1");
}

TEST_F(OomWatchTest, AnAncestorsCounterIsSaidToBeShared) {
  // No memory files on the node's cgroup: the job's counts for it, and for whatever else it holds.
  const std::string job = Cgroup(
      "job", {{"memory.events", kEventsNoKill}, {"memory.max", "536870912\n"}});  // no memory.peak
  Cgroup("job/node", {});
  Cgroup("job/node/cmd", {});
  TrackerInfo tracker;
  tracker.kind = TrackerKind::kCgroup2;
  tracker.cgroup = job + "/node";
  std::optional<MemoryCgroup> found = NodeMemoryCgroup(tracker, env_);
  ASSERT_TRUE(found);
  EXPECT_EQ(found->dir, job);
  EXPECT_FALSE(found->own);
  AlertScanner alerts(alerts_path_, env_);
  OomWatch watch(*found, std::nullopt, env_);
  Write(job + "/memory.events", kEventsTwoKills);
  watch.Check(&alerts);
  std::vector<AlertRecord> got = Recorded();
  ASSERT_EQ(got.size(), 1u);
  EXPECT_EQ(got[0].rank, std::nullopt);
  EXPECT_EQ(Field(got[0], "memory_max"), "512.0 MiB");
  EXPECT_EQ(Field(got[0], "memory_peak"), "unknown");
  EXPECT_EQ(got[0].line, job +
                             "/memory.events: oom_kill 2 (was 0); memory limit 512.0 MiB, peak "
                             "unknown (a cgroup above the node's: it holds other processes too)");
}

TEST_F(OomWatchTest, WithoutV2MemoryFilesTheNodesV1MemoryCgroupCounts) {
  const std::string node = Cgroup("unified/node", {});
  Cgroup("unified/node/cmd", {});
  const std::string memory = dir_.path() + "/memory/node";
  ASSERT_TRUE(env_->CreateDirs(memory).ok());
  Write(memory + "/memory.oom_control", "oom_kill_disable 0\nunder_oom 0\noom_kill 0\n");
  // v1's memory.stat carries the smallest limit of the cgroup and its ancestors.
  Write(memory + "/memory.stat",
        "cache 0\nrss 1048576\nhierarchical_memory_limit 268435456\n"
        "hierarchical_memsw_limit 9223372036854771712\n");
  Write(memory + "/memory.max_usage_in_bytes", "254484480\n");
  TrackerInfo tracker;
  tracker.kind = TrackerKind::kCgroup2;
  tracker.cgroup = node;
  tracker.memory_cgroup = memory;
  std::optional<MemoryCgroup> found = NodeMemoryCgroup(tracker, env_);
  ASSERT_TRUE(found);
  EXPECT_EQ(found->dir, memory);
  EXPECT_FALSE(found->v2);
  AlertScanner alerts(alerts_path_, env_);
  OomWatch watch(*found, 0, env_);
  Write(memory + "/memory.oom_control", kOomControlOneKill);
  watch.Check(&alerts);
  std::vector<AlertRecord> got = Recorded();
  ASSERT_EQ(got.size(), 1u);
  EXPECT_EQ(Field(got[0], "count"), "1");
  EXPECT_EQ(Field(got[0], "memory_max"), "256.0 MiB");
  EXPECT_EQ(Field(got[0], "memory_peak"), "242.7 MiB");
  EXPECT_EQ(
      got[0].line,
      memory + "/memory.oom_control: oom_kill 1 (was 0); memory limit 256.0 MiB, peak 242.7 MiB");

  // No counter anywhere: no watch.
  tracker.memory_cgroup.clear();
  EXPECT_FALSE(NodeMemoryCgroup(tracker, env_));
}

}  // namespace
}  // namespace air::agent
