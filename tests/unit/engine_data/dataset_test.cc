// Dataset tests: record formats, every bad-input case (each naming FILE:LINE and the field),
// JSON arrays with per-record lines, and dataset_name resolution (file, directory, hub cache).
#include "engine/data/dataset.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cstdlib>
#include <map>

#include "engine/hf_cache_dirs.h"

namespace air::engine {
namespace {

using ::testing::HasSubstr;

std::string ErrorOf(std::string_view content, const std::string& path = "d.jsonl") {
  auto records = ParseRecords(content, path);
  return records.ok() ? "" : records.status().message();
}

TEST(DatasetTest, ReadsAlpacaAndChatRecordsFromJsonLines) {
  auto records = ParseRecords(
      "{\"instruction\": \"Add\", \"input\": \"1 2\", \"output\": \"3\"}\n"
      "\n"
      "{\"instruction\": \"Hi\", \"input\": null, \"output\": \"Hello\", \"extra\": 1}\n"
      "{\"messages\": [{\"role\": \"user\", \"content\": \"Q\", \"thinking\": null},"
      " {\"role\": \"assistant\", \"content\": \"A\"}]}\n",
      "d.jsonl");
  ASSERT_TRUE(records.ok()) << records.status().ToString();
  ASSERT_EQ(records->size(), 3u);
  EXPECT_EQ((*records)[0].kind, DatasetRecord::Kind::kInstruction);
  EXPECT_EQ((*records)[0].input, "1 2");
  EXPECT_EQ((*records)[1].input, "");
  EXPECT_EQ((*records)[1].source, "d.jsonl:3");
  EXPECT_EQ((*records)[2].kind, DatasetRecord::Kind::kChat);
  EXPECT_EQ((*records)[2].messages[1].content, "A");
  EXPECT_TRUE((*records)[2].messages[0].fields.contains("thinking"));  // kept for templates
  EXPECT_EQ((*records)[2].source, "d.jsonl:4");
}

TEST(DatasetTest, JsonArraysReportTheLineOfEachRecord) {
  auto records = ParseRecords(
      "[\n  {\"instruction\": \"a\", \"output\": \"[}\\\"\"},\n\n  {\"instruction\": \"b\",\n"
      "   \"output\": \"c\"}\n]\n",
      "d.json");
  ASSERT_TRUE(records.ok()) << records.status().ToString();
  ASSERT_EQ(records->size(), 2u);
  EXPECT_EQ((*records)[0].source, "d.json:2");
  EXPECT_EQ((*records)[1].source, "d.json:4");
  auto with_bom =
      ParseRecords("\xEF\xBB\xBF[\n{\"instruction\": \"a\", \"output\": \"b\"}\n]", "b.json");
  ASSERT_TRUE(with_bom.ok()) << with_bom.status().ToString();
  EXPECT_EQ((*with_bom)[0].source, "b.json:2");
  EXPECT_THAT(ErrorOf("[\n {\"instruction\": \"a\", \"output\": \"b\"},\n {\"instruction\": 5}\n]",
                      "d.json"),
              HasSubstr("d.json:3: field \"instruction\" must be a string, got number"));
}

TEST(DatasetTest, EveryBadRecordNamesFileLineAndField) {
  const std::string ok = "{\"instruction\": \"a\", \"output\": \"b\"}\n";
  std::map<std::string, std::string> cases = {
      {ok + "{\"instruction\": \"a\", \"output\": \"b\"\n", "d.jsonl:2:35: invalid JSON"},
      {ok + "not json at all\n", "d.jsonl:2:2: invalid JSON"},
      {ok + ok + "{\"instruction\": \"x\"}\n",
       "d.jsonl:3: field \"output\" is missing; alpaca records need \"instruction\" and "
       "\"output\" strings (the record has: \"instruction\")"},
      {"{\"output\": \"x\"}\n", "d.jsonl:1: field \"instruction\" is missing"},
      {"{\"instruction\": [\"a\"], \"output\": \"x\"}\n",
       "d.jsonl:1: field \"instruction\" must be a string, got array"},
      {"{\"instruction\": \"a\", \"output\": \"x\", \"input\": 3}\n",
       "d.jsonl:1: field \"input\" must be a string, got number"},
      {"{\"text\": \"hello\"}\n",
       "d.jsonl:1: the record is neither alpaca (\"instruction\", "
       "optional \"input\", \"output\") nor chat (\"messages\"); it "
       "has: \"text\""},
      {"[1, 2]\n", "d.jsonl:1: a record must be a JSON object"},
      {"\"just a string\"\n", "d.jsonl:1: a record must be a JSON object"},
      {"{\"messages\": \"hi\"}\n", "d.jsonl:1: field \"messages\" must be a list"},
      {"{\"messages\": []}\n", "d.jsonl:1: field \"messages\" is an empty list"},
      {"{\"messages\": [{\"role\": \"user\"}]}\n",
       "d.jsonl:1: messages[0] has no field \"content\""},
      {"{\"messages\": [{\"role\": \"user\", \"content\": 1}]}\n",
       "d.jsonl:1: messages[0].content must be a string, got number"},
      {"{\"messages\": [\"hi\"]}\n", "d.jsonl:1: messages[0] must be an object"},
      {"{\"messages\": [{\"role\": \"user\", \"content\": \"q\"}]}\n",
       "d.jsonl:1: field \"messages\" has no message with role \"assistant\""},
      {"[{\"instruction\": \"a\", \"output\": \"b\"},]", "d.jsonl:1:38: invalid JSON"},
  };
  for (const auto& [content, expected] : cases) {
    EXPECT_THAT(ErrorOf(content), HasSubstr(expected)) << content;
  }
}

class DatasetFilesTest : public ::testing::Test {
 protected:
  void SetUp() override {
    char tmpl[] = "/tmp/air_dataset_test_XXXXXX";
    dir_ = ::mkdtemp(tmpl);
  }
  void TearDown() override { ASSERT_TRUE(env_->RemoveAll(dir_).ok()); }
  void Write(const std::string& rel, const std::string& content) {
    std::string path = dir_ + "/" + rel;
    ASSERT_TRUE(env_->CreateDirs(path.substr(0, path.rfind('/'))).ok());
    ASSERT_TRUE(env_->WriteFileAtomic(path, content).ok());
  }
  Env* env_ = DefaultEnv();
  std::string dir_;
};

TEST_F(DatasetFilesTest, EmptyDatasetsAreErrors) {
  Write("empty.jsonl", "");
  Write("blank.jsonl", "\n  \n");
  Write("array.json", "[ ]");
  for (const char* name : {"empty.jsonl", "blank.jsonl", "array.json"}) {
    auto records = LoadRecords({dir_ + "/" + name}, env_);
    ASSERT_FALSE(records.ok()) << name;
    EXPECT_THAT(records.status().message(),
                HasSubstr("empty dataset: " + dir_ + "/" + name + " has no records"));
  }
}

TEST_F(DatasetFilesTest, ResolvesFilesDirectoriesAndShards) {
  Write("one.jsonl", "{}");
  Write("plain/train.json", "[]");
  Write("hub/data/train-00001-of-00002.jsonl", "{}");
  Write("hub/data/train-00000-of-00002.jsonl", "{}");
  Write("hub/data/test-00000-of-00001.jsonl", "{}");
  EXPECT_EQ(*ResolveDataset(dir_ + "/one.jsonl", env_),
            std::vector<std::string>{dir_ + "/one.jsonl"});
  EXPECT_EQ(*ResolveDataset(dir_ + "/plain", env_),
            std::vector<std::string>{dir_ + "/plain/train.json"});
  EXPECT_EQ(*ResolveDataset(dir_ + "/hub", env_),
            (std::vector<std::string>{dir_ + "/hub/data/train-00000-of-00002.jsonl",
                                      dir_ + "/hub/data/train-00001-of-00002.jsonl"}));
  Write("parquet/data/train-00000.parquet", "PAR1");
  auto none = ResolveDataset(dir_ + "/parquet", env_);
  ASSERT_FALSE(none.ok());
  EXPECT_THAT(none.status().message(), HasSubstr("has no train.jsonl"));
  EXPECT_THAT(none.status().message(), HasSubstr("parquet"));
}

TEST_F(DatasetFilesTest, HubIdsAreFoundInTheCacheOrListWhereWeLooked) {
  ::setenv("HF_HUB_CACHE", (dir_ + "/cache").c_str(), 1);
  Write("cache/datasets--org--name/refs/main", "abc123\n");
  Write("cache/datasets--org--name/snapshots/abc123/train.jsonl", "{}");
  auto found = ResolveDataset("org/name", env_);
  ASSERT_TRUE(found.ok()) << found.status().ToString();
  EXPECT_EQ(*found, std::vector<std::string>{dir_ + "/cache/datasets--org--name/snapshots/abc123/"
                                                    "train.jsonl"});
  auto missing = ResolveDataset("org/other", env_);
  ASSERT_FALSE(missing.ok());
  EXPECT_EQ(missing.status().code(), ErrorCode::kNotFound);
  EXPECT_THAT(missing.status().message(), HasSubstr("dataset \"org/other\" not found"));
  EXPECT_THAT(missing.status().message(), HasSubstr("org/other (no such file or directory)"));
  EXPECT_THAT(missing.status().message(),
              HasSubstr(dir_ + "/cache/datasets--org--other/snapshots"));
  ::unsetenv("HF_HUB_CACHE");
  // Models and datasets read the same variables (engine/hf_cache_dirs.h): the legacy
  // HUGGINGFACE_HUB_CACHE and XDG_CACHE_HOME were each honored for only one of the two.
  const std::vector<std::pair<std::string, std::string>> places = {
      {"HUGGINGFACE_HUB_CACHE", "legacy"}, {"XDG_CACHE_HOME", "xdg"}};
  for (const auto& [var, value] : places) {
    const std::string hub = value + (var == "XDG_CACHE_HOME" ? "/huggingface/hub" : "");
    Write(hub + "/datasets--org--name/refs/main", "abc123\n");
    Write(hub + "/datasets--org--name/snapshots/abc123/train.jsonl", "{}");
    ::setenv(var.c_str(), (dir_ + "/" + value).c_str(), 1);
    auto in_cache = ResolveDataset("org/name", env_);
    ::unsetenv(var.c_str());
    ASSERT_TRUE(in_cache.ok()) << var << ": " << in_cache.status().ToString();
    EXPECT_EQ(*in_cache, std::vector<std::string>{dir_ + "/" + hub +
                                                  "/datasets--org--name/snapshots/abc123/"
                                                  "train.jsonl"});
  }
  ::setenv("HF_HOME", "/hf", 1);
  EXPECT_EQ(HfHubCacheDirs(env_).front(), "/hf/hub");
  ::unsetenv("HF_HOME");
}

}  // namespace
}  // namespace air::engine
