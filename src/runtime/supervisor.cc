// The run supervisor: claim, prepare, attempts with retries, finish.
#include "runtime/supervisor.h"

#include <fmt/format.h>
#include <signal.h>
#include <sys/signalfd.h>
#include <unistd.h>

#include <cerrno>
#include <cmath>
#include <cstdlib>

#include "agent/proc.h"
#include "backends/cluster_registry.h"
#include "base/log.h"
#include "base/private_dir.h"
#include "base/process_limits.h"
#include "runtime/attempt_runner.h"
#include "runtime/daemon.h"
#include "runtime/elastic.h"
#include "runtime/layout.h"
#include "runtime/node_plan.h"
#include "runtime/prepare.h"
#include "runtime/reconcile.h"
#include "runtime/spec_codec.h"
#include "runtime/tracking_link.h"
#include "store/store.h"
#include "tracking/tracking_store.h"
#include "tracking/workload_metrics.h"

namespace air::runtime {
namespace {

// "1 retry left after it", "2 retries left after it": what a retry event says is left.
std::string RetriesLeft(int left) {
  return fmt::format("{} retr{} left after it", left, left == 1 ? "y" : "ies");
}

using store::AttemptState;
using store::RunState;

// Cancellation requests: the store's flag and termination signals to this process.
class CancelWatch {
 public:
  CancelWatch(store::Store* store, int64_t run_id) : store_(store), run_id_(run_id) {
    sigset_t set;
    sigemptyset(&set);
    for (int sig : {SIGTERM, SIGINT, SIGHUP}) sigaddset(&set, sig);
    ::sigprocmask(SIG_BLOCK, &set, nullptr);
    fd_ = ::signalfd(-1, &set, SFD_CLOEXEC | SFD_NONBLOCK);
  }
  ~CancelWatch() {
    if (fd_ >= 0) ::close(fd_);
  }
  CancelWatch(const CancelWatch&) = delete;
  CancelWatch& operator=(const CancelWatch&) = delete;

  // A reason when the run should be canceled, else "".
  std::string Check() {
    signalfd_siginfo info;
    while (fd_ >= 0 && ::read(fd_, &info, sizeof(info)) == sizeof(info)) {
      reason_ = fmt::format("the supervisor received SIG{} (pid {})",
                            sigabbrev_np(static_cast<int>(info.ssi_signo)), info.ssi_pid);
    }
    if (!reason_.empty()) return reason_;
    auto run = store_->GetRun(run_id_);
    if (run.ok() && run->cancel_requested) reason_ = "canceled by `air cancel`";
    return reason_;
  }

 private:
  store::Store* store_;
  int64_t run_id_;
  int fd_ = -1;
  std::string reason_;
};

std::string SelfExecutable() {
  auto exe = CurrentExecutable();
  return exe.ok() ? *exe : std::string();
}

// The directory holding the air executable ("" when unknown).
std::string AirExecutableDir() {
  std::string exe = SelfExecutable();
  auto slash = exe.rfind('/');
  return slash == std::string::npos ? std::string() : exe.substr(0, slash);
}

class RunSupervisor {
 public:
  RunSupervisor(store::Store* store, const SupervisorOptions& options, Env* env,
                store::RunRecord run, backends::ClusterConfig backend)
      : store_(store),
        options_(options),
        env_(env),
        layout_(options.air_home, backend.shared_root, backend.volumes_root),
        backend_config_(std::move(backend)),
        run_(std::move(run)),
        cancel_(store, run_.id),
        settings_(ReadSupervisorSettings(env)) {}

  Status Supervise() {
    if (std::string reason = cancel_.Check(); !reason.empty()) {
      return Finish(RunState::kCanceled, reason, "");
    }
    Status started = store_->TransitionRun(run_.id, RunState::kRunning,
                                           fmt::format("supervisor started (pid {})", ::getpid()),
                                           RunState::kPending);
    if (started.code() == ErrorCode::kFailedPrecondition) return Status::Ok();  // canceled
    AIR_RETURN_IF_ERROR(started);
    AIR_INFO("run {}: claimed", run_.id);
    Status outcome = DriveAttempts(/*adopt=*/false);
    if (!outcome.ok()) {
      return Finish(RunState::kInternalError, "air failed: " + outcome.message(),
                    outcome.message());
    }
    return Status::Ok();
  }

