// Tests for the exec-limit checks (spec/exec_limits.h): a command or an environment entry past
// MAX_ARG_STRLEN, and a total past ARG_MAX, are named with the field and the size.
#include "spec/exec_limits.h"

#include <gtest/gtest.h>

namespace air::spec {
namespace {

WorkloadSpec SpecWith(std::string command, std::vector<std::pair<std::string, std::string>> env) {
  WorkloadSpec spec;
  spec.command = std::move(command);
  spec.env_variables = std::move(env);
  return spec;
}

TEST(ExecLimitsTest, NamesTheFieldAndItsSize) {
  ExecLimits limits;  // 2 MiB, nothing inherited
  EXPECT_TRUE(CheckExecLimits(SpecWith("echo hi", {{"A", "1"}}), limits).empty());

  auto command = CheckExecLimits(SpecWith(std::string(1 << 20, 'x'), {}), limits);
  ASSERT_EQ(command.size(), 1u);
  EXPECT_EQ(command[0].field, "command");
  EXPECT_NE(command[0].message.find("is 1,048,576 bytes"), std::string::npos) << command[0].message;
  EXPECT_NE(command[0].message.find("131,072"), std::string::npos);
  // The largest command that fits: 131,071 bytes and the NUL.
  EXPECT_TRUE(CheckExecLimits(SpecWith(std::string(kMaxArgStrlen - 1, 'x'), {}), limits).empty());
  EXPECT_FALSE(CheckExecLimits(SpecWith(std::string(kMaxArgStrlen, 'x'), {}), limits).empty());

  auto env = CheckExecLimits(SpecWith("true", {{"BIG", std::string(200 * 1024, 'v')}}), limits);
  ASSERT_EQ(env.size(), 1u);
  EXPECT_EQ(env[0].field, "env_variables.BIG");
  EXPECT_NE(env[0].message.find("is 204,800 bytes"), std::string::npos) << env[0].message;
}

TEST(ExecLimitsTest, TheTotalCountsWhatNodesInherit) {
  std::vector<std::pair<std::string, std::string>> many;
  for (int i = 0; i < 25; ++i) many.emplace_back("V" + std::to_string(i), std::string(100000, 'v'));
  ExecLimits limits;
  auto total = CheckExecLimits(SpecWith("true", many), limits);
  ASSERT_EQ(total.size(), 1u);
  EXPECT_EQ(total[0].field, "env_variables");
  EXPECT_NE(total[0].message.find("in 25 variables"), std::string::npos) << total[0].message;
  EXPECT_NE(total[0].message.find("2,097,152"), std::string::npos);

  std::vector<std::pair<std::string, std::string>> some(many.begin(), many.begin() + 10);
  EXPECT_TRUE(CheckExecLimits(SpecWith("true", some), limits).empty());
  limits.inherited_bytes = 1200 * 1000;  // a large inherited environment tips it over
  EXPECT_EQ(CheckExecLimits(SpecWith("true", some), limits).size(), 1u);
}

}  // namespace
}  // namespace air::spec
