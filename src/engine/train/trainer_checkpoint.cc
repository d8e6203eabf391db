// The trainer's resumable checkpoints: saving every rank's state at save_steps and on SIGTERM,
// and resume_from_checkpoint (see trainer.h and sharded_checkpoint.h).
#include <fmt/format.h>

#include "engine/train/trainer.h"

namespace air::engine::train {

StateLayout Trainer::Layout(const std::vector<ParamView>& params) const {
  fsdp::Fsdp* fsdp = io_.parallel.fsdp;
  StateLayout layout;
  const bool replicated = fsdp->gradients_replicated();
  // A replicated model is saved once (as one shard of the whole), by rank 0.
  layout.rank = replicated ? 0 : fsdp->rank();
  layout.world_size = replicated ? 1 : fsdp->world_size();
  for (size_t u = 0; u < model_->units().size(); ++u) {
    const fsdp::Fsdp::ShardRange r = fsdp->Range(static_cast<int>(u));
    layout.units.push_back({r.numel, r.begin, r.count});
  }
  const auto& places = fsdp->view_places();
  for (size_t i = 0; i < places.size(); ++i) {
    layout.pieces.push_back({places[i].unit, places[i].offset, params[i].numel});
  }
  return layout;
}

RunIdentity Trainer::Identity() const {
  RunIdentity id;
  id.strategy = io_.parallel.world_size > 1
                    ? fsdp::ShardingStrategyName(io_.parallel.fsdp->strategy())
                    : "single";
  id.global_batch_rows =
      static_cast<int64_t>(config_.per_device_batch_size) * io_.parallel.world_size;
  id.gradient_accumulation_steps = config_.gradient_accumulation_steps;
  id.seed = config_.seed;
  id.torch_dtype = fsdp::TorchDTypeName(io_.parallel.fsdp->state_dtype());
  return id;
}

Status Trainer::AgreeOnStatus(const Status& local, const std::string& what) const {
  double failed = local.ok() ? 0.0 : 1.0;
  AIR_RETURN_IF_ERROR(SumOverRanks(&failed, 1));
  AIR_RETURN_IF_ERROR(local);
  if (failed > 0) return Internal(fmt::format("another rank failed: {}", what));
  return Status::Ok();
}

Status Trainer::SaveTrainingCheckpoint(const std::string& dir, int step, const DataLoader& loader,
                                       const AdamW& optimizer) const {
  Env* env = io_.env;
  // A checkpoint directory left by a run that was stopped while writing it: not complete, so
  // rewrite it whole.
  AIR_RETURN_IF_ERROR(SaveCheckpoint(dir));
  const StateLayout layout = Layout(optimizer.params());
  fsdp::Fsdp* fsdp = io_.parallel.fsdp;
  Status saved = Status::Ok();
  if (fsdp->writes_state()) {
    ReadUnitFn read = [&](int unit) { return fsdp->ReadShard(unit); };
    saved = SaveRankState(env, dir, layout, read, optimizer);
  }
  AIR_RETURN_IF_ERROR(AgreeOnStatus(saved, "writing its part of " + dir));
  Status committed = Status::Ok();
  if (lead()) {
    TrainPosition position{
        .step = step, .micro_batches = loader.position(), .adam_step = optimizer.step_count()};
    committed = CommitCheckpoint(env, dir, *model_, layout, Identity(), position);
  }
  return AgreeOnStatus(committed, "committing " + dir);
}

Result<int> Trainer::MaybeResume(DataLoader& loader, AdamW& optimizer,
                                 const std::vector<ParamView>& params, ProgressDisplay& progress) {
  const std::string& wanted = config_.resume_from_checkpoint;
  if (wanted.empty()) return 0;
  Env* env = io_.env;
  std::string dir = wanted;
  if (wanted == "latest") {
    std::optional<std::string> latest = LatestCheckpoint(env, config_.output_dir);
    if (!latest) {
      progress.Note(fmt::format(
          "resume_from_checkpoint latest: no complete checkpoint in {}; starting from step 1",
          config_.output_dir));
      return 0;
    }
    dir = *latest;
  } else if (!env->IsDirectory(dir)) {
    return InvalidArgument(fmt::format("{}: {}: no such checkpoint directory",
                                       config_.Where("resume_from_checkpoint"), dir));
  }
  fsdp::Fsdp* fsdp = io_.parallel.fsdp;
  WriteUnitFn write = [&](int unit, const std::vector<float>& values) {
    return fsdp->WriteShard(unit, values);
  };
  Result<TrainPosition> position =
      LoadRankState(env, dir, *model_, Layout(params), Identity(), write, optimizer);
  Status loaded = position.ok()
                      ? Status::Ok()
                      : position.status().WithContext(config_.Where("resume_from_checkpoint"));
  AIR_RETURN_IF_ERROR(AgreeOnStatus(loaded, "loading " + dir));
  AIR_RETURN_IF_ERROR(fsdp->RefreshComputeCopies());  // the compute copies from the masters
  AIR_RETURN_IF_ERROR(loader.Seek(position->micro_batches));
  progress.Note(fmt::format("resumed from {} (step {})", dir, position->step));
  return position->step;
}

}  // namespace air::engine::train
