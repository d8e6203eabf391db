// `air model init --config FILE --out DIR`: writes a random-initialized model (Llama family or
// GPT-OSS) in
// Hugging Face layout (config.json, model.safetensors or shards + index, generation_config.json,
// and optionally the tokenizer files of another model) from a config.json-style file in JSON or
// YAML. Initialization follows HF (normal(0, initializer_range) for linear and embedding
// weights, ones for norms, zeros for biases) from a seed, so the same command gives the same
// bytes. Weights cannot be downloaded here; demos and tests start from such a model.
//
// `air model inspect MODEL`: resolves MODEL (a directory or a hub id in the HF cache), reads its
// config and checks every tensor the architecture needs (present, right shape, valid file;
// GPT-OSS's experts dense or MXFP4) without loading the weights, and prints a summary. Every
// problem is listed; exit 1 if any.
#include <fmt/format.h>

#include <cctype>
#include <map>
#include <set>

#include "base/strings.h"
#include "cli/commands.h"
#include "engine/backend/registry.h"
#include "engine/io/checkpoint.h"
#include "engine/io/gpt_oss_checkpoint.h"
#include "engine/io/hf_config.h"
#include "engine/io/hf_hub.h"
#include "engine/io/hf_state_dict.h"
#include "engine/io/state_dict_adapter.h"
#include "engine/model/memory_check.h"
#include "engine/model/model_factory.h"
#include "spec/scalar_types.h"
#include "spec/yaml_tree.h"

