// Tests for request body parsing (server/mlflow_json.h): a body nested far past the depth limit
// (the 150,000-level body that once crashed the server) is an error, never a crash; bodies within
// the limit, MLflow's real ones, parse; anything but a JSON object is refused.
#include "server/mlflow_json.h"

#include <gtest/gtest.h>

namespace air::server {
namespace {

std::string Nested(size_t depth) {
  return "{\"x\":" + std::string(depth, '[') + std::string(depth, ']') + "}";
}

TEST(ParseJsonObjectTest, DeepBodiesAreRefusedNotFollowed) {
  auto deep = ParseJsonObject(Nested(150000));
  ASSERT_FALSE(deep.ok());
  EXPECT_EQ(deep.status().code(), ErrorCode::kInvalidArgument);
  EXPECT_NE(deep.status().message().find("nested deeper than 64 levels"), std::string::npos)
      << deep.status().message();
  // Unbalanced, too: the check stops at the limit, not at the end of the text.
  EXPECT_FALSE(ParseJsonObject("{\"x\":" + std::string(1000000, '[')).ok());
  EXPECT_TRUE(ParseJsonObject(Nested(kMaxJsonDepth - 1)).ok());
  EXPECT_FALSE(ParseJsonObject(Nested(kMaxJsonDepth)).ok());
}

TEST(ParseJsonObjectTest, MlflowBodiesParseAndOthersAreRefused) {
  auto batch = ParseJsonObject(
      R"({"run_id": "r", "metrics": [{"key": "loss", "value": 1.5, "timestamp": 1, "step": 0}],)"
      R"( "tags": [{"key": "a", "value": "b"}]})");
  ASSERT_TRUE(batch.ok()) << batch.status().message();
  EXPECT_EQ((*batch)["metrics"][0]["value"], 1.5);
  for (const std::string& bad :
       {std::string("[1, 2]"), std::string("\"x\""), std::string("{not json"),
        std::string("{\"k\": \"\xff\xfe\"}"), std::string("")}) {
    auto parsed = ParseJsonObject(bad);
    ASSERT_FALSE(parsed.ok()) << bad;
    EXPECT_NE(parsed.status().message().find("Malformed request"), std::string::npos);
  }
}

}  // namespace
}  // namespace air::server
