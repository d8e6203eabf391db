// model_name resolution: local directories, the Hugging Face cache layout (refs/main ->
// snapshots/REV), the variables that move the cache, and an error listing where it looked.
#include "engine/io/hf_hub.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <filesystem>
#include <map>

#include "test_util.h"
#include "unit/vars_env.h"

namespace air::engine {
namespace {

using ::testing::AllOf;
using ::testing::HasSubstr;
using testing::ScratchDir;
using testing::WriteBytes;

using ::air::testing::VarsEnv;

// Lays out HUB/models--ORG--NAME/{refs/main, snapshots/REV/config.json}.
std::string MakeCachedModel(const std::string& hub, const std::string& folder,
                            const std::string& rev) {
  const std::string snapshot = hub + "/" + folder + "/snapshots/" + rev;
  std::filesystem::create_directories(snapshot);
  std::filesystem::create_directories(hub + "/" + folder + "/refs");
  WriteBytes(hub + "/" + folder + "/refs/main", rev + "\n");
  WriteBytes(snapshot + "/config.json", "{}");
  return snapshot;
}

TEST(HfHub, LocalDirectoryWins) {
  ScratchDir dir;
  VarsEnv env({});
  auto r = ResolveModelDir(dir.path(), &env);
  ASSERT_TRUE(r.ok());
  EXPECT_EQ(*r, dir.path());
}

TEST(HfHub, FindsSnapshotThroughRefsMainUnderHfHome) {
  ScratchDir home;
  const std::string snapshot =
      MakeCachedModel(home / "hub", "models--meta-llama--Llama-3.2-1B", "abc123");
  VarsEnv env({{"HF_HOME", home.path()}});
  auto r = ResolveModelDir("meta-llama/Llama-3.2-1B", &env);
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_EQ(*r, snapshot);
  // A snapshot name works as a revision too.
  EXPECT_EQ(*ResolveModelDir("meta-llama/Llama-3.2-1B", &env, "abc123"), snapshot);
}

TEST(HfHub, HubCacheVariableTakesPrecedenceAndHomeIsTheDefault) {
  ScratchDir a, b;
  const std::string in_cache = MakeCachedModel(a.path(), "models--org--m", "r1");
  MakeCachedModel(b / "hub", "models--org--m", "r2");
  VarsEnv env({{"HF_HUB_CACHE", a.path()}, {"HF_HOME", b.path()}});
  EXPECT_EQ(*ResolveModelDir("org/m", &env), in_cache);
  ScratchDir home;
  const std::string default_place =
      MakeCachedModel(home / ".cache/huggingface/hub", "models--org--m", "r3");
  VarsEnv env_home({{"HOME", home.path()}});
  EXPECT_EQ(*ResolveModelDir("org/m", &env_home), default_place);
  EXPECT_EQ(HfHubCacheDir(&env_home), home / ".cache/huggingface/hub");
  // XDG_CACHE_HOME moves the default, as in huggingface_hub (it was read for datasets only).
  ScratchDir xdg;
  const std::string xdg_place = MakeCachedModel(xdg / "huggingface/hub", "models--org--m", "r4");
  VarsEnv env_xdg({{"XDG_CACHE_HOME", xdg.path()}, {"HOME", home.path()}});
  EXPECT_EQ(*ResolveModelDir("org/m", &env_xdg), xdg_place);
  EXPECT_EQ(HfHubCacheDir(&env_xdg), xdg / "huggingface/hub");
}

TEST(HfHub, AbsentModelListsEveryPlaceLooked) {
  ScratchDir a, b;
  VarsEnv env({{"HF_HUB_CACHE", a.path()}, {"HF_HOME", b.path()}});
  Status s = ResolveModelDir("org/missing-model", &env).status();
  EXPECT_EQ(s.code(), ErrorCode::kNotFound);
  EXPECT_THAT(s.message(),
              AllOf(HasSubstr("'org/missing-model'"), HasSubstr("(as a local directory)"),
                    HasSubstr(a.path() + "/models--org--missing-model/refs/main"),
                    HasSubstr(b.path() + "/hub/models--org--missing-model/refs/main"),
                    HasSubstr("does not download")));
}

TEST(HfHub, RefPointingAtAMissingSnapshotSaysSo) {
  ScratchDir hub;
  MakeCachedModel(hub.path(), "models--org--m", "r1");
  WriteBytes(hub / "models--org--m/refs/main", "deadbeef");
  VarsEnv env({{"HF_HUB_CACHE", hub.path()}});
  EXPECT_THAT(ResolveModelDir("org/m", &env).status().message(),
              HasSubstr("snapshots/deadbeef (named by"));
}

}  // namespace
}  // namespace air::engine
