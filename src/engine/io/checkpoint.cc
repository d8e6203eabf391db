// Reading weights from an HF model directory and saving HF checkpoints (see checkpoint.h).
#include "engine/io/checkpoint.h"

#include <algorithm>
#include <cstdio>
#include <nlohmann/json.hpp>
#include <set>

#include "base/env.h"
#include "base/strings.h"
#include "engine/io/hf_config.h"

namespace air::engine {

namespace {

// "model-00002-of-00005.safetensors"
std::string ShardName(size_t index, size_t count) {
  char buf[64];
  std::snprintf(buf, sizeof(buf), "model-%05zu-of-%05zu.safetensors", index + 1, count);
  return buf;
}

bool IsShardName(const std::string& name) {
  return StartsWith(name, "model-") && EndsWith(name, ".safetensors") &&
         name.find("-of-") != std::string::npos;
}

bool IsSafeRelativeName(const std::string& name) {
  return !name.empty() && name[0] != '/' && name.find("..") == std::string::npos;
}

const char* TorchDTypeName(DType dtype) {
  switch (dtype) {
    case DType::kF32:
      return "float32";
    case DType::kBF16:
      return "bfloat16";
    case DType::kF16:
      return "float16";
    case DType::kI32:
    case DType::kF64:
    case DType::kU8:
      break;  // not a weight dtype (SaveOptions allows the three float types)
  }
  return "float32";
}

}  // namespace

Result<std::unique_ptr<WeightReader>> WeightReader::Open(const std::string& model_dir) {
  Env* env = DefaultEnv();
  std::unique_ptr<WeightReader> reader(new WeightReader());
  reader->dir_ = model_dir;
  const std::string index_path = model_dir + "/" + kSafetensorsIndexName;
  const std::string single_path = model_dir + "/" + kSafetensorsSingleName;
  if (env->FileExists(index_path)) {
    AIR_ASSIGN_OR_RETURN(std::string text, env->ReadFile(index_path));
    nlohmann::json index = nlohmann::json::parse(text, nullptr, false);
    if (index.is_discarded() || !index.is_object()) {
      return DataLoss(index_path +
                      ": not valid JSON (expected {\"metadata\": ..., "
                      "\"weight_map\": {tensor: file}})");
    }
    auto map_it = index.find("weight_map");
    if (map_it == index.end() || !map_it->is_object() || map_it->empty()) {
      return DataLoss(index_path +
                      ": field 'weight_map' must be a non-empty object "
                      "{tensor name: shard file}");
    }
    std::map<std::string, size_t> file_index;
    for (auto it = map_it->begin(); it != map_it->end(); ++it) {
      if (!it->is_string() || !IsSafeRelativeName(it->get<std::string>())) {
        return DataLoss(index_path + ": weight_map entry '" + it.key() +
                        "' must name a shard file in the same directory, got " + it->dump());
      }
      const std::string file = it->get<std::string>();
      auto [pos, inserted] = file_index.emplace(file, reader->files_.size());
      if (inserted) {
        auto opened = SafetensorsFile::Open(model_dir + "/" + file);
        if (!opened.ok()) {
          return Status(opened.status().code(),
                        opened.status().message() + " (listed in " + index_path + ")");
        }
        reader->files_.push_back(std::move(opened).value());
      }
      const SafetensorsFile& shard = *reader->files_[pos->second];
      if (shard.Find(it.key()) == nullptr) {
        return DataLoss(index_path + " says tensor '" + it.key() + "' is in " + file + ", but " +
                        shard.path() + " has no such tensor");
      }
      reader->owner_[it.key()] = pos->second;
    }
    return reader;
  }
  if (env->FileExists(single_path)) {
    AIR_ASSIGN_OR_RETURN(auto file, SafetensorsFile::Open(single_path));
    for (const auto& e : file->entries()) reader->owner_[e.name] = 0;
    reader->files_.push_back(std::move(file));
    return reader;
  }
  std::string hint;
  if (env->FileExists(model_dir + "/pytorch_model.bin") ||
      env->FileExists(model_dir + "/pytorch_model.bin.index.json")) {
    hint =
        "; found PyTorch .bin weights, which air does not read — convert them with "
        "transformers (save_pretrained(..., safe_serialization=True))";
  }
  return NotFound("no model weights in " + model_dir + ": looked for " + single_path + " and " +
                  index_path + hint);
}

const SafetensorsEntry* WeightReader::Find(const std::string& name,
                                           const SafetensorsFile** file) const {
  auto it = owner_.find(name);
  if (it == owner_.end()) return nullptr;
  const SafetensorsFile& f = *files_[it->second];
  if (file != nullptr) *file = &f;
  return f.Find(name);
}

std::vector<std::string> WeightReader::Names() const {
  std::vector<std::string> names;
  for (const auto& [name, _] : owner_) names.push_back(name);
  return names;
}

std::string WeightReader::FileList() const {
  std::vector<std::string> paths;
  for (const auto& f : files_) paths.push_back(f->path());
  return Join(paths, ", ");
}

Status WeightReader::ReadInto(const std::string& name, Tensor& out) const {
  const SafetensorsFile* file = nullptr;
  if (Find(name, &file) == nullptr) {
    return NotFound("tensor '" + name + "' (shape " + out.ShapeString() +
                    ") is missing from the model weights in " + FileList());
  }
  return file->ReadInto(name, out);
}

Status SaveHfCheckpoint(const std::string& dir, const ModelConfig& config,
                        const std::vector<NamedTensorRef>& tensors, const SaveOptions& options,
                        Env* env) {
  AIR_RETURN_IF_ERROR(env->CreateDirs(dir));
  const std::map<std::string, std::string> metadata = {{"format", "pt"}};
  const size_t elem = DTypeSize(options.dtype);

  // Group tensors into shards of at most max_shard_bytes (a larger tensor gets its own).
  std::vector<std::vector<NamedTensorRef>> shards(1);
  uint64_t current = 0, total = 0;
  for (const auto& t : tensors) {
    const uint64_t bytes = static_cast<uint64_t>(t.tensor->numel()) * elem;
    if (options.max_shard_bytes > 0 && current > 0 && current + bytes > options.max_shard_bytes) {
      shards.emplace_back();
      current = 0;
    }
    shards.back().push_back(t);
    current += bytes;
    total += bytes;
  }

  AIR_RETURN_IF_ERROR(env->WriteFileAtomic(
      dir + "/config.json", ModelConfigToJson(config, TorchDTypeName(options.dtype)).dump(2)));
  std::set<std::string> written;
  if (shards.size() == 1) {
    AIR_RETURN_IF_ERROR(WriteSafetensors(dir + "/" + kSafetensorsSingleName, shards[0],
                                         options.dtype, metadata, env));
    written.insert(kSafetensorsSingleName);
  } else {
    nlohmann::ordered_json weight_map = nlohmann::ordered_json::object();
    for (size_t i = 0; i < shards.size(); ++i) {
      const std::string name = ShardName(i, shards.size());
      AIR_RETURN_IF_ERROR(
          WriteSafetensors(dir + "/" + name, shards[i], options.dtype, metadata, env));
      for (const auto& t : shards[i]) weight_map[t.name] = name;
      written.insert(name);
    }
    nlohmann::ordered_json index;
    index["metadata"] = {{"total_size", total}};
    index["weight_map"] = weight_map;
    AIR_RETURN_IF_ERROR(env->WriteFileAtomic(dir + "/" + kSafetensorsIndexName, index.dump(2)));
    written.insert(kSafetensorsIndexName);
  }
  AIR_RETURN_IF_ERROR(
      env->WriteFileAtomic(dir + "/generation_config.json", GenerationConfigJson(config).dump(2)));
  // Remove weights of the other layout left by an earlier save into the same directory.
  AIR_ASSIGN_OR_RETURN(auto entries, env->ListDir(dir));
  for (const std::string& name : entries) {
    const bool weight_file =
        name == kSafetensorsSingleName || name == kSafetensorsIndexName || IsShardName(name);
    if (weight_file && written.count(name) == 0) {
      AIR_RETURN_IF_ERROR(env->RemoveAll(dir + "/" + name));
    }
  }
  return Status::Ok();
}

Result<std::vector<std::string>> CopyTokenizerFiles(const std::string& from_dir,
                                                    const std::string& to_dir, Env* env) {
  static const char* const kNames[] = {"tokenizer.json",
                                       "tokenizer_config.json",
                                       "special_tokens_map.json",
                                       "tokenizer.model",
                                       "vocab.json",
                                       "merges.txt",
                                       "chat_template.jinja",
                                       "added_tokens.json"};
  AIR_RETURN_IF_ERROR(env->CreateDirs(to_dir));
  std::vector<std::string> copied;
  for (const char* name : kNames) {
    const std::string src = from_dir + "/" + name;
    if (!env->FileExists(src)) continue;
    AIR_ASSIGN_OR_RETURN(std::string content, env->ReadFile(src));
    AIR_RETURN_IF_ERROR(env->WriteFileAtomic(to_dir + "/" + name, content));
    copied.emplace_back(name);
  }
  return copied;
}

}  // namespace air::engine
