// Architecture names (see model_config.h).
#include "engine/model/model_config.h"

namespace air::engine {

const char* ArchitectureClassName(Architecture arch) {
  switch (arch) {
    case Architecture::kLlama:
      return "LlamaForCausalLM";
    case Architecture::kQwen2:
      return "Qwen2ForCausalLM";
    case Architecture::kQwen3:
      return "Qwen3ForCausalLM";
    case Architecture::kMistral:
      return "MistralForCausalLM";
  }
  return "?";
}

const char* ArchitectureModelType(Architecture arch) {
  switch (arch) {
    case Architecture::kLlama:
      return "llama";
    case Architecture::kQwen2:
      return "qwen2";
    case Architecture::kQwen3:
      return "qwen3";
    case Architecture::kMistral:
      return "mistral";
  }
  return "?";
}

std::vector<std::string> SupportedArchitectureNames() {
  return {"LlamaForCausalLM", "Qwen2ForCausalLM", "Qwen3ForCausalLM", "MistralForCausalLM"};
}

}  // namespace air::engine
