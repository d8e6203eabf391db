// Tests for reading pre-tokenized JSONL datasets: ids, default labels, and every error with
// file:line and field.
#include "engine/train/pretokenized_dataset.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <filesystem>

namespace air::engine::train {
namespace {

using ::testing::HasSubstr;
namespace fs = std::filesystem;

class PretokenizedTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = fs::temp_directory_path() / ("air_pretok_test_" + std::to_string(::getpid()));
    fs::create_directories(dir_);
  }
  void TearDown() override { fs::remove_all(dir_); }

  std::string Write(const std::string& name, const std::string& text) {
    std::string path = (dir_ / name).string();
    EXPECT_TRUE(DefaultEnv()->WriteFileAtomic(path, text).ok());
    return path;
  }

  std::string ErrorOf(const std::string& text) {
    std::string path = Write("bad.jsonl", text);
    auto r = ReadPretokenizedJsonl(DefaultEnv(), path, 50);
    EXPECT_FALSE(r.ok());
    return r.ok() ? "" : r.status().message();
  }

  fs::path dir_;
};

TEST_F(PretokenizedTest, ReadsIdsAndLabels) {
  std::string path = Write("d.jsonl",
                           "{\"input_ids\": [1, 2, 3], \"labels\": [-100, 2, 3]}\n"
                           "\n"
                           "{\"input_ids\": [4, 5]}\n");
  EXPECT_TRUE(LooksPretokenized(DefaultEnv(), path));
  auto r = ReadPretokenizedJsonl(DefaultEnv(), path, 50);
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  ASSERT_EQ(r->size(), 2u);
  EXPECT_EQ((*r)[0].labels, (std::vector<int32_t>{-100, 2, 3}));
  EXPECT_EQ((*r)[1].labels, (std::vector<int32_t>{4, 5}));  // defaults to input_ids
}

TEST_F(PretokenizedTest, TextDatasetsAreNotPretokenized) {
  EXPECT_FALSE(LooksPretokenized(DefaultEnv(), Write("a.jsonl", "{\"instruction\": \"x\"}\n")));
  EXPECT_FALSE(LooksPretokenized(DefaultEnv(), Write("a.json", "{\"input_ids\": [1, 2]}\n")));
}

TEST_F(PretokenizedTest, ErrorsNameFileLineAndField) {
  EXPECT_THAT(ErrorOf("{\"input_ids\": [1, 2]}\nnot json\n"),
              HasSubstr("bad.jsonl:2: not a JSON object"));
  EXPECT_THAT(ErrorOf("{\"labels\": [1, 2]}\n"), HasSubstr("bad.jsonl:1: input_ids: missing"));
  EXPECT_THAT(ErrorOf("{\"input_ids\": \"1 2\"}\n"),
              HasSubstr("bad.jsonl:1: input_ids: expected a list of token ids, got string"));
  EXPECT_THAT(ErrorOf("{\"input_ids\": [1, 2.5]}\n"),
              HasSubstr("bad.jsonl:1: input_ids[1]: expected an integer token id, got 2.5"));
  EXPECT_THAT(ErrorOf("{\"input_ids\": [1, 50]}\n"),
              HasSubstr("bad.jsonl:1: input_ids[1]: token id 50 is outside the model's "
                        "vocabulary [0, 50)"));
  EXPECT_THAT(ErrorOf("{\"input_ids\": [1, -100]}\n"), HasSubstr("input_ids[1]: token id -100"));
  EXPECT_THAT(ErrorOf("{\"input_ids\": [1, 2], \"labels\": [1]}\n"),
              HasSubstr("bad.jsonl:1: labels: has 1 ids but input_ids has 2"));
  EXPECT_THAT(ErrorOf("{\"input_ids\": [1]}\n"),
              HasSubstr("bad.jsonl:1: input_ids: needs at least 2 tokens"));
  EXPECT_THAT(ErrorOf("\n\n"), HasSubstr("bad.jsonl: the dataset is empty"));
}

}  // namespace
}  // namespace air::engine::train
