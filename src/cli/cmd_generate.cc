// `air generate --model DIR [--adapter DIR] --prompt TEXT [--max-new-tokens N] [--temperature T]
// [--top-p P] [--seed S] [--chat] [--device cpu|cuda|cuda:N]`: continues a prompt with a Hugging
// Face Llama-family model (a directory or a hub id in the HF cache; with --adapter, a PEFT LoRA
// adapter applied to it unmerged, as PeftModel runs it) using the KV cache — greedy at temperature
// 0, nucleus sampling otherwise — and stops at an end-of-sequence token. Text mode streams the
// continuation to stdout; -o json returns it in the envelope with token counts and speed.
//
// `air generate --model DIR --dataset FILE [--limit N]` instead generates for every record of an
// alpaca or chat dataset (the prompt the trainer would build, up to the answer) and compares
// with the record's answer: a held-out check of what a fine-tune learned.
#include <fmt/format.h>

#include "cli/commands.h"
#include "engine/backend/registry.h"
#include "engine/data/chat_template.h"
#include "engine/data/dataset.h"
#include "engine/data/tokenizer.h"
#include "engine/io/hf_config.h"
#include "engine/io/hf_hub.h"
#include "engine/io/hf_state_dict.h"
#include "engine/lora/lora_load.h"
#include "engine/model/causal_lm.h"
#include "engine/model/memory_check.h"
#include "engine/train/generate.h"
#include "engine/train/generation_eval.h"

namespace air::cli {
namespace {

using engine::CausalLm;
using engine::Tokenizer;

struct GenerateFlags {
  std::string model;
  std::string adapter;  // a PEFT LoRA adapter applied to --model (unmerged)
  std::string prompt;
  std::string dataset;
  int limit = 0;
  int max_new_tokens = 128;
  double temperature = 0.0;
  double top_p = 1.0;
  uint64_t seed = 0;
  bool chat = false;
  int threads = 0;
  std::string device = "cpu";  // cpu, cuda (cuda:0) or cuda:N
  bool prompt_given = false;   // --prompt was on the command line (perhaps empty)
  bool dataset_given = false;  // likewise --dataset
};

// Prints the decoded continuation as it grows, holding back a trailing partial UTF-8 character
// (which Decode shows as U+FFFD) until its remaining bytes arrive.
class StreamingPrinter {
 public:
  StreamingPrinter(const Tokenizer& tokenizer, std::ostream* out)
      : tokenizer_(tokenizer), out_(out) {}

  void Add(int32_t token) {
    tokens_.push_back(token);
    Print(/*final=*/false);
  }
  // Prints whatever is held back (an incomplete character at the end stays U+FFFD).
  void Finish() { Print(/*final=*/true); }

 private:
  void Print(bool final) {
    std::string text = tokenizer_.Decode(tokens_, /*skip_special_tokens=*/true);
    if (!final && text.size() >= 3 && text.compare(text.size() - 3, 3, "\xEF\xBF\xBD") == 0) {
      return;
    }
    if (text.size() > printed_) {
      *out_ << text.substr(printed_) << std::flush;
      printed_ = text.size();
    }
  }

