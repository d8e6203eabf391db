// ShardingStrategy: how FSDP (fsdp.h) splits a model's training state across the ranks of a
// data-parallel group — PyTorch FSDP's ShardingStrategy names, which the seeds' configs use:
//   FULL_SHARD     (ZeRO-3) parameters, gradients and optimizer state sharded; a unit's
//                  parameters are all-gathered before its forward and again before its backward
//                  and dropped after each; its gradients are reduce-scattered after its backward.
//   SHARD_GRAD_OP  (ZeRO-2) parameters stay whole on every rank; gradients are reduce-scattered,
//                  optimizer state is sharded, and the updated shards are all-gathered after the
//                  optimizer step.
//   NO_SHARD       (DDP) everything replicated; gradients are all-reduced once per optimizer
//                  step (after the last micro-batch) and every rank runs the same update.
//   HYBRID_SHARD   FULL_SHARD within a node, replicated across nodes.
// Parsed from `fsdp_sharding_strategy` (those names, any case; "ddp" for NO_SHARD) or from the
// HF TrainingArguments string `fsdp` ("full_shard auto_wrap", "shard_grad_op", "hybrid_shard",
// "no_shard"; "" means no FSDP: DDP). Thread safety: pure functions.
#pragma once

#include <optional>
#include <string>
#include <vector>

namespace air::engine::fsdp {

enum class ShardingStrategy { kFullShard, kShardGradOp, kNoShard, kHybridShard };

const char* ShardingStrategyName(ShardingStrategy strategy);  // "FULL_SHARD", ...
// The names accepted by ParseShardingStrategy, for error messages.
std::vector<std::string> ShardingStrategyNames();

// A strategy name (any case) or "ddp"; nullopt otherwise.
std::optional<ShardingStrategy> ParseShardingStrategy(const std::string& name);

// HF's `fsdp` option: space-separated words among full_shard, shard_grad_op, hybrid_shard,
// hybrid_shard_zero2, no_shard, auto_wrap, offload. Returns the strategy, or an error message
// naming the word that is not understood (offload: not supported on this engine).
struct HfFsdpOption {
  std::optional<ShardingStrategy> strategy;
  std::string error;
};
HfFsdpOption ParseHfFsdpOption(const std::string& value);

}  // namespace air::engine::fsdp
