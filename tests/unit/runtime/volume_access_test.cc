// Tests for how a run's nodes reach /Volumes (runtime/volume_access.h): the host's /Volumes when
// it is the root, a mount when a probe can make one (the dry-run probe creating nothing), the
// spec's paths rewritten when no mount is possible, a refusal naming the root and what would
// work when not even that is; and the launch each node gets for each of them (node_plan.h).
#include "runtime/volume_access.h"

#include <gtest/gtest.h>
#include <sys/stat.h>
#include <unistd.h>

#include <fstream>
#include <map>

#include "parse_spec.h"
#include "runtime/node_plan.h"
#include "spec/parser.h"
#include "test_util.h"

namespace air::runtime {
namespace {

using air::testing::ParseSpec;
using air::testing::TempDir;

constexpr char kSpec[] = R"(experiment_name: v
compute: {num_accelerators: 1, accelerator_type: CPU_1}
command: cp /Volumes/main/default/in/x.txt "$OUT" && ls '/Volumes/main/default'
env_variables:
  OUT: dbfs:/Volumes/main/default/out/x.txt
  OTHER: /data/Volumes/x
parameters:
  output_dir: /Volumes/main/default/ckpt/run1
)";

constexpr char kPlainSpec[] = R"(experiment_name: v
compute: {num_accelerators: 1, accelerator_type: CPU_1}
command: echo /mnt/Volumes/x
)";

VolumeAccess Rewrite(const std::string& root) {
  VolumeAccess access;
  access.kind = VolumeAccessKind::kRewrite;
  access.root = root;
  access.required = true;
  return access;
}

TEST(VolumeAccessTest, RewritesEveryVolumePathAndNothingElse) {
  VolumeAccess access = Rewrite("/home/u/.air/volumes");
  EXPECT_EQ(RewriteVolumePaths("cp /Volumes/a/b/c/x 'dbfs:/Volumes/a/b/c' /mnt/Volumes/a/b/c/y "
                               "OUT=/Volumes/a/b/c/z;ls /Volumes",
                               access),
            "cp /home/u/.air/volumes/a/b/c/x 'dbfs:/home/u/.air/volumes/a/b/c' "
            "/mnt/Volumes/a/b/c/y OUT=/home/u/.air/volumes/a/b/c/z;ls /Volumes");
  EXPECT_EQ(RewriteVolumePaths("no paths here", access), "no paths here");
  access.kind = VolumeAccessKind::kMount;
  EXPECT_EQ(RewriteVolumePaths("cp /Volumes/a/b/c/x .", access), "cp /Volumes/a/b/c/x .");
}

TEST(VolumeAccessTest, NodesGetTheRewrittenSpecAndTheRealRoot) {
  TempDir dir;
  spec::WorkloadSpec spec = ParseSpec(kSpec, dir.path());
  const std::string root = dir.path() + "/vols";
  spec::WorkloadSpec nodes = SpecForNodes(spec, Rewrite(root));
  EXPECT_EQ(nodes.command,
            "cp " + root + "/main/default/in/x.txt \"$OUT\" && ls '" + root + "/main/default'");
  std::map<std::string, std::string> env(nodes.env_variables.begin(), nodes.env_variables.end());
  EXPECT_EQ(env["OUT"], "dbfs:" + root + "/main/default/out/x.txt");
  EXPECT_EQ(env["OTHER"], "/data/Volumes/x");
  EXPECT_NE(nodes.parameters_yaml->find("output_dir: " + root + "/main/default/ckpt/run1"),
            std::string::npos)
      << *nodes.parameters_yaml;

  store::RunRecord run;
  run.id = 3;
  PreparedRun prepared;
  prepared.node_workdirs = {"/w/node_0"};
  prepared.volumes = Rewrite(root);
  auto plan = PlanAttempt(spec, run, Layout(dir.path()), prepared, AttemptSettings{});
  const agent::NodeLaunch& launch = plan.nodes[0].launch;
  EXPECT_EQ(launch.command, nodes.command);
  EXPECT_EQ(launch.volumes_root, "");  // no mount
  std::map<std::string, std::string> launch_env(launch.env.begin(), launch.env.end());
  EXPECT_EQ(launch_env["OUT"], env["OUT"]);
  EXPECT_EQ(launch_env["AIR_VOLUMES_ROOT"], root);

  // A mount the spec does not need is a precaution: the node runs without it if it fails.
  prepared.volumes.kind = VolumeAccessKind::kMount;
  prepared.volumes.required = false;
  plan = PlanAttempt(ParseSpec(kPlainSpec, dir.path()), run, Layout(dir.path()), prepared, {});
  EXPECT_EQ(plan.nodes[0].launch.volumes_root, root);
  EXPECT_FALSE(plan.nodes[0].launch.volumes_required);
  EXPECT_EQ(plan.nodes[0].launch.command, "echo /mnt/Volumes/x");
}

