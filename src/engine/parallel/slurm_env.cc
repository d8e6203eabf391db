// SLURM_* task variables -> torchrun's variables.
#include "engine/parallel/slurm_env.h"

#include <fmt/format.h>

#include <cstdlib>

#include "base/strings.h"

namespace air::engine::parallel {
namespace {

std::optional<int> ParseCount(const std::string& text) {
  if (text.empty() || text.size() > 9 ||
      text.find_first_not_of("0123456789") != std::string::npos) {
    return std::nullopt;
  }
  return std::atoi(text.c_str());
}

}  // namespace

std::optional<int> TasksOnNode(const std::string& tasks_per_node, int node_id) {
  int node = 0;
  for (const auto& part : Split(tasks_per_node, ',')) {
    std::string item(Trim(part));
    int repeat = 1;
    if (auto open = item.find("(x"); open != std::string::npos) {
      if (item.back() != ')') return std::nullopt;
      auto r = ParseCount(item.substr(open + 2, item.size() - open - 3));
      if (!r) return std::nullopt;
      repeat = *r;
      item = item.substr(0, open);
    }
    auto count = ParseCount(item);
    if (!count) return std::nullopt;
    if (node_id < node + repeat) return *count;
    node += repeat;
  }
  return std::nullopt;
}

Result<std::vector<std::pair<std::string, std::string>>> TorchrunVariablesFromSlurm(
    const EnvLookup& lookup) {
  std::vector<std::pair<std::string, std::string>> out;
  if (!lookup("SLURM_PROCID")) return out;
  auto number = [&lookup](const char* name) -> Result<int> {
    auto value = lookup(name);
    auto parsed = value ? ParseCount(*value) : std::nullopt;
    if (!parsed) {
      return InvalidArgument(fmt::format(
          "{}={}: expected a number (set by srun for every task); run the command under srun", name,
          value.value_or("(unset)")));
    }
    return *parsed;
  };
  AIR_ASSIGN_OR_RETURN(int rank, number("SLURM_PROCID"));
  AIR_ASSIGN_OR_RETURN(int local_rank, number("SLURM_LOCALID"));
  AIR_ASSIGN_OR_RETURN(int world, number("SLURM_NTASKS"));
  AIR_ASSIGN_OR_RETURN(int node, number("SLURM_NODEID"));
  AIR_ASSIGN_OR_RETURN(int nodes, number("SLURM_NNODES"));
  std::string per_node_text =
      lookup("SLURM_STEP_TASKS_PER_NODE").value_or(lookup("SLURM_TASKS_PER_NODE").value_or(""));
  std::optional<int> local_world = TasksOnNode(per_node_text, node);
  if (!local_world) {
    return InvalidArgument(
        fmt::format("SLURM_TASKS_PER_NODE={}: expected counts such as 2(x3),1 covering node {}",
                    per_node_text, node));
  }
  auto add = [&](const char* name, std::string value) {
    if (!lookup(name)) out.emplace_back(name, std::move(value));
  };
  add("RANK", std::to_string(rank));
  add("LOCAL_RANK", std::to_string(local_rank));
  add("WORLD_SIZE", std::to_string(world));
  add("LOCAL_WORLD_SIZE", std::to_string(*local_world));
  add("NODE_RANK", std::to_string(node));
  add("GROUP_RANK", std::to_string(node));
  add("NUM_NODES", std::to_string(nodes));
  if (auto launch = lookup("SLURM_LAUNCH_NODE_IPADDR"); launch && !launch->empty()) {
    add("MASTER_ADDR", *launch);
  }
  if (auto job = lookup("SLURM_JOB_ID"); job && ParseCount(*job)) {
    add("MASTER_PORT", std::to_string(10000 + *ParseCount(*job) % 50000));
  }
  return out;
}

}  // namespace air::engine::parallel
