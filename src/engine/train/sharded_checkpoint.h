// Resumable training state: each rank's parameter and AdamW shards plus the step, the data
// position and what the run was, written so that a kill at any moment leaves either the
// previous complete checkpoint or the new one, and read back at any world size.
//
// Layout of output_dir/checkpoint-N/ (beside the consolidated HF files rank 0 writes there):
//   train_state/rank-R-of-W.safetensors  this rank's flat range of every unit's trainable
//                                        segment (model/parameter.h; the frozen base of a LoRA
//                                        run is not training state): tensors
//                                        "units.U.param", "units.U.exp_avg", "units.U.exp_avg_sq"
//                                        (F32, the shard's S elements, zero past the unit's end)
//   train_state/rank-R-of-W.json         {"blake2b": hex of the .safetensors, "bytes": n}
//   trainer_state.json                   rank 0: {"format", "step", "world_size", "strategy",
//                                        "micro_batches", "adam_step", "global_batch_rows",
//                                        "gradient_accumulation_steps", "seed", "units": [n_u],
//                                        "parameters": [[name, shape], ...]}
//   COMPLETE                             rank 0, last: the commit marker
// Every file is written under a temporary name, fsynced and renamed (the directory fsynced too);
// the marker is written only after every rank's files are in place (the trainer's barrier), so
// a checkpoint without it is torn and is never resumed from.
//
// Resharding: a unit's elements are the same flat range whatever the world size, so a rank of
// a W-rank run reads, for each unit, the pieces of the W'-rank files that overlap its own range.
// The strategy may change too (NO_SHARD and one process hold the whole unit: [0, n)).
//
// Thread safety: functions; the caller serializes them with training.
#pragma once

#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "base/env.h"
#include "base/status.h"
#include "engine/model/causal_lm.h"
#include "engine/train/adamw.h"

namespace air::engine::train {

// This rank's part of the units' flat element space, and where each optimizer view lies in it.
struct StateLayout {
  struct Unit {
    int64_t numel = 0;  // n
    int64_t begin = 0;  // first element this rank holds
    int64_t count = 0;  // elements it holds (S; begin + count may pass n: zero padding)
  };
  struct Piece {
    int unit = 0;
    int64_t offset = 0;  // first element of the view within its unit
    int64_t numel = 0;
  };
  int rank = 0;
  int world_size = 1;
  std::vector<Unit> units;
  std::vector<Piece> pieces;  // one per optimizer view, in the optimizer's order
};

// One process (or a replica holding every unit whole): each unit's trainable segment [0, n),
// views = the model's trainable parameters in model order.
StateLayout WholeModelLayout(const CausalLm& model);

// What a checkpoint records about the run, checked on resume.
struct RunIdentity {
  std::string strategy;  // "FULL_SHARD", ..., "single" (informational)
  int64_t global_batch_rows = 0;
  int gradient_accumulation_steps = 1;
  int64_t seed = 0;
  // The dtype the parameters and AdamW's moments are kept in ("float32", "bfloat16"): a resume
  // in the other would round (or widen) the state, not continue it.
  std::string torch_dtype = "float32";
};

struct TrainPosition {
  int step = 0;               // optimizer steps done
  int64_t micro_batches = 0;  // DataLoader::position() of every rank
  int64_t adam_step = 0;
};

// Reads / writes this rank's flat range of unit u (layout.units[u].count floats).
using ReadUnitFn = std::function<std::vector<float>(int unit)>;
using WriteUnitFn = std::function<Status(int unit, const std::vector<float>& values)>;

// This rank's files (collective only through the caller's barrier afterwards).
Status SaveRankState(Env* env, const std::string& dir, const StateLayout& layout,
                     const ReadUnitFn& read_unit, const AdamW& adam);
// Rank 0, after every rank's SaveRankState succeeded: trainer_state.json, then COMPLETE.
Status CommitCheckpoint(Env* env, const std::string& dir, const CausalLm& model,
                        const StateLayout& layout, const RunIdentity& identity,
                        const TrainPosition& position);

// The newest complete output_dir/checkpoint-N (nullopt when there is none).
std::optional<std::string> LatestCheckpoint(Env* env, const std::string& output_dir);

// Loads `dir` into this rank: validates it against the model and the run (another model, an
// incompatible global batch or accumulation, a missing or corrupt file: an error naming the
// file and what differs), writes this rank's ranges through write_unit and the moments into
// `adam`, and returns where training resumes.
Result<TrainPosition> LoadRankState(Env* env, const std::string& dir, const CausalLm& model,
                                    const StateLayout& layout, const RunIdentity& identity,
                                    const WriteUnitFn& write_unit, AdamW& adam);

}  // namespace air::engine::train