namespace air::cli {
namespace {

using nlohmann::json;

// YAML (or JSON, a subset) -> JSON, keeping plain scalars typed the way YAML 1.2 reads them
// (spec/scalar_types.h) and quoted scalars as strings. A key that is not a scalar is an error.
Result<json> YamlToJson(const spec::YamlNode& node, const std::string& path) {
  if (node.IsSequence()) {
    json out = json::array();
    for (const auto& item : node.items) {
      AIR_ASSIGN_OR_RETURN(json value, YamlToJson(item, path));
      out.push_back(std::move(value));
    }
    return out;
  }
  if (node.IsMapping()) {
    json out = json::object();
    for (const auto& [key, value] : node.entries) {
      if (!key.IsScalar()) {
        return InvalidArgument(fmt::format(
            "{}:{}:{}: a field name must be a string, got {} (expected config.json fields: "
            "name: value)",
            path, key.location.line, key.location.column, spec::DescribeNode(key)));
      }
      AIR_ASSIGN_OR_RETURN(out[key.value], YamlToJson(value, path));
    }
    return out;
  }
  const std::string& text = node.value;
  switch (spec::ResolveScalarType(node)) {
    case spec::ScalarType::kNull:
      return json(nullptr);
    case spec::ScalarType::kBool:
      return json(text == "true" || text == "True" || text == "TRUE");
    case spec::ScalarType::kInt:
      try {
        return json(std::stoll(text, nullptr, 0));
      } catch (...) {
        return json(text);
      }
    case spec::ScalarType::kFloat:
      try {
        return json(std::stod(text));
      } catch (...) {
        return json(text);
      }
    case spec::ScalarType::kString:
      break;
  }
  return json(text);
}

Result<json> ReadConfigFile(Env* env, const std::string& path) {
  auto text = env->ReadFile(path);
  if (!text.ok()) {
    return Status(text.status().code(),
                  "cannot read --config " + path + ": " + text.status().message());
  }
  AIR_ASSIGN_OR_RETURN(spec::YamlNode root, spec::LoadYaml(*text, path));
  if (!root.IsMapping()) {
    return InvalidArgument(path +
                           ": expected a mapping of config.json fields "
                           "(architectures, vocab_size, hidden_size, ...)");
  }
  AIR_ASSIGN_OR_RETURN(json j, YamlToJson(root, path));
  // A misspelled known field would otherwise be silently ignored (HF configs carry many fields
  // air does not read, so unknown names that resemble nothing are allowed).
  const auto& known = engine::KnownConfigFields();
  for (auto it = j.begin(); it != j.end(); ++it) {
    if (std::find(known.begin(), known.end(), it.key()) != known.end()) continue;
    const std::string close = ClosestMatch(it.key(), known);
    if (!close.empty()) {
      return InvalidArgument(path + ": unknown field '" + it.key() + "' (did you mean '" + close +
                             "'?)");
    }
  }
  return j;
}

struct InitFlags {
  std::string config, out, dtype = "float32", max_shard_size, tokenizer;
  uint64_t seed = 0;
  bool force = false;
};

Status RunInit(CliContext& ctx, const InitFlags& f) {
  AIR_ASSIGN_OR_RETURN(json j, ReadConfigFile(ctx.env, f.config));
  AIR_ASSIGN_OR_RETURN(engine::ModelConfig config, engine::ModelConfigFromJson(j, f.config));
  AIR_RETURN_IF_ERROR(
      engine::CheckModelFitsInMemory(ctx.env, config, engine::InferenceBytes(), "initialization")
          .WithContext("--config " + f.config));
  engine::SaveOptions save;
  if (f.dtype == "bfloat16") {
    save.dtype = engine::DType::kBF16;
  } else if (f.dtype != "float32") {
    return InvalidArgument("--dtype: '" + f.dtype + "' is not supported; use float32 or bfloat16");
  }
  if (!f.max_shard_size.empty()) {
    auto bytes = ParseByteSize(f.max_shard_size);
    if (!bytes.ok()) return bytes.status().WithContext("--max-shard-size");
    save.max_shard_bytes = *bytes;
  }
  for (const char* name :
       {"config.json", engine::kSafetensorsSingleName, engine::kSafetensorsIndexName}) {
    if (!f.force && ctx.env->FileExists(f.out + "/" + name)) {
      return AlreadyExists("--out " + f.out + " already holds a model (" + name +
                           "); pass --force to overwrite it");
    }
  }
  config.torch_dtype = f.dtype;
  // No compute needed: the reference backend (no thread pool) holds the weights.
  AIR_ASSIGN_OR_RETURN(std::shared_ptr<engine::Backend> backend,
                       engine::CreateBackend({.kind = "reference"}));
  AIR_ASSIGN_OR_RETURN(auto model, engine::CreateModel(config, std::move(backend)));
  model->InitWeights(f.seed);
  AIR_RETURN_IF_ERROR(engine::SaveHfModel(*model, f.out, save));
  std::vector<std::string> tokenizer_files;
  if (!f.tokenizer.empty()) {
    AIR_ASSIGN_OR_RETURN(std::string tokenizer_dir, engine::ResolveModelDir(f.tokenizer, ctx.env));
    AIR_ASSIGN_OR_RETURN(tokenizer_files, engine::CopyTokenizerFiles(tokenizer_dir, f.out));
    if (tokenizer_files.empty()) {
      return NotFound("--tokenizer " + f.tokenizer +
                      ": no tokenizer files (tokenizer.json, "
                      "tokenizer_config.json, ...) in " +
                      tokenizer_dir);
    }
  }
  AIR_ASSIGN_OR_RETURN(auto files, ctx.env->ListDir(f.out));
  const int64_t params = model->NumParameters();
  const uint64_t bytes = static_cast<uint64_t>(params) * engine::DTypeSize(save.dtype);
  json data = {{"out", f.out},         {"architecture", engine::ArchitectureClassName(config.arch)},
               {"parameters", params}, {"bytes", bytes},
               {"dtype", f.dtype},     {"seed", f.seed},
               {"files", files},       {"tokenizer_files", tokenizer_files}};
  std::string text = "initialized " + std::string(engine::ArchitectureClassName(config.arch)) +
                     " with " + std::to_string(params) + " parameters (" + HumanBytes(bytes) +
                     ", " + f.dtype + ", seed " + std::to_string(f.seed) + ") in " + f.out +
                     "\n  files: " + Join(files, ", ");
  EmitData(ctx, data, text);
  return Status::Ok();
}

Status RunInspect(CliContext& ctx, const std::string& name) {
  AIR_ASSIGN_OR_RETURN(std::string dir, engine::ResolveModelDir(name, ctx.env));
  AIR_ASSIGN_OR_RETURN(engine::ModelConfig config, engine::LoadModelConfig(dir));
  AIR_ASSIGN_OR_RETURN(auto reader, engine::WeightReader::Open(dir));
  std::vector<std::string> problems;
  std::set<std::string> expected;
  std::set<std::string> dtypes;
  int64_t params = 0;
  const auto adapter = engine::StateDictAdapterFor(config);
  for (const auto& spec : engine::ParameterSpecsFor(config))
    params += engine::NumElements(spec.shape);
  if (config.arch == engine::Architecture::kGptOss) {
    // The released layout may hold the experts as MXFP4 blocks and scales: the GPT-OSS check
    // lists every missing or mismatched tensor of whichever layout the checkpoint has.
    const Status complete = engine::CheckHfCheckpoint(*reader, config);
    if (!complete.ok()) return DataLoss(complete.message());
    const auto format = engine::GptOssExpertFormatOf(*reader, *config.gpt_oss);
    for (const auto& spec : engine::GptOssCheckpointTensors(*config.gpt_oss, format)) {
      expected.insert(spec.name);
      const engine::SafetensorsEntry* entry = reader->Find(spec.name, nullptr);
      dtypes.insert(entry->raw_u8 ? "U8 (MXFP4)" : engine::DTypeName(entry->dtype));
    }
  }
  for (auto spec : engine::ParameterSpecsFor(config)) {
    if (config.arch == engine::Architecture::kGptOss) break;  // checked above
    spec.name = adapter->ToHf(spec.name);                     // checkpoints hold HF names
    expected.insert(spec.name);
    const engine::SafetensorsFile* file = nullptr;
    const engine::SafetensorsEntry* entry = reader->Find(spec.name, &file);
    if (entry == nullptr) {
      problems.push_back("tensor '" + spec.name + "' (shape " + engine::ShapeToString(spec.shape) +
                         ") is missing from " + reader->FileList());
    } else if (entry->shape != spec.shape) {
      problems.push_back(file->path() + ": tensor '" + spec.name + "' has shape " +
                         engine::ShapeToString(entry->shape) + " but " +
                         engine::ArchitectureClassName(config.arch) +
                         " with this config.json "
                         "expects " +
                         engine::ShapeToString(spec.shape));
    } else {
      dtypes.insert(engine::DTypeName(entry->dtype));
    }
  }
  std::vector<std::string> unused;
  for (const std::string& n : reader->Names()) {
    if (expected.count(n) == 0) unused.push_back(n);
  }
  if (!problems.empty()) {
    return DataLoss(std::to_string(problems.size()) + " problem(s) with the model in " + dir +
                    ":\n  " + Join(problems, "\n  "));
  }
  std::vector<int64_t> windows(config.layer_sliding_window.begin(),
                               config.layer_sliding_window.end());
  json data = {{"dir", dir},
               {"architecture", engine::ArchitectureClassName(config.arch)},
               {"parameters", params},
               {"layers", config.num_layers},
               {"hidden_size", config.hidden_size},
               {"intermediate_size", config.intermediate_size},
               {"heads", config.num_heads},
               {"kv_heads", config.num_kv_heads},
               {"head_dim", config.head_dim},
               {"vocab_size", config.vocab_size},
               {"rope_type", config.rope.type},
               {"rope_theta", config.rope.theta},
               {"tie_word_embeddings", config.tie_word_embeddings},
               {"sliding_windows", windows},
               {"dtypes", std::vector<std::string>(dtypes.begin(), dtypes.end())},
               {"files", reader->FileList()},
               {"unused_tensors", unused}};
  std::string text = std::string(engine::ArchitectureClassName(config.arch)) + " in " + dir +
                     "\n  parameters: " + std::to_string(params) + " (" +
                     Join(std::vector<std::string>(dtypes.begin(), dtypes.end()), ", ") + ")" +
                     "\n  layers " + std::to_string(config.num_layers) + ", hidden " +
                     std::to_string(config.hidden_size) + ", heads " +
                     std::to_string(config.num_heads) + "/" + std::to_string(config.num_kv_heads) +
                     " (head_dim " + std::to_string(config.head_dim) + "), vocab " +
                     std::to_string(config.vocab_size) + ", rope " + config.rope.type +
                     (config.tie_word_embeddings ? ", tied embeddings" : "") +
                     "\n  files: " + reader->FileList() + "\n  all tensors present and valid";
  if (!unused.empty()) text += "\n  unused tensors: " + Join(unused, ", ");
  EmitData(ctx, data, text);
  return Status::Ok();
}

}  // namespace

void RegisterModelCommand(CLI::App& root, CliContext& ctx) {
  auto* model = root.add_subcommand("model", "create and check Hugging Face model directories");
  model->require_subcommand(1);

  auto init_flags = std::make_shared<InitFlags>();
  auto* init = model->add_subcommand(
      "init", "write a random-initialized model (HF layout) from a config.json-style file");
  init->add_option("--config", init_flags->config,
                   "model config in JSON or YAML (config.json fields: architectures, "
                   "vocab_size, hidden_size, ...)")
      ->required();
  init->add_option("--out", init_flags->out, "output directory")->required();
  init->add_option("--seed", init_flags->seed, "random seed (default 0)");
  init->add_option("--dtype", init_flags->dtype, "float32 (default) or bfloat16");
  init->add_option("--max-shard-size", init_flags->max_shard_size,
                   "split weights into shards of at most this size (e.g. 2GB)");
  init->add_option("--tokenizer", init_flags->tokenizer,
                   "copy tokenizer files from this model directory or hub id");
  init->add_flag("--force", init_flags->force, "overwrite a model already in --out");
  init->callback([&ctx, init_flags] {
    Status s = RunInit(ctx, *init_flags);
    if (!s.ok()) EmitError(ctx, s);
  });

  auto model_name = std::make_shared<std::string>();
  auto* inspect = model->add_subcommand(
      "inspect", "check a model directory (or hub id in the HF cache) and summarize it");
  inspect->add_option("model", *model_name, "model directory or hub id")->required();
  inspect->callback([&ctx, model_name] {
    Status s = RunInspect(ctx, *model_name);
    if (!s.ok()) EmitError(ctx, s);
  });
}

}  // namespace air::cli
