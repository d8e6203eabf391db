// AIR_HOME/config.yaml through the registry's loader: the external tracking server's keys
// (tracking_uri and the tracking_*_secret references) and their bad input, and the one capped
// YAML loader (spec::LoadYaml): an alias bomb is a clear error, not memory exhaustion.
#include <gtest/gtest.h>

#include "backends/cluster_registry.h"
#include "test_util.h"
#include "unit/alias_bomb.h"

namespace air::backends {
namespace {

class TrackingConfigTest : public ::testing::Test {
 protected:
  Result<ClusterConfig> Load(const std::string& text) {
    EXPECT_TRUE(DefaultEnv()->WriteFileAtomic(dir_.path() + "/config.yaml", text).ok());
    return LoadClusterConfig(dir_.path(), "", DefaultEnv());
  }
  std::string ErrorOf(const std::string& text) {
    auto config = Load(text);
    EXPECT_FALSE(config.ok()) << text;
    return config.ok() ? "" : config.status().message();
  }
  air::testing::TempDir dir_;
};

TEST_F(TrackingConfigTest, UriAndSecretReferences) {
  auto token = Load("tracking_uri: https://mlflow.example.com/\ntracking_token_secret: ml/tok\n");
  ASSERT_TRUE(token.ok()) << token.status().message();
  EXPECT_EQ(token->tracking.uri, "https://mlflow.example.com");
  EXPECT_EQ(token->tracking.token_secret, "ml/tok");
  EXPECT_EQ(token->tracking.config_path, dir_.path() + "/config.yaml");
  auto basic = Load(
      "backend: local\ntracking_uri: http://10.0.0.5:5000\ntracking_username_secret: ml/user\n"
      "tracking_password_secret: ml/pass\n");
  ASSERT_TRUE(basic.ok()) << basic.status().message();
  EXPECT_EQ(basic->tracking.username_secret, "ml/user");
  EXPECT_EQ(basic->tracking.password_secret, "ml/pass");
  EXPECT_TRUE(basic->tracking.token_secret.empty());
  auto none = Load("backend: local\n");
  ASSERT_TRUE(none.ok());
  EXPECT_TRUE(none->tracking.uri.empty());
}

TEST_F(TrackingConfigTest, BadInputNamesTheLineKeyAndWhatIsValid) {
  EXPECT_NE(ErrorOf("tracking_uri: databricks\n")
                .find("config.yaml:1: tracking_uri: 'databricks' is not an http:// or https:// "
                      "URL of an MLflow server"),
            std::string::npos);
  EXPECT_NE(ErrorOf("tracking_uri: http://h\ntracking_token_secret: token\n")
                .find("config.yaml:2: tracking_token_secret: 'token' is not scope/key"),
            std::string::npos);
  EXPECT_NE(ErrorOf("tracking_token_secret: a b/c\n").find("invalid scope name 'a b'"),
            std::string::npos);
  EXPECT_NE(ErrorOf("tracking_uri: [http://h]\n").find("tracking_uri: expected a URL, got a list"),
            std::string::npos);
  EXPECT_NE(ErrorOf("tracking_username_secret: a/u\n")
                .find("basic auth needs both tracking_username_secret and "
                      "tracking_password_secret"),
            std::string::npos);
  EXPECT_NE(ErrorOf("tracking_token_secret: a/t\ntracking_username_secret: a/u\n"
                    "tracking_password_secret: a/p\n")
                .find("not both"),
            std::string::npos);
  std::string unknown = ErrorOf("tracking_url: http://h\n");
  EXPECT_NE(unknown.find("config.yaml:1: unknown key 'tracking_url'; valid: backend, "
                         "shared_root, volumes_root, slurm, tracking_uri, tracking_token_secret"),
            std::string::npos)
      << unknown;
}

TEST_F(TrackingConfigTest, AnAliasBombIsAClearError) {
  std::string e = ErrorOf(air::testing::AliasBomb() + "backend: *a8\n");
  EXPECT_NE(e.find("config.yaml:"), std::string::npos) << e;
  EXPECT_NE(e.find("invalid YAML: the document has more than"), std::string::npos) << e;
}

TEST_F(TrackingConfigTest, YamlSyntaxErrorHasLineAndColumn) {
  std::string e = ErrorOf("backend: local\nslurm: [unclosed\n");
  EXPECT_NE(e.find("config.yaml:"), std::string::npos) << e;
  EXPECT_NE(e.find("invalid YAML"), std::string::npos) << e;
}

}  // namespace
}  // namespace air::backends
