// Node shape table and descriptions (see compute_shapes.h).
#include "spec/compute_shapes.h"

#include <fmt/format.h>

#include <cctype>
#include <charconv>

namespace air::spec {
namespace {

struct GpuShape {
  const char* name;
  const char* model;
  int per_node;
};

constexpr GpuShape kGpuShapes[] = {
    {"GPU_1xA10", "A10", 1},
    {"GPU_1xH100", "H100", 1},
    {"GPU_8xH100", "H100", 8},
    {"GPU_8xH200", "H200", 8},
};

}  // namespace

std::optional<NodeShape> LookupNodeShape(std::string_view accelerator_type) {
  for (const auto& shape : kGpuShapes) {
    if (accelerator_type == shape.name) {
      return NodeShape{AcceleratorKind::kGpu, shape.model, shape.per_node};
    }
  }
  constexpr std::string_view kCpuPrefix = "CPU_";
  if (accelerator_type.substr(0, kCpuPrefix.size()) != kCpuPrefix) return std::nullopt;
  std::string_view digits = accelerator_type.substr(kCpuPrefix.size());
  if (digits.empty() || digits[0] == '0') return std::nullopt;
  int n = 0;
  auto [ptr, ec] = std::from_chars(digits.data(), digits.data() + digits.size(), n);
  if (ec != std::errc() || ptr != digits.data() + digits.size()) return std::nullopt;
  if (n < 1 || n > kMaxCpuWorkersPerNode) return std::nullopt;
  return NodeShape{AcceleratorKind::kCpu, "CPU", n};
}

std::vector<std::string> KnownGpuShapes() {
  std::vector<std::string> names;
  for (const auto& shape : kGpuShapes) names.emplace_back(shape.name);
  return names;
}

std::string ShapeWithCorrectCase(std::string_view accelerator_type) {
  auto upper = [](std::string_view s) {
    std::string out(s);
    for (char& c : out) c = static_cast<char>(toupper(static_cast<unsigned char>(c)));
    return out;
  };
  std::string wanted = upper(accelerator_type);
  for (const auto& shape : kGpuShapes) {
    if (upper(shape.name) == wanted) return shape.name;
  }
  if (wanted.rfind("CPU_", 0) == 0 && LookupNodeShape(wanted)) return wanted;
  return "";
}

std::string DescribeCompute(const ComputeSpec& compute) {
  std::string unit;
  if (compute.kind == AcceleratorKind::kGpu) {
    unit = compute.per_node == 1 ? "GPU" : "GPUs";
  } else {
    unit = compute.per_node == 1 ? "worker process" : "worker processes";
  }
  return fmt::format("{} {} \u00d7 {} {} ({})", compute.num_nodes,
                     compute.num_nodes == 1 ? "node" : "nodes", compute.per_node, unit,
                     compute.accelerator_type);
}

}  // namespace air::spec
