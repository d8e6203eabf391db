// Workspace: one backend buffer carved into views by a bump pointer — the activations, scratch
// gradients and batch inputs of a forward/backward whose sizes depend on the batch shape.
//
// Arrange(layout) runs `layout(ws)`, which calls ws.Take(dtype, shape) for every view it needs
// and stores them; it runs once to measure and once to hand out views, and reallocates only
// when the layout needs more bytes than the buffer has (a high-water mark: a training loop
// over same-shaped batches allocates once, at its first step). Every view from an earlier
// Arrange is invalid afterwards. Views are 64-byte aligned. Measure(layout) runs the measuring
// pass alone: the bytes an Arrange would allocate, with no backend and no memory (the training
// plan's activation memory).
// Thread safety: owned and used by one model.
#pragma once

#include <cstddef>
#include <memory>

#include "base/status.h"
#include "engine/backend/backend.h"

namespace air::engine {

class Workspace {
 public:
  explicit Workspace(const Backend* backend = nullptr) : backend_(backend) {}

  template <typename Layout>
  Status Arrange(Layout&& layout) {
    measuring_ = true;
    cursor_ = 0;
    layout(*this);
    const size_t need = cursor_;
    if (buffer_ == nullptr || need > buffer_->bytes()) {
      buffer_.reset();  // free first: the old and new buffers are never both held
      AIR_ASSIGN_OR_RETURN(buffer_, backend_->Allocate(need));
    }
    measuring_ = false;
    cursor_ = 0;
    layout(*this);
    return Status::Ok();
  }

  template <typename Layout>
  static size_t Measure(Layout&& layout) {
    Workspace ws;
    ws.measuring_ = true;
    layout(ws);
    return ws.cursor_;
  }

  // The next view (an empty one while measuring).
  View Take(DType dtype, Shape shape) {
    const size_t offset = cursor_;
    const size_t bytes = static_cast<size_t>(NumElements(shape)) * DTypeSize(dtype);
    cursor_ += (bytes + 63) / 64 * 64;
    if (measuring_) return View();
    return View(buffer_.get(), offset, dtype, std::move(shape));
  }
  View F32(Shape shape) { return Take(DType::kF32, std::move(shape)); }

  size_t capacity() const { return buffer_ ? buffer_->bytes() : 0; }

 private:
  const Backend* backend_;
  std::unique_ptr<Buffer> buffer_;
  size_t cursor_ = 0;
  bool measuring_ = false;
};

}  // namespace air::engine
