// Views of a model's parameters for the optimizer and the clipper (see param_view.h).
#include "engine/train/param_view.h"

namespace air::engine::train {

std::vector<ParamView> ViewsOf(std::vector<Parameter>& params) {
  std::vector<ParamView> views;
  views.reserve(params.size());
  for (Parameter& p : params) {
    views.push_back(ParamView{p.name, p.value.shape(), p.value.data(), p.grad.data(),
                              p.value.numel(), p.decay});
  }
  return views;
}

}  // namespace air::engine::train
