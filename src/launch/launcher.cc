// RunLaunch: rendezvous of the nodes' air launch processes, attempts, restarts, the summary.
#include "launch/launcher.h"

#include <fmt/format.h>
#include <signal.h>
#include <unistd.h>

#include <chrono>
#include <memory>
#include <nlohmann/json.hpp>
#include <optional>

#include "base/strings.h"
#include "engine/parallel/tcp_store.h"
#include "launch/worker_group.h"

namespace air::launch {
namespace {

using engine::parallel::TcpStoreClient;
using engine::parallel::TcpStoreServer;

void Say(const std::string& message) { fmt::print(stderr, "air launch: {}\n", message); }

std::string Hostname() {
  char buf[256] = {};
  ::gethostname(buf, sizeof(buf) - 1);
  return buf;
}

std::chrono::milliseconds Millis(double seconds) {
  return std::chrono::milliseconds(static_cast<int64_t>(seconds * 1000));
}

sigset_t StopSignals() {
  sigset_t set;
  sigemptyset(&set);
  for (int sig : {SIGINT, SIGTERM, SIGHUP, SIGQUIT}) sigaddset(&set, sig);
  return set;
}

// kFailed may restart (a worker failed); kAborted may not (a launcher stopped or broke, so it
// will not join another attempt).
enum class Outcome { kSucceeded, kFailed, kAborted, kSignaled };

struct AttemptResult {
  Outcome outcome = Outcome::kSucceeded;
  std::string first_failure;  // as recorded in the store by the node that saw it
  int signal = 0;
};

class Agent {
 public:
  Agent(LaunchOptions options, Env* env) : o_(std::move(options)), env_(env) {}
  Result<int> Run();

 private:
  std::string Key(int attempt, const std::string& what) const {
    return fmt::format("/air_launch/attempt_{}/{}", attempt, what);
  }
  std::string NodeKey(int attempt, const std::string& what, int node) const {
    return Key(attempt, fmt::format("{}/{}", what, node));
  }
  std::vector<std::string> AllNodes(int attempt, const std::string& what) const {
    std::vector<std::string> keys;
    for (int n = 0; n < o_.nnodes; ++n) keys.push_back(NodeKey(attempt, what, n));
    return keys;
  }
  Status Connect();
  Status JoinAttempt(int attempt);
  Result<AttemptResult> RunAttempt(int attempt);
  // Watches a started attempt until it succeeds everywhere, fails somewhere or is signalled.
  Result<AttemptResult> MonitorAttempt(int attempt, WorkerGroup& group);
  std::string DescribeFailure(const WorkerGroup& group, const WorkerExit& exit) const;
  // Records `failure` unless another one was first; returns the first.
  std::string RecordFailure(int attempt, const std::string& failure);
  // The same for a launcher that stops or breaks: no node restarts the group without it.
  std::string RecordAbort(int attempt, const std::string& failure);
  // The outcome another node recorded for `attempt`, if any.
  Result<std::optional<AttemptResult>> RecordedOutcome(int attempt);
  // A stop signal that arrived within `wait` (0: none pending), or 0.
  int NextSignal(std::chrono::milliseconds wait);
  void Leave(int attempt);