  const Tokenizer& tokenizer_;
  std::ostream* out_;
  std::vector<int32_t> tokens_;
  size_t printed_ = 0;
};

struct LoadedModel {
  std::string dir;
  Tokenizer tokenizer;
  engine::lora::ModelWithAdapter loaded;  // the model, and its adapter with --adapter
  CausalLm& model() { return *loaded.model; }
  // A memory failure of the adapters' scratch inside a forward (checked after generating).
  Status status() const { return loaded.lora ? loaded.lora->status() : Status::Ok(); }
};

Result<LoadedModel> Load(CliContext& ctx, const GenerateFlags& flags) {
  auto model_dir = engine::ResolveModelDir(flags.model, ctx.env);
  if (!model_dir.ok()) return model_dir.status().WithContext("--model");
  AIR_ASSIGN_OR_RETURN(Tokenizer tokenizer, Tokenizer::Load(*model_dir, ctx.env));
  AIR_ASSIGN_OR_RETURN(engine::ModelConfig config, engine::LoadModelConfig(*model_dir));
  Result<engine::Device> device = engine::ParseDevice(flags.device);
  if (!device.ok()) return device.status().WithContext("--device");
  Result<std::shared_ptr<engine::Backend>> created =
      engine::CreateBackend(engine::ForDevice(*device, flags.threads));
  if (!created.ok()) return created.status().WithContext("--device " + flags.device);
  std::shared_ptr<engine::Backend> backend = *created;
  if (device->type == engine::DeviceType::kCpu) {
    AIR_RETURN_IF_ERROR(
        engine::CheckModelFitsInMemory(ctx.env, config, engine::InferenceBytes(), "generation")
            .WithContext(*model_dir));
  } else {
    AIR_ASSIGN_OR_RETURN(const engine::DeviceMemory memory, backend->QueryMemory());
    AIR_RETURN_IF_ERROR(engine::CheckModelFitsOnDevice(
                            config, engine::InferenceBytes(), "generation", {}, memory.free_bytes,
                            device->ToString() + ", " + backend->Describe())
                            .WithContext(*model_dir));
  }
  LoadedModel out{*model_dir, std::move(tokenizer), {}};
  if (flags.adapter.empty()) {
    AIR_ASSIGN_OR_RETURN(out.loaded.model, engine::LoadHfModel(*model_dir, std::move(backend)));
    return out;
  }
  auto adapter_dir = engine::ResolveModelDir(flags.adapter, ctx.env);
  if (!adapter_dir.ok()) return adapter_dir.status().WithContext("--adapter");
  auto loaded = engine::lora::LoadModelWithAdapter(*model_dir, *adapter_dir, std::move(backend));
  if (!loaded.ok()) return loaded.status().WithContext("--adapter " + *adapter_dir);
  out.loaded = std::move(*loaded);
  return out;
}

Status ValidateFlags(const GenerateFlags& flags, engine::train::SamplingOptions& sampling) {
  sampling = {flags.temperature, flags.top_p, flags.seed};
  AIR_RETURN_IF_ERROR(engine::train::ValidateSamplingOptions(sampling));
  if (flags.max_new_tokens < 1) {
    return InvalidArgument(
        fmt::format("--max-new-tokens: {} is out of range: must be >= 1", flags.max_new_tokens));
  }
  if (flags.prompt_given == flags.dataset_given) {
    return InvalidArgument("give exactly one of --prompt TEXT or --dataset FILE");
  }
  if (flags.prompt_given && flags.prompt.empty()) {
    return InvalidArgument("--prompt: the prompt is empty; give the text to continue");
  }
  if (flags.dataset_given && flags.chat) {
    return InvalidArgument(
        "--chat goes with --prompt; with --dataset, chat records (messages) are rendered with the "
        "chat template and alpaca records with the ### Instruction prompt, as in training");
  }
  if (flags.limit < 0) {
    return InvalidArgument(fmt::format("--limit: {} is out of range: must be >= 0", flags.limit));
  }
  return Status::Ok();
}

Status RunPrompt(CliContext& ctx, const GenerateFlags& flags,
                 const engine::train::SamplingOptions& sampling) {
  using namespace air::engine;
  AIR_ASSIGN_OR_RETURN(LoadedModel loaded, Load(ctx, flags));
  std::string prompt_text = flags.prompt;
  bool add_special_tokens = true;
  if (flags.chat) {
    // One user turn and the assistant header, rendered by the model's chat template; the
    // template writes the special tokens itself (as apply_chat_template does).
    auto chat_template = ChatTemplate::ForTokenizer(loaded.tokenizer);
    if (!chat_template.ok()) return chat_template.status().WithContext("--chat");
    prompt_text = chat_template->RenderText({ChatMessage{"user", flags.prompt}},
                                            /*add_generation_prompt=*/true);
    add_special_tokens = false;
  }
  AIR_ASSIGN_OR_RETURN(std::vector<int32_t> prompt,
                       loaded.tokenizer.Encode(prompt_text, add_special_tokens));

  train::GenerateOptions options;
  options.max_new_tokens = flags.max_new_tokens;
  options.sampling = sampling;
  options.eos_token_ids = train::EndOfGenerationIds(loaded.model(), loaded.tokenizer, flags.chat);

  StreamingPrinter printer(loaded.tokenizer, ctx.out);
  std::function<void(int32_t)> on_token;
  if (!ctx.json()) on_token = [&printer](int32_t t) { printer.Add(t); };
  AIR_ASSIGN_OR_RETURN(train::GenerateResult result,
                       train::Generate(loaded.model(), prompt, options, on_token));
  AIR_RETURN_IF_ERROR(loaded.status());

  const std::string text = loaded.tokenizer.Decode(result.tokens, /*skip_special_tokens=*/true);
  const double tokens_per_s =
      result.decode_s > 0 ? static_cast<double>(result.tokens.size()) / result.decode_s : 0.0;
  nlohmann::json data = {{"model_dir", loaded.dir},
                         {"prompt", flags.prompt},
                         {"text", text},
                         {"prompt_tokens", prompt.size()},
                         {"new_tokens", result.tokens.size()},
                         {"token_ids", result.tokens},
                         {"stopped_at_eos", result.stopped_at_eos},
                         {"prefill_s", result.prefill_s},
                         {"decode_tokens_per_s", tokens_per_s}};
  if (ctx.json()) {
    EmitData(ctx, data, "");
  } else {
    printer.Finish();
    *ctx.out << "\n";
    *ctx.err << fmt::format("[{} prompt tokens, {} new tokens{}, {:.1f} tok/s]\n", prompt.size(),
                            result.tokens.size(), result.stopped_at_eos ? ", stopped at eos" : "",
                            tokens_per_s);
    ctx.exit_code = kExitOk;
  }
  return Status::Ok();
}

// Generations for every record of a dataset, compared with the records' answers.
Status GenerateForDataset(CliContext& ctx, const GenerateFlags& flags,
                          const engine::train::SamplingOptions& sampling) {
  using namespace air::engine;
  auto files = ResolveDataset(flags.dataset, ctx.env);
  if (!files.ok()) return files.status().WithContext("--dataset");
  AIR_ASSIGN_OR_RETURN(std::vector<DatasetRecord> records, LoadRecords(*files, ctx.env));
  if (flags.limit > 0 && records.size() > static_cast<size_t>(flags.limit)) {
    records.resize(static_cast<size_t>(flags.limit));
  }
  AIR_ASSIGN_OR_RETURN(LoadedModel loaded, Load(ctx, flags));
  AIR_ASSIGN_OR_RETURN(std::vector<train::EvalPrompt> prompts,
                       train::EvalPromptsFromRecords(records, loaded.tokenizer));

  nlohmann::json results = nlohmann::json::array();
  int matches = 0;
  int ended = 0;
  std::string text;
  for (const train::EvalPrompt& p : prompts) {
    AIR_ASSIGN_OR_RETURN(std::vector<int32_t> ids,
                         loaded.tokenizer.Encode(p.text, p.add_special_tokens));
    train::GenerateOptions options;
    options.max_new_tokens = flags.max_new_tokens;
    options.sampling = sampling;
    options.eos_token_ids =
        train::EndOfGenerationIds(loaded.model(), loaded.tokenizer, !p.add_special_tokens);
    auto generated_ids = train::Generate(loaded.model(), ids, options);
    if (!generated_ids.ok()) return generated_ids.status().WithContext(p.source);
    AIR_RETURN_IF_ERROR(loaded.status());
    const train::GenerateResult& result = *generated_ids;
    const std::string generated =
        loaded.tokenizer.Decode(result.tokens, /*skip_special_tokens=*/true);
    const bool match = train::ExactMatch(generated, p.expected);
    matches += match;
    ended += result.stopped_at_eos;
    results.push_back({{"source", p.source},
                       {"expected", p.expected},
                       {"generated", generated},
                       {"exact_match", match},
                       {"stopped_at_eos", result.stopped_at_eos}});
    text += fmt::format("{} {}\n  expected: {:?}\n  got:      {:?}\n", match ? "ok  " : "MISS",
                        p.source, p.expected, generated);
  }
  const double rate = prompts.empty() ? 0.0 : static_cast<double>(matches) / prompts.size();
  text += fmt::format(
      "exact match: {}/{} ({:.1f}%); {} of {} answers ended with an end-of-"
      "sequence token",
      matches, prompts.size(), 100.0 * rate, ended, prompts.size());
  EmitData(ctx,
           {{"model_dir", loaded.dir},
            {"dataset", flags.dataset},
            {"results", results},
            {"exact_match", matches},
            {"stopped_at_eos", ended},
            {"total", prompts.size()},
            {"exact_match_rate", rate}},
           text);
  return Status::Ok();
}

}  // namespace

void RegisterGenerateCommand(CLI::App& root, CliContext& ctx) {
  auto* cmd = root.add_subcommand("generate", "continue a prompt with a model (KV cache)");
  auto flags = std::make_shared<GenerateFlags>();
  cmd->add_option("--model", flags->model, "model directory or hub id in the HF cache")->required();
  cmd->add_option("--adapter", flags->adapter,
                  "a PEFT LoRA adapter directory (or hub id) applied to --model, unmerged");
  cmd->add_option("--prompt", flags->prompt, "the text to continue");
  cmd->add_option("--dataset", flags->dataset,
                  "instead of --prompt: answer every record of an alpaca/chat dataset and "
                  "report exact matches");
  cmd->add_option("--limit", flags->limit, "with --dataset: at most this many records");
  cmd->add_option("--max-new-tokens", flags->max_new_tokens, "stop after this many tokens")
      ->default_val(128);
  cmd->add_option("--temperature", flags->temperature, "0: greedy; > 0: sample")->default_val(0.0);
  cmd->add_option("--top-p", flags->top_p, "nucleus sampling mass in (0, 1]")->default_val(1.0);
  cmd->add_option("--seed", flags->seed, "random seed for sampling")->default_val(0);
  cmd->add_flag("--chat", flags->chat, "wrap the prompt as a user turn of the chat template");
  cmd->add_option("--device", flags->device,
                  "where to compute: cpu (default), cuda (cuda:0) or cuda:N");
  cmd->add_option("--threads", flags->threads, "compute threads (default: every core)")
      ->check(CLI::Range(0, 1024));
  cmd->callback([&ctx, flags, cmd] {
    engine::train::SamplingOptions sampling;
    flags->prompt_given = cmd->count("--prompt") > 0;
    flags->dataset_given = cmd->count("--dataset") > 0;
    Status status = ValidateFlags(*flags, sampling);
    if (status.ok()) {
      status = flags->dataset.empty() ? RunPrompt(ctx, *flags, sampling)
                                      : GenerateForDataset(ctx, *flags, sampling);
    }
    if (!status.ok()) EmitError(ctx, status);
  });
}

}  // namespace air::cli
