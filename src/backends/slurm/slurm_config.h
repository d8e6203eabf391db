// The `slurm:` block of AIR_HOME/config.yaml (docs/slurm.md): which partition, account and QOS
// air submits to, extra sbatch options, and the air executable the nodes run.
//
//   backend: slurm
//   shared_root: /shared/me/air
//   slurm:
//     partition: gpu
//     account: ml
//     qos: normal
//     sbatch_options: ["--exclusive", "--constraint=a100"]
//     air_binary: /shared/me/bin/air   # default: the submitting air executable
// Thread safety: plain values; parsing is a pure function.
#pragma once

#include <string>
#include <vector>

#include "base/status.h"
#include "spec/yaml_tree.h"

namespace air::backends {

struct SlurmConfig {
  std::string partition;  // "" = the cluster's default partition
  std::string account;
  std::string qos;
  std::vector<std::string> sbatch_options;
  std::string air_binary;
};

// `where` names the file for messages ("/home/me/.air/config.yaml"). Unknown keys, wrong types
// and options air sets itself (--nodes, --time, ...) are errors naming FILE:LINE: slurm.KEY.
Status ParseSlurmConfig(const spec::YamlNode& block, const std::string& where, SlurmConfig* out);

}  // namespace air::backends
