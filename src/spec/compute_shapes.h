// The node shapes air knows: GPU node types (GPU_<n>x<model>) and CPU nodes for the embedded
// local backend (CPU_<n> = n worker processes per node). Shared by the validator, the plan and
// the backends so that a shape means the same thing everywhere.
// Thread safety: pure functions over constant tables.
#pragma once

#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "spec/workload_spec.h"

namespace air::spec {

struct NodeShape {
  AcceleratorKind kind = AcceleratorKind::kGpu;
  std::string device_model;  // "H100", "A10", ...; "CPU" for CPU shapes
  int per_node = 0;          // GPUs, or worker processes for CPU shapes
};

inline constexpr int kMaxCpuWorkersPerNode = 256;
inline constexpr int kMaxNodes = 4096;

// The shape named `accelerator_type`, or nullopt when air does not know it.
std::optional<NodeShape> LookupNodeShape(std::string_view accelerator_type);

// The GPU shape names, for error messages and did-you-mean ("CPU_<n>" is listed separately).
std::vector<std::string> KnownGpuShapes();

// The known shape that `accelerator_type` spells with other letter case ("gpu_8xh100" ->
// "GPU_8xH100", "cpu_4" -> "CPU_4"), or "" when there is none. Shape names are case-sensitive.
std::string ShapeWithCorrectCase(std::string_view accelerator_type);

// "2 nodes × 8 GPUs (GPU_8xH100)" or "1 node × 2 worker processes (CPU_2)".
std::string DescribeCompute(const ComputeSpec& compute);

}  // namespace air::spec
