// Tests for TrainConfig parsing: defaults, every type and range error with file:line:col, unknown
// keys with did-you-mean, duplicate keys, aliases, conflicting pairs, --set overrides, and the
// one capped YAML loader's limits (an alias bomb in the file or a --set value).
#include "engine/train/train_config.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "unit/alias_bomb.h"

namespace air::engine::train {
namespace {

using ::testing::HasSubstr;
using ::testing::Not;

constexpr char kMinimal[] =
    "model_name: ./tiny\n"
    "dataset_name: data.jsonl\n"
    "output_dir: out\n";

std::string ErrorOf(const std::string& yaml, const std::vector<std::string>& sets = {}) {
  auto result = ParseTrainConfig(yaml, "cfg.yaml", sets);
  EXPECT_FALSE(result.ok()) << "expected an error for:\n" << yaml;
  if (result.ok()) return "";
  EXPECT_EQ(result.status().code(), ErrorCode::kInvalidArgument);
  return result.status().message();
}

TEST(TrainConfigTest, MinimalUsesDefaults) {
  auto c = ParseTrainConfig(kMinimal, "cfg.yaml");
  ASSERT_TRUE(c.ok()) << c.status().ToString();
  EXPECT_EQ(c->model_name, "./tiny");
  EXPECT_EQ(c->dataset_name, "data.jsonl");
  EXPECT_EQ(c->output_dir, "out");
  EXPECT_EQ(c->max_seq_len, 1024);
  EXPECT_EQ(c->gradient_accumulation_steps, 1);
  EXPECT_EQ(c->max_steps, -1);
  EXPECT_DOUBLE_EQ(c->max_grad_norm, 1.0);
  EXPECT_EQ(c->lr_scheduler_type, LrSchedulerType::kLinear);
  EXPECT_FALSE(c->bf16);
  EXPECT_EQ(c->sources.at("dataset_name"), "cfg.yaml:2:1");
}

// torch_dtype (alias dtype): the dtype the parameters and their state are kept in; bfloat16
// computes in bf16, so it implies bf16 and refuses an explicit fp32 compute.
TEST(TrainConfigTest, TorchDtypeKeepsTheStateInBf16AndImpliesBf16Compute) {
  EXPECT_EQ(ParseTrainConfig(kMinimal, "cfg.yaml")->torch_dtype, DType::kF32);
  for (const char* key : {"torch_dtype", "dtype"}) {
    auto c = ParseTrainConfig(std::string(kMinimal) + key + ": bfloat16\n", "cfg.yaml");
    ASSERT_TRUE(c.ok()) << c.status().ToString();
    EXPECT_EQ(c->torch_dtype, DType::kBF16);
    EXPECT_TRUE(c->bf16);
    EXPECT_EQ(c->precision.param_dtype, DType::kBF16);
    EXPECT_EQ(c->precision.reduce_dtype, DType::kBF16);
  }
  EXPECT_THAT(ErrorOf(std::string(kMinimal) + "torch_dtype: float16\n"),
              HasSubstr("cfg.yaml:4:1: torch_dtype: 'float16' is not a dtype air keeps "
                        "parameters in; valid: float32, bfloat16"));
  EXPECT_THAT(ErrorOf(std::string(kMinimal) + "torch_dtype: bfloat16\nbf16: false\n"),
              HasSubstr("torch_dtype: bfloat16 keeps the parameters in bf16, which compute in "
                        "bf16, but cfg.yaml:5:1 asks for float32 compute"));
  EXPECT_THAT(ErrorOf(std::string(kMinimal) +
                      "torch_dtype: bfloat16\nmixed_precision: {param_dtype: float32}\n"),
              HasSubstr("asks for float32 compute"));
}

TEST(TrainConfigTest, SeedParametersBlockParses) {
  // The parameters block of the first seed's train.yaml, as HYPERPARAMETERS_PATH holds it.
  auto c = ParseTrainConfig(
      "model_name: meta-llama/Llama-3.1-8B\n"
      "dataset_name: tatsu-lab/alpaca\n"
      "max_seq_len: 1024\n"
      "per_device_batch_size: 4\n"
      "gradient_accumulation_steps: 2\n"
      "learning_rate: 0.00002\n"
      "max_steps: 100\n"
      "output_dir: /Volumes/main/default/air_checkpoints/llama31-8b-sft\n",
      "params.yaml");
  ASSERT_TRUE(c.ok()) << c.status().ToString();
  EXPECT_EQ(c->per_device_batch_size, 4);
  EXPECT_EQ(c->gradient_accumulation_steps, 2);
  EXPECT_DOUBLE_EQ(c->learning_rate, 2e-5);
  EXPECT_EQ(c->max_steps, 100);
}

TEST(TrainConfigTest, EveryFieldParses) {
  auto c = ParseTrainConfig(std::string(kMinimal) +
                                "max_length: 256\n"
                                "per_device_batch_size: 2\n"
                                "packing: true\n"
                                "gradient_accumulation_steps: 3\n"
                                "learning_rate: 1e-4\n"
                                "num_train_epochs: 2.5\n"
                                "warmup_ratio: 0.1\n"
                                "lr_scheduler_type: cosine\n"
                                "weight_decay: 0.01\n"
                                "max_grad_norm: 0\n"
                                "adam_beta1: 0.8\n"
                                "adam_beta2: 0.95\n"
                                "adam_epsilon: 1e-6\n"
                                "seed: 7\n"
                                "logging_steps: 5\n"
                                "save_steps: 50\n"
                                "bf16: true\n"
                                "activation_checkpointing: true\n",
                            "cfg.yaml");
  ASSERT_TRUE(c.ok()) << c.status().ToString();
  EXPECT_EQ(c->max_seq_len, 256);
  EXPECT_TRUE(c->packing);
  EXPECT_EQ(c->gradient_accumulation_steps, 3);
  EXPECT_DOUBLE_EQ(c->learning_rate, 1e-4);
  EXPECT_DOUBLE_EQ(c->num_train_epochs, 2.5);
  EXPECT_DOUBLE_EQ(c->warmup_ratio, 0.1);
  EXPECT_EQ(c->lr_scheduler_type, LrSchedulerType::kCosine);
  EXPECT_DOUBLE_EQ(c->weight_decay, 0.01);
  EXPECT_DOUBLE_EQ(c->max_grad_norm, 0.0);
  EXPECT_DOUBLE_EQ(c->adam_beta1, 0.8);
  EXPECT_DOUBLE_EQ(c->adam_beta2, 0.95);
  EXPECT_DOUBLE_EQ(c->adam_epsilon, 1e-6);
  EXPECT_EQ(c->seed, 7);
  EXPECT_EQ(c->logging_steps, 5);
  EXPECT_EQ(c->save_steps, 50);
  EXPECT_TRUE(c->bf16);
  EXPECT_TRUE(c->activation_checkpointing);
  // The alias is recorded under its canonical name.
  EXPECT_EQ(c->sources.at("max_seq_len"), "cfg.yaml:4:1");
}

TEST(TrainConfigTest, UnknownKeySuggestsTheClosestName) {
  std::string e = ErrorOf(std::string(kMinimal) + "learning_rat: 0.1\n");
  EXPECT_THAT(e, HasSubstr("cfg.yaml:4:1: learning_rat: unknown parameter (did you mean "
                           "'learning_rate'?)"));
  // A key the seed's second script uses but air train does not know is an error, not ignored.
  e = ErrorOf(std::string(kMinimal) + "ddp_find_unused_parameters: false\n");
  EXPECT_THAT(e, HasSubstr("cfg.yaml:4:1: ddp_find_unused_parameters: unknown parameter; valid "
                           "parameters: model_name, dataset_name, output_dir, max_seq_len, "));
}

TEST(TrainConfigTest, MissingRequiredKeysAreAllReported) {
  std::string e = ErrorOf("learning_rate: 0.1\n");
  EXPECT_THAT(e, HasSubstr("cfg.yaml: model_name: required parameter is missing"));
  EXPECT_THAT(e, HasSubstr("cfg.yaml: dataset_name: required parameter is missing"));
  EXPECT_THAT(e, HasSubstr("cfg.yaml: output_dir: required parameter is missing"));
}

TEST(TrainConfigTest, EmptyFileReportsMissingKeys) {
  std::string e = ErrorOf("");
  EXPECT_THAT(e, HasSubstr("model_name: required parameter is missing"));
}

TEST(TrainConfigTest, TypeErrorsNameLineColumnAndField) {
  std::string e = ErrorOf(std::string(kMinimal) +
                          "per_device_batch_size: four\n"
                          "learning_rate: [1, 2]\n"
                          "bf16: maybe\n"
                          "max_steps: 1.5\n"
                          "gradient_accumulation_steps: \"2\"\n");
  EXPECT_THAT(e, HasSubstr("cfg.yaml:4:1: per_device_batch_size: expected an integer, got 'four'"));
  EXPECT_THAT(e, HasSubstr("cfg.yaml:5:1: learning_rate: expected a number, got a list"));
  EXPECT_THAT(e, HasSubstr("cfg.yaml:6:1: bf16: expected true or false, got 'maybe'"));
  EXPECT_THAT(e, HasSubstr("cfg.yaml:7:1: max_steps: expected an integer, got '1.5'"));
  EXPECT_THAT(e, HasSubstr("cfg.yaml:8:1: gradient_accumulation_steps: expected an integer, "
                           "got the quoted string \"2\""));
}

TEST(TrainConfigTest, RangeErrors) {
  std::string e = ErrorOf(std::string(kMinimal) +
                          "per_device_batch_size: 0\n"
                          "learning_rate: -1\n"
                          "adam_beta2: 1.0\n"
                          "warmup_ratio: 1.5\n"
                          "max_steps: 0\n"
                          "max_seq_len: 1\n"
                          "adam_epsilon: 0\n");
  EXPECT_THAT(e, HasSubstr("cfg.yaml:4:1: per_device_batch_size: 0 is out of range: must be >= 1"));
  EXPECT_THAT(e, HasSubstr("cfg.yaml:5:1: learning_rate: -1 is out of range: must be >= 0"));
  EXPECT_THAT(e, HasSubstr("cfg.yaml:6:1: adam_beta2: 1.0 is out of range: must be in [0, 1)"));
  EXPECT_THAT(e, HasSubstr("cfg.yaml:7:1: warmup_ratio: 1.5 is out of range: must be in [0, 1]"));
  EXPECT_THAT(e, HasSubstr("cfg.yaml:8:1: max_steps: 0 is out of range"));
  EXPECT_THAT(e, HasSubstr("cfg.yaml:9:1: max_seq_len: 1 is out of range"));
  EXPECT_THAT(e, HasSubstr("cfg.yaml:10:1: adam_epsilon: 0 is out of range: must be > 0"));
}

TEST(TrainConfigTest, MaxStepsMinusOneMeansEpochs) {
  auto c = ParseTrainConfig(std::string(kMinimal) + "max_steps: -1\n", "cfg.yaml");
  ASSERT_TRUE(c.ok()) << c.status().ToString();
  EXPECT_EQ(c->max_steps, -1);
}

TEST(TrainConfigTest, UnknownSchedulerSuggests) {
  std::string e = ErrorOf(std::string(kMinimal) + "lr_scheduler_type: cosin\n");
  EXPECT_THAT(e, HasSubstr("cfg.yaml:4:1: lr_scheduler_type: unknown scheduler 'cosin' (did you "
                           "mean 'cosine'?); valid: constant, constant_with_warmup, linear, "
                           "cosine"));
}

TEST(TrainConfigTest, BothAliasesAreAnError) {
  std::string e = ErrorOf(std::string(kMinimal) + "max_seq_len: 128\nmax_length: 256\n");
  EXPECT_THAT(e, HasSubstr("cfg.yaml:5:1: max_length: 'max_seq_len' and 'max_length' are the same "
                           "parameter (first given at cfg.yaml:4:1); keep one"));
}

TEST(TrainConfigTest, DuplicateKeyIsAnError) {
  std::string e = ErrorOf(std::string(kMinimal) + "seed: 1\nseed: 2\n");
  EXPECT_THAT(e, HasSubstr("cfg.yaml:5:1: seed: duplicate key (first given at cfg.yaml:4:1)"));
}

TEST(TrainConfigTest, WarmupStepsAndRatioConflict) {
  std::string e = ErrorOf(std::string(kMinimal) + "warmup_ratio: 0.1\nwarmup_steps: 3\n");
  EXPECT_THAT(e, HasSubstr("cfg.yaml:5:1: warmup_steps: give warmup_steps or warmup_ratio, not "
                           "both"));
}

TEST(TrainConfigTest, GlobalBatchSizeExcludesAccumulationAndMustBePositive) {
  auto c = ParseTrainConfig(std::string(kMinimal) + "global_batch_size: 32\n", "cfg.yaml", {});
  ASSERT_TRUE(c.ok()) << c.status().message();
  EXPECT_EQ(c->global_batch_size, 32);
  EXPECT_EQ(c->gradient_accumulation_steps, 1);  // derived from the ranks when training starts
  std::string e =
      ErrorOf(std::string(kMinimal) + "global_batch_size: 32\n", {"gradient_accumulation_steps=4"});
  EXPECT_THAT(e, HasSubstr("cfg.yaml:4:1: global_batch_size: give global_batch_size or "
                           "gradient_accumulation_steps (--set gradient_accumulation_steps=4), "
                           "not both"));
  e = ErrorOf(std::string(kMinimal) + "global_batch_size: 0\n");
  EXPECT_THAT(e, HasSubstr("cfg.yaml:4:1: global_batch_size: 0 is out of range: must be >= 1"));
}

TEST(TrainConfigTest, ConstantScheduleWithWarmupIsAnError) {
  std::string e = ErrorOf(std::string(kMinimal) + "lr_scheduler_type: constant\nwarmup_steps: 3\n");
  EXPECT_THAT(e, HasSubstr("use constant_with_warmup"));
}

TEST(TrainConfigTest, YamlSyntaxErrorHasLineAndColumn) {
  std::string e = ErrorOf("model_name: [unclosed\n");
  EXPECT_THAT(e, HasSubstr("cfg.yaml:"));
  EXPECT_THAT(e, HasSubstr("invalid YAML"));
}

TEST(TrainConfigTest, NonMapRootIsAnError) {
  std::string e = ErrorOf("- a\n- b\n");
  EXPECT_THAT(e, HasSubstr("cfg.yaml:1:1: expected a map of parameters"));
}

TEST(TrainConfigTest, SetOverridesFileValuesWithTypes) {
  auto c =
      ParseTrainConfig(std::string(kMinimal) + "learning_rate: 0.1\nmax_seq_len: 64\n", "cfg.yaml",
                       {"learning_rate=3e-4", "bf16=true", "max_length=32", "output_dir=/tmp/x"});
  ASSERT_TRUE(c.ok()) << c.status().ToString();
  EXPECT_DOUBLE_EQ(c->learning_rate, 3e-4);
  EXPECT_TRUE(c->bf16);
  EXPECT_EQ(c->max_seq_len, 32);  // an alias on --set replaces the file's canonical spelling
  EXPECT_EQ(c->output_dir, "/tmp/x");
  EXPECT_EQ(c->sources.at("learning_rate"), "--set learning_rate=3e-4");
}

TEST(TrainConfigTest, SetErrorsNameTheFlag) {
  std::string e = ErrorOf(kMinimal, {"learning_rate=fast", "seeed=3", "novalue"});
  EXPECT_THAT(e,
              HasSubstr("--set learning_rate=fast: learning_rate: expected a number, got 'fast'"));
  EXPECT_THAT(e, HasSubstr("--set seeed=3: seeed: unknown parameter (did you mean 'seed'?)"));
  EXPECT_THAT(e, HasSubstr("--set novalue: expected key=value"));
}

TEST(TrainConfigTest, SetCanSupplyRequiredKeys) {
  auto c =
      ParseTrainConfig("", "cfg.yaml", {"model_name=m", "dataset_name=d.jsonl", "output_dir=o"});
  ASSERT_TRUE(c.ok()) << c.status().ToString();
  EXPECT_EQ(c->model_name, "m");
}

TEST(TrainConfigTest, AllErrorsInOnePass) {
  std::string e = ErrorOf("learning_rat: 1\nseed: x\nbf16: 3\n");
  // One unknown key, two type errors, three missing keys: six lines.
  EXPECT_EQ(std::count(e.begin(), e.end(), '\n'), 5) << e;
  EXPECT_THAT(e, Not(HasSubstr("cfg.yaml:0")));
}

TEST(TrainConfigTest, WarmupStepsFromRatioRoundsUp) {
  TrainConfig c;
  c.warmup_ratio = 0.03;
  EXPECT_EQ(c.WarmupStepsFor(100), 3);
  EXPECT_EQ(c.WarmupStepsFor(101), 4);  // ceil(3.03)
  c.warmup_ratio = 0.0;
  EXPECT_EQ(c.WarmupStepsFor(100), 0);
  c.warmup_steps = 7;
  EXPECT_EQ(c.WarmupStepsFor(100), 7);
}

TEST(TrainConfigTest, AnAliasBombIsAClearError) {
  std::string e = ErrorOf(std::string(kMinimal) + air::testing::AliasBomb() + "seed: *a8\n");
  EXPECT_THAT(e, HasSubstr("cfg.yaml:"));
  EXPECT_THAT(e, HasSubstr("invalid YAML: the document has more than 200000 nodes"));
  std::string flow = "[&a0 [x, x, x, x, x, x, x, x, x, x]";
  for (int i = 1; i < 9; ++i) {
    flow += ", &a" + std::to_string(i) + " [*a" + std::to_string(i - 1);
    for (int j = 1; j < 10; ++j) flow += ", *a" + std::to_string(i - 1);
    flow += "]";
  }
  std::string set = ErrorOf(kMinimal, {"seed=" + flow + "]"});
  EXPECT_THAT(set, HasSubstr("--set seed="));
  EXPECT_THAT(set, HasSubstr("seed: the value is not valid YAML"));
}

// Mixed precision: HF's bf16 flag, FSDP1's MixedPrecision map (reduce_dtype defaults to
// param_dtype, buffer_dtype to float32), Accelerate's string, and the errors: an unknown dtype
// (the valid list), float16 (no compute path), an unknown key, and bf16 disagreeing.
TEST(TrainConfigTest, MixedPrecisionFromBf16OrTheFsdpMap) {
  auto none = ParseTrainConfig(kMinimal, "cfg.yaml");
  ASSERT_TRUE(none.ok());
  EXPECT_FALSE(none->precision.enabled());
  auto hf = ParseTrainConfig(std::string(kMinimal) + "bf16: true\n", "cfg.yaml");
  ASSERT_TRUE(hf.ok());
  EXPECT_EQ(hf->precision, fsdp::Bf16Policy());
  EXPECT_EQ(hf->precision.buffer_dtype, DType::kBF16);  // as Accelerate sets it for FSDP1
  auto map = ParseTrainConfig(std::string(kMinimal) +
                                  "mixed_precision:\n  param_dtype: bfloat16\n"
                                  "  reduce_dtype: float32\n",
                              "cfg.yaml");
  ASSERT_TRUE(map.ok()) << map.status().ToString();
  EXPECT_EQ(map->precision.param_dtype, DType::kBF16);
  EXPECT_EQ(map->precision.reduce_dtype, DType::kF32);
  EXPECT_EQ(map->precision.buffer_dtype, DType::kF32);
  auto defaulted = ParseTrainConfig(
      std::string(kMinimal) + "mixed_precision: {param_dtype: torch.bfloat16}\n", "cfg.yaml");
  ASSERT_TRUE(defaulted.ok()) << defaulted.status().ToString();
  EXPECT_EQ(defaulted->precision.reduce_dtype, DType::kBF16);  // FSDP1: None -> param_dtype
  auto accelerate = ParseTrainConfig(std::string(kMinimal) + "mixed_precision: bf16\n", "cfg.yaml");
  ASSERT_TRUE(accelerate.ok());
  EXPECT_EQ(accelerate->precision, fsdp::Bf16Policy());
  // Given together, bf16 and mixed_precision must agree.
  auto agree = ParseTrainConfig(
      std::string(kMinimal) + "bf16: true\nmixed_precision: {param_dtype: bf16}\n", "cfg.yaml");
  EXPECT_TRUE(agree.ok()) << agree.status().ToString();
}

TEST(TrainConfigTest, MixedPrecisionErrorsNameTheKeyAndWhatIsValid) {
  std::string e = ErrorOf(std::string(kMinimal) + "mixed_precision: {param_dtype: bfloat17}\n");
  EXPECT_THAT(e, HasSubstr("cfg.yaml:4:19: mixed_precision.param_dtype: unknown dtype "
                           "'bfloat17'; valid: float32 (fp32), bfloat16 (bf16)"));
  e = ErrorOf(std::string(kMinimal) + "mixed_precision:\n  param_dtype: float16\n");
  EXPECT_THAT(e, HasSubstr("cfg.yaml:5:3: mixed_precision.param_dtype: float16 has no compute "
                           "path"));
  e = ErrorOf(std::string(kMinimal) + "mixed_precision: {param_type: bfloat16}\n");
  EXPECT_THAT(e, HasSubstr("mixed_precision: unknown key 'param_type' (did you mean "
                           "'param_dtype'?); valid: param_dtype, reduce_dtype, buffer_dtype"));
  e = ErrorOf(std::string(kMinimal) + "mixed_precision: fp16\n");
  EXPECT_THAT(e, HasSubstr("fp16 has no compute path"));
  e = ErrorOf(std::string(kMinimal) +
              "bf16: true\nmixed_precision: {param_dtype: float32, reduce_dtype: float32}\n");
  EXPECT_THAT(e, HasSubstr("cfg.yaml:5:1: mixed_precision: says param_dtype float32, "
                           "reduce_dtype float32 but bf16 (cfg.yaml:4:1) is true"));
  e = ErrorOf(std::string(kMinimal) + "mixed_precision: [bf16]\n");
  EXPECT_THAT(e, HasSubstr("mixed_precision: expected a map"));
  // A bad map is one error, not also a disagreement with bf16.
  e = ErrorOf(std::string(kMinimal) + "bf16: true\nmixed_precision: {param_dtype: bf9}\n");
  EXPECT_THAT(e, HasSubstr("unknown dtype 'bf9'"));
  EXPECT_THAT(e, Not(HasSubstr("give one of them")));
}

TEST(TrainConfigLoraTest, TrlKeysAndTheSecondSeedsLoraConfig) {
  // The second seed's LoraConfig(r=16, lora_alpha=16, target_modules="all-linear",
  // lora_dropout=0.05, bias="none", task_type="CAUSAL_LM") in TRL's flat keys.
  auto c = ParseTrainConfig(std::string(kMinimal) +
                                "use_peft: true\nlora_r: 16\nlora_alpha: 16\n"
                                "lora_target_modules: all-linear\nlora_dropout: 0.05\n"
                                "lora_task_type: CAUSAL_LM\n",
                            "cfg.yaml");
  ASSERT_TRUE(c.ok()) << c.status().ToString();
  EXPECT_TRUE(c->lora.enabled);
  EXPECT_EQ(c->lora.r, 16);
  EXPECT_DOUBLE_EQ(c->lora.alpha, 16.0);
  EXPECT_DOUBLE_EQ(c->lora.dropout, 0.05);
  EXPECT_EQ(c->lora.targets.kind, lora::TargetModules::Kind::kAllLinear);
  EXPECT_FLOAT_EQ(c->lora.Scaling(), 1.0f);
  EXPECT_EQ(c->sources.at("lora_r"), "cfg.yaml:5:1");
}

TEST(TrainConfigLoraTest, TrlDefaultsListsRegexesAndRsLora) {
  auto c = ParseTrainConfig(std::string(kMinimal) + "use_peft: true\n", "cfg.yaml");
  ASSERT_TRUE(c.ok()) << c.status().ToString();
  // TRL's ModelConfig defaults; targets unset: PEFT's default for the architecture.
  EXPECT_EQ(c->lora.r, 16);
  EXPECT_DOUBLE_EQ(c->lora.alpha, 32.0);
  EXPECT_DOUBLE_EQ(c->lora.dropout, 0.05);
  EXPECT_EQ(c->lora.targets.kind, lora::TargetModules::Kind::kDefault);
  EXPECT_FALSE(c->lora.use_rslora);

  c = ParseTrainConfig(std::string(kMinimal) +
                           "use_peft: true\nlora_r: 4\nlora_alpha: 16\nuse_rslora: true\n"
                           "lora_target_modules: [q_proj, v_proj]\n"
                           "lora_modules_to_save: lm_head\nlora_adapter_path: ./adapter\n",
                       "cfg.yaml");
  ASSERT_TRUE(c.ok()) << c.status().ToString();
  EXPECT_EQ(c->lora.targets.kind, lora::TargetModules::Kind::kNames);
  EXPECT_EQ(c->lora.targets.names, (std::vector<std::string>{"q_proj", "v_proj"}));
  EXPECT_EQ(c->lora.modules_to_save, std::vector<std::string>{"lm_head"});
  EXPECT_FLOAT_EQ(c->lora.Scaling(), 8.0f);  // alpha / sqrt(r)
  EXPECT_EQ(c->lora.adapter_path, "./adapter");

  c = ParseTrainConfig(
      std::string(kMinimal) + "use_peft: true\nlora_target_modules: '.*\\.(q|v)_proj'\n",
      "cfg.yaml");
  ASSERT_TRUE(c.ok()) << c.status().ToString();
  EXPECT_EQ(c->lora.targets.kind, lora::TargetModules::Kind::kRegex);
  EXPECT_EQ(c->lora.targets.pattern, ".*\\.(q|v)_proj");
}

TEST(TrainConfigLoraTest, BadLoraValuesNameTheKey) {
  std::string e = ErrorOf(std::string(kMinimal) + "use_peft: true\nlora_r: 0\n");
  EXPECT_THAT(e, HasSubstr("cfg.yaml:5:1: lora_r: 0 is out of range: the rank must be >= 1"));
  e = ErrorOf(std::string(kMinimal) + "use_peft: true\nlora_dropout: 1\n");
  EXPECT_THAT(e, HasSubstr("lora_dropout: 1 is out of range: must be in [0, 1)"));
  e = ErrorOf(std::string(kMinimal) + "use_peft: true\nlora_alpha: 0\n");
  EXPECT_THAT(e, HasSubstr("lora_alpha: 0 is out of range: must be > 0"));
  e = ErrorOf(std::string(kMinimal) + "use_peft: true\nlora_target_modules: []\n");
  EXPECT_THAT(e, HasSubstr("lora_target_modules: the list is empty"));
  e = ErrorOf(std::string(kMinimal) + "use_peft: true\nlora_target_modules: '(q_proj'\n");
  EXPECT_THAT(e, HasSubstr("lora_target_modules: '(q_proj' is not a valid regular expression"));
  e = ErrorOf(std::string(kMinimal) + "use_peft: true\nlora_task_type: SEQ_CLS\n");
  EXPECT_THAT(e, HasSubstr("lora_task_type: 'SEQ_CLS' is not supported"));
  // PEFT's target_parameters (GPT-OSS's experts): a list of names, kept as given (what they match
  // is decided against the model: lora_config.h).
  auto parsed = ParseTrainConfig(std::string(kMinimal) +
                                     "use_peft: true\nlora_target_parameters: "
                                     "[mlp.experts.gate_up_proj, mlp.experts.down_proj]\n",
                                 "cfg.yaml");
  ASSERT_TRUE(parsed.ok()) << parsed.status().ToString();
  EXPECT_EQ(parsed->lora.target_parameters,
            (std::vector<std::string>{"mlp.experts.gate_up_proj", "mlp.experts.down_proj"}));
  e = ErrorOf(std::string(kMinimal) + "use_peft: true\nlora_target_parameters: gate_up_proj\n");
  EXPECT_THAT(e, HasSubstr("cfg.yaml:5:1: lora_target_parameters: expected a list of parameter "
                           "names such as [mlp.experts.gate_up_proj, mlp.experts.down_proj]"));
  auto empty = ParseTrainConfig(
      std::string(kMinimal) + "use_peft: true\nlora_target_parameters: []\n", "cfg.yaml");
  ASSERT_TRUE(empty.ok()) << empty.status().ToString();
  EXPECT_TRUE(empty->lora.target_parameters.empty());
  // A LoRA key without use_peft would train the whole model.
  e = ErrorOf(std::string(kMinimal) + "lora_r: 8\n");
  EXPECT_THAT(e, HasSubstr("cfg.yaml:4:1: lora_r: takes effect only with use_peft: true"));
}

}  // namespace
}  // namespace air::engine::train
