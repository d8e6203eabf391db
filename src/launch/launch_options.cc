// LaunchOptions validation and the worker environment (torchrun's contract).
#include "launch/launch_options.h"

#include <fmt/format.h>

#include <random>

namespace air::launch {
namespace {

std::string RandomRunId() {
  std::random_device rd;
  std::uniform_int_distribution<uint32_t> dist;
  return fmt::format("{:08x}-{:04x}-{:04x}-{:04x}-{:08x}{:04x}", dist(rd), dist(rd) & 0xffff,
                     (dist(rd) & 0x0fff) | 0x4000, (dist(rd) & 0x3fff) | 0x8000, dist(rd),
                     dist(rd) & 0xffff);
}

}  // namespace

Status ResolveLaunchOptions(Env* env, LaunchOptions& o) {
  if (o.command.empty()) {
    return InvalidArgument(
        "no training script: give the script (or, with --no-python, the program) and its "
        "arguments after the options, e.g. `air launch --nproc-per-node 2 train.py`");
  }
  if (o.no_python && o.module) {
    return InvalidArgument("--no-python and -m/--module exclude each other");
  }
  if (o.standalone) {
    if (o.nnodes != 1 || o.node_rank != 0) {
      return InvalidArgument(fmt::format(
          "--standalone runs one node: --nnodes {} --node-rank {} cannot go with it (drop "
          "--standalone and give --master-addr/--master-port for several nodes)",
          o.nnodes, o.node_rank));
    }
    o.master_addr = "localhost";
    AIR_ASSIGN_OR_RETURN(o.master_port, env->PickFreePort());
    o.run_id = RandomRunId();
  }
  if (o.nnodes < 1) return InvalidArgument(fmt::format("--nnodes {}: expected >= 1", o.nnodes));
  if (o.node_rank < 0 || o.node_rank >= o.nnodes) {
    return InvalidArgument(
        fmt::format("--node-rank {} is not valid with --nnodes {}: nodes are 0..{}", o.node_rank,
                    o.nnodes, o.nnodes - 1));
  }
  if (o.nproc_per_node < 1) {
    return InvalidArgument(fmt::format("--nproc-per-node {}: expected >= 1", o.nproc_per_node));
  }
  if (o.master_port < 1 || o.master_port > 65535) {
    return InvalidArgument(
        fmt::format("--master-port {}: expected a TCP port 1-65535", o.master_port));
  }
  if (o.master_addr.empty()) return InvalidArgument("--master-addr is empty");
  if (o.max_restarts < 0) {
    return InvalidArgument(fmt::format("--max-restarts {}: expected >= 0", o.max_restarts));
  }
  if (o.monitor_interval_s <= 0) {
    return InvalidArgument(
        fmt::format("--monitor-interval {}: expected > 0 seconds", o.monitor_interval_s));
  }
  if (o.stop_grace_s < 0) {
    return InvalidArgument(fmt::format("--stop-grace {}: expected >= 0 seconds", o.stop_grace_s));
  }
  if (o.join_timeout_s <= 0) {
    return InvalidArgument(
        fmt::format("--join-timeout {}: expected > 0 seconds", o.join_timeout_s));
  }
  return Status::Ok();
}

std::vector<std::string> WorkerArgv(const LaunchOptions& o) {
  if (o.no_python) return o.command;
  std::vector<std::string> argv = {"python3", "-u"};
  if (o.module) argv.push_back("-m");
  argv.insert(argv.end(), o.command.begin(), o.command.end());
  return argv;
}

std::vector<std::pair<std::string, std::string>> WorkerEnvironment(const LaunchOptions& o,
                                                                   int local_rank,
                                                                   int restart_count,
                                                                   const std::string& error_file,
                                                                   Env* inherited) {
  const int world = o.nnodes * o.nproc_per_node;
  const int rank = o.node_rank * o.nproc_per_node + local_rank;
  std::vector<std::pair<std::string, std::string>> env = {
      {"RANK", std::to_string(rank)},
      {"GROUP_RANK", std::to_string(o.node_rank)},
      {"ROLE_RANK", std::to_string(rank)},
      {"ROLE_NAME", "default"},
      {"LOCAL_WORLD_SIZE", std::to_string(o.nproc_per_node)},
      {"WORLD_SIZE", std::to_string(world)},
      {"GROUP_WORLD_SIZE", std::to_string(o.nnodes)},
      {"ROLE_WORLD_SIZE", std::to_string(world)},
      {"MASTER_ADDR", o.master_addr},
      {"MASTER_PORT", std::to_string(o.master_port)},
      {"TORCHELASTIC_RESTART_COUNT", std::to_string(restart_count)},
      {"TORCHELASTIC_MAX_RESTARTS", std::to_string(o.max_restarts)},
      {"TORCHELASTIC_RUN_ID", o.run_id},
      {"TORCHELASTIC_USE_AGENT_STORE", "True"},
      {"TORCH_NCCL_ASYNC_ERROR_HANDLING",
       inherited->GetEnv("TORCH_NCCL_ASYNC_ERROR_HANDLING").value_or("1")},
      {"LOCAL_RANK", std::to_string(local_rank)},
      {"TORCHELASTIC_ERROR_FILE", error_file},
      {"TORCHELASTIC_SIGNALS_TO_HANDLE", "SIGTERM,SIGINT,SIGHUP,SIGQUIT"},
  };
  if (!inherited->GetEnv("OMP_NUM_THREADS") && o.nproc_per_node > 1) {
    env.emplace_back("OMP_NUM_THREADS", "1");
  }
  return env;
}

}  // namespace air::launch