  LaunchOptions o_;
  Env* env_;
  std::string host_ = Hostname();
  std::string base_dir_;
  sigset_t signals_ = StopSignals();
  std::unique_ptr<TcpStoreServer> server_;
  std::unique_ptr<TcpStoreClient> store_;
  int stop_signal_ = 0;  // the stop signal that ended this launcher, if one did
};

int Agent::NextSignal(std::chrono::milliseconds wait) {
  timespec ts{static_cast<time_t>(wait.count() / 1000),
              static_cast<long>((wait.count() % 1000) * 1'000'000)};
  const int sig = ::sigtimedwait(&signals_, nullptr, &ts);
  return sig > 0 ? sig : 0;
}

Status Agent::Connect() {
  const std::string at = fmt::format("{}:{}", o_.master_addr, o_.master_port);
  if (o_.node_rank == 0) {
    auto server = TcpStoreServer::Start(o_.master_port);
    if (!server.ok()) return server.status().WithContext("--master-port");
    server_ = std::move(*server);
  }
  // In rounds of a second, so that a stop signal ends the wait for node 0.
  const auto deadline = std::chrono::steady_clock::now() + Millis(o_.join_timeout_s);
  while (true) {
    const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(
        deadline - std::chrono::steady_clock::now());
    auto client = TcpStoreClient::Connect(
        o_.master_addr, o_.master_port,
        std::max(std::chrono::milliseconds(0), std::min(left, std::chrono::milliseconds(1000))),
        Millis(std::max(30.0, o_.stop_grace_s + 10)));
    if (client.ok()) {
      store_ = std::move(*client);
      return Status::Ok();
    }
    const bool retry = client.status().code() == ErrorCode::kDeadlineExceeded &&
                       std::chrono::steady_clock::now() < deadline;
    if (!retry) {
      const std::string what = fmt::format(
          "node {} could not join node 0's air launch at {} (--master-addr/--master-port)",
          o_.node_rank, at);
      if (client.status().code() != ErrorCode::kDeadlineExceeded) {
        return client.status().WithContext(what);
      }
      return DeadlineExceeded(fmt::format("{}: nothing answered within --join-timeout {} s ({})",
                                          what, o_.join_timeout_s, client.status().message()));
    }
    if (int sig = NextSignal(std::chrono::milliseconds(0)); sig != 0) {
      stop_signal_ = sig;
      return Cancelled(fmt::format("got SIG{} while waiting for node 0's air launch at {}",
                                   sigabbrev_np(sig), at));
    }
  }
}

Status Agent::JoinAttempt(int attempt) {
  AIR_RETURN_IF_ERROR(store_->Set(NodeKey(attempt, "join", o_.node_rank), host_));
  std::vector<std::string> keys = AllNodes(attempt, "join");
  // Waits for every node, or for another node's failure (node 0's join timeout, say).
  const auto deadline = std::chrono::steady_clock::now() + Millis(o_.join_timeout_s);
  while (true) {
    AIR_ASSIGN_OR_RETURN(bool all_joined, store_->Check(keys));
    if (all_joined) return Status::Ok();
    AIR_ASSIGN_OR_RETURN(std::optional<std::string> failed, store_->TryGet(Key(attempt, "failed")));
    if (failed) return FailedPrecondition(*failed);
    if (std::chrono::steady_clock::now() >= deadline) break;
    if (int sig = NextSignal(std::chrono::milliseconds(20)); sig != 0) {
      stop_signal_ = sig;
      return Cancelled(fmt::format("got SIG{} while waiting for the other nodes to join attempt {}",
                                   sigabbrev_np(sig), attempt));
    }
  }
  std::vector<std::string> missing;
  for (int n = 0; n < o_.nnodes; ++n) {
    AIR_ASSIGN_OR_RETURN(bool joined, store_->Check({keys[static_cast<size_t>(n)]}));
    if (!joined) missing.push_back(std::to_string(n));
  }
  return DeadlineExceeded(fmt::format(
      "nodes {} of --nnodes {} did not join attempt {} within {} s (--join-timeout); start "
      "`air launch --node-rank N` on every node with the same --nnodes, --master-addr {} and "
      "--master-port {}",
      Join(missing, ", "), o_.nnodes, attempt, o_.join_timeout_s, o_.master_addr, o_.master_port));
}

std::string Agent::DescribeFailure(const WorkerGroup& group, const WorkerExit& exit) const {
  std::string text =
      fmt::format("rank {} (local rank {}, node {}) on host {}: {} (pid {})", exit.rank,
                  exit.local_rank, o_.node_rank, host_, exit.result.Describe(), exit.pid);
  if (exit.result.signal == SIGKILL) text += ", probably out of memory or killed";
  const std::string error_file = group.ErrorFile(exit.local_rank);
  if (env_->FileExists(error_file)) {
    text += fmt::format("; error file: {}", error_file);
    // torch's @record writes {"message": {"message": "...", "extraInfo": {...}}}.
    Result<std::string> body = env_->ReadFile(error_file);
    if (body.ok()) {
      nlohmann::json j = nlohmann::json::parse(*body, nullptr, false);
      if (j.is_object() && j.contains("message")) {
        const nlohmann::json& m = j["message"];
        std::string message = m.is_object() && m.contains("message") && m["message"].is_string()
                                  ? m["message"].get<std::string>()
                              : m.is_string() ? m.get<std::string>()
                                              : std::string();
        if (!message.empty()) text += fmt::format(" ({})", message);
      }
    }
  }
  if (const std::string log = group.LogFile(exit.local_rank); !log.empty()) {
    text += fmt::format("; log: {}", log);
  }
  return text;
}

std::string Agent::RecordFailure(int attempt, const std::string& failure) {
  Result<std::string> first = store_->CompareSet(Key(attempt, "failed"), "", failure);
  return first.ok() ? *first : failure;
}

std::string Agent::RecordAbort(int attempt, const std::string& failure) {
  (void)store_->Set(Key(attempt, "aborted"), host_);
  return RecordFailure(attempt, failure);
}

Result<std::optional<AttemptResult>> Agent::RecordedOutcome(int attempt) {
  AIR_ASSIGN_OR_RETURN(std::optional<std::string> failed, store_->TryGet(Key(attempt, "failed")));
  if (!failed) return std::optional<AttemptResult>();
  AIR_ASSIGN_OR_RETURN(bool aborted, store_->Check({Key(attempt, "aborted")}));
  return std::optional<AttemptResult>(
      AttemptResult{aborted ? Outcome::kAborted : Outcome::kFailed, *failed, 0});
}

void Agent::Leave(int attempt) { (void)store_->Set(NodeKey(attempt, "left", o_.node_rank), host_); }

Result<AttemptResult> Agent::RunAttempt(int attempt) {
  AIR_RETURN_IF_ERROR(JoinAttempt(attempt));
  const std::string attempt_dir =
      fmt::format("{}/attempt_{}/node_{}", base_dir_, attempt, o_.node_rank);
  Result<WorkerGroup> started = WorkerGroup::Start(o_, attempt, attempt_dir, env_);
  if (!started.ok()) {
    RecordFailure(attempt, fmt::format("node {} on host {} could not start its workers: {}",
                                       o_.node_rank, host_, started.status().message()));
    Leave(attempt);
    return started.status();
  }
  Result<AttemptResult> result = MonitorAttempt(attempt, *started);
  // A launcher error (not a worker's): stop the workers here; Run tells the other nodes.
  if (!result.ok()) started->Stop(o_.stop_grace_s, env_);
  return result;
}

Result<AttemptResult> Agent::MonitorAttempt(int attempt, WorkerGroup& group) {
  bool local_done = false;
  const auto interval = Millis(o_.monitor_interval_s);
  while (true) {
    if (const int sig = NextSignal(interval); sig != 0) {
      Say(fmt::format("got {}; stopping the workers", sigabbrev_np(sig)));
      AttemptResult r{Outcome::kSignaled,
                      RecordAbort(attempt, fmt::format("node {}'s air launch on host {} got SIG{}",
                                                       o_.node_rank, host_, sigabbrev_np(sig))),
                      sig};
      group.Stop(o_.stop_grace_s, env_);
      Leave(attempt);
      return r;
    }
    if (!local_done) {
      AIR_ASSIGN_OR_RETURN(std::vector<WorkerExit> exits, group.Poll());
      for (const WorkerExit& e : exits) {
        if (e.result.succeeded()) continue;
        AttemptResult r{Outcome::kFailed, RecordFailure(attempt, DescribeFailure(group, e)), 0};
        group.Stop(o_.stop_grace_s, env_);
        Leave(attempt);
        return r;
      }
      if (group.AllEnded()) {
        local_done = true;
        AIR_RETURN_IF_ERROR(store_->Set(NodeKey(attempt, "done", o_.node_rank), host_));
      }
    }
    Result<std::optional<AttemptResult>> recorded = RecordedOutcome(attempt);
    if (!recorded.ok()) {
      return recorded.status().WithContext("node 0's air launch is gone; workers stopped");
    }
    if (*recorded) {
      group.Stop(o_.stop_grace_s, env_);
      Leave(attempt);
      return **recorded;
    }
    if (local_done) {
      AIR_ASSIGN_OR_RETURN(bool all_done, store_->Check(AllNodes(attempt, "done")));
      if (all_done) {
        Leave(attempt);
        return AttemptResult{};
      }
    }
  }
}

Result<int> Agent::Run() {
  ::pthread_sigmask(SIG_BLOCK, &signals_, nullptr);  // before the store's thread starts
  base_dir_ =
      o_.log_dir.empty() ? fmt::format("/tmp/air_launch_{}_{}", o_.run_id, ::getpid()) : o_.log_dir;
  if (Status connected = Connect(); !connected.ok()) {
    if (stop_signal_ != 0) {
      Say(connected.message());
      return 128 + stop_signal_;
    }
    return connected;
  }
  if (o_.nproc_per_node > 1 && !env_->GetEnv("OMP_NUM_THREADS")) {
    Say("setting OMP_NUM_THREADS=1 for each worker (it was unset and a node runs several); set "
        "it yourself to tune");
  }
  AttemptResult last;
  Status error = Status::Ok();
  int attempt = 0;
  for (;; ++attempt) {
    Result<AttemptResult> ran = RunAttempt(attempt);
    if (!ran.ok()) {
      // This launcher's own error (the store, the spawner): the other nodes learn it from the
      // store rather than only seeing node 0's store vanish.
      error = ran.status();
      (void)RecordAbort(attempt, fmt::format("node {}'s air launch on host {} failed: {}",
                                             o_.node_rank, host_, error.message()));
      Leave(attempt);
      break;
    }
    last = *ran;
    if (last.outcome != Outcome::kFailed || attempt >= o_.max_restarts) break;
    Say(fmt::format("attempt {} failed: {}; restarting the worker group ({} of --max-restarts {})",
                    attempt, last.first_failure, attempt + 1, o_.max_restarts));
  }
  if (server_) {
    // Keep the store up until every node that joined has read the outcome.
    std::vector<std::string> left;
    for (int n = 0; n < o_.nnodes; ++n) {
      Result<bool> joined = store_->Check({NodeKey(attempt, "join", n)});
      if (joined.ok() && *joined) left.push_back(NodeKey(attempt, "left", n));
    }
    // A stop signal ends this wait too: the outcome is already in the store.
    const auto until = std::chrono::steady_clock::now() + Millis(o_.stop_grace_s + 10);
    while (std::chrono::steady_clock::now() < until) {
      Result<bool> all_left = store_->Check(left);
      if (!all_left.ok() || *all_left || NextSignal(std::chrono::milliseconds(20)) != 0) break;
    }
  }
  if (!error.ok()) {
    if (stop_signal_ == 0) return error;
    Say(error.message());
    return 128 + stop_signal_;
  }
  if (last.outcome == Outcome::kSucceeded) {
    if (o_.log_dir.empty()) (void)env_->RemoveAll(base_dir_);
    return 0;
  }
  Say(fmt::format("the worker group failed in attempt {} ({} restart{} of --max-restarts {})",
                  attempt, attempt, attempt == 1 ? "" : "s", o_.max_restarts));
  Say("first failure: " + last.first_failure);
  return last.outcome == Outcome::kSignaled ? 128 + last.signal : 1;
}

}  // namespace

Result<int> RunLaunch(LaunchOptions options, Env* env) {
  AIR_RETURN_IF_ERROR(ResolveLaunchOptions(env, options));
  Agent agent(std::move(options), env);
  return agent.Run();
}

}  // namespace air::launch
