// The Slurm node entry: launch file by SLURM_NODEID, secrets file, MASTER_ADDR, then the agent.
#include "backends/slurm/node_entry.h"

#include <fmt/format.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <nlohmann/json.hpp>

#include "agent/agent.h"
#include "agent/node_launch.h"
#include "backends/slurm/slurm_cli.h"

namespace air::backends::slurm {
namespace {

int Fail(const std::string& message) {
  std::fprintf(stderr, "air slurm-node: %s\n", message.c_str());
  return 2;
}

// The values travel as a JSON object {"NAME": "value"}; the file is gone once read.
Status TakeSecrets(const std::string& path, Env* env) {
  if (!env->FileExists(path)) return Status::Ok();
  auto text = env->ReadFile(path);
  if (::unlink(path.c_str()) != 0 && errno != ENOENT) {
    return ErrnoStatus("remove the secrets file " + path, errno);
  }
  if (!text.ok()) return text.status();
  nlohmann::json values = nlohmann::json::parse(*text, nullptr, false);
  if (!values.is_object()) return DataLoss(path + ": not a JSON object of secret values");
  for (const auto& [name, value] : values.items()) {
    if (!value.is_string()) return DataLoss(path + ": " + name + " is not a string");
    if (::setenv(name.c_str(), value.get<std::string>().c_str(), 1) != 0) {
      return ErrnoStatus("setenv " + name, errno);
    }
  }
  return Status::Ok();
}

// The node must be able to write the attempt directory on the shared root: without it, it
// could leave no log and no exit report.
Status ProbeWritable(const std::string& dir) {
  std::string probe = dir + "/.node-write-probe-XXXXXX";
  int fd = ::mkstemp(probe.data());
  if (fd < 0) return ErrnoStatus(dir, errno);
  ::close(fd);
  ::unlink(probe.c_str());
  return Status::Ok();
}

// Says why where the supervisor looks every second anyway: the job's Comment, which the job's
// owner may set (`scontrol update`), naming the node and the path.
int ReportUnwritable(int rank, const Status& why, Env* env) {
  char host[256] = {};
  (void)::gethostname(host, sizeof(host) - 1);
  const std::string message = fmt::format(
      "node {} ({}) cannot write the shared root: {} (every node must see shared_root, "
      "read-write, at the same path)",
      rank, host, why.message());
  if (auto job = env->GetEnv("SLURM_JOB_ID"); job && !job->empty()) {
    auto updated = RunSlurm({"scontrol", "update", "JobId=" + *job,
                             std::string("Comment=") + kNodeErrorPrefix + message});
    if (!updated.ok()) {
      std::fprintf(stderr, "air slurm-node: %s\n", updated.status().message().c_str());
    }
  }
  return Fail(message);
}

}  // namespace

std::string NodeSecretsPath(const std::string& attempt_dir, int node_rank) {
  return fmt::format("{}/node_{}.secrets", attempt_dir, node_rank);
}

int SlurmNodeMain(const std::string& attempt_dir, Env* env) {
  auto node_id = env->GetEnv("SLURM_NODEID");
  if (!node_id || node_id->empty() ||
      node_id->find_first_not_of("0123456789") != std::string::npos) {
    return Fail("SLURM_NODEID is not set: this command runs inside the srun step air submits");
  }
  const int rank = std::atoi(node_id->c_str());
  if (Status writable = ProbeWritable(attempt_dir); !writable.ok()) {
    return ReportUnwritable(rank, writable, env);
  }
  const std::string launch_path = fmt::format("{}/node_{}.json", attempt_dir, rank);
  auto text = env->ReadFile(launch_path);
  if (!text.ok()) return Fail(text.status().message());
  auto launch = agent::NodeLaunchFromJson(*text, launch_path);
  if (!launch.ok()) return Fail(launch.status().message());
  Status secrets = TakeSecrets(NodeSecretsPath(attempt_dir, rank), env);
  if (!secrets.ok()) {
    agent::NodeExitReport failed;
    failed.error = "reading the node's secrets: " + secrets.message();
    failed.ended_us = env->NowMicros();
    (void)env->WriteFileAtomic(launch->exit_path, agent::NodeExitReportToJson(failed), 0600);
    return Fail(failed.error);
  }
  if (auto master = env->GetEnv("AIR_SLURM_MASTER_ADDR"); master && !master->empty()) {
    for (auto& [name, value] : launch->env) {
      if (name == "MASTER_ADDR") value = *master;
    }
  }
  return agent::RunNodeMain(*launch, env);
}

}  // namespace air::backends::slurm
