// Tests for /Volumes path parsing and discovery in a spec's command, env_variables and
// parameters (spec/volume_paths.h).
#include "spec/volume_paths.h"

#include <gtest/gtest.h>

namespace air::spec {
namespace {

TEST(VolumePathsTest, ParsesComponents) {
  auto parts = ParseVolumePath("/Volumes/main/default/air_checkpoints/llama31-8b-sft/");
  ASSERT_TRUE(parts.ok()) << parts.status().message();
  EXPECT_EQ(*parts,
            (std::vector<std::string>{"main", "default", "air_checkpoints", "llama31-8b-sft"}));
  EXPECT_TRUE(ParseVolumePath("/Volumes").ok());
  EXPECT_TRUE(ParseVolumePath("dbfs:/Volumes/a//b/c").ok());
  EXPECT_EQ(ParseVolumePath("/Volumes/a/b/c/d e.txt")->back(), "d e.txt");
}

TEST(VolumePathsTest, RefusesDotsBadNamesAndOtherPrefixes) {
  struct Case {
    const char* path;
    const char* message;
  };
  for (const Case& c : {Case{"/Volumes/main/default/v/../../x", "contains '..'"},
                        Case{"/Volumes/main/./default/v", "contains '.'"},
                        Case{"/Volumes/ma!n/default/v", "'ma!n' is not a valid catalog name"},
                        Case{"/Volumes/main/-x/v", "'-x' is not a valid schema name"},
                        Case{"/Volumes/main/default/v w", "'v w' is not a valid volume name"},
                        Case{"/Volumesx/main", "is not a volume path"},
                        Case{"/tmp/Volumes/main", "is not a volume path"}}) {
    auto parts = ParseVolumePath(c.path);
    ASSERT_FALSE(parts.ok()) << c.path;
    EXPECT_EQ(parts.status().code(), ErrorCode::kInvalidArgument);
    EXPECT_NE(parts.status().message().find(c.message), std::string::npos)
        << parts.status().message();
    EXPECT_NE(parts.status().message().find(c.path), std::string::npos);
  }
  EXPECT_FALSE(IsValidVolumeName(std::string(256, 'a')));
  EXPECT_TRUE(IsValidVolumeName(std::string(255, 'a')));
}

TEST(VolumePathsTest, FindsPathsThatStartAWord) {
  EXPECT_EQ(FindVolumePaths("cp out /Volumes/a/b/c/x.pt && ls '/Volumes/a/b/c'; "
                            "X=/Volumes/a/b/c/$RUN/y echo dbfs:/Volumes/a/b/d"),
            (std::vector<std::string>{"/Volumes/a/b/c/x.pt", "/Volumes/a/b/c", "/Volumes/a/b/c/",
                                      "dbfs:/Volumes/a/b/d"}));
  EXPECT_TRUE(FindVolumePaths("/mnt/Volumes/a/b/c and Volumes/x").empty());
  EXPECT_EQ(FindVolumePaths("output_dir: /Volumes/main/default/ck\nother: 1\n"),
            (std::vector<std::string>{"/Volumes/main/default/ck"}));
}

TEST(VolumePathsTest, ReferencesNameTheirField) {
  WorkloadSpec spec;
  spec.command = "python train.py --out /Volumes/a/b/c/run";
  spec.env_variables = {{"DATA", "/Volumes/a/b/data/train.jsonl"}, {"OTHER", "/tmp"}};
  spec.parameters_yaml = "output_dir: /Volumes/main/default/ckpt\n";
  std::vector<VolumeReference> refs = FindVolumeReferences(spec);
  ASSERT_EQ(refs.size(), 3u);
  EXPECT_EQ(refs[0].field, "command");
  EXPECT_EQ(refs[0].path, "/Volumes/a/b/c/run");
  EXPECT_EQ(refs[1].field, "env_variables.DATA");
  EXPECT_EQ(refs[2].field, "parameters");
  EXPECT_EQ(refs[2].path, "/Volumes/main/default/ckpt");
}

}  // namespace
}  // namespace air::spec
