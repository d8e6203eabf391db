// ReadDistEnv: the torchrun and Slurm variables, validated together.
#include "engine/parallel/dist_env.h"

#include <fmt/format.h>

#include <charconv>
#include <optional>

namespace air::engine::parallel {
namespace {

// The variable's value as an integer >= min; nullopt when unset; an error naming it when bad.
Result<std::optional<int>> IntVar(Env* env, const std::string& name, int min) {
  std::optional<std::string> text = env->GetEnv(name);
  if (!text) return std::optional<int>();
  int value = 0;
  const char* end = text->data() + text->size();
  auto [p, ec] = std::from_chars(text->data(), end, value);
  if (text->empty() || ec != std::errc() || p != end || value < min) {
    return InvalidArgument(
        fmt::format("{}={:?} is not valid: expected an integer >= {}", name, *text, min));
  }
  return std::optional<int>(value);
}

Result<int> RequiredInt(Env* env, const std::string& name, int min, const std::string& why) {
  AIR_ASSIGN_OR_RETURN(std::optional<int> v, IntVar(env, name, min));
  if (!v) return InvalidArgument(fmt::format("{} is not set ({})", name, why));
  return *v;
}

Status ReadMaster(Env* env, DistEnv& d) {
  std::optional<std::string> addr = env->GetEnv("MASTER_ADDR");
  AIR_ASSIGN_OR_RETURN(std::optional<int> port, IntVar(env, "MASTER_PORT", 1));
  if (port && *port > 65535) {
    return InvalidArgument(
        fmt::format("MASTER_PORT={} is not valid: expected a TCP port 1-65535", *port));
  }
  if (d.world_size > 1) {
    if (!addr || addr->empty()) {
      return InvalidArgument(
          fmt::format("MASTER_ADDR is not set: with WORLD_SIZE={} every rank needs the host of the "
                      "rendezvous store (rank 0's host, or the launcher's)",
                      d.world_size));
    }
    if (!port) {
      return InvalidArgument(
          fmt::format("MASTER_PORT is not set: with WORLD_SIZE={} every rank needs the port of the "
                      "rendezvous store",
                      d.world_size));
    }
  }
  d.master_addr = addr.value_or("");
  d.master_port = port.value_or(0);
  return Status::Ok();
}

Status ReadTorchrun(Env* env, DistEnv& d) {
  d.launcher = "torchrun";
  AIR_ASSIGN_OR_RETURN(d.rank, RequiredInt(env, "RANK", 0, "RANK is set, so WORLD_SIZE must be"));
  AIR_ASSIGN_OR_RETURN(d.world_size,
                       RequiredInt(env, "WORLD_SIZE", 1, "RANK is set, so WORLD_SIZE must be"));
  if (d.rank >= d.world_size) {
    return InvalidArgument(fmt::format("RANK={} is not valid with WORLD_SIZE={}: ranks are 0..{}",
                                       d.rank, d.world_size, d.world_size - 1));
  }
  AIR_ASSIGN_OR_RETURN(std::optional<int> local_world, IntVar(env, "LOCAL_WORLD_SIZE", 1));
  AIR_ASSIGN_OR_RETURN(std::optional<int> local_rank, IntVar(env, "LOCAL_RANK", 0));
  d.local_world_size = local_world.value_or(local_rank ? d.world_size : 1);
  d.local_rank = local_rank.value_or(local_world ? d.rank % d.local_world_size : 0);
  if (d.local_world_size > d.world_size) {
    return InvalidArgument(fmt::format(
        "LOCAL_WORLD_SIZE={} is larger than WORLD_SIZE={}: a node cannot hold more ranks than "
        "the job",
        d.local_world_size, d.world_size));
  }
  if (d.local_rank >= d.local_world_size) {
    return InvalidArgument(
        fmt::format("LOCAL_RANK={} is not valid with LOCAL_WORLD_SIZE={}: local ranks are 0..{}",
                    d.local_rank, d.local_world_size, d.local_world_size - 1));
  }
  AIR_ASSIGN_OR_RETURN(std::optional<int> group_rank, IntVar(env, "GROUP_RANK", 0));
  d.node_rank = group_rank.value_or(d.rank / d.local_world_size);
  std::optional<std::string> agent = env->GetEnv("TORCHELASTIC_USE_AGENT_STORE");
  d.agent_store = agent && (*agent == "True" || *agent == "true" || *agent == "1");
  AIR_ASSIGN_OR_RETURN(std::optional<int> restarts, IntVar(env, "TORCHELASTIC_RESTART_COUNT", 0));
  d.restart_count = restarts.value_or(0);
  return ReadMaster(env, d);
}

Status ReadSlurm(Env* env, DistEnv& d) {
  d.launcher = "slurm";
  const std::string why = "srun sets it for every task";
  AIR_ASSIGN_OR_RETURN(d.rank, RequiredInt(env, "SLURM_PROCID", 0, why));
  AIR_ASSIGN_OR_RETURN(d.world_size, RequiredInt(env, "SLURM_NTASKS", 1, why));
  AIR_ASSIGN_OR_RETURN(d.local_rank, RequiredInt(env, "SLURM_LOCALID", 0, why));
  AIR_ASSIGN_OR_RETURN(d.node_rank, RequiredInt(env, "SLURM_NODEID", 0, why));
  AIR_ASSIGN_OR_RETURN(std::optional<int> nodes, IntVar(env, "SLURM_STEP_NUM_NODES", 1));
  if (!nodes) {
    AIR_ASSIGN_OR_RETURN(nodes, IntVar(env, "SLURM_NNODES", 1));
  }
  const int num_nodes = nodes.value_or(1);
  if (d.rank >= d.world_size) {
    return InvalidArgument(
        fmt::format("SLURM_PROCID={} is not valid with SLURM_NTASKS={}", d.rank, d.world_size));
  }
  if (d.node_rank >= num_nodes) {
    return InvalidArgument(fmt::format("SLURM_NODEID={} is not valid with {} nodes in the step",
                                       d.node_rank, num_nodes));
  }
  if (d.world_size % num_nodes != 0) {
    return InvalidArgument(fmt::format(
        "SLURM_NTASKS={} over {} nodes: air needs the same number of tasks on every node "
        "(srun --ntasks-per-node)",
        d.world_size, num_nodes));
  }
  d.local_world_size = d.world_size / num_nodes;
  if (d.local_rank >= d.local_world_size) {
    return InvalidArgument(fmt::format("SLURM_LOCALID={} is not valid with {} tasks per node",
                                       d.local_rank, d.local_world_size));
  }
  AIR_ASSIGN_OR_RETURN(std::optional<int> world, IntVar(env, "WORLD_SIZE", 1));
  if (world && *world != d.world_size) {
    return InvalidArgument(fmt::format(
        "WORLD_SIZE={} contradicts SLURM_NTASKS={} (this is an srun task and RANK is not set): "
        "unset WORLD_SIZE, or launch through torchrun/air launch, which set RANK too",
        *world, d.world_size));
  }
  return ReadMaster(env, d);
}

// air run's node environment (docs/node-environment.md) when the command is the node's only
// worker: rank = NODE_RANK, world = NUM_NODES.
Status ReadAirRunNode(Env* env, DistEnv& d) {
  d.launcher = "air run";
  const std::string why = "air run sets NUM_NODES and NODE_RANK together";
  AIR_ASSIGN_OR_RETURN(d.world_size, RequiredInt(env, "NUM_NODES", 1, why));
  AIR_ASSIGN_OR_RETURN(d.rank, RequiredInt(env, "NODE_RANK", 0, why));
  if (d.rank >= d.world_size) {
    return InvalidArgument(
        fmt::format("NODE_RANK={} is not valid with NUM_NODES={}: nodes are 0..{}", d.rank,
                    d.world_size, d.world_size - 1));
  }
  AIR_ASSIGN_OR_RETURN(std::optional<int> per_node, IntVar(env, "LOCAL_WORLD_SIZE", 1));
  if (per_node && *per_node > 1) {
    return InvalidArgument(fmt::format(
        "LOCAL_WORLD_SIZE={} workers per node but RANK is not set: start them with `air launch "
        "--nnodes $NUM_NODES --node-rank $NODE_RANK --nproc-per-node $LOCAL_WORLD_SIZE "
        "--master-addr $MASTER_ADDR --master-port $MASTER_PORT ...` (or torchrun), which sets "
        "each worker's RANK",
        *per_node));
  }
  AIR_ASSIGN_OR_RETURN(std::optional<int> world, IntVar(env, "WORLD_SIZE", 1));
  if (world && *world != d.world_size) {
    return InvalidArgument(fmt::format(
        "WORLD_SIZE={} contradicts NUM_NODES={} with one worker per node (RANK is not set)", *world,
        d.world_size));
  }
  d.node_rank = d.rank;
  return ReadMaster(env, d);
}

}  // namespace

Result<DistEnv> ReadDistEnv(Env* env) {
  DistEnv d;
  if (env->GetEnv("RANK")) {
    AIR_RETURN_IF_ERROR(ReadTorchrun(env, d));
    return d;
  }
  if (env->GetEnv("SLURM_STEP_ID") && env->GetEnv("SLURM_PROCID")) {
    AIR_RETURN_IF_ERROR(ReadSlurm(env, d));
    return d;
  }
  if (env->GetEnv("NODE_RANK") && env->GetEnv("NUM_NODES")) {
    AIR_RETURN_IF_ERROR(ReadAirRunNode(env, d));
    return d;
  }
  AIR_ASSIGN_OR_RETURN(std::optional<int> world, IntVar(env, "WORLD_SIZE", 1));
  if (world && *world > 1) {
    return InvalidArgument(fmt::format(
        "WORLD_SIZE={} but RANK is not set: a launcher (air launch, torchrun, srun) sets both; "
        "set RANK (0..{}) too, or unset WORLD_SIZE for one process",
        *world, *world - 1));
  }
  d.launcher = "none";
  AIR_RETURN_IF_ERROR(ReadMaster(env, d));
  return d;
}

std::string DescribeDistEnv(const DistEnv& d) {
  std::string s = fmt::format("rank {} of {} (local {} of {}, node {})", d.rank, d.world_size,
                              d.local_rank, d.local_world_size, d.node_rank);
  if (d.world_size > 1) {
    s += fmt::format(", store at {}:{} hosted by {}", d.master_addr, d.master_port,
                     d.agent_store ? "the launcher" : "rank 0");
  }
  return s;
}

}  // namespace air::engine::parallel
