// A workload spec from YAML text for the runtime unit tests, as `air run` parses it from
// DIR/train.yaml; any diagnostic fails the calling test.
#pragma once

#include <gtest/gtest.h>

#include <string>

#include "base/env.h"
#include "spec/parser.h"

namespace air::testing {

inline spec::WorkloadSpec ParseSpec(const std::string& yaml, const std::string& dir) {
  spec::LoadReport report;
  auto parsed = spec::ParseWorkloadSpec(yaml, dir + "/train.yaml", {}, DefaultEnv(), &report);
  EXPECT_TRUE(parsed.ok()) << parsed.status().ToString();
  for (const auto& d : report.diagnostics.Sorted()) ADD_FAILURE() << d.ToString();
  return parsed.ok() ? *parsed : spec::WorkloadSpec{};
}

}  // namespace air::testing
