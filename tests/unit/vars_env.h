// VarsEnv: the real Env with a fixed set of environment variables, for tests of code that reads
// its configuration from the environment (hub paths, the torchrun/Slurm variables).
// Thread safety: as the real Env; the variables are fixed at construction.
#pragma once

#include <map>
#include <string>
#include <utility>
#include <vector>

#include "base/env_wrapper.h"

namespace air::testing {

class VarsEnv : public EnvWrapper {
 public:
  explicit VarsEnv(std::map<std::string, std::string> vars)
      : EnvWrapper(DefaultEnv()), vars_(std::move(vars)) {}
  std::optional<std::string> GetEnv(const std::string& name) override {
    auto it = vars_.find(name);
    if (it == vars_.end()) return std::nullopt;
    return it->second;
  }

 private:
  std::map<std::string, std::string> vars_;
};

}  // namespace air::testing
