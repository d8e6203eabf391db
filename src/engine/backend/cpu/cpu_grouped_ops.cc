// The CPU backends' grouped GEMM and MXFP4 kernels (ops.h), one implementation for ReferenceOps
// and FastOps:
//   - GroupedGemm / GroupedGemmWeightGrad read the offsets in place (host memory), check them,
//     and run each group as the backend's own Gemm (and AddBias / BiasBackward) over that
//     group's rows: the reference's loops on the reference, the fast blocked GEMM — threaded
//     over its tiles, on the bf16 path the backend was made with — on the fast one. So a group's
//     result has exactly the bits of the per-expert Gemm call it replaces, whatever the path,
//     and training numerics (and exact resume) are those of the per-expert loop. Groups run one
//     after another: each GEMM already uses every thread, and the paths with no serial variant
//     (onednn) keep their bits.
//   - DequantizeMxfp4 is the host decoder of mxfp4_decode.h (transformers' bits), writing the
//     output view in place.
// Thread safety: as the backend's other kernels (ops.h).
#include <fmt/format.h>

#include "engine/backend/cpu/fast_ops.h"
#include "engine/backend/cpu/reference_ops.h"
#include "engine/check.h"
#include "engine/mxfp4_decode.h"

namespace air::engine {

namespace {

// The offsets (G + 1) of `rows` grouped rows, checked: non-decreasing from >= 0 to <= rows.
const int32_t* CheckedOffsets(const View& offsets, int64_t rows) {
  const int32_t* o = offsets.i32();
  const int64_t groups = offsets.numel() - 1;
  bool ok = o[0] >= 0 && o[groups] <= rows;
  for (int64_t g = 0; ok && g < groups; ++g) ok = o[g] <= o[g + 1];
  AIR_ENGINE_CHECK(ok, fmt::format("grouped GEMM offsets must rise from >= 0 to <= {} rows "
                                   "(offsets[0] = {}, offsets[{}] = {})",
                                   rows, o[0], groups, o[groups])
                           .c_str());
  return o;
}

}  // namespace

void CpuGroupedGemm(const Ops& ops, bool trans_w, int64_t n, int64_t k, const View& x,
                    const View& w, const View& bias, const View& offsets, float beta,
                    const View& y) {
  const int64_t rows = k > 0 ? x.numel() / k : (n > 0 ? y.numel() / n : 0);
  const int32_t* o = CheckedOffsets(offsets, rows);
  for (int64_t g = 0; g + 1 < offsets.numel(); ++g) {
    const int64_t r0 = o[g], m = o[g + 1] - o[g];
    if (m == 0) continue;
    const View yg = y.Slice(r0 * n, m * n);
    // y_g (m, n) = x_g (m, k) @ op(w_g) + beta y_g; w_g is (k, n), or (n, k) with trans_w.
    ops.Gemm(false, trans_w, m, n, k, k > 0 ? x.Slice(r0 * k, m * k) : View(), k,
             k > 0 ? w.Slice(g * k * n, k * n) : View(), trans_w ? k : n, beta, yg, n);
    if (!bias.empty()) ops.AddBias(yg, bias.Slice(g * n, n));
  }
}

void CpuGroupedGemmWeightGrad(const Ops& ops, int64_t k, int64_t n, const View& x, const View& dy,
                              const View& offsets, const View& dw, const View& dbias) {
  const int64_t rows = n > 0 ? dy.numel() / n : 0;
  const int32_t* o = CheckedOffsets(offsets, rows);
  for (int64_t g = 0; g + 1 < offsets.numel(); ++g) {
    const int64_t r0 = o[g], m = o[g + 1] - o[g];
    if (m == 0) continue;
    const View dyg = dy.Slice(r0 * n, m * n);
    // dw_g (k, n) += x_g^T (k, m) @ dy_g (m, n)
    if (!dw.empty()) {
      ops.Gemm(true, false, k, n, m, x.Slice(r0 * k, m * k), k, dyg, n, 1.0f,
               dw.Slice(g * k * n, k * n), n);
    }
    if (!dbias.empty()) ops.BiasBackward(dyg, dbias.Slice(g * n, n));
  }
}

void CpuDequantizeMxfp4(int64_t experts, int64_t rows, int64_t groups, const View& blocks,
                        const View& scales, const View& out) {
  const Mxfp4Layout layout{experts, rows, groups};
  const auto* b = static_cast<const uint8_t*>(blocks.raw());
  const auto* s = static_cast<const uint8_t*>(scales.raw());
  if (out.dtype() == DType::kBF16) {
    DequantizeMxfp4Bf16(layout, b, s, Mxfp4Orientation::kTransformers, 0, experts, out.bf16());
  } else {
    DequantizeMxfp4F32(layout, b, s, Mxfp4Orientation::kTransformers, 0, experts, out.f32());
  }
}

void ReferenceOps::GroupedGemmKernel(bool trans_w, int64_t n, int64_t k, const View& x,
                                     const View& w, const View& bias, const View& offsets,
                                     float beta, const View& y) const {
  CpuGroupedGemm(*this, trans_w, n, k, x, w, bias, offsets, beta, y);
}

void ReferenceOps::GroupedGemmWeightGradKernel(int64_t k, int64_t n, const View& x, const View& dy,
                                               const View& offsets, const View& dw,
                                               const View& dbias) const {
  CpuGroupedGemmWeightGrad(*this, k, n, x, dy, offsets, dw, dbias);
}

void ReferenceOps::DequantizeMxfp4Kernel(int64_t experts, int64_t rows, int64_t groups,
                                         const View& blocks, const View& scales,
                                         const View& out) const {
  CpuDequantizeMxfp4(experts, rows, groups, blocks, scales, out);
}

void FastOps::GroupedGemmKernel(bool trans_w, int64_t n, int64_t k, const View& x, const View& w,
                                const View& bias, const View& offsets, float beta,
                                const View& y) const {
  CpuGroupedGemm(*this, trans_w, n, k, x, w, bias, offsets, beta, y);
}

void FastOps::GroupedGemmWeightGradKernel(int64_t k, int64_t n, const View& x, const View& dy,
                                          const View& offsets, const View& dw,
                                          const View& dbias) const {
  CpuGroupedGemmWeightGrad(*this, k, n, x, dy, offsets, dw, dbias);
}

void FastOps::DequantizeMxfp4Kernel(int64_t experts, int64_t rows, int64_t groups,
                                    const View& blocks, const View& scales, const View& out) const {
  CpuDequantizeMxfp4(experts, rows, groups, blocks, scales, out);
}

}  // namespace air::engine
