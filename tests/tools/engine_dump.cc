// air_engine_dump: a test-only tool for the parity tests (tests/python/test_engine_parity.py).
// Loads an HF model directory with air's engine, runs Forward and Backward on a batch given as
// JSON, and writes logits, loss and every parameter gradient to one safetensors file that the
// test compares with transformers. Optionally also decodes the batch token by token through
// the KV cache (logits "decode_logits") and saves the loaded model back (--save) to check
// that transformers loads air's checkpoints.
//
//   air_engine_dump --model DIR [--adapter DIR] --batch batch.json --out dump.safetensors
//                   [--ops fast|reference] [--checkpointing] [--decode]
//                   [--save DIR [--save-dtype F32|BF16] [--max-shard-bytes N]]
//
// batch.json: {"input_ids": [[...], ...], "labels": [[...]], "position_ids": [[...]],
//              "segment_ids": [[...]]} — rows of equal length; labels, position_ids and
// segment_ids optional. With --adapter, a PEFT LoRA adapter is applied to the model (unmerged,
// engine/lora) and the gradients written are those of the trainable parameters: the adapters'
// (by PEFT's names without the adapter name, under "grad.", in PEFT's layout) and
// modules_to_save's.
// Exit 0 on success; on error the message goes to stderr, exit 1.
#include <CLI/CLI.hpp>
#include <fstream>
#include <iostream>
#include <nlohmann/json.hpp>
#include <sstream>

#include "engine/backend/registry.h"
#include "engine/io/hf_state_dict.h"
#include "engine/io/safetensors.h"
#include "engine/lora/lora_load.h"
#include "engine/train/activation_checkpointing.h"

