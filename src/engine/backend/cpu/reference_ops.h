// ReferenceOps: the CPU ground truth for every op in engine/ops/ops.h — plain fp32 loops, one
// thread, accumulation in double where a sum runs long, shapes in comments. BF16 data is widened
// to fp32 (exactly), computed by the same loops and rounded back once per output element, so
// the reference of a bf16 op is "the fp32 op on the bf16 inputs". Fast paths and future backends
// are tested against it; read reference_loops.cc to learn what an op computes.
// Thread safety: stateless; safe from any number of threads.
#pragma once

#include "engine/backend/cpu/cpu_backend.h"

namespace air::engine {

class ReferenceOps : public CpuBackend {
 public:
  std::string name() const override { return "reference"; }
  std::string Describe() const override { return "cpu, reference loops, 1 thread"; }
  // Every op on F32 and on BF16 (the master-state ops too: widened, updated, rounded once).
  bool Supports(OpKind op, DType dtype) const override;

 protected:
  // Every op's kernel (ops.h: the public op has checked the arguments when a kernel runs).
  AIR_OPS_KERNELS(, override)
};

// sum of x[j]^2 in double, in index order (the reference's loop, reused by the fast path).
double SumOfSquaresLoop(const float* x, int64_t n);

// Ops::MoeDispatch's counting sort on the calling thread: the whole kernel for every CPU backend
// (N*k small integers; ReferenceOps and FastOps both call it).
void CpuMoeDispatch(const View& indices, const View& offsets, const View& token_of_row,
                    const View& row_of_slot);

// Ops::GroupedGemm, GroupedGemmWeightGrad and DequantizeMxfp4 for every CPU backend
// (cpu_grouped_ops.cc): each group is `ops`' own Gemm (AddBias, BiasBackward) over its rows.
void CpuGroupedGemm(const Ops& ops, bool trans_w, int64_t n, int64_t k, const View& x,
                    const View& w, const View& bias, const View& offsets, float beta,
                    const View& y);
void CpuGroupedGemmWeightGrad(const Ops& ops, int64_t k, int64_t n, const View& x, const View& dy,
                              const View& offsets, const View& dw, const View& dbias);
void CpuDequantizeMxfp4(int64_t experts, int64_t rows, int64_t groups, const View& blocks,
                        const View& scales, const View& out);

}  // namespace air::engine
