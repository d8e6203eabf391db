// Parsing the `slurm:` block of AIR_HOME/config.yaml.
#include "backends/slurm/slurm_config.h"

#include <fmt/format.h>
// yaml-cpp 0.7's node/impl.h trips GCC 12's -Wdangling-pointer (a false positive in the library).
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wdangling-pointer"
#include <yaml-cpp/yaml.h>
#pragma GCC diagnostic pop

#include "base/strings.h"

namespace air::backends {
namespace {

// Options air derives from the workload itself: setting them by hand would contradict it.
constexpr const char* kOwnedOptions[] = {"--nodes",
                                         "-N",
                                         "--ntasks",
                                         "-n",
                                         "--ntasks-per-node",
                                         "--cpus-per-task",
                                         "-c",
                                         "--gres",
                                         "--gpus",
                                         "-G",
                                         "--time",
                                         "-t",
                                         "--output",
                                         "-o",
                                         "--error",
                                         "-e",
                                         "--job-name",
                                         "-J",
                                         "--chdir",
                                         "-D",
                                         "--export",
                                         "--parsable",
                                         "--wrap",
                                         "--array",
                                         "-a",
                                         "--partition",
                                         "-p",
                                         "--account",
                                         "-A",
                                         "--qos",
                                         "-q"};

std::string At(const std::string& path, const YAML::Node& node) {
  return fmt::format("{}:{}", path, node.Mark().line + 1);
}

}  // namespace

Status ParseSlurmConfig(const YAML::Node& block, const std::string& where, SlurmConfig* out) {
  if (block.IsNull()) return Status::Ok();
  if (!block.IsMap()) {
    return InvalidArgument(fmt::format(
        "{}: slurm: expected a mapping (partition, account, qos, sbatch_options, air_binary)",
        At(where, block)));
  }
  for (const auto& item : block) {
    const std::string key = item.first.as<std::string>();
    const YAML::Node& value = item.second;
    if (key == "sbatch_options") {
      if (!value.IsSequence()) {
        return InvalidArgument(
            fmt::format("{}: slurm.sbatch_options: expected a list of sbatch options, e.g. "
                        "[\"--exclusive\", \"--constraint=a100\"]",
                        At(where, value)));
      }
      for (const auto& option : value) {
        if (!option.IsScalar()) {
          return InvalidArgument(
              fmt::format("{}: slurm.sbatch_options: expected a string", At(where, option)));
        }
        std::string text = option.as<std::string>();
        if (!StartsWith(text, "-")) {
          return InvalidArgument(
              fmt::format("{}: slurm.sbatch_options: '{}' is not an option (they start with -)",
                          At(where, option), text));
        }
        std::string name = text.substr(0, text.find('='));
        for (const char* owned : kOwnedOptions) {
          if (name == owned) {
            return InvalidArgument(fmt::format(
                "{}: slurm.sbatch_options: '{}' is set by air (from the workload's compute and "
                "timeout_minutes, or slurm.partition/account/qos); remove it",
                At(where, option), text));
          }
        }
        out->sbatch_options.push_back(text);
      }
      continue;
    }
    if (!value.IsScalar()) {
      return InvalidArgument(fmt::format("{}: slurm.{}: expected a string", At(where, value), key));
    }
    std::string text = value.as<std::string>();
    if (key == "partition") {
      out->partition = text;
    } else if (key == "account") {
      out->account = text;
    } else if (key == "qos") {
      out->qos = text;
    } else if (key == "air_binary") {
      if (text.empty() || text[0] != '/') {
        return InvalidArgument(fmt::format(
            "{}: slurm.air_binary: '{}' is not an absolute path (the air executable every node "
            "runs, on the shared filesystem)",
            At(where, value), text));
      }
      out->air_binary = text;
    } else {
      return InvalidArgument(fmt::format(
          "{}: slurm: unknown key '{}'; valid: partition, account, qos, sbatch_options, "
          "air_binary",
          At(where, item.first), key));
    }
  }
  return Status::Ok();
}

}  // namespace air::backends
