// GPT-OSS's state-dict adapter (see state_dict_adapter.h): GptOssModel's names <-> transformers'
// GptOssForCausalLM, loading the expert weights from either released layout — dense float
// tensors (gate_up_proj [E, H, 2I], down_proj [E, I, H]) or MXFP4 (*_blocks + *_scales, uploaded
// as stored and decoded by the backend expert by expert, bit for bit as transformers dequantizes
// them: Ops::DequantizeMxfp4, engine/mxfp4_decode.h) — and checking a
// checkpoint's completeness first (io/gpt_oss_checkpoint.h: missing expert tensors by name).
// Saving writes the dense layout, which transformers loads without a quantization config.
#include <memory>

#include "engine/io/gpt_oss_checkpoint.h"
#include "engine/io/mxfp4.h"
#include "engine/io/state_dict_adapter.h"
#include "engine/model/gpt_oss_config.h"

namespace air::engine {

namespace {

class GptOssStateDictAdapter : public TableStateDictAdapter {
 public:
  explicit GptOssStateDictAdapter(std::shared_ptr<const GptOssConfig> config)
      : TableStateDictAdapter(
            Pairs{
                {"tok_embeddings.weight", "model.embed_tokens.weight"},
                {"norm.weight", "model.norm.weight"},
                {"output.weight", "lm_head.weight"},
            },
            Pairs{
                {"attention_norm", "input_layernorm"},
                {"attention.wq", "self_attn.q_proj"},
                {"attention.wk", "self_attn.k_proj"},
                {"attention.wv", "self_attn.v_proj"},
                {"attention.wo", "self_attn.o_proj"},
                {"attention.sinks", "self_attn.sinks"},
                {"ffn_norm", "post_attention_layernorm"},
                {"moe.router", "mlp.router"},
                {"moe.experts.mlp1_weight", "mlp.experts.gate_up_proj"},
                {"moe.experts.mlp1_bias", "mlp.experts.gate_up_proj_bias"},
                {"moe.experts.mlp2_weight", "mlp.experts.down_proj"},
                {"moe.experts.mlp2_bias", "mlp.experts.down_proj_bias"},
                // The experts module itself, after its parameters: where LoRA on the expert
                // weights puts its adapters (engine/lora: "mlp.experts.lora_A.weight").
                {"moe.experts", "mlp.experts"},
            }),
        config_(std::move(config)) {}

  Status LoadInto(const WeightReader& reader, const std::string& name, const Shape& shape,
                  const Backend& backend, const View& value, Tensor& scratch) const override {
    const std::string hf = ToHf(name);
    const bool expert_weight =
        name.ends_with("moe.experts.mlp1_weight") || name.ends_with("moe.experts.mlp2_weight");
    if (!expert_weight || reader.Find(hf + "_blocks", nullptr) == nullptr) {
      return StateDictAdapter::LoadInto(reader, name, shape, backend, value, scratch);
    }
    AIR_ASSIGN_OR_RETURN(Mxfp4Layout layout, FindMxfp4(reader, hf));
    const Shape decoded = Mxfp4DecodedShape(layout, Mxfp4Orientation::kTransformers);
    if (decoded != shape) {
      return InvalidArgument(reader.dir() + ": MXFP4 tensor '" + hf + "_blocks' decodes to " +
                             ShapeToString(decoded) + ", but the config needs " +
                             ShapeToString(shape));
    }
    const SafetensorsFile* blocks_file = nullptr;
    const SafetensorsFile* scales_file = nullptr;
    const SafetensorsEntry* blocks = reader.Find(hf + "_blocks", &blocks_file);
    const SafetensorsEntry* scales = reader.Find(hf + "_scales", &scales_file);
    // One expert at a time: its 4-bit blocks and scales go to the backend as stored (a GPU
    // receives a quarter of bf16's bytes) and the backend expands them into the parameter in
    // its own memory (Ops::DequantizeMxfp4: transformers' bits on every backend).
    const int64_t per_expert = layout.rows * layout.cols();
    const int64_t scale_bytes = layout.rows * layout.groups;
    View block_view, scale_view;
    AIR_ASSIGN_OR_RETURN(
        auto block_buffer,
        backend.AllocateView(DType::kU8, {scale_bytes * kMxfp4GroupBytes}, &block_view));
    AIR_ASSIGN_OR_RETURN(auto scale_buffer,
                         backend.AllocateView(DType::kU8, {scale_bytes}, &scale_view));
    const uint8_t* block_bytes = blocks_file->RawData(*blocks);
    const uint8_t* scale_bytes_in = scales_file->RawData(*scales);
    for (int64_t e = 0; e < layout.experts; ++e) {
      backend.CopyToDevice(block_view, block_bytes + e * scale_bytes * kMxfp4GroupBytes);
      backend.CopyToDevice(scale_view, scale_bytes_in + e * scale_bytes);
      backend.DequantizeMxfp4(1, layout.rows, layout.groups, block_view, scale_view,
                              value.Slice(e * per_expert, per_expert));
    }
    return Status::Ok();
  }

  Status Check(const WeightReader& reader) const override {
    return CheckGptOssCheckpoint(reader, *config_);
  }

 private:
  std::shared_ptr<const GptOssConfig> config_;
};

}  // namespace

std::unique_ptr<StateDictAdapter> MakeGptOssStateDictAdapter(const ModelConfig& config) {
  return std::make_unique<GptOssStateDictAdapter>(config.gpt_oss);
}

}  // namespace air::engine