  // Drives a run whose dead supervisor left its attempt in a scheduler (already claimed with
  // Store::AdoptRun): that attempt is adopted, then the run goes on as under its first supervisor.
  Status Adopt() {
    Status outcome = DriveAttempts(/*adopt=*/true);
    if (!outcome.ok()) {
      return Finish(RunState::kInternalError, "air failed: " + outcome.message(),
                    outcome.message());
    }
    return Status::Ok();
  }

 private:
  // Ends the run; a run someone else already ended (a race with `air cancel` on a PENDING run)
  // stays as it is.
  Status Finish(RunState to, const std::string& message, const std::string& summary) {
    Status moved = store_->TransitionRun(run_.id, to, message, std::nullopt, summary);
    if (moved.code() == ErrorCode::kFailedPrecondition) return Status::Ok();
    return moved;
  }

  Result<int> FreshPort(int previous) {
    for (int tries = 0; tries < 20; ++tries) {
      AIR_ASSIGN_OR_RETURN(int port, env_->PickFreePort());
      if (port != previous) return port;
    }
    return Unavailable("could not find a free MASTER_PORT on this host");
  }

  // Prepares the run (PrepareRun) within its time limit; on failure the run is finished (FAILED,
  // TIMED_OUT or CANCELED) and `out` stays empty.
  Status Prepare(const spec::WorkloadSpec& spec, std::optional<PreparedRun>* out) {
    const double prepare_seconds = settings_.prepare_timeout_minutes * settings_.minute_seconds;
    const int64_t prepare_deadline =
        env_->MonotonicMicros() + static_cast<int64_t>(std::llround(prepare_seconds * 1e6));
    bool prepare_timed_out = false;
    auto stop_preparing = [&] {
      if (!cancel_.Check().empty()) return true;
      if (env_->MonotonicMicros() >= prepare_deadline) prepare_timed_out = true;
      return prepare_timed_out;
    };
    auto prepared = PrepareRun(spec, run_, layout_, env_, stop_preparing);
    if (prepared.ok() && stop_preparing()) prepared = Cancelled("preparation was stopped");
    if (!prepared.ok()) {
      if (std::string reason = cancel_.Check(); !reason.empty()) {
        return Finish(RunState::kCanceled, reason, "");
      }
      if (prepare_timed_out) {
        std::string why = fmt::format(
            "preparing the run (snapshot, environment) took longer than its limit of {} "
            "minute(s) (AIR_PREPARE_TIMEOUT_MINUTES{}); no command was started",
            settings_.prepare_timeout_minutes,
            settings_.minute_seconds != 60
                ? fmt::format(", a minute being {} s under AIR_TEST_MINUTE_SECONDS",
                              settings_.minute_seconds)
                : "");
        return Finish(RunState::kTimedOut, why, why);
      }
      return Finish(
          RunState::kFailed, "preparing the run failed; no command was started",
          "preparing the run failed (no command was started): " + prepared.status().message());
    }
    *out = std::move(*prepared);
    return Status::Ok();
  }

  // The attempt's size on its MLflow run; a tracking server that cannot be reached costs a
  // warning, not the run.
  void TagAttemptSize(int attempt, int nodes) {
    Status tagged = TagAttemptInTracking(store_, run_.id, attempt, nodes, layout_.home(), env_);
    if (!tagged.ok()) {
      AIR_WARN("run {}: could not tag attempt {}'s size on its tracking run: {}", run_.id, attempt,
               tagged.message());
    }
  }

  // Hang detection for each attempt (hang_timeout_minutes): node output, and the metrics the
  // workload logs when its tracking run is in air's store.
  HangWatchOptions HangOptions(double minutes) {
    HangWatchOptions hang;
    hang.timeout_us = std::llround(minutes * settings_.minute_seconds * 1e6);
    hang.timeout_text = fmt::format("hang_timeout_minutes: {}", minutes);
    if (settings_.minute_seconds != 60) {
      hang.timeout_text += fmt::format(", a minute being {} s under AIR_TEST_MINUTE_SECONDS",
                                       settings_.minute_seconds);
    }
    tracking::TrackingStore tracking(store_->db(), env_);
    auto link = tracking.GetLink(run_.id);
    if (link.ok() && *link && (*link)->tracking_uri.empty()) {
      hang.metric_marker = [this, run_uuid = (*link)->mlflow_run_id] {
        auto marker = tracking::WorkloadMetricMarker(store_->db(), run_uuid);
        return marker.ok() ? *marker : std::string();
      };
    }
    return hang;
  }

  // The attempt a dead supervisor left open (the newest one without an end).
  Result<store::AttemptRecord> OpenAttempt() {
    AIR_ASSIGN_OR_RETURN(std::vector<store::AttemptRecord> attempts, store_->ListAttempts(run_.id));
    if (attempts.empty() || attempts.back().ended_us) {
      return FailedPrecondition(fmt::format("run {} has no open attempt to adopt", run_.id));
    }
    return attempts.back();
  }

