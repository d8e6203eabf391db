// Strategy names (see sharding_strategy.h).
#include "engine/fsdp/sharding_strategy.h"

#include <algorithm>
#include <cctype>
#include <sstream>

namespace air::engine::fsdp {
namespace {

std::string Lower(std::string s) {
  std::transform(s.begin(), s.end(), s.begin(),
                 [](unsigned char c) { return static_cast<char>(std::tolower(c)); });
  return s;
}

}  // namespace

const char* ShardingStrategyName(ShardingStrategy strategy) {
  switch (strategy) {
    case ShardingStrategy::kFullShard:
      return "FULL_SHARD";
    case ShardingStrategy::kShardGradOp:
      return "SHARD_GRAD_OP";
    case ShardingStrategy::kNoShard:
      return "NO_SHARD";
    case ShardingStrategy::kHybridShard:
      return "HYBRID_SHARD";
  }
  return "?";
}

std::vector<std::string> ShardingStrategyNames() {
  return {"FULL_SHARD", "SHARD_GRAD_OP", "NO_SHARD", "HYBRID_SHARD", "DDP"};
}

std::optional<ShardingStrategy> ParseShardingStrategy(const std::string& name) {
  const std::string n = Lower(name);
  if (n == "full_shard") return ShardingStrategy::kFullShard;
  if (n == "shard_grad_op") return ShardingStrategy::kShardGradOp;
  if (n == "no_shard" || n == "ddp") return ShardingStrategy::kNoShard;
  if (n == "hybrid_shard") return ShardingStrategy::kHybridShard;
  return std::nullopt;
}

HfFsdpOption ParseHfFsdpOption(const std::string& value) {
  HfFsdpOption out;
  std::istringstream words(value);
  std::string word;
  bool any = false;
  while (words >> word) {
    any = true;
    const std::string w = Lower(word);
    if (w == "auto_wrap") continue;  // air always wraps each decoder layer as a unit
    if (w == "offload") {
      out.error = "'offload' (CPU offload) is not supported: air keeps the state on the device";
      return out;
    }
    std::optional<ShardingStrategy> s = ParseShardingStrategy(w);
    if (!s || w == "ddp") {
      out.error = "'" + word +
                  "' is not an FSDP option; valid words: full_shard, shard_grad_op, "
                  "hybrid_shard, no_shard, auto_wrap";
      return out;
    }
    if (out.strategy && *out.strategy != *s) {
      out.error = "names two sharding strategies";
      return out;
    }
    out.strategy = s;
  }
  // HF: an empty fsdp string means no FSDP (plain DDP across the ranks).
  if (!any || !out.strategy)
    out.strategy = any ? ShardingStrategy::kFullShard : ShardingStrategy::kNoShard;
  return out;
}

}  // namespace air::engine::fsdp
