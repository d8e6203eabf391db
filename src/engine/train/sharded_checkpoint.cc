// Sharded, resumable checkpoints (see sharded_checkpoint.h for the layout and the commit rule).
#include "engine/train/sharded_checkpoint.h"

#include <fmt/format.h>
#include <sodium.h>

#include <algorithm>
#include <map>
#include <memory>
#include <nlohmann/json.hpp>

#include "engine/io/hf_state_dict.h"
#include "engine/io/safetensors.h"

namespace air::engine::train {
namespace {

constexpr const char* kFormat = "air-sharded-v1";
constexpr const char* kMarker = "COMPLETE";
constexpr const char* kStateFile = "trainer_state.json";

std::string RankStem(const std::string& dir, int rank, int world) {
  return fmt::format("{}/train_state/rank-{}-of-{}", dir, rank, world);
}

// BLAKE2b (libsodium) of a file, hex, read through the Env.
Result<std::string> HashFile(Env* env, const std::string& path) {
  if (sodium_init() < 0) return Internal("libsodium could not initialize");
  AIR_ASSIGN_OR_RETURN(std::unique_ptr<SequentialFile> in, env->NewSequentialFile(path));
  crypto_generichash_state state;
  crypto_generichash_init(&state, nullptr, 0, crypto_generichash_BYTES);
  std::vector<char> chunk(1 << 20);
  while (true) {
    AIR_ASSIGN_OR_RETURN(size_t n, in->Read(chunk.data(), chunk.size()));
    if (n == 0) break;
    crypto_generichash_update(&state, reinterpret_cast<const unsigned char*>(chunk.data()),
                              static_cast<unsigned long long>(n));
  }
  unsigned char digest[crypto_generichash_BYTES];
  crypto_generichash_final(&state, digest, sizeof(digest));
  char hex[2 * crypto_generichash_BYTES + 1];
  sodium_bin2hex(hex, sizeof(hex), digest, sizeof(digest));
  return std::string(hex);
}

// Every parameter's HF name and shape (what a checkpoint of another model differs in).
nlohmann::json ParameterList(const CausalLm& model) {
  nlohmann::json out = nlohmann::json::array();
  const std::vector<std::string> names = HfParameterNames(model);
  for (size_t i = 0; i < names.size(); ++i) out.push_back({names[i], model.parameters()[i].shape});
  return out;
}

// The moments of unit u as this rank's flat range (zero where no view lies: padding).
std::vector<float> UnitMoments(const StateLayout& layout, const AdamW& adam, int unit,
                               bool second) {
  const StateLayout::Unit& u = layout.units[static_cast<size_t>(unit)];
  std::vector<float> out(static_cast<size_t>(u.count), 0.0f);
  for (size_t i = 0; i < layout.pieces.size(); ++i) {
    const StateLayout::Piece& p = layout.pieces[i];
    if (p.unit != unit) continue;
    std::vector<float> m = second ? adam.second_moment(i) : adam.first_moment(i);
    std::copy(m.begin(), m.end(), out.begin() + (p.offset - u.begin));
  }
  return out;
}

}  // namespace

StateLayout WholeModelLayout(const CausalLm& model) {
  StateLayout layout;
  const auto& units = model.units();
  std::map<const Parameter*, std::pair<int, int64_t>> where;  // parameter -> (unit, offset)
  for (size_t u = 0; u < units.size(); ++u) {
    layout.units.push_back({units[u].trainable_numel, 0, units[u].trainable_numel});
    int64_t offset = 0;  // within the trainable segment
    for (const Parameter* p : units[u].params) {
      if (!p->trainable) continue;
      where[p] = {static_cast<int>(u), offset};
      offset += p->numel();
    }
  }
  for (const Parameter& p : model.parameters()) {
    if (!p.trainable) continue;
    const auto [unit, offset] = where[&p];
    layout.pieces.push_back({unit, offset, p.numel()});
  }
  return layout;
}

Status SaveRankState(Env* env, const std::string& dir, const StateLayout& layout,
                     const ReadUnitFn& read_unit, const AdamW& adam) {
  AIR_RETURN_IF_ERROR(env->CreateDirs(dir + "/train_state"));
  std::vector<Tensor> tensors;
  std::vector<std::string> names;
  tensors.reserve(3 * layout.units.size());
  for (size_t u = 0; u < layout.units.size(); ++u) {
    const int64_t count = layout.units[u].count;
    const int unit = static_cast<int>(u);
    std::vector<float> values = read_unit(unit);
    tensors.emplace_back(Shape{count}, std::move(values));
    names.push_back(fmt::format("units.{}.param", u));
    tensors.emplace_back(Shape{count}, UnitMoments(layout, adam, unit, false));
    names.push_back(fmt::format("units.{}.exp_avg", u));
    tensors.emplace_back(Shape{count}, UnitMoments(layout, adam, unit, true));
    names.push_back(fmt::format("units.{}.exp_avg_sq", u));
  }
  std::vector<NamedTensorRef> refs;
  for (size_t i = 0; i < tensors.size(); ++i) refs.push_back({names[i], &tensors[i]});
  const std::string stem = RankStem(dir, layout.rank, layout.world_size);
  AIR_RETURN_IF_ERROR(WriteSafetensors(stem + ".safetensors", refs, DType::kF32,
                                       {{"format", kFormat},
                                        {"rank", std::to_string(layout.rank)},
                                        {"world_size", std::to_string(layout.world_size)}},
                                       env));
  AIR_ASSIGN_OR_RETURN(std::string hash, HashFile(env, stem + ".safetensors"));
  AIR_ASSIGN_OR_RETURN(uint64_t bytes, env->FileSize(stem + ".safetensors"));
  nlohmann::json sidecar = {{"blake2b", hash}, {"bytes", bytes}};
  return env->WriteFileAtomic(stem + ".json", sidecar.dump() + "\n");
}

Status CommitCheckpoint(Env* env, const std::string& dir, const CausalLm& model,
                        const StateLayout& layout, const RunIdentity& identity,
                        const TrainPosition& position) {
  nlohmann::json units = nlohmann::json::array();
  for (const StateLayout::Unit& u : layout.units) units.push_back(u.numel);
  nlohmann::ordered_json state;
  state["format"] = kFormat;
  state["step"] = position.step;
  state["micro_batches"] = position.micro_batches;
  state["adam_step"] = position.adam_step;
  state["world_size"] = layout.world_size;
  state["strategy"] = identity.strategy;
  state["global_batch_rows"] = identity.global_batch_rows;
  state["gradient_accumulation_steps"] = identity.gradient_accumulation_steps;
  state["seed"] = identity.seed;
  state["torch_dtype"] = identity.torch_dtype;
  state["units"] = units;
  state["parameters"] = ParameterList(model);
  AIR_RETURN_IF_ERROR(env->WriteFileAtomic(dir + "/" + kStateFile, state.dump(1) + "\n"));
  return env->WriteFileAtomic(dir + "/" + kMarker, fmt::format("step {}\n", position.step));
}

std::optional<std::string> LatestCheckpoint(Env* env, const std::string& output_dir) {
  auto entries = env->ListDir(output_dir);
  if (!entries.ok()) return std::nullopt;
  int best = -1;
  for (const std::string& name : *entries) {
    if (name.rfind("checkpoint-", 0) != 0) continue;
    const std::string digits = name.substr(11);
    if (digits.empty() || !std::all_of(digits.begin(), digits.end(), ::isdigit)) continue;
    if (digits.size() > 9) continue;
    const int step = std::stoi(digits);
    if (step > best && env->FileExists(output_dir + "/" + name + "/" + kMarker)) best = step;
  }
  if (best < 0) return std::nullopt;
  return fmt::format("{}/checkpoint-{}", output_dir, best);
}

Result<TrainPosition> LoadRankState(Env* env, const std::string& dir, const CausalLm& model,
                                    const StateLayout& layout, const RunIdentity& identity,
                                    const WriteUnitFn& write_unit, AdamW& adam) {
  if (!env->FileExists(dir + "/" + kMarker)) {
    return FailedPrecondition(fmt::format(
        "{}: not a complete checkpoint (no {} marker: it was torn while being written, or is not "
        "air's); resume from an earlier one, or 'latest'",
        dir, kMarker));
  }
  const std::string state_path = dir + "/" + kStateFile;
  AIR_ASSIGN_OR_RETURN(std::string text, env->ReadFile(state_path));
  nlohmann::json state = nlohmann::json::parse(text, nullptr, false);
  if (state.is_discarded() || !state.is_object() || state.value("format", "") != kFormat) {
    return InvalidArgument(fmt::format("{}: not an {} trainer state", state_path, kFormat));
  }
  if (state["parameters"] != ParameterList(model)) {
    return InvalidArgument(fmt::format(
        "{}: the checkpoint is of another model (its parameter names or shapes differ from "
        "model_name's)",
        state_path));
  }
  auto mismatch = [&](const char* key, const std::string& ours, const std::string& theirs) {
    return InvalidArgument(fmt::format(
        "{}: {} is {} in the checkpoint but {} now; resuming exactly needs the same value",
        state_path, key, theirs, ours));
  };
  // The global batch decides which rows each step reads (data_loader.h): it must be the same;
  // how it is split into per_device_batch_size, ranks and accumulation may change.
  const int64_t rows = state.value("global_batch_rows", int64_t{0});
  const int accumulation = state.value("gradient_accumulation_steps", 0);
  const int64_t theirs = rows * accumulation;
  const int64_t ours = identity.global_batch_rows * identity.gradient_accumulation_steps;
  if (theirs != ours || accumulation < 1) {
    return InvalidArgument(fmt::format(
        "{}: the global batch (per_device_batch_size x ranks x gradient_accumulation_steps) is {} "
        "in the checkpoint ({} x {}) but {} now ({} x {}); resuming exactly needs the same global "
        "batch: global_batch_size: {} keeps it on any number of ranks",
        state_path, theirs, rows, accumulation, ours, identity.global_batch_rows,
        identity.gradient_accumulation_steps, theirs));
  }
  const int64_t seed = state.value("seed", int64_t{0});
  if (seed != identity.seed) {
    return mismatch("seed", std::to_string(identity.seed), std::to_string(seed));
  }
  // Checkpoints written before torch_dtype existed hold fp32 state.
  const std::string torch_dtype = state.value("torch_dtype", std::string("float32"));
  if (torch_dtype != identity.torch_dtype) {
    return mismatch("torch_dtype", identity.torch_dtype, torch_dtype);
  }
  const int old_world = state.value("world_size", 0);
  if (old_world < 1) return InvalidArgument(fmt::format("{}: world_size missing", state_path));

  // Every file of the old world, verified before any value is used.
  std::vector<std::unique_ptr<SafetensorsFile>> files;
  for (int q = 0; q < old_world; ++q) {
    const std::string stem = RankStem(dir, q, old_world);
    auto sidecar_text = env->ReadFile(stem + ".json");
    if (!sidecar_text.ok() && sidecar_text.status().code() == ErrorCode::kNotFound) {
      return NotFound(
          fmt::format("{}.json: missing (the checkpoint of {} ranks needs it)", stem, old_world));
    }
    AIR_RETURN_IF_ERROR(sidecar_text.status());
    nlohmann::json sidecar = nlohmann::json::parse(*sidecar_text, nullptr, false);
    AIR_ASSIGN_OR_RETURN(std::string hash, HashFile(env, stem + ".safetensors"));
    if (sidecar.is_discarded() || sidecar.value("blake2b", "") != hash) {
      return DataLoss(fmt::format(
          "{}.safetensors: corrupt (its BLAKE2b does not match {}.json); the checkpoint cannot "
          "be resumed — use an earlier checkpoint-N",
          stem, stem));
    }
    AIR_ASSIGN_OR_RETURN(auto file, SafetensorsFile::Open(stem + ".safetensors"));
    files.push_back(std::move(file));
  }

  // This rank's range of unit u, assembled from the old ranks' overlapping ranges.
  auto assemble = [&](int unit, const char* kind) -> Result<std::vector<float>> {
    const StateLayout::Unit& mine = layout.units[static_cast<size_t>(unit)];
    std::vector<float> out(static_cast<size_t>(mine.count), 0.0f);
    const int64_t n = mine.numel;
    const int64_t old_shard = std::max<int64_t>(1, (n + old_world - 1) / old_world);
    for (int q = 0; q < old_world; ++q) {
      const int64_t lo = std::min(n, q * old_shard);
      const int64_t hi = std::min(n, lo + old_shard);
      const int64_t from = std::max(lo, mine.begin);
      const int64_t to = std::min(hi, std::min(n, mine.begin + mine.count));
      if (to <= from) continue;
      const std::string name = fmt::format("units.{}.{}", unit, kind);
      AIR_ASSIGN_OR_RETURN(Tensor t, files[static_cast<size_t>(q)]->ReadF32(name));
      if (t.numel() < hi - lo) {
        return InvalidArgument(fmt::format("{}: {} holds {} values, fewer than its range {}",
                                           files[static_cast<size_t>(q)]->path(), name, t.numel(),
                                           hi - lo));
      }
      std::copy(t.data() + (from - lo), t.data() + (to - lo), out.begin() + (from - mine.begin));
    }
    return out;
  };
  const nlohmann::json& units = state["units"];
  for (size_t u = 0; u < layout.units.size(); ++u) {
    if (!units.is_array() || units.size() != layout.units.size() ||
        units[u].get<int64_t>() != layout.units[u].numel) {
      return InvalidArgument(fmt::format("{}: its units do not match the model's", state_path));
    }
    const int unit = static_cast<int>(u);
    AIR_ASSIGN_OR_RETURN(std::vector<float> values, assemble(unit, "param"));
    AIR_RETURN_IF_ERROR(write_unit(unit, values));
    AIR_ASSIGN_OR_RETURN(std::vector<float> m, assemble(unit, "exp_avg"));
    AIR_ASSIGN_OR_RETURN(std::vector<float> v, assemble(unit, "exp_avg_sq"));
    const StateLayout::Unit& mine = layout.units[u];
    for (size_t i = 0; i < layout.pieces.size(); ++i) {
      const StateLayout::Piece& p = layout.pieces[i];
      if (p.unit != unit) continue;
      const auto first = static_cast<size_t>(p.offset - mine.begin);
      const auto last = first + static_cast<size_t>(p.numel);
      adam.SetMoments(i, std::vector<float>(m.begin() + first, m.begin() + last),
                      std::vector<float>(v.begin() + first, v.begin() + last));
    }
  }
  TrainPosition position;
  position.step = state.value("step", 0);
  // The data position in this run's micro-batches: the same steps, split anew.
  const int64_t micro_batches = state.value("micro_batches", int64_t{0});
  if (micro_batches != int64_t{position.step} * accumulation) {
    return InvalidArgument(fmt::format(
        "{}: micro_batches {} is not step {} x gradient_accumulation_steps {}: the trainer state "
        "is inconsistent",
        state_path, micro_batches, position.step, accumulation));
  }
  position.micro_batches = int64_t{position.step} * identity.gradient_accumulation_steps;
  position.adam_step = state.value("adam_step", int64_t{0});
  adam.set_step_count(position.adam_step);
  return position;
}

}  // namespace air::engine::train