TEST(VolumeAccessTest, AHostVolumesThatIsTheRootNeedsNoNamespace) {
  TempDir dir;
  const std::string root = dir.path() + "/shared_vols";
  ASSERT_EQ(::mkdir(root.c_str(), 0700), 0);
  const std::string host_volumes = dir.path() + "/Volumes";  // what the admin made
  ASSERT_EQ(::symlink(root.c_str(), host_volumes.c_str()), 0);
  VolumeAccessOptions options;
  options.mount_point = host_volumes;
  auto access = DecideVolumeAccess(ParseSpec(kSpec, dir.path()), root, options);
  ASSERT_TRUE(access.ok()) << access.status().ToString();
  EXPECT_EQ(access->kind, VolumeAccessKind::kHost);
  EXPECT_TRUE(access->required);
  EXPECT_NE(DescribeVolumeAccess(*access).find("is the volume root " + root), std::string::npos);
}

TEST(VolumeAccessTest, WithoutAMountThePathsAreRewrittenOrTheRunRefused) {
  TempDir dir;
  // A mount point that is a file: no mount can be made on it, for root as for anyone.
  const std::string not_a_dir = dir.path() + "/Volumes";
  std::ofstream(not_a_dir) << "x";
  VolumeAccessOptions options;
  options.mount_point = not_a_dir;
  const std::string root = dir.path() + "/vols";
  ASSERT_EQ(::mkdir(root.c_str(), 0700), 0);

  auto access = DecideVolumeAccess(ParseSpec(kSpec, dir.path()), root, options);
  ASSERT_TRUE(access.ok()) << access.status().ToString();
  EXPECT_EQ(access->kind, VolumeAccessKind::kRewrite);
  EXPECT_NE(access->why_no_mount.find(not_a_dir), std::string::npos) << access->why_no_mount;
  EXPECT_NE(DescribeVolumeAccess(*access).find("rewritten to " + root), std::string::npos);

  auto plain = DecideVolumeAccess(ParseSpec(kPlainSpec, dir.path()), root, options);
  ASSERT_TRUE(plain.ok());
  EXPECT_EQ(plain->kind, VolumeAccessKind::kNone);
  EXPECT_FALSE(plain->required);

  const std::string odd = dir.path() + "/my vols";
  ASSERT_EQ(::mkdir(odd.c_str(), 0700), 0);
  auto refused = DecideVolumeAccess(ParseSpec(kSpec, dir.path()), odd, options);
  ASSERT_FALSE(refused.ok());
  EXPECT_EQ(refused.status().code(), ErrorCode::kFailedPrecondition);
  const std::string message = refused.status().message();
  EXPECT_NE(message.find("the volume root " + odd + " cannot stand in for " + not_a_dir),
            std::string::npos)
      << message;
  EXPECT_NE(message.find("a space is not one of"), std::string::npos) << message;
  EXPECT_NE(message.find("set AIR_VOLUMES_ROOT"), std::string::npos) << message;
}

TEST(VolumeAccessTest, ADryRunProbeCreatesNothing) {
  TempDir dir;
  VolumeAccessOptions options;
  options.mount_point = dir.path() + "/Volumes";
  options.dry_run = true;
  const std::string root = dir.path() + "/vols";  // not created yet either
  auto access = DecideVolumeAccess(ParseSpec(kSpec, dir.path()), root, options);
  ASSERT_TRUE(access.ok()) << access.status().ToString();
  // Root would create the mount point at submit; anyone else cannot, and gets the rewrite.
  EXPECT_EQ(access->kind, ::getuid() == 0 ? VolumeAccessKind::kMount : VolumeAccessKind::kRewrite)
      << access->why_no_mount;
  struct stat st {};
  EXPECT_NE(::stat(options.mount_point.c_str(), &st), 0);
  EXPECT_NE(::stat(root.c_str(), &st), 0);
  // Submit's probe creates the mount point (empty).
  options.dry_run = false;
  ASSERT_EQ(::mkdir(root.c_str(), 0700), 0);
  access = DecideVolumeAccess(ParseSpec(kSpec, dir.path()), root, options);
  ASSERT_TRUE(access.ok()) << access.status().ToString();
  if (::getuid() == 0) {
    EXPECT_EQ(::stat(options.mount_point.c_str(), &st), 0);
  }
}

}  // namespace
}  // namespace air::runtime
