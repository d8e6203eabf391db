// GptOssConfig: the shape and hyperparameters of a GPT-OSS model (transformers'
// GptOssConfig, configuration_gpt_oss.py, as modeling_gpt_oss.py reads it), with every default
// transformers applies. Parsing config.json into it is io/gpt_oss_hf_config.h; the checkpoint's
// tensor names are io/gpt_oss_checkpoint.h.
//
// What the fields mean for the model (modeling_gpt_oss.py):
//   router      Linear(hidden, num_local_experts) with bias; top-k (num_experts_per_tok) of the
//               raw logits, softmax over the k
//   experts     gate_up_proj [E, H, 2I] + bias (gate = even columns, up = odd), gate clamped
//               above at swiglu_limit, up to ±swiglu_limit, (up + 1) * gate * sigmoid(swiglu_alpha
//               * gate); down_proj [E, I, H] + bias. I = intermediate_size.
//   attention   q/k/v/o with bias when attention_bias; one learned sink logit per head; layer l
//               attends within sliding_window tokens when layer_types[l] is sliding_attention
//   RoPE        YaRN (rope.type "yarn") over head_dim * partial_rotary_factor dimensions, with
//               cos/sin multiplied by rope.attention_factor (YarnAttentionFactor)
//   RMSNorm     eps rms_norm_eps, computed in fp32
//   head        lm_head [vocab, hidden], untied unless tie_word_embeddings
// Thread safety: a value type.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "base/status.h"
#include "engine/model/model_config.h"

namespace air::engine {

// rope_parameters (transformers 5) / rope_scaling + rope_theta (the released config.json).
struct GptOssRope {
  std::string type = "yarn";  // "yarn" or "default" (no scaling)
  double theta = 150000.0;
  double partial_rotary_factor = 1.0;
  // YaRN (type "yarn"):
  double factor = 32.0;
  int64_t original_max_position_embeddings = 4096;
  double beta_fast = 32.0;  // transformers: `beta_fast or 32`
  double beta_slow = 1.0;   // transformers: `beta_slow or 1`
  bool truncate = true;     // transformers: rope_parameters.get("truncate", True)
  // The cos/sin scale: attention_factor when given, else from mscale / mscale_all_dim / factor
  // (YarnAttentionFactor). 1.0 for "default".
  double attention_factor = 1.0;
};

struct GptOssConfig {
  int64_t vocab_size = 201088;
  int64_t hidden_size = 2880;
  int64_t intermediate_size = 2880;  // each expert's I
  int64_t num_layers = 36;           // num_hidden_layers
  int64_t num_heads = 64;            // num_attention_heads
  int64_t num_kv_heads = 8;          // num_key_value_heads
  int64_t head_dim = 64;
  int64_t num_experts = 128;      // num_local_experts (alias num_experts)
  int64_t experts_per_token = 4;  // num_experts_per_tok
  // Per layer: 0 = full attention, else the window (sliding_window) of a sliding_attention layer.
  std::vector<int64_t> layer_sliding_window;
  int64_t sliding_window = 128;  // 0 when null
  GptOssRope rope;
  int64_t max_position_embeddings = 131072;
  double rms_norm_eps = 1e-5;
  double swiglu_alpha = 1.702;
  double swiglu_limit = 7.0;
  bool attention_bias = true;
  bool tie_word_embeddings = false;
  double initializer_range = 0.02;
  double router_aux_loss_coef = 0.001;
  bool output_router_logits = false;  // the load-balancing loss is added only when true
  // quantization_config {"quant_method": "mxfp4"}: the experts are stored as *_blocks/*_scales.
  bool mxfp4_experts = false;
  int64_t bos_token_id = -1;  // -1: none
  std::vector<int64_t> eos_token_ids;
  int64_t pad_token_id = -1;
  std::string torch_dtype = "float32";  // dtype / torch_dtype as written

  int64_t q_dim() const { return num_heads * head_dim; }
  int64_t kv_dim() const { return num_kv_heads * head_dim; }
  bool is_sliding(int64_t layer) const { return layer_sliding_window[layer] > 0; }
};

// transformers' _compute_yarn_parameters attention factor: `attention_factor` when given; else
// get_mscale(factor, mscale) / get_mscale(factor, mscale_all_dim) when both mscale and
// mscale_all_dim are non-zero; else get_mscale(factor), get_mscale(s, m) = 0.1 * m * ln(s) + 1
// for s > 1 and 1 otherwise. (0 and absent are the same, as in Python's truthiness.)
double YarnAttentionFactor(double factor, double mscale, double mscale_all_dim);

// The common ModelConfig of a GPT-OSS model (arch kGptOss; intermediate_size is each expert's;
// rope.type/theta/factor/original length for display) carrying `config` itself in gpt_oss.
ModelConfig GptOssModelConfig(const GptOssConfig& config);

// Consistency checks (positive sizes, heads divisible by kv heads, a window for every sliding
// layer, experts_per_token <= num_experts, ...): InvalidArgument naming `source` and the field.
Status ValidateGptOssConfig(const GptOssConfig& config, const std::string& source);

}  // namespace air::engine
