// Backend helpers built on the virtual memory calls (see backend.h).
#include "engine/backend/backend.h"

#include "engine/check.h"

namespace air::engine {

Result<std::unique_ptr<Buffer>> Backend::AllocateView(DType dtype, const Shape& shape,
                                                      View* view) const {
  AIR_ASSIGN_OR_RETURN(auto buffer,
                       Allocate(static_cast<size_t>(NumElements(shape)) * DTypeSize(dtype)));
  *view = View(buffer.get(), 0, dtype, shape);
  return buffer;
}

double Backend::ReadScalar(const View& scalar) const {
  AIR_ENGINE_CHECK(scalar.dtype() == DType::kF64 && scalar.numel() == 1, "not an F64 scalar");
  double value = 0.0;
  CopyToHost(&value, scalar);
  return value;
}

Tensor Backend::ToHostTensor(const View& src) const {
  AIR_ENGINE_CHECK(src.dtype() == DType::kF32, "ToHostTensor of a non-F32 view");
  Tensor out(src.shape());
  if (!src.empty()) CopyToHost(out.data(), src);
  return out;
}

}  // namespace air::engine
