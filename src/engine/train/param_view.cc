// Views of a model's trainable parameters for the optimizer and the clipper (see param_view.h).
#include "engine/train/param_view.h"

#include "engine/check.h"

namespace air::engine::train {

std::vector<ParamView> ViewsOf(std::vector<Parameter>& params) {
  std::vector<ParamView> views;
  views.reserve(params.size());
  for (Parameter& p : params) {
    if (!p.trainable) continue;
    AIR_ENGINE_CHECK(!p.grad.empty() || p.numel() == 0, "ViewsOf before the grads exist");
    AIR_ENGINE_CHECK(p.value.dtype() == DType::kF32, "ViewsOf a parameter that is not F32");
    views.push_back(ParamView{p.name, p.shape, p.value.Flat(), p.grad.Flat(), p.numel(), p.decay});
  }
  return views;
}

}  // namespace air::engine::train
