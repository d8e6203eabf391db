// The Llama family's state-dict adapter (see state_dict_adapter.h): torchtitan's parameter
// names <-> transformers' LlamaForCausalLM (Qwen2, Qwen3, Mistral share the layout).
#include "engine/io/state_dict_adapter.h"

namespace air::engine {

std::unique_ptr<StateDictAdapter> MakeLlamaStateDictAdapter() {
  return std::make_unique<TableStateDictAdapter>(
      TableStateDictAdapter::Pairs{
          {"tok_embeddings.weight", "model.embed_tokens.weight"},
          {"norm.weight", "model.norm.weight"},
          {"output.weight", "lm_head.weight"},
      },
      TableStateDictAdapter::Pairs{
          {"attention_norm", "input_layernorm"},
          {"attention.wq", "self_attn.q_proj"},
          {"attention.wk", "self_attn.k_proj"},
          {"attention.wv", "self_attn.v_proj"},
          {"attention.wo", "self_attn.o_proj"},
          {"attention.q_norm", "self_attn.q_norm"},
          {"attention.k_norm", "self_attn.k_norm"},
          {"ffn_norm", "post_attention_layernorm"},
          {"feed_forward.w1", "mlp.gate_proj"},
          {"feed_forward.w3", "mlp.up_proj"},
          {"feed_forward.w2", "mlp.down_proj"},
      });
}

}  // namespace air::engine