  // Attempts from 0 (or, when `adopt`, from the open attempt a dead supervisor left, whose
  // scheduler job is adopted rather than launched) to the run's end.
  Status DriveAttempts(bool adopt) {
    AIR_ASSIGN_OR_RETURN(spec::WorkloadSpec spec, SpecFromJsonText(run_.spec_json));
    // The secret values are resolved into this process: no core dump may write them to disk.
    if (!spec.secrets.empty()) DisableCoreDumps();
    std::optional<PreparedRun> prepared;
    int first = 0;
    std::optional<store::AttemptRecord> adopted;
    if (adopt) {
      AIR_ASSIGN_OR_RETURN(adopted, OpenAttempt());
      first = adopted->attempt;
    } else {
      AIR_RETURN_IF_ERROR(Prepare(spec, &prepared));
      if (!prepared) return Status::Ok();  // finished
    }
    if (prepared) AIR_INFO("run {}: prepared", run_.id);
    AttemptSettings attempt_settings;
    attempt_settings.grace_seconds = settings_.grace_seconds;
    attempt_settings.inherited_path = env_->GetEnv("PATH").value_or("");
    attempt_settings.air_bin_dir = AirExecutableDir();
    attempt_settings.air_executable = SelfExecutable();
    int port = 0;
    // The attempt's size: every node at first; after nodes were lost, the ones left
    // (compute.min_nodes; docs/state-machine.md, "Elastic retries").
    int nodes = spec.compute.num_nodes;
    if (adopted && adopted->num_nodes > 0) nodes = adopted->num_nodes;
    std::vector<std::string> excluded_hosts;
    for (int attempt = first; attempt <= run_.max_retries; ++attempt) {
      const spec::WorkloadSpec sized = SizedSpec(spec, nodes);
      const bool adopting = adopted && attempt == first;
      if (std::string reason = cancel_.Check(); !reason.empty() && !adopting) {
        return Finish(RunState::kCanceled, reason, "");
      }
      if (!adopting && !prepared) {
        AIR_RETURN_IF_ERROR(Prepare(spec, &prepared));
        if (!prepared) return Status::Ok();  // finished
      }
      PreparedRun paths;  // an adopted attempt's plan: only the paths it was launched with
      if (adopting) {
        for (int rank = 0; rank < nodes; ++rank) {
          paths.node_workdirs.push_back(layout_.NodeWorkDir(run_.id, rank));
        }
      } else if (attempt > 0) {
        // A retry starts where attempt 0 did: fresh node working directories.
        auto dirs = PrepareNodeDirectories(sized, run_, layout_, env_);
        if (!dirs.ok()) {
          return Finish(
              RunState::kFailed,
              fmt::format("preparing attempt {} failed; it was not started", attempt),
              fmt::format("preparing attempt {} failed: {}", attempt, dirs.status().message()));
        }
        prepared->node_workdirs = std::move(*dirs);
      }
      if (adopting) {
        port = adopted->master_port;
      } else {
        AIR_ASSIGN_OR_RETURN(port, FreshPort(port));
        AIR_RETURN_IF_ERROR(MakePrivateDir(layout_.AttemptDir(run_.id, attempt), env_));
        AIR_RETURN_IF_ERROR(store_->StartAttempt(run_.id, attempt, port, nodes));
        TagAttemptSize(attempt, nodes);
      }
      attempt_settings.attempt = attempt;
      attempt_settings.master_port = port;
      if (!adopting) {
        AttemptTracking tracking = PrepareTrackingForAttempt(store_, layout_.home(), run_.id,
                                                             backend_config_.tracking, env_);
        attempt_settings.tracking_env = std::move(tracking.env);
        attempt_settings.tracking_secret_env = std::move(tracking.secret_env);
        if (!tracking.warning.empty()) {
          AIR_RETURN_IF_ERROR(store_->AppendEvent(run_.id, "tracking", tracking.warning, attempt));
        }
      }
      backends::AttemptToLaunch plan =
          PlanAttempt(sized, run_, layout_, adopting ? paths : *prepared, attempt_settings);
      plan.excluded_hosts = excluded_hosts;
      AIR_ASSIGN_OR_RETURN(auto backend, backends::CreateClusterBackend(
                                             backend_config_, options_.agent_binary, env_));
      AttemptRunnerOptions runner_options;
      runner_options.run_id = run_.id;
      runner_options.attempt = attempt;
      runner_options.grace_seconds = settings_.grace_seconds;
      runner_options.attach = adopting;
      if (run_.timeout_minutes) {
        double seconds = *run_.timeout_minutes * settings_.minute_seconds;
        // An adopted attempt keeps the deadline it had from its start.
        const int64_t elapsed = adopting ? env_->NowMicros() - adopted->started_us : 0;
        runner_options.deadline_monotonic_us =
            env_->MonotonicMicros() + static_cast<int64_t>(std::llround(seconds * 1e6)) - elapsed;
        plan.time_limit_seconds = static_cast<int64_t>(std::ceil(seconds));
        runner_options.timeout_text = fmt::format("timeout_minutes: {}", *run_.timeout_minutes);
        if (settings_.minute_seconds != 60) {
          runner_options.timeout_text += fmt::format(
              ", a minute being {} s under AIR_TEST_MINUTE_SECONDS", settings_.minute_seconds);
        }
      }
      runner_options.cancel_requested = [this] { return cancel_.Check(); };
      if (spec.hang_timeout_minutes) runner_options.hang = HangOptions(*spec.hang_timeout_minutes);
      AttemptRunner runner(store_, backend.get(), layout_, env_, runner_options);
      AIR_INFO("run {}: {} attempt {} on port {}", run_.id, adopting ? "adopting" : "launching",
               attempt, port);
      auto outcome = runner.Run(plan);
      backend.reset();  // reaps and, as a last resort, kills whatever is left
      if (!outcome.ok()) {
        (void)store_->FinishAttempt(run_.id, attempt, AttemptState::kInternalError,
                                    outcome.status().message());
        return outcome.status();
      }
      AIR_RETURN_IF_ERROR(
          store_->FinishAttempt(run_.id, attempt, outcome->state, outcome->summary));
      std::string where = fmt::format("attempt {} of {}", attempt, run_.max_retries + 1);
      switch (outcome->state) {
        case AttemptState::kSucceeded:
          return Finish(RunState::kSucceeded, fmt::format("every node exited 0 ({})", where), "");
        case AttemptState::kFailed:
          if (outcome->hung) {  // on_hang: fail ends the run; restart retries it
            if (spec.on_hang == spec::OnHang::kFail || attempt >= run_.max_retries) {
              return Finish(RunState::kFailed,
                            fmt::format("{} hung; {}", where,
                                        spec.on_hang == spec::OnHang::kFail ? "on_hang: fail"
                                                                            : "no retries left"),
                            fmt::format("{}: {}", where, outcome->summary));
            }
            AIR_RETURN_IF_ERROR(store_->AppendEvent(
                run_.id, "retry",
                fmt::format("attempt {} hung; restarting the whole workload as attempt {} "
                            "(on_hang: restart; {})",
                            attempt, attempt + 1, RetriesLeft(run_.max_retries - attempt - 1)),
                attempt));
            continue;
          }
          if (spec.compute.min_nodes < spec.compute.num_nodes && !outcome->lost_nodes.empty()) {
            const ElasticStep step = NextElasticStep(spec, attempt, nodes, *outcome);
            if (!step.retry) {
              return Finish(RunState::kFailed, step.message,
                            fmt::format("{}\n{}", step.message, outcome->summary));
            }
            if (attempt < run_.max_retries) {
              nodes = step.nodes;
              for (const LostNode& lost : outcome->lost_nodes) {
                if (!lost.host.empty()) excluded_hosts.push_back(lost.host);
              }
              AIR_RETURN_IF_ERROR(store_->AppendEvent(
                  run_.id, "retry",
                  fmt::format("{}; retrying as attempt {} ({})", step.message, attempt + 1,
                              RetriesLeft(run_.max_retries - attempt - 1)),
                  attempt));
              continue;
            }
          }
          if (attempt < run_.max_retries) {
            AIR_RETURN_IF_ERROR(store_->AppendEvent(
                run_.id, "retry",
                fmt::format("attempt {} failed; retrying the whole workload as attempt {} ({})",
                            attempt, attempt + 1, RetriesLeft(run_.max_retries - attempt - 1)),
                attempt));
            continue;
          }
          return Finish(RunState::kFailed, fmt::format("{} failed; no retries left", where),
                        fmt::format("{}: {}", where, outcome->summary));
        case AttemptState::kTimedOut:
          return Finish(RunState::kTimedOut, outcome->summary,
                        fmt::format("{}: {}", where, outcome->summary));
        case AttemptState::kCanceled:
          return Finish(RunState::kCanceled, outcome->summary, "");
        case AttemptState::kRunning:
        case AttemptState::kInternalError:
          return Internal(fmt::format("{} ended in an unexpected state", where));
      }
    }
    return Internal("the retry loop ended without an outcome");
  }

