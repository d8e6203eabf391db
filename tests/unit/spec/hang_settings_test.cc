// hang_timeout_minutes and on_hang: accepted values (fractions included), the defaults, an
// --override, and the refusals of the bad-input corpus (tests/data/spec/hang_*.yaml,
// on_hang_*.yaml) at the edges of the range.
#include <gtest/gtest.h>

#include "spec/parser.h"
#include "spec_test_util.h"

namespace air::spec {
namespace {

using testing::TempDir;

const char kBase[] =
    "experiment_name: demo\n"
    "compute: {accelerator_type: CPU_1, num_accelerators: 1}\n"
    "command: echo hi\n";

Result<WorkloadSpec> LoadText(const std::string& extra, LoadReport* report,
                              const std::vector<std::string>& overrides = {}) {
  TempDir dir;
  std::string path = dir.Write("w.yaml", std::string(kBase) + extra);
  return LoadWorkloadSpec(path, overrides, DefaultEnv(), report);
}

std::string Errors(const LoadReport& report) {
  std::string out;
  for (const auto& d : report.diagnostics.Sorted()) out += d.field + ": " + d.message + "\n";
  return out;
}

TEST(HangSettings, OffByDefault) {
  LoadReport report;
  auto spec = LoadText("", &report);
  ASSERT_TRUE(spec.ok()) << Errors(report);
  EXPECT_FALSE(spec->hang_timeout_minutes.has_value());
  EXPECT_EQ(spec->on_hang, OnHang::kFail);
}

TEST(HangSettings, FractionalMinutesAndRestart) {
  LoadReport report;
  auto spec = LoadText("hang_timeout_minutes: 0.05\non_hang: restart\n", &report);
  ASSERT_TRUE(spec.ok()) << Errors(report);
  EXPECT_DOUBLE_EQ(*spec->hang_timeout_minutes, 0.05);
  EXPECT_EQ(spec->on_hang, OnHang::kRestart);
}

TEST(HangSettings, WholeMinutesDefaultToFail) {
  LoadReport report;
  auto spec = LoadText("hang_timeout_minutes: 30\n", &report);
  ASSERT_TRUE(spec.ok()) << Errors(report);
  EXPECT_DOUBLE_EQ(*spec->hang_timeout_minutes, 30);
  EXPECT_EQ(spec->on_hang, OnHang::kFail);
}

TEST(HangSettings, TheEdgesOfTheRange) {
  for (const char* ok : {"0.01", "10080", "1e1"}) {
    LoadReport report;
    EXPECT_TRUE(LoadText(std::string("hang_timeout_minutes: ") + ok + "\n", &report).ok())
        << ok << ": " << Errors(report);
  }
  for (const char* bad : {"0", "0.009", "10080.5", "-1", ".inf", ".nan", "true", "soon", "[1]"}) {
    LoadReport report;
    auto spec = LoadText(std::string("hang_timeout_minutes: ") + bad + "\n", &report);
    ASSERT_FALSE(spec.ok()) << bad;
    std::string errors = Errors(report);
    EXPECT_NE(errors.find("hang_timeout_minutes: "), std::string::npos) << errors;
    EXPECT_NE(errors.find("from 0.01 to 10080 (7 days)"), std::string::npos) << errors;
  }
}

TEST(HangSettings, OnHangNeedsTheTimeoutNamingBothFields) {
  LoadReport report;
  auto spec = LoadText("on_hang: fail\n", &report);
  ASSERT_FALSE(spec.ok());
  EXPECT_NE(Errors(report).find("on_hang: needs hang_timeout_minutes"), std::string::npos)
      << Errors(report);
}

TEST(HangSettings, SetByOverride) {
  LoadReport report;
  auto spec = LoadText("", &report, {"hang_timeout_minutes=2.5", "on_hang=restart"});
  ASSERT_TRUE(spec.ok()) << Errors(report);
  EXPECT_DOUBLE_EQ(*spec->hang_timeout_minutes, 2.5);
  EXPECT_EQ(spec->on_hang, OnHang::kRestart);
}

}  // namespace
}  // namespace air::spec
