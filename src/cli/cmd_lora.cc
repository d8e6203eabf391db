// `air lora merge --base DIR --adapter DIR --out DIR`: folds a PEFT LoRA adapter into its base
// model and writes the merged model as a Hugging Face checkpoint — PEFT's merge_and_unload
// (W += B·A·scaling in fp32; modules_to_save's trained weights replace the base's) followed by
// save_pretrained. The base and the adapter may be directories or hub ids in the HF cache; the
// tokenizer files of the base are copied along. Errors name the file and the first tensor that
// does not fit.
#include <fmt/format.h>

#include <filesystem>

#include "cli/commands.h"
#include "engine/backend/registry.h"
#include "engine/io/checkpoint.h"
#include "engine/io/hf_config.h"
#include "engine/io/hf_hub.h"
#include "engine/lora/lora_load.h"
#include "engine/model/memory_check.h"

namespace air::cli {
namespace {

struct MergeFlags {
  std::string base;
  std::string adapter;
  std::string out;
  int threads = 0;
};

Status RunMerge(CliContext& ctx, const MergeFlags& flags) {
  using namespace air::engine;
  auto base = ResolveModelDir(flags.base, ctx.env);
  if (!base.ok()) return base.status().WithContext("--base");
  auto adapter = ResolveModelDir(flags.adapter, ctx.env);
  if (!adapter.ok()) return adapter.status().WithContext("--adapter");
  std::error_code ec;
  if (std::filesystem::exists(flags.out, ec) &&
      (std::filesystem::equivalent(flags.out, *base, ec) ||
       std::filesystem::equivalent(flags.out, *adapter, ec))) {
    return InvalidArgument(fmt::format(
        "--out {}: is the base model's or the adapter's directory; merging would overwrite what "
        "it reads — choose another directory",
        flags.out));
  }
  AIR_ASSIGN_OR_RETURN(ModelConfig config, LoadModelConfig(*base));
  AIR_RETURN_IF_ERROR(
      CheckModelFitsInMemory(ctx.env, config, InferenceBytes(), "merging").WithContext(*base));
  AIR_ASSIGN_OR_RETURN(std::shared_ptr<Backend> backend,
                       CreateBackend({.kind = "fast", .num_threads = flags.threads}));
  AIR_ASSIGN_OR_RETURN(lora::ModelWithAdapter loaded,
                       lora::LoadModelWithAdapter(*base, *adapter, std::move(backend)));
  const size_t adapters = loaded.lora->adapters().size() + loaded.lora->expert_adapters().size();
  AIR_RETURN_IF_ERROR(lora::MergeAdapters(loaded));
  AIR_RETURN_IF_ERROR(lora::SaveBaseModel(*loaded.model, flags.out));
  AIR_ASSIGN_OR_RETURN(std::vector<std::string> copied, CopyTokenizerFiles(*base, flags.out));
  EmitData(ctx,
           {{"base", *base},
            {"adapter", *adapter},
            {"out", flags.out},
            {"merged_modules", adapters},
            {"trained_whole", loaded.lora->plan().trained_whole},
            {"tokenizer_files", copied}},
           fmt::format("merged {} LoRA adapters{} of {} into {} (base {})", adapters,
                       loaded.lora->plan().trained_whole.empty()
                           ? ""
                           : fmt::format(" and {} trained modules",
                                         loaded.lora->plan().trained_whole.size()),
                       *adapter, flags.out, *base));
  return Status::Ok();
}

}  // namespace

void RegisterLoraCommand(CLI::App& root, CliContext& ctx) {
  auto* lora = root.add_subcommand("lora", "work with PEFT LoRA adapters");
  lora->require_subcommand(1);
  auto flags = std::make_shared<MergeFlags>();
  auto* merge = lora->add_subcommand(
      "merge", "fold an adapter into its base model and write the merged HF checkpoint");
  merge->add_option("--base", flags->base, "base model directory or hub id")->required();
  merge
      ->add_option("--adapter", flags->adapter,
                   "PEFT adapter directory (adapter_config.json, adapter_model.safetensors)")
      ->required();
  merge->add_option("--out", flags->out, "output directory for the merged model")->required();
  merge->add_option("--threads", flags->threads, "compute threads (default: every core)")
      ->check(CLI::Range(0, 1024));
  merge->callback([&ctx, flags] {
    Status s = RunMerge(ctx, *flags);
    if (!s.ok()) EmitError(ctx, s);
  });
}

}  // namespace air::cli
