// Table-driven test over tests/data/spec/*.yaml: every file is an invalid workload whose
// expected diagnostics ("LINE:COL: field: message", a prefix of the real line) are written in
// its own `# expect:` comment lines (or, for files that cannot hold comments, NAME.expect).
// Each case must produce exactly those diagnostics, in that order.
#include <gtest/gtest.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include "base/env.h"
#include "base/strings.h"
#include "spec/parser.h"
#include "spec_test_util.h"

namespace air::spec {
namespace {

// The cases are listed when the binary starts (also during ctest's test discovery, which does
// not get AIR_SOURCE_DIR), so SourceDir() falls back to locating the repository itself.
std::filesystem::path DataDir() { return testing::SourceDir() / "tests" / "data" / "spec"; }

std::string ReadAll(const std::filesystem::path& p) {
  std::ifstream in(p, std::ios::binary);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

std::vector<std::string> Expectations(const std::filesystem::path& file) {
  std::vector<std::string> out;
  std::filesystem::path sidecar = file.string() + ".expect";
  bool from_sidecar = std::filesystem::exists(sidecar);
  std::string text = ReadAll(from_sidecar ? sidecar : file);
  for (const std::string& line : Split(text, '\n')) {
    if (from_sidecar && !Trim(line).empty()) out.emplace_back(Trim(line));
    if (!from_sidecar && StartsWith(line, "# expect: ")) out.push_back(line.substr(10));
  }
  return out;
}

// A diagnostic without its "FILE:" prefix.
std::string WithoutFile(const SpecDiagnostic& d) {
  std::string s = d.ToString();
  return s.substr(d.file.size() + 1);
}

std::vector<std::filesystem::path> Cases() {
  std::vector<std::filesystem::path> files;
  std::error_code ec;  // a missing directory yields no cases (and HasAtLeastThirtyCases fails)
  for (const auto& entry : std::filesystem::directory_iterator(DataDir(), ec)) {
    if (entry.path().extension() == ".yaml") files.push_back(entry.path());
  }
  std::sort(files.begin(), files.end());
  return files;
}

class InvalidSpecTest : public ::testing::TestWithParam<std::filesystem::path> {};

TEST_P(InvalidSpecTest, ReportsExactlyTheExpectedDiagnostics) {
  const std::filesystem::path& file = GetParam();
  std::vector<std::string> expected = Expectations(file);
  ASSERT_FALSE(expected.empty()) << file << " has no '# expect:' lines and no .expect file";
  LoadReport report;
  Result<WorkloadSpec> spec = LoadWorkloadSpec(file.string(), {}, DefaultEnv(), &report);
  ASSERT_FALSE(spec.ok()) << file << " was accepted";
  EXPECT_EQ(spec.status().code(), ErrorCode::kInvalidArgument);
  std::vector<SpecDiagnostic> actual = report.diagnostics.Sorted();
  std::string all;
  for (const auto& d : actual) all += "  " + WithoutFile(d) + "\n";
  ASSERT_EQ(actual.size(), expected.size()) << file << " reported:\n" << all;
  for (size_t i = 0; i < expected.size(); ++i) {
    EXPECT_TRUE(StartsWith(WithoutFile(actual[i]), expected[i]))
        << file << " diagnostic " << i << "\n  expected prefix: " << expected[i]
        << "\n  actual:          " << WithoutFile(actual[i]);
    EXPECT_EQ(actual[i].file, file.string());
  }
}

std::string CaseName(const ::testing::TestParamInfo<std::filesystem::path>& info) {
  std::string name = info.param.stem().string();
  for (char& c : name) {
    if (!isalnum(static_cast<unsigned char>(c))) c = '_';
  }
  return name;
}

INSTANTIATE_TEST_SUITE_P(DataDir, InvalidSpecTest, ::testing::ValuesIn(Cases()), CaseName);

TEST(InvalidSpecCorpus, HasAtLeastThirtyCases) {
  EXPECT_GE(Cases().size(), 30u) << "no cases found in " << DataDir();
}

}  // namespace
}  // namespace air::spec
