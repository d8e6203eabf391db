// SlurmBackend: sbatch per attempt, scontrol for states, reports from the shared root.
#include "backends/slurm/slurm_backend.h"

#include <fmt/format.h>
#include <unistd.h>

#include <algorithm>
#include <csignal>
#include <cstdio>
#include <cstring>
#include <nlohmann/json.hpp>

#include "backends/slurm/batch_script.h"
#include "backends/slurm/node_entry.h"
#include "base/log.h"
#include "base/private_dir.h"
#include "base/strings.h"

namespace air::backends {
namespace {

using slurm::JobPhase;

constexpr int64_t kQueryIntervalUs = 1'000'000;  // scontrol at most once a second
constexpr int64_t kReportGraceUs = 2'000'000;    // reports may land just after the job ends
// A node stopped by Slurm waits this long for the job's state to give the reason: Slurm marks a
// dead node's job NODE_FAIL SlurmdTimeout (plus a ping interval) after it died, ~28 s on the
// test cluster's SlurmdTimeout=10, while the other nodes may be signalled at once.
constexpr int64_t kHeldReportMaxUs = 60'000'000;
constexpr int64_t kSelfEndWaitUs = 10'000'000;  // a job whose nodes all reported ends by itself

// Whether a node's command ended because something outside it asked it to stop: its agent got
// a stop signal first, or the command itself died of SIGTERM (the signal, or a shell's exit 143).
bool StoppedFromOutside(const agent::NodeExitReport& exit) {
  return exit.stopped_by_air || exit.signal == SIGTERM || exit.exit_code == 128 + SIGTERM;
}

std::string Get(const slurm::Record& r, const char* key) {
  auto it = r.find(key);
  return it == r.end() ? std::string() : it->second;
}

bool InList(const std::string& list, const std::string& item) {
  for (const auto& part : Split(list, ',')) {
    if (Trim(part) == item) return true;
  }
  return false;
}

int ToInt(const std::string& text) {
  if (text.empty() || text.find_first_not_of("0123456789") != std::string::npos) return 0;
  return std::stoi(text);
}

}  // namespace

Result<ClusterCapabilities> SlurmBackend::DescribeCapabilities(const SlurmConfig& config,
                                                               const std::string& data_root,
                                                               Env* env) {
  for (const char* command : {"sbatch", "srun", "scontrol", "scancel"}) {
    AIR_RETURN_IF_ERROR(slurm::FindSlurmCommand(command, env).status());
  }
  auto partitions_text = slurm::RunSlurm({"scontrol", "show", "partition", "-o"});
  if (!partitions_text.ok()) {
    return Unavailable(fmt::format(
        "cannot reach the Slurm controller: {}; check that slurmctld runs and that SLURM_CONF "
        "(now '{}') names the cluster's slurm.conf",
        partitions_text.status().message(),
        env->GetEnv("SLURM_CONF").value_or("unset: /etc/slurm/slurm.conf")));
  }
  std::vector<slurm::Record> partitions = slurm::ParseRecords(*partitions_text);
  std::vector<std::string> names;
  const slurm::Record* partition = nullptr;
  for (const auto& p : partitions) {
    names.push_back(Get(p, "PartitionName"));
    bool chosen = config.partition.empty() ? InList(Get(p, "Default"), "YES")
                                           : Get(p, "PartitionName") == config.partition;
    if (chosen && partition == nullptr) partition = &p;
  }
  if (partition == nullptr) {
    if (config.partition.empty()) {
      return InvalidArgument(fmt::format(
          "slurm.partition: the cluster has no default partition; set slurm.partition in "
          "AIR_HOME/config.yaml to one of: {}",
          Join(names, ", ")));
    }
    return InvalidArgument(fmt::format(
        "slurm.partition: '{}' is not a partition of this cluster; valid: {}{}", config.partition,
        Join(names, ", "), DidYouMeanSuffix(config.partition, names)));
  }
  const std::string name = Get(*partition, "PartitionName");
  if (Get(*partition, "State") != "UP") {
    return FailedPrecondition(fmt::format(
        "slurm partition '{}' is {}: jobs would wait until an administrator brings it UP", name,
        Get(*partition, "State")));
  }
  AIR_ASSIGN_OR_RETURN(std::string nodes_text, slurm::RunSlurm({"scontrol", "show", "node", "-o"}));
  ClusterCapabilities caps;
  caps.name = fmt::format("slurm (partition {})", name);
  caps.max_gpus_per_node = 0;
  caps.docker_images = false;
  caps.shared_filesystem = true;
  caps.enforces_time_limit = true;
  caps.attempts_outlive_supervisor = true;
  int nodes = 0;
  for (const auto& node : slurm::ParseRecords(nodes_text)) {
    if (!InList(Get(node, "Partitions"), name)) continue;
    ++nodes;
    int gpus = slurm::GpusInGres(Get(node, "Gres"));
    caps.gpus_available += gpus;
    caps.max_gpus_per_node = std::max(caps.max_gpus_per_node, gpus);
    caps.max_cpus_per_node = std::max(caps.max_cpus_per_node, ToInt(Get(node, "CPUTot")));
  }
  caps.max_nodes = nodes;
  if (int max_nodes = ToInt(Get(*partition, "MaxNodes")); max_nodes > 0) {
    caps.max_nodes = std::min(caps.max_nodes, max_nodes);
  }
  if (caps.max_nodes == 0) {
    return FailedPrecondition(fmt::format("slurm partition '{}' has no nodes", name));
  }
  // Every node writes its logs and reports under the data root: it must be writable (here; a
  // node that cannot is reported by the job itself).
  // It must also be the user's own (base/private_dir.h): one another user prepared is refused.
  const bool existed = env->GetPathInfo(data_root, /*follow_symlinks=*/false).ok();
  Status dir = MakePrivateDir(data_root, env, "shared_root");
  if (existed && dir.code() == ErrorCode::kPermissionDenied) {
    return Status(dir.code(), dir.message() + " (shared_root is set in AIR_HOME/config.yaml)");
  }
  std::string probe = fmt::format("{}/.air-write-probe-{}", data_root, ::getpid());
  if (dir.ok()) dir = env->WriteFileAtomic(probe, "probe\n", 0600);
  if (!dir.ok()) {
    return FailedPrecondition(fmt::format(
        "shared_root '{}' is not writable ({}): the slurm backend keeps runs, snapshots and "
        "environments there, so it must be a directory every node can write (the cluster's "
        "shared filesystem); set shared_root in AIR_HOME/config.yaml",
        data_root, dir.message()));
  }
  ::unlink(probe.c_str());
  return caps;
}

Result<std::unique_ptr<SlurmBackend>> SlurmBackend::Create(const SlurmConfig& config,
                                                           std::string air_binary, Env* env) {
  return std::unique_ptr<SlurmBackend>(new SlurmBackend(config, std::move(air_binary), env));
}

SlurmBackend::SlurmBackend(const SlurmConfig& config, std::string air_binary, Env* env)
    : config_(config), air_binary_(std::move(air_binary)), env_(env) {
  capabilities_.name = "slurm";
  capabilities_.enforces_time_limit = true;
  capabilities_.attempts_outlive_supervisor = true;
}

SlurmBackend::~SlurmBackend() {
  auto ended = [this] { return job_gone_ || (job_ && job_->phase == JobPhase::kEnded); };
  bool all_reported = true;
  for (const Node& node : nodes_) all_reported = all_reported && node.status.exit.has_value();
  // Every agent reported: the job ends on its own in a moment (srun and the batch script exit);
  // let it, so Slurm records how it really ended. Otherwise nothing of the attempt may live on.
  const int64_t until = env_->MonotonicMicros() + kSelfEndWaitUs;
  while (!job_id_.empty() && all_reported && !ended() && env_->MonotonicMicros() < until) {
    env_->SleepMicros(100'000);
    (void)RefreshJob();
  }
  if (!job_id_.empty() && !ended()) (void)slurm::RunSlurm({"scancel", job_id_});
  RemoveSecretFiles();
}

void SlurmBackend::RemoveSecretFiles() {
  for (const Node& node : nodes_) {
    if (!node.secrets_path.empty()) ::unlink(node.secrets_path.c_str());
  }
}

std::string SlurmBackend::JobIdPath(const std::string& attempt_dir) {
  return attempt_dir + "/slurm_job_id";
}

Result<std::string> SlurmBackend::DescribeDetachedAttempt(const std::string& attempt_dir,
                                                          Env* env) {
  auto id = env->ReadFile(JobIdPath(attempt_dir));
  if (!id.ok()) return std::string();  // never submitted: nothing lives on
  const std::string job_id(Trim(*id));
  auto info = slurm::QueryJob(job_id);
  if (!info.ok()) {
    if (info.status().code() == ErrorCode::kNotFound) {
      // Slurm forgets an ended job after MinJobAge: how it ended is gone with it; say so rather
      // than adopt (or wait for) a job that cannot be watched.
      return NotFound(fmt::format(
          "its Slurm job {} ({}) is no longer known to Slurm: the job ended and Slurm purged "
          "it (slurm.conf MinJobAge), so how it ended is lost; the nodes' own reports are kept",
          job_id, JobIdPath(attempt_dir)));
    }
    return info.status();
  }
  return fmt::format("Slurm job {} {}", job_id, info->state);
}

SlurmBackend::Node SlurmBackend::NodeOf(const NodeToLaunch& node) const {
  Node n;
  n.rank = node.launch.node_rank;
  n.started_path = node.launch.started_path;
  n.exit_path = node.launch.exit_path;
  n.log_path = node.launch.log_path;
  n.status.node_rank = n.rank;
  return n;
}

Status SlurmBackend::Attach(const AttemptToLaunch& attempt) {
  if (!job_id_.empty()) return FailedPrecondition("SlurmBackend: an attempt is already launched");
  auto id = env_->ReadFile(JobIdPath(attempt.attempt_dir));
  if (!id.ok()) {
    return NotFound(fmt::format("attempt {} of run {} has no Slurm job to adopt ({})",
                                attempt.attempt, attempt.run_id, id.status().message()));
  }
  attempt_dir_ = attempt.attempt_dir;
  for (const NodeToLaunch& node : attempt.nodes) {
    Node n = NodeOf(node);
    // A job still queued has not read its secrets yet: remove them when it ends, as Launch does.
    if (std::string path = slurm::NodeSecretsPath(attempt_dir_, n.rank); env_->FileExists(path)) {
      n.secrets_path = path;
    }
    nodes_.push_back(n);
  }
  job_id_ = std::string(Trim(*id));
  AIR_RETURN_IF_ERROR(RefreshJob());
  if (job_gone_) return NotFound(fmt::format("Slurm no longer knows job {}", job_id_));
  scheduler_.note = fmt::format("re-attached to {}", scheduler_.note);
  return Status::Ok();
}

Status SlurmBackend::Launch(const AttemptToLaunch& attempt) {
  if (!job_id_.empty()) return FailedPrecondition("SlurmBackend: an attempt is already launched");
  attempt_dir_ = attempt.attempt_dir;
  for (const NodeToLaunch& node : attempt.nodes) {
    Node n = NodeOf(node);
    AIR_RETURN_IF_ERROR(
        env_->WriteFileAtomic(node.launch_path, agent::NodeLaunchToJson(node.launch), 0600));
    if (!node.secret_env.empty()) {
      nlohmann::json values = nlohmann::json::object();
      for (const auto& [name, value] : node.secret_env) values[name] = value;
      n.secrets_path = slurm::NodeSecretsPath(attempt_dir_, n.rank);
      nodes_.push_back(n);
      AIR_RETURN_IF_ERROR(env_->WriteFileAtomic(n.secrets_path, values.dump(), 0600));
    } else {
      nodes_.push_back(n);
    }
  }
  slurm::JobRequest request;
  request.run_id = attempt.run_id;
  request.attempt = attempt.attempt;
  request.nodes = static_cast<int>(attempt.nodes.size());
  request.gpus_per_node = attempt.gpus_per_node;
  request.cpus_per_node = attempt.cpus_per_node;
  request.time_limit_seconds = attempt.time_limit_seconds;
  request.attempt_dir = attempt_dir_;
  request.excluded_hosts = attempt.excluded_hosts;
  request.air_binary = air_binary_;
  request.config = config_;
  const std::string script = attempt_dir_ + "/job.sbatch";
  AIR_RETURN_IF_ERROR(env_->WriteFileAtomic(script, slurm::BatchScript(request), 0755));
  auto submitted = slurm::RunSlurm(slurm::SbatchArgv(request, script));
  if (!submitted.ok()) {
    RemoveSecretFiles();
    return submitted.status();
  }
  AIR_ASSIGN_OR_RETURN(job_id_, slurm::ParseSbatchJobId(*submitted));
  // Where a new supervisor finds the job when this one dies (DescribeDetachedAttempt, Attach).
  if (Status kept = env_->WriteFileAtomic(JobIdPath(attempt_dir_), job_id_ + "\n", 0600);
      !kept.ok()) {
    AIR_WARN("Slurm job {}: {} (a restarted supervisor cannot re-attach)", job_id_, kept.message());
  }
  scheduler_.note = fmt::format("Slurm job {} submitted ({})", job_id_, script);
  scheduler_.queued_reason = "submitted";
  return RefreshJob();
}

Status SlurmBackend::StopAll() {
  stop_requested_ = true;
  if (job_id_.empty() || job_gone_ || (job_ && job_->phase == JobPhase::kEnded)) {
    return Status::Ok();
  }
  (void)slurm::RunSlurm({"scancel", job_id_});  // fails only when the job already ended
  return Status::Ok();
}

Status SlurmBackend::KillAll() {
  stop_requested_ = true;
  if (job_id_.empty()) return Status::Ok();
  (void)slurm::RunSlurm({"scancel", "--signal=KILL", "--full", job_id_});
  (void)slurm::RunSlurm({"scancel", job_id_});
  return Status::Ok();
}

Status SlurmBackend::RefreshJob() {
  last_query_us_ = env_->MonotonicMicros();
  auto info = slurm::QueryJob(job_id_);
  if (!info.ok()) {
    if (info.status().code() != ErrorCode::kNotFound) {
      // The controller may be busy for a moment: keep the last state and ask again.
      AIR_WARN("Slurm job {}: {}", job_id_, info.status().message());
      return Status::Ok();
    }
    job_gone_ = true;
    scheduler_.queued_reason.clear();
    scheduler_.note = fmt::format("Slurm no longer knows job {}", job_id_);
    if (ended_seen_us_ == 0) ended_seen_us_ = last_query_us_;
    return Status::Ok();
  }
  job_ = *info;
  if (StartsWith(info->comment, slurm::kNodeErrorPrefix)) EndFailedNode(info->comment);
  scheduler_.queued_reason = info->phase == JobPhase::kQueued ? info->reason : "";
  if (info->phase != JobPhase::kQueued && hostnames_.empty() && !info->nodes.empty()) {
    auto hosts = slurm::RunSlurm({"scontrol", "show", "hostnames", info->nodes});
    if (hosts.ok()) {
      for (const auto& line : Split(*hosts, '\n')) {
        if (!Trim(line).empty()) hostnames_.emplace_back(Trim(line));
      }
    }
    if (hostnames_.size() != nodes_.size()) hostnames_.clear();  // a job losing nodes already
  }
  switch (info->phase) {
    case JobPhase::kQueued:
      scheduler_.note = fmt::format("Slurm job {} PENDING ({})", job_id_, info->reason);
      break;
    case JobPhase::kRunning:
      scheduler_.note = fmt::format("Slurm job {} {} on {}", job_id_, info->state, info->nodes);
      break;
    case JobPhase::kEnded:
      scheduler_.note = fmt::format("Slurm job {} ended {} (batch exit code {}, reason {})",
                                    job_id_, info->state, info->exit_code, info->reason);
      scheduler_.timed_out = StartsWith(info->state, "TIMEOUT");
      if (ended_seen_us_ == 0) ended_seen_us_ = last_query_us_;
      break;
  }
  return Status::Ok();
}

// A node that could not write the shared root said so in the job's Comment (node_entry.h): it
// is lost with that reason, naming the node and the path, and the runtime stops the rest.
void SlurmBackend::EndFailedNode(const std::string& comment) {
  const std::string message = comment.substr(std::strlen(slurm::kNodeErrorPrefix));
  int rank = -1;
  if (std::sscanf(message.c_str(), "node %d", &rank) != 1) return;
  for (Node& node : nodes_) {
    if (node.rank != rank || node.status.phase == NodePhase::kEnded || node.status.exit) continue;
    node.status.phase = NodePhase::kEnded;
    node.status.lost_reason = message;
    node.culprit = true;
  }
}

// Nodes of the job that Slurm marks down or failing ("node2"), for NODE_FAIL.
std::string SlurmBackend::FailedNodeNames() {
  if (!job_ || job_->nodes.empty()) return "";
  auto text = slurm::RunSlurm({"scontrol", "show", "node", "-o", job_->nodes});
  if (!text.ok()) return "";
  std::vector<std::string> failed;
  for (const auto& node : slurm::ParseRecords(*text)) {
    std::string state = Get(node, "State");
    if (state.find("DOWN") != std::string::npos || state.find("FAIL") != std::string::npos ||
        state.find("NOT_RESPONDING") != std::string::npos || EndsWith(state, "*")) {
      failed.push_back(Get(node, "NodeName"));
    }
  }
  return Join(failed, ",");
}

void SlurmBackend::EndLostNodes() {
  const std::string state = job_gone_ ? std::string("(unknown)") : job_->state;
  const bool node_fail = StartsWith(state, "NODE_FAIL");
  std::vector<std::string> failed;
  if (node_fail) {
    for (const auto& name : Split(FailedNodeNames(), ',')) {
      if (!name.empty()) failed.push_back(name);
    }
  }
  const std::string output = fmt::format("{}/slurm-{}.out", attempt_dir_, job_id_);
  for (Node& node : nodes_) {
    if (node.status.phase == NodePhase::kEnded) continue;
    // Where the node ran: its agent's word, else the job's node list (once Slurm has dropped a
    // failed node from it, the list no longer has every rank).
    std::string host = node.status.started ? node.status.started->host : "";
    if (host.empty() && hostnames_.size() == nodes_.size()) host = hostnames_[node.rank];
    node.status.host = host;
    const bool host_failed =
        node_fail && std::find(failed.begin(), failed.end(), host) != failed.end();
    if (node.status.exit && !host_failed) {  // a report held back until the job's end explained it
      node.status.phase = NodePhase::kEnded;
      continue;
    }
    // On a host Slurm failed (set DOWN, stopped responding) the node is lost even if its agent
    // got to report the SIGTERM that Slurm's kill began with.
    node.status.exit.reset();
    node.status.phase = NodePhase::kEnded;
    if (job_gone_) {
      node.status.lost_reason =
          fmt::format("Slurm no longer knows job {} and node {} never reported (see {})", job_id_,
                      node.rank, output);
    } else if (host_failed) {
      node.status.lost_reason =
          fmt::format("Slurm node {} failed (job {} ended NODE_FAIL: the node stopped responding)",
                      host, job_id_);
      node.status.node_lost = true;
      node.culprit = true;
    } else if (node_fail) {
      node.status.lost_reason = fmt::format("stopped by Slurm: job {} ended NODE_FAIL ({} failed)",
                                            job_id_, Join(failed, ","));
    } else if (scheduler_.timed_out) {
      node.status.lost_reason =
          fmt::format("Slurm ended job {} at its time limit (TIMEOUT)", job_id_);
    } else if (StartsWith(state, "CANCELLED") && stop_requested_) {
      node.status.lost_reason = fmt::format(
          "stopped by air (scancel of job {}) before node {} reported", job_id_, node.rank);
    } else if (StartsWith(state, "CANCELLED")) {
      node.status.lost_reason = fmt::format(
          "Slurm job {} was CANCELLED outside air (scancel, or an administrator)", job_id_);
    } else {
      node.status.lost_reason = fmt::format(
          "Slurm job {} ended {} (batch exit code {}) before node {}{} reported; see {}", job_id_,
          state, job_->exit_code, node.rank, host.empty() ? "" : " (" + host + ")", output);
    }
  }
}

Result<std::vector<NodeStatus>> SlurmBackend::Poll(int64_t wait_micros) {
  if (wait_micros > 0) env_->SleepMicros(std::min<int64_t>(wait_micros, 200'000));
  const int64_t now = env_->MonotonicMicros();
  bool newly_reported = false;
  for (Node& node : nodes_) {
    if (node.status.phase == NodePhase::kEnded) continue;
    if (!node.status.started) {
      auto started = agent::ReadNodeStarted(env_, node.started_path);
      if (started.ok()) {
        node.status.started = *started;
        node.status.phase = NodePhase::kRunning;
      }
    }
    if (!node.status.exit) {
      auto report = agent::ReadNodeExitReport(env_, node.exit_path);
      if (report.ok()) {
        node.status.exit = *report;
        node.reported_us = now;
        newly_reported = true;
      }
    }
  }
  const bool ended = job_gone_ || (job_ && job_->phase == JobPhase::kEnded);
  if (!ended && (newly_reported || now - last_query_us_ >= kQueryIntervalUs)) {
    AIR_RETURN_IF_ERROR(RefreshJob());
  }
  const bool ended_now = job_gone_ || (job_ && job_->phase == JobPhase::kEnded);
  for (Node& node : nodes_) {
    if (node.status.phase == NodePhase::kEnded || !node.status.exit) continue;
    // A node stopped by a signal air did not send (Slurm ending the job): hold its report until
    // the job's state says why, so the failure names the cause (a failed node, the time limit).
    // Released with the lost nodes (EndLostNodes), which come first. Slurm signals every process
    // of the step, so the command may die of its SIGTERM before the agent has read its own.
    const bool held = StoppedFromOutside(*node.status.exit) && !stop_requested_ &&
                      now - node.reported_us < kHeldReportMaxUs;
    if (!held) node.status.phase = NodePhase::kEnded;
  }
  if (ended_now && now - ended_seen_us_ >= kReportGraceUs) EndLostNodes();
  // The runtime names the first failure it sees: a failed node first, then other lost ones.
  auto order = [](const Node& node) {
    if (node.culprit) return 0;
    return node.status.phase == NodePhase::kEnded && !node.status.exit ? 1 : 2;
  };
  std::vector<NodeStatus> out;
  for (int rank_class = 0; rank_class < 3; ++rank_class) {
    for (const Node& node : nodes_) {
      if (order(node) == rank_class) out.push_back(node.status);
    }
  }
  return out;
}

}  // namespace air::backends
