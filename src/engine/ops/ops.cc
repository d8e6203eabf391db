// Op names, the support check model code runs before it builds, and the argument checks the
// public ops run before any backend's kernel (see ops.h, op_checks.h and ops_checked.cc).
#include "engine/ops/ops.h"

#include <fmt/format.h>

#include "engine/check.h"
#include "engine/ops/op_checks.h"

namespace air::engine {

const char* OpName(OpKind op) {
  switch (op) {
    case OpKind::kGemm:
      return "Gemm";
    case OpKind::kEmbeddingForward:
      return "EmbeddingForward";
    case OpKind::kEmbeddingBackward:
      return "EmbeddingBackward";
    case OpKind::kRmsNormForward:
      return "RmsNormForward";
    case OpKind::kRmsNormBackward:
      return "RmsNormBackward";
    case OpKind::kRopeTables:
      return "RopeTables";
    case OpKind::kRopeForward:
      return "RopeForward";
    case OpKind::kRopeBackward:
      return "RopeBackward";
    case OpKind::kAttentionForward:
      return "AttentionForward";
    case OpKind::kAttentionBackward:
      return "AttentionBackward";
    case OpKind::kSwigluForward:
      return "SwigluForward";
    case OpKind::kSwigluBackward:
      return "SwigluBackward";
    case OpKind::kAddInPlace:
      return "AddInPlace";
    case OpKind::kAddBias:
      return "AddBias";
    case OpKind::kBiasBackward:
      return "BiasBackward";
    case OpKind::kCrossEntropyForward:
      return "CrossEntropyForward";
    case OpKind::kCrossEntropyBackward:
      return "CrossEntropyBackward";
    case OpKind::kAdamWUpdate:
      return "AdamWUpdate";
    case OpKind::kSumOfSquares:
      return "SumOfSquares";
    case OpKind::kScale:
      return "Scale";
    case OpKind::kConvert:
      return "Convert";
    case OpKind::kDropout:
      return "Dropout";
    case OpKind::kDropoutMask:
      return "DropoutMask";
    case OpKind::kApplyDropoutMask:
      return "ApplyDropoutMask";
    case OpKind::kGemmDropped:
      return "GemmDropped";
    case OpKind::kGemmAddDropped:
      return "GemmAddDropped";
    case OpKind::kGemmConcatK:
      return "GemmConcatK";
    case OpKind::kDroppedLinearBackward:
      return "DroppedLinearBackward";
    case OpKind::kPackGemmB:
      return "PackGemmB";
    case OpKind::kGemmPackedB:
      return "GemmPackedB";
    case OpKind::kClampedSwigluForward:
      return "ClampedSwigluForward";
    case OpKind::kClampedSwigluBackward:
      return "ClampedSwigluBackward";
    case OpKind::kRouterTopK:
      return "RouterTopK";
    case OpKind::kRouterTopKBackward:
      return "RouterTopKBackward";
    case OpKind::kMoeDispatch:
      return "MoeDispatch";
    case OpKind::kMoeGather:
      return "MoeGather";
    case OpKind::kMoeGatherBackward:
      return "MoeGatherBackward";
    case OpKind::kMoeCombine:
      return "MoeCombine";
    case OpKind::kMoeCombineBackward:
      return "MoeCombineBackward";
    case OpKind::kGroupedGemm:
      return "GroupedGemm";
    case OpKind::kGroupedGemmWeightGrad:
      return "GroupedGemmWeightGrad";
    case OpKind::kDequantizeMxfp4:
      return "DequantizeMxfp4";
  }
  return "?";
}

Status CheckOpsSupport(const Ops& ops, std::span<const OpKind> ops_needed, DType dtype,
                       const std::string& purpose) {
  for (OpKind op : ops_needed) {
    if (!ops.Supports(op, dtype)) {
      return Unimplemented(fmt::format("{}: the {} backend has no {} {} op", purpose, ops.name(),
                                       DTypeName(dtype), OpName(op)));
    }
  }
  return Status::Ok();
}

namespace {

[[noreturn]] void Fail(OpKind op, const char* arg, const std::string& what) {
  std::fprintf(stderr, "engine invariant failed: %s: argument %s: %s\n", OpName(op), arg,
               what.c_str());
  std::abort();
}

// A view with memory on another device than the backend's.
void CheckDevice(const Ops& ops, OpKind op, const View& v, const char* arg) {
  if (v.buffer() == nullptr || v.device() == ops.device()) return;
  Fail(op, arg,
       fmt::format("a view of {} memory reached the {} backend, which runs on {} (copy it through "
                   "the host, or create it with this backend)",
                   v.device().ToString(), ops.name(), ops.device().ToString()));
}

}  // namespace

void CheckData(const Ops& ops, OpKind op, const View& v, const char* arg) {
  CheckDevice(ops, op, v, arg);
  if (v.dtype() != DType::kF32 && v.dtype() != DType::kBF16 && v.dtype() != DType::kF16) {
    Fail(op, arg, fmt::format("{} is not a float dtype", DTypeName(v.dtype())));
  }
  if (!ops.Supports(op, v.dtype())) {
    Fail(op, arg,
         fmt::format("the {} backend does not support {} here", ops.name(), DTypeName(v.dtype())));
  }
}

void CheckF32(const Ops& ops, OpKind op, const View& v, const char* arg) {
  CheckDevice(ops, op, v, arg);
  if (!v.empty() && v.dtype() != DType::kF32) {
    Fail(op, arg, fmt::format("must be F32, is {}", DTypeName(v.dtype())));
  }
}

void CheckIndex(const Ops& ops, OpKind op, const View& v, const char* arg) {
  CheckDevice(ops, op, v, arg);
  if (!v.empty() && v.dtype() != DType::kI32) {
    Fail(op, arg, fmt::format("must be I32, is {}", DTypeName(v.dtype())));
  }
}

void CheckPacked(const Ops& ops, OpKind op, const View& v, const char* arg) {
  CheckDevice(ops, op, v, arg);
  if (!v.empty() && v.dtype() != DType::kU8) {
    Fail(op, arg, fmt::format("must be U8, is {}", DTypeName(v.dtype())));
  }
}

void CheckScalar(const Ops& ops, OpKind op, const View& v, const char* arg) {
  CheckDevice(ops, op, v, arg);
  if (v.dtype() != DType::kF64 || v.numel() < 1) {
    Fail(op, arg, fmt::format("must be one F64, is {} x {}", v.numel(), DTypeName(v.dtype())));
  }
}

void CheckSize(OpKind op, const View& v, int64_t elements, const char* arg) {
  if (elements > 0 && v.numel() < elements) {
    Fail(op, arg, fmt::format("holds {} elements, {} are addressed", v.numel(), elements));
  }
}

void CheckSameSize(OpKind op, const View& a, const View& b, const char* what) {
  if (a.numel() != b.numel()) {
    Fail(op, what, fmt::format("{} vs {} elements", a.numel(), b.numel()));
  }
}

}  // namespace air::engine