  store::Store* store_;
  const SupervisorOptions& options_;
  Env* env_;
  Layout layout_;
  backends::ClusterConfig backend_config_;
  store::RunRecord run_;
  CancelWatch cancel_;
  SupervisorSettings settings_;
};

}  // namespace

SupervisorSettings ReadSupervisorSettings(Env* env) {
  SupervisorSettings settings;
  if (auto v = env->GetEnv("AIR_TEST_MINUTE_SECONDS"); v && !v->empty()) {
    double seconds = std::strtod(v->c_str(), nullptr);
    if (seconds > 0) settings.minute_seconds = seconds;
  }
  if (auto v = env->GetEnv("AIR_PREPARE_TIMEOUT_MINUTES"); v && !v->empty()) {
    double minutes = std::strtod(v->c_str(), nullptr);
    if (minutes > 0) settings.prepare_timeout_minutes = minutes;
  }
  if (auto v = env->GetEnv("AIR_STOP_GRACE_SECONDS"); v && !v->empty()) {
    long seconds = std::strtol(v->c_str(), nullptr, 10);
    if (seconds >= 0 && seconds <= 3600) settings.grace_seconds = static_cast<int>(seconds);
  }
  return settings;
}

Status SuperviseRun(int64_t run_id, const SupervisorOptions& options, Env* env) {
  UsePrivateUmask();  // everything under AIR_HOME is private (base/process_limits.h)
  Layout layout(options.air_home);
  AIR_ASSIGN_OR_RETURN(auto store, store::Store::Open(layout.DbPath(), env));
  AIR_ASSIGN_OR_RETURN(store::RunRecord run, store->GetRun(run_id));
  if (store::IsTerminal(run.state)) {
    return FinishTrackingRun(store.get(), run, options.air_home, env);
  }
  const bool adopt = options.adopt_from_pid > 0;
  auto self = agent::ReadProcStat(::getpid());
  const int64_t ticks = self ? static_cast<int64_t>(self->start_ticks) : 0;
  if (adopt) {
    // Exactly one adopter wins; the others (and a supervisor that is alive after all) leave
    // the run alone.
    if (SupervisorAlive(run)) {
      return FailedPrecondition(
          fmt::format("run {}: its supervisor (pid {}) is alive", run_id, *run.supervisor_pid));
    }
    Status claimed = store->AdoptRun(
        run_id, options.adopt_from_pid, ::getpid(), ticks,
        fmt::format("supervisor pid {} re-attached: supervisor pid {} was gone and its attempt "
                    "lives on in the scheduler",
                    ::getpid(), options.adopt_from_pid));
    if (claimed.code() == ErrorCode::kFailedPrecondition) return Status::Ok();
    AIR_RETURN_IF_ERROR(claimed);
  } else if (run.state != RunState::kPending) {
    return FailedPrecondition(fmt::format("run {} is {}: it already has a supervisor (pid {})",
                                          run_id, store::RunStateName(run.state),
                                          run.supervisor_pid.value_or(0)));
  }
  if (!adopt) AIR_RETURN_IF_ERROR(store->SetSupervisor(run_id, ::getpid(), ticks));
  SupervisorOptions resolved = options;
  if (resolved.agent_binary.empty()) resolved.agent_binary = SelfExecutable();
  // The run's backend (recorded at submit) with today's settings from AIR_HOME/config.yaml.
  auto backend = backends::LoadClusterConfig(options.air_home, run.backend, env);
  if (!backend.ok()) {
    return store->TransitionRun(run_id, RunState::kFailed,
                                "the backend configuration is unusable; no command was started",
                                std::nullopt, backend.status().message());
  }
  RunSupervisor supervisor(store.get(), resolved, env, std::move(run), std::move(*backend));
  Status supervised = adopt ? supervisor.Adopt() : supervisor.Supervise();
  // The tracking run's status follows the air run's terminal state.
  if (auto ended = store->GetRun(run_id); ended.ok() && store::IsTerminal(ended->state)) {
    if (Status tracked = FinishTrackingRun(store.get(), *ended, options.air_home, env);
        !tracked.ok()) {
      AIR_WARN("run {}: could not set its tracking run's status: {}", run_id, tracked.message());
    }
  }
  return supervised;
}

}  // namespace air::runtime