namespace {

using air::Result;
using air::Status;
using air::engine::Tensor;
using air::engine::TokenBatch;

Result<std::vector<int32_t>> Flatten(const nlohmann::json& j, const char* field, int* rows,
                                     int* cols) {
  auto it = j.find(field);
  if (it == j.end()) return std::vector<int32_t>{};
  if (!it->is_array() || it->empty()) {
    return air::InvalidArgument(std::string("batch: '") + field + "' must be a list of rows");
  }
  std::vector<int32_t> flat;
  *rows = static_cast<int>(it->size());
  *cols = static_cast<int>((*it)[0].size());
  for (const auto& row : *it) {
    if (!row.is_array() || static_cast<int>(row.size()) != *cols) {
      return air::InvalidArgument(std::string("batch: rows of '") + field +
                                  "' must be lists of equal length");
    }
    for (const auto& v : row) flat.push_back(v.get<int32_t>());
  }
  return flat;
}

Result<TokenBatch> ReadBatch(const std::string& path) {
  std::ifstream in(path);
  if (!in) return air::NotFound("cannot read batch file " + path);
  std::stringstream ss;
  ss << in.rdbuf();
  nlohmann::json j = nlohmann::json::parse(ss.str(), nullptr, false);
  if (j.is_discarded()) return air::InvalidArgument(path + ": not valid JSON");
  TokenBatch batch;
  int rows = 0, cols = 0, r2 = 0, c2 = 0;
  AIR_ASSIGN_OR_RETURN(batch.input_ids, Flatten(j, "input_ids", &rows, &cols));
  AIR_ASSIGN_OR_RETURN(batch.labels, Flatten(j, "labels", &r2, &c2));
  AIR_ASSIGN_OR_RETURN(batch.position_ids, Flatten(j, "position_ids", &r2, &c2));
  AIR_ASSIGN_OR_RETURN(batch.segment_ids, Flatten(j, "segment_ids", &r2, &c2));
  batch.batch_size = rows;
  batch.seq_len = cols;
  return batch;
}

struct Flags {
  std::string model, adapter, batch, out, ops = "fast", save, save_dtype = "F32";
  bool checkpointing = false, decode = false;
  uint64_t max_shard_bytes = 0;
};

Status Run(const Flags& f) {
  AIR_ASSIGN_OR_RETURN(std::shared_ptr<air::engine::Backend> backend,
                       air::engine::CreateBackend({.kind = f.ops}));
  air::engine::lora::ModelWithAdapter loaded;
  if (f.adapter.empty()) {
    AIR_ASSIGN_OR_RETURN(loaded.model, air::engine::LoadHfModel(f.model, backend));
  } else {
    AIR_ASSIGN_OR_RETURN(loaded,
                         air::engine::lora::LoadModelWithAdapter(f.model, f.adapter, backend));
  }
  air::engine::CausalLm* model = loaded.model.get();
  air::engine::train::ApplyActivationCheckpointing(*model, f.checkpointing);
  if (!f.save.empty()) {
    air::engine::SaveOptions save;
    auto dtype = air::engine::ParseDType(f.save_dtype);
    if (!dtype) return air::InvalidArgument("--save-dtype: use F32, BF16 or F16");
    save.dtype = *dtype;
    save.max_shard_bytes = f.max_shard_bytes;
    AIR_RETURN_IF_ERROR(air::engine::SaveHfModel(*model, f.save, save));
  }
  if (f.batch.empty()) return Status::Ok();
  AIR_ASSIGN_OR_RETURN(TokenBatch batch, ReadBatch(f.batch));
  AIR_RETURN_IF_ERROR(model->ZeroGrads());
  air::engine::ForwardOptions fo;
  fo.return_logits = true;
  AIR_ASSIGN_OR_RETURN(auto result, model->Forward(batch, fo));
  AIR_RETURN_IF_ERROR(model->Backward());

  std::vector<Tensor> owned;
  owned.reserve(4 + model->parameters().size());
  owned.push_back(Tensor({1}, {static_cast<float>(result.loss)}));
  owned.push_back(Tensor({1}, {static_cast<float>(result.loss_tokens)}));
  std::vector<air::engine::NamedTensorRef> refs = {
      {"logits", &result.logits}, {"loss", &owned[0]}, {"loss_tokens", &owned[1]}};
  if (f.decode) {
    // Token by token through the KV cache: logits of every position, (B, T, V).
    const int64_t b = batch.batch_size, t = batch.seq_len, v = model->config().vocab_size;
    owned.push_back(Tensor({b, t, v}));
    Tensor& decoded = owned.back();
    AIR_ASSIGN_OR_RETURN(auto cache, model->NewKvCache(b, t));
    // A 3-token prefill first (exercises multi-token steps), then one token at a time.
    const int64_t prefill = std::min<int64_t>(3, t);
    int64_t pos = 0;
    while (pos < t) {
      const int64_t step = pos == 0 ? prefill : 1;
      std::vector<int32_t> tokens;
      for (int64_t r = 0; r < b; ++r) {
        for (int64_t i = 0; i < step; ++i) tokens.push_back(batch.input_ids[r * t + pos + i]);
      }
      AIR_ASSIGN_OR_RETURN(Tensor logits, model->ForwardStep(tokens, cache, true));
      for (int64_t r = 0; r < b; ++r) {
        for (int64_t i = 0; i < step; ++i) {
          std::copy(logits.data() + (r * step + i) * v, logits.data() + (r * step + i + 1) * v,
                    decoded.data() + (r * t + pos + i) * v);
        }
      }
      pos += step;
    }
    refs.push_back({"decode_logits", &decoded});
  }
  const std::vector<std::string> names = air::engine::HfParameterNames(*model);
  std::vector<size_t> trainable;
  for (size_t i = 0; i < names.size(); ++i) {
    const auto& p = model->parameters()[i];
    if (!p.trainable) continue;  // frozen (the base under LoRA): no gradient
    Tensor grad = backend->ToHostTensor(p.grad);
    // An adapter's gradient in PEFT's layout (an expert adapter's lora_B: lora_model.h).
    owned.push_back(loaded.lora ? loaded.lora->ToFile(p, grad) : std::move(grad));
    trainable.push_back(i);
  }
  size_t first_grad = owned.size() - trainable.size();
  for (size_t i : trainable) {
    refs.push_back({"grad." + names[i], &owned[first_grad++]});  // by transformers' names
  }
  return air::engine::WriteSafetensors(f.out, refs, air::engine::DType::kF32, {});
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"air_engine_dump: forward/backward dump for parity tests"};
  Flags f;
  app.add_option("--model", f.model, "HF model directory")->required();
  app.add_option("--adapter", f.adapter, "PEFT LoRA adapter directory applied to the model");
  app.add_option("--batch", f.batch, "batch JSON file");
  app.add_option("--out", f.out, "output safetensors file");
  app.add_option("--ops", f.ops, "fast or reference");
  app.add_flag("--checkpointing", f.checkpointing, "activation checkpointing");
  app.add_flag("--decode", f.decode, "also decode through the KV cache");
  app.add_option("--save", f.save, "save the loaded model to this directory");
  app.add_option("--save-dtype", f.save_dtype, "F32, BF16 or F16");
  app.add_option("--max-shard-bytes", f.max_shard_bytes, "shard size limit for --save");
  CLI11_PARSE(app, argc, argv);
  Status status = Run(f);
  if (!status.ok()) {
    std::cerr << "error: " << status.message() << "\n";
    return 1;
  }
  return 0;
}
