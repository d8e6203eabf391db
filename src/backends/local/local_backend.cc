// LocalBackend: one `air agent` child per node on this machine.
#include "backends/local/local_backend.h"

#include <fcntl.h>
#include <fmt/format.h>
#include <poll.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/signalfd.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

#include "agent/proc.h"
#include "agent/process_tracker.h"
#include "base/posix_io.h"
#include "base/process_limits.h"
#include "base/strings.h"
#include "base/subprocess.h"

namespace air::backends {
namespace {

// The device ids nodes may use: CUDA_VISIBLE_DEVICES when the caller set it (an empty value
// means no GPUs, as CUDA reads it), else 0..count-1.
std::vector<std::string> AvailableDevices(Env* env, int count) {
  if (auto visible = env->GetEnv("CUDA_VISIBLE_DEVICES")) {
    std::vector<std::string> ids;
    for (const auto& part : Split(*visible, ',')) {
      std::string id(Trim(part));
      if (!id.empty()) ids.push_back(id);
    }
    return ids;
  }
  std::vector<std::string> ids;
  for (int i = 0; i < count; ++i) ids.push_back(std::to_string(i));
  return ids;
}

std::string DescribeAgentStatus(int status) {
  if (WIFEXITED(status)) return fmt::format("exit code {}", WEXITSTATUS(status));
  if (WIFSIGNALED(status)) {
    return fmt::format("signal {} ({})", WTERMSIG(status), sigabbrev_np(WTERMSIG(status)));
  }
  return "unknown status";
}

}  // namespace

int CountLocalGpus() {
  int count = 0;
  if (auto names = DefaultEnv()->ListDir("/proc/driver/nvidia/gpus"); names.ok()) {
    return static_cast<int>(names->size());
  }
  if (auto names = DefaultEnv()->ListDir("/dev"); names.ok()) {
    for (const auto& name : *names) {
      if (name.size() > 6 && StartsWith(name, "nvidia") &&
          name.find_first_not_of("0123456789", 6) == std::string::npos) {
        ++count;
      }
    }
  }
  return count;
}

ClusterCapabilities LocalBackend::DescribeCapabilities(Env* env) {
  ClusterCapabilities caps;
  caps.name = "local";
  caps.gpu_devices = AvailableDevices(env, CountLocalGpus());
  caps.gpus_available = static_cast<int>(caps.gpu_devices.size());
  caps.docker_images = false;
  caps.shared_filesystem = true;
  return caps;
}

Result<std::unique_ptr<LocalBackend>> LocalBackend::Create(Env* env, std::string agent_binary) {
  sigset_t chld;
  sigemptyset(&chld);
  sigaddset(&chld, SIGCHLD);
  if (::sigprocmask(SIG_BLOCK, &chld, nullptr) != 0) return ErrnoStatus("sigprocmask", errno);
  int fd = ::signalfd(-1, &chld, SFD_CLOEXEC | SFD_NONBLOCK);
  if (fd < 0) return ErrnoStatus("signalfd", errno);
  // Orphans of a dying agent come back to us instead of init, so KillAll can reach them.
  ::prctl(PR_SET_CHILD_SUBREAPER, 1);
  return std::unique_ptr<LocalBackend>(
      new LocalBackend(env, std::move(agent_binary), fd, DescribeCapabilities(env)));
}

LocalBackend::LocalBackend(Env* env, std::string agent_binary, int sigchld_fd,
                           ClusterCapabilities caps)
    : env_(env),
      agent_binary_(std::move(agent_binary)),
      sigchld_fd_(sigchld_fd),
      capabilities_(std::move(caps)) {}

LocalBackend::~LocalBackend() {
  (void)KillAll();
  ReapAgents();
  ::close(sigchld_fd_);
}

std::vector<std::vector<int>> SplitCpusAmongNodes(const std::vector<int>& cpus, int nodes) {
  std::vector<std::vector<int>> parts;
  const int64_t count = static_cast<int64_t>(cpus.size());
  if (nodes <= 1 || count < nodes) return parts;
  for (int64_t i = 0; i < nodes; ++i) {
    const int64_t begin = i * count / nodes, end = (i + 1) * count / nodes;
    parts.emplace_back(cpus.begin() + begin, cpus.begin() + end);
  }
  return parts;
}

Result<pid_t> LocalBackend::SpawnAgent(const NodeToLaunch& node, const std::string& cuda_devices,
                                       std::vector<int> cpus) {
  agent::NodeLaunch launch = node.launch;
  if (!cuda_devices.empty()) launch.env.emplace_back("CUDA_VISIBLE_DEVICES", cuda_devices);
  AIR_RETURN_IF_ERROR(
      env_->WriteFileAtomic(node.launch_path, agent::NodeLaunchToJson(launch), 0600));

  // The agent's environment: ours plus the secret values (the only place they travel). It
  // stays in the supervisor's process group and gets SIGTERM if the supervisor dies.
  SubprocessOptions agent;
  agent.argv = {"air", "agent", node.launch_path};
  agent.program = agent_binary_;
  agent.env_overrides = node.secret_env;
  agent.placement = ProcessPlacement::kCallerGroup;
  agent.parent_death_signal = SIGTERM;
  agent.inherit_output = true;
  agent.cpus = std::move(cpus);  // inherited by the node's command and every process it starts
  AIR_ASSIGN_OR_RETURN(RunningSubprocess started, StartSubprocess(agent));
  return static_cast<pid_t>(started.pid());
}

Status LocalBackend::Launch(const AttemptToLaunch& attempt) {
  if (!nodes_.empty()) return FailedPrecondition("LocalBackend: an attempt is already launched");
  std::vector<std::string> devices;
  if (attempt.gpus_per_node > 0) {
    devices = attempt.devices.empty() ? AvailableDevices(env_, CountLocalGpus()) : attempt.devices;
    size_t needed = static_cast<size_t>(attempt.gpus_per_node) * attempt.nodes.size();
    if (devices.size() < needed) {
      return FailedPrecondition(fmt::format(
          "{} node(s) x {} GPU(s) need {} GPUs; this host has {} (CUDA_VISIBLE_DEVICES or "
          "/proc/driver/nvidia); use a CPU_<n> accelerator_type for CPU-only local runs",
          attempt.nodes.size(), attempt.gpus_per_node, needed, devices.size()));
    }
  }
  const std::vector<std::vector<int>> node_cpus =
      SplitCpusAmongNodes(AllowedCpus(), static_cast<int>(attempt.nodes.size()));
  for (size_t i = 0; i < attempt.nodes.size(); ++i) {
    const NodeToLaunch& node = attempt.nodes[i];
    std::string cuda;
    for (int g = 0; g < attempt.gpus_per_node; ++g) {
      if (!cuda.empty()) cuda += ",";
      cuda += devices[i * attempt.gpus_per_node + g];
    }
    auto pid = SpawnAgent(node, cuda, node_cpus.empty() ? std::vector<int>{} : node_cpus[i]);
    if (!pid.ok()) {
      (void)KillAll();
      return pid.status().WithContext(fmt::format("node {}", node.launch.node_rank));
    }
    Node n;
    n.rank = node.launch.node_rank;
    n.agent_pid = *pid;
    n.started_path = node.launch.started_path;
    n.exit_path = node.launch.exit_path;
    n.tracker_path = agent::TrackerPath(node.launch);
    n.status.node_rank = n.rank;
    nodes_.push_back(std::move(n));
  }
  return Status::Ok();
}

Status LocalBackend::StopAll() {
  for (const Node& node : nodes_) {
    if (!node.reaped) ::kill(node.agent_pid, SIGTERM);
  }
  return Status::Ok();
}

Status LocalBackend::KillAll() {
  Status first = Status::Ok();
  for (Node& node : nodes_) {
    // An unreaped agent is our child: its pid cannot have been reused.
    if (!node.reaped) ::kill(node.agent_pid, SIGKILL);
    // An agent that wrote its exit report has already killed and released its node.
    if (node.reaped && node.status.exit) continue;
    Status st = KillNodeProcesses(node);
    if (first.ok() && !st.ok()) first = st;
  }
  // Orphans of killed agents were re-parented to us (child subreaper).
  for (const agent::ProcStat& p : agent::DescendantStatsOf(::getpid())) {
    agent::SignalSameProcess(p.pid, p.start_ticks, SIGKILL);
  }
  return first;
}

Status LocalBackend::KillNodeProcesses(Node& node) {
  auto info = agent::ReadTrackerInfo(env_, node.tracker_path);
  if (!info.ok()) {
    // No tracker file: the agent never started the command.
    return info.status().code() == ErrorCode::kNotFound ? Status::Ok() : info.status();
  }
  return agent::KillTrackedNode(*info, env_)
      .status()
      .WithContext(fmt::format("node {}", node.rank));
}

void LocalBackend::ReapAgents() {
  while (true) {
    int status = 0;
    pid_t pid = ::waitpid(-1, &status, WNOHANG);
    if (pid <= 0) return;
    for (Node& node : nodes_) {
      if (node.agent_pid == pid) {
        node.reaped = true;
        node.wait_status = status;
      }
    }
  }
}

void LocalBackend::Refresh(Node& node) {
  if (node.status.phase == NodePhase::kEnded) return;
  if (!node.status.started) {
    auto started = agent::ReadNodeStarted(env_, node.started_path);
    if (started.ok()) {
      node.status.started = *started;
      node.status.phase = NodePhase::kRunning;
    }
  }
  if (!node.reaped) return;
  node.status.phase = NodePhase::kEnded;
  auto report = agent::ReadNodeExitReport(env_, node.exit_path);
  if (report.ok()) {
    node.status.exit = *report;
  } else {
    node.status.lost_reason = fmt::format("the node agent (pid {}) ended with {} without a report",
                                          node.agent_pid, DescribeAgentStatus(node.wait_status));
    node.status.node_lost = true;  // a simulated node is gone when its agent is
    // Its command may survive it (in its own process group, or escaped from it): kill every
    // process the node's tracker knows.
    if (Status killed = KillNodeProcesses(node); !killed.ok()) {
      node.status.lost_reason += "; " + killed.message();
    }
  }
}

Result<std::vector<NodeStatus>> LocalBackend::Poll(int64_t wait_micros) {
  bool all_reaped = true;
  for (const Node& node : nodes_) all_reaped = all_reaped && node.reaped;
  if (!all_reaped && wait_micros > 0) {
    pollfd fd = {sigchld_fd_, POLLIN, 0};
    int rc = ::poll(&fd, 1, static_cast<int>((wait_micros + 999) / 1000));
    if (rc < 0 && errno != EINTR) return ErrnoStatus("poll", errno);
  }
  signalfd_siginfo info;
  while (::read(sigchld_fd_, &info, sizeof(info)) == sizeof(info)) {
  }
  ReapAgents();
  std::vector<NodeStatus> out;
  for (Node& node : nodes_) {
    Refresh(node);
    out.push_back(node.status);
  }
  return out;
}

}  // namespace air::backends
