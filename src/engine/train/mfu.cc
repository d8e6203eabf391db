// FLOPs per token and GPU peaks for MFU.
#include "engine/train/mfu.h"

#include <algorithm>
#include <cctype>
#include <string>

namespace air::engine::train {
namespace {

// Whether `name` holds `model` as a whole word ("A10" in "NVIDIA A10", not in "NVIDIA A100").
bool HasModel(std::string_view name, std::string_view model) {
  for (size_t at = name.find(model); at != std::string_view::npos; at = name.find(model, at + 1)) {
    const size_t end = at + model.size();
    const bool starts = at == 0 || name[at - 1] == ' ' || name[at - 1] == '-';
    const bool ends = end == name.size() || !std::isalnum(static_cast<unsigned char>(name[end]));
    if (starts && ends) return true;
  }
  return false;
}

struct Peak {
  const char* model;   // as it appears in the device's name
  double bf16_tflops;  // dense, NVIDIA's datasheet
};

// The first match wins: the more specific names come first.
constexpr Peak kPeaks[] = {
    {"H100 PCIe", 756.0}, {"H100 NVL", 835.0}, {"H100", 989.4},  {"H200 NVL", 835.0},
    {"H200", 989.4},      {"GH200", 989.4},    {"B200", 2250.0}, {"A100", 312.0},
    {"A10", 125.0},       {"L40S", 362.05},    {"L40", 181.05},  {"L4", 121.0},
};

}  // namespace

std::optional<double> PeakDenseFlops(std::string_view device_name, DType compute) {
  if (compute != DType::kBF16 && compute != DType::kF16) return std::nullopt;
  if (device_name.find("NVIDIA") == std::string_view::npos) return std::nullopt;
  for (const Peak& peak : kPeaks) {
    if (HasModel(device_name, peak.model)) return peak.bf16_tflops * 1e12;
  }
  return std::nullopt;
}

std::optional<double> TrainingFlopsPerToken(const ModelConfig& c, int64_t seq_len, bool lora) {
  if (c.gpt_oss || seq_len <= 0) return std::nullopt;  // mixture of experts: not dense
  const double C = static_cast<double>(c.hidden_size);
  const double per_layer = C * static_cast<double>(c.q_dim()) * 2 +           // q, o
                           C * static_cast<double>(c.kv_dim()) * 2 +          // k, v
                           C * static_cast<double>(c.intermediate_size) * 3;  // gate, up, down
  const double matmul_params =
      per_layer * static_cast<double>(c.num_layers) + C * static_cast<double>(c.vocab_size);
  double attention = 0;
  for (int64_t layer = 0; layer < c.num_layers; ++layer) {
    const int64_t window = c.sliding_window(layer);
    const int64_t context = window > 0 ? std::min(window, seq_len) : seq_len;
    attention += 12.0 * static_cast<double>(c.q_dim()) * static_cast<double>(context);
  }
  return (lora ? 4.0 : 6.0) * matmul_params + attention;
}

}  // namespace air::engine::train
