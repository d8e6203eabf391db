// Tests for ResolveSecrets: values in reference order, every missing reference named at once,
// never a value in an error.
#include "secrets/resolve.h"

#include <gtest/gtest.h>

#include "secrets/names.h"
#include "test_util.h"

namespace air::secrets {
namespace {

using testing::TempHome;

spec::SecretRef Ref(std::string scope, std::string key) {
  return {std::move(scope), std::move(key)};
}

TEST(ResolveSecretsTest, ResolvesInReferenceOrder) {
  TempHome home;
  SecretStore store(DefaultEnv(), home.path());
  ASSERT_TRUE(store.CreateScope("my_scope").ok());
  ASSERT_TRUE(store.PutSecret("my_scope", "hf_token", "hf_value_1").ok());
  ASSERT_TRUE(store.PutSecret("my_scope", "wandb", "wandb_value").ok());
  auto resolved = ResolveSecrets(store, {{"WANDB_API_KEY", Ref("my_scope", "wandb")},
                                         {"HF_TOKEN", Ref("my_scope", "hf_token")},
                                         {"HF_TOKEN_AGAIN", Ref("my_scope", "hf_token")}});
  ASSERT_TRUE(resolved.ok()) << resolved.status().ToString();
  ASSERT_EQ(resolved->size(), 3u);
  EXPECT_EQ((*resolved)[0], (std::pair<std::string, std::string>{"WANDB_API_KEY", "wandb_value"}));
  EXPECT_EQ((*resolved)[1].second, "hf_value_1");
}

TEST(ResolveSecretsTest, NoReferencesNeedNoStore) {
  TempHome home;
  SecretStore store(DefaultEnv(), home.path());
  auto resolved = ResolveSecrets(store, {});
  ASSERT_TRUE(resolved.ok());
  EXPECT_TRUE(resolved->empty());
  EXPECT_FALSE(DefaultEnv()->FileExists(home.path()));
}

TEST(ResolveSecretsTest, EveryMissingReferenceIsNamedAndNoValueIs) {
  TempHome home;
  SecretStore store(DefaultEnv(), home.path());
  ASSERT_TRUE(store.CreateScope("my_scope").ok());
  ASSERT_TRUE(store.PutSecret("my_scope", "present", "PRESENT_VALUE_xyz").ok());
  auto resolved = ResolveSecrets(store, {{"A", Ref("my_scope", "present")},
                                         {"HF_TOKEN", Ref("my_scope", "hf_token")},
                                         {"DB", Ref("no_such_scope", "password")},
                                         {"BAD", Ref("my_scope", "bad key")}});
  ASSERT_FALSE(resolved.ok());
  const std::string msg = resolved.status().message();
  EXPECT_EQ(resolved.status().code(), ErrorCode::kNotFound);
  EXPECT_NE(msg.find("3 secrets referenced by the workload are missing"), std::string::npos) << msg;
  EXPECT_NE(msg.find("HF_TOKEN -> my_scope/hf_token (scope 'my_scope' has no key 'hf_token')"),
            std::string::npos)
      << msg;
  EXPECT_NE(msg.find("DB -> no_such_scope/password (scope 'no_such_scope' does not exist)"),
            std::string::npos)
      << msg;
  EXPECT_NE(msg.find("BAD -> my_scope/bad key (invalid key name"), std::string::npos) << msg;
  EXPECT_EQ(msg.find("PRESENT_VALUE"), std::string::npos);
}

// Linux refuses an environment entry NAME=VALUE over 128 KiB (with '=' and NUL), so a value
// of the maximal stored size would make every node agent fail to start (exit 127).
TEST(ResolveSecretsTest, ValueTooLongForItsEnvironmentVariableFailsBeforeLaunch) {
  TempHome home;
  SecretStore store(DefaultEnv(), home.path());
  ASSERT_TRUE(store.CreateScope("s").ok());
  const size_t fits = kMaxEnvironmentEntryBytes - std::string("BIG=").size() - 1;  // 131067
  ASSERT_TRUE(store.PutSecret("s", "fits", std::string(fits, 'f')).ok());
  ASSERT_TRUE(store.PutSecret("s", "max", std::string(kMaxValueBytes, 'm')).ok());

  auto ok = ResolveSecrets(store, {{"BIG", Ref("s", "fits")}});
  ASSERT_TRUE(ok.ok()) << ok.status().ToString();
  EXPECT_EQ((*ok)[0].second.size(), fits);

  auto one_more = ResolveSecrets(store, {{"BIGG", Ref("s", "fits")}, {"BIG", Ref("s", "max")}});
  ASSERT_FALSE(one_more.ok());
  EXPECT_EQ(one_more.status().code(), ErrorCode::kFailedPrecondition);
  const std::string msg = one_more.status().message();
  EXPECT_NE(msg.find("2 secret values are too long to pass as an environment variable"),
            std::string::npos)
      << msg;
  EXPECT_NE(msg.find("BIGG -> s/fits (131067 bytes; at most 131066 for this variable)"),
            std::string::npos)
      << msg;
  EXPECT_NE(msg.find("BIG -> s/max (131072 bytes; at most 131067 for this variable)"),
            std::string::npos)
      << msg;
  EXPECT_NE(msg.find("MAX_ARG_STRLEN"), std::string::npos) << msg;
  EXPECT_EQ(msg.find("mmmm"), std::string::npos);
}

TEST(ResolveSecretsTest, DamagedStoreIsReportedNotTreatedAsMissing) {
  TempHome home;
  SecretStore store(DefaultEnv(), home.path());
  ASSERT_TRUE(store.CreateScope("s").ok());
  ASSERT_TRUE(store.PutSecret("s", "k", "value-123").ok());
  testing::OverwriteInPlace(store.store_path(), "AIRSECRS garbage");
  auto resolved = ResolveSecrets(store, {{"K", Ref("s", "k")}});
  ASSERT_FALSE(resolved.ok());
  EXPECT_EQ(resolved.status().code(), ErrorCode::kDataLoss);
  EXPECT_NE(resolved.status().message().find(store.store_path()), std::string::npos);
}

}  // namespace
}  // namespace air::secrets
