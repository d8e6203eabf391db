// Tests for metrics.jsonl and the progress line.
#include "engine/train/step_metrics.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <filesystem>
#include <nlohmann/json.hpp>
#include <sstream>
#include <string>
#include <vector>

namespace air::engine::train {
namespace {

using ::testing::HasSubstr;

StepMetrics Sample(int step) {
  StepMetrics m;
  m.step = step;
  m.total_steps = 100;
  m.loss = 2.5 - step * 0.01;
  m.lr = 1e-4;
  m.grad_norm = 0.75;
  m.tokens = step * 1000;
  m.tokens_per_s = 2048;
  m.elapsed_s = step * 2.0;
  m.epoch = step / 50.0;
  return m;
}

TEST(StepMetricsTest, FormatDuration) {
  EXPECT_EQ(FormatDuration(0), "0:00");
  EXPECT_EQ(FormatDuration(65), "1:05");
  EXPECT_EQ(FormatDuration(3725), "1:02:05");
  EXPECT_EQ(FormatDuration(-1), "?");
}

TEST(StepMetricsTest, ProgressLineHasEveryFieldAndEta) {
  std::string line = ProgressDisplay::Line(Sample(10));
  EXPECT_EQ(line,
            "step  10/100 | loss 2.4000 | lr 1.000e-04 | grad norm 0.750 | 2048 tok/s | "
            "elapsed 0:20 | ETA 3:00");
}

TEST(StepMetricsTest, TtyUpdatesInPlaceOtherwiseFullLines) {
  std::ostringstream tty, pipe;
  ProgressDisplay on_tty(&tty, true), on_pipe(&pipe, false);
  for (int s = 1; s <= 3; ++s) {
    on_tty.Update(Sample(s));
    on_pipe.Update(Sample(s));
  }
  on_tty.Finish();
  on_pipe.Finish();
  const std::string tty_text = tty.str(), pipe_text = pipe.str();
  EXPECT_EQ(std::count(tty_text.begin(), tty_text.end(), '\r'), 3);
  EXPECT_EQ(std::count(tty_text.begin(), tty_text.end(), '\n'), 1);
  EXPECT_EQ(std::count(pipe_text.begin(), pipe_text.end(), '\r'), 0);
  EXPECT_EQ(std::count(pipe_text.begin(), pipe_text.end(), '\n'), 3);
}

// Off a terminal (a node's log), one line per logging_steps and one for the last step.
TEST(StepMetricsTest, OffATerminalOneLineEveryLoggingSteps) {
  std::ostringstream pipe;
  ProgressDisplay display(&pipe, false, 25);
  for (int s = 1; s <= 100; ++s) display.Update(Sample(s));
  display.Finish();
  std::vector<std::string> lines;
  std::istringstream in(pipe.str());
  for (std::string line; std::getline(in, line);) lines.push_back(line);
  ASSERT_EQ(lines.size(), 4u) << pipe.str();
  EXPECT_EQ(lines[0].rfind("step  25/100", 0), 0u) << lines[0];
  EXPECT_EQ(lines[3].rfind("step 100/100", 0), 0u) << lines[3];
  // A total that is not a multiple still ends with its last step.
  std::ostringstream odd;
  ProgressDisplay odd_display(&odd, false, 40);
  for (int s = 1; s <= 100; ++s) odd_display.Update(Sample(s));
  const std::string odd_text = odd.str();
  EXPECT_EQ(std::count(odd_text.begin(), odd_text.end(), '\n'), 3) << odd_text;
  // On a terminal every step still updates the live line.
  std::ostringstream tty;
  ProgressDisplay live(&tty, true, 25);
  for (int s = 1; s <= 100; ++s) live.Update(Sample(s));
  const std::string tty_text = tty.str();
  EXPECT_EQ(std::count(tty_text.begin(), tty_text.end(), '\r'), 100);
}

TEST(StepMetricsTest, MetricsJsonlHasOneObjectPerLine) {
  auto dir =
      std::filesystem::temp_directory_path() / ("air_metrics_test_" + std::to_string(::getpid()));
  std::filesystem::remove_all(dir);
  auto log = MetricsLog::Create(DefaultEnv(), dir.string());
  ASSERT_TRUE(log.ok()) << log.status().ToString();
  ASSERT_TRUE(log->Append(Sample(1)).ok());
  ASSERT_TRUE(log->Append(Sample(2)).ok());
  auto text = DefaultEnv()->ReadFile(log->path());
  ASSERT_TRUE(text.ok());
  std::istringstream lines(*text);
  std::string line;
  int n = 0;
  while (std::getline(lines, line)) {
    auto j = nlohmann::json::parse(line);
    ++n;
    EXPECT_EQ(j["step"], n);
    for (const char* key :
         {"loss", "lr", "grad_norm", "tokens", "tokens_per_s", "elapsed_s", "epoch"}) {
      EXPECT_TRUE(j.contains(key)) << key;
    }
  }
  EXPECT_EQ(n, 2);
  // Creating the log again starts the file afresh.
  auto again = MetricsLog::Create(DefaultEnv(), dir.string());
  ASSERT_TRUE(again.ok());
  EXPECT_EQ(*DefaultEnv()->ReadFile(again->path()), "");
  std::filesystem::remove_all(dir);
}

}  // namespace
}  // namespace air::engine::train
