// air launch's place in an srun step, from Slurm's task environment.
#include "backends/slurm/srun_task.h"

#include <fmt/format.h>

#include "backends/slurm/slurm_cli.h"
#include "base/strings.h"

namespace air::backends::slurm {
namespace {

// A whole number from `name`; -1 when unset.
Result<int> Number(Env* env, const char* name) {
  auto value = env->GetEnv(name);
  if (!value || value->empty()) return -1;
  if (value->size() > 9 || value->find_first_not_of("0123456789") != std::string::npos) {
    return InvalidArgument(fmt::format("{}='{}' is not a whole number", name, *value));
  }
  return std::stoi(*value);
}

}  // namespace

Result<std::optional<SrunNodePlace>> ReadSrunNodePlace(Env* env) {
  auto step = env->GetEnv("SLURM_STEP_ID");
  if (!step || step->empty()) return std::optional<SrunNodePlace>();
  AIR_ASSIGN_OR_RETURN(int nodes, Number(env, "SLURM_STEP_NUM_NODES"));
  if (nodes < 0) {
    AIR_ASSIGN_OR_RETURN(nodes, Number(env, "SLURM_NNODES"));
  }
  AIR_ASSIGN_OR_RETURN(int node_id, Number(env, "SLURM_NODEID"));
  AIR_ASSIGN_OR_RETURN(int tasks, Number(env, "SLURM_STEP_NUM_TASKS"));
  if (tasks < 0) {
    AIR_ASSIGN_OR_RETURN(tasks, Number(env, "SLURM_NTASKS"));
  }
  if (nodes < 1 || node_id < 0 || node_id >= nodes) {
    return InvalidArgument(fmt::format(
        "air launch under srun: SLURM_STEP_NUM_NODES/SLURM_NNODES ({}) and SLURM_NODEID ({}) do "
        "not give this node's place; pass --nnodes and --node-rank",
        nodes, node_id));
  }
  if (tasks > nodes) {
    return InvalidArgument(fmt::format(
        "air launch under srun runs once per node and starts the node's workers itself, but "
        "this step has {} tasks on {} node(s) (SLURM_NTASKS): run srun --ntasks-per-node=1 and "
        "set the workers with --nproc-per-node",
        tasks, nodes));
  }
  SrunNodePlace place;
  place.nnodes = nodes;
  place.node_rank = node_id;
  auto list = env->GetEnv("SLURM_STEP_NODELIST");
  if (!list || list->empty()) list = env->GetEnv("SLURM_JOB_NODELIST");
  if (!list || list->empty()) {
    return InvalidArgument(
        "air launch under srun: SLURM_STEP_NODELIST is unset; pass --master-addr");
  }
  AIR_ASSIGN_OR_RETURN(std::string hosts, RunSlurm({"scontrol", "show", "hostnames", *list}));
  for (const auto& line : Split(hosts, '\n')) {
    if (!Trim(line).empty()) {
      place.master_addr = std::string(Trim(line));
      break;
    }
  }
  if (place.master_addr.empty()) {
    return InvalidArgument(fmt::format("scontrol show hostnames {} printed no host", *list));
  }
  return std::optional<SrunNodePlace>(place);
}

}  // namespace air::backends::slurm
