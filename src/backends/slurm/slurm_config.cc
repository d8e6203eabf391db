// Parsing the `slurm:` block of AIR_HOME/config.yaml.
#include "backends/slurm/slurm_config.h"

#include <fmt/format.h>

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

}  // namespace

Status ParseSlurmConfig(const spec::YamlNode& block, const std::string& where, SlurmConfig* out) {
  if (block.IsScalar() && block.IsNull()) return Status::Ok();
  if (!block.IsMapping()) {
    return InvalidArgument(fmt::format(
        "{}: slurm: expected a mapping (partition, account, qos, sbatch_options, air_binary)",
        spec::SourceLine(where, block)));
  }
  for (const auto& [key_node, value] : block.entries) {
    if (!key_node.IsScalar()) {
      return InvalidArgument(fmt::format("{}: slurm: a key must be a string, got {}",
                                         spec::SourceLine(where, key_node),
                                         spec::DescribeNode(key_node)));
    }
    const std::string& key = key_node.value;
    if (key == "sbatch_options") {
      if (!value.IsSequence()) {
        return InvalidArgument(
            fmt::format("{}: slurm.sbatch_options: expected a list of sbatch options, e.g. "
                        "[\"--exclusive\", \"--constraint=a100\"]",
                        spec::SourceLine(where, value)));
      }
      for (const auto& option : value.items) {
        if (!option.IsScalar() || option.IsNull()) {
          return InvalidArgument(fmt::format("{}: slurm.sbatch_options: expected a string",
                                             spec::SourceLine(where, option)));
        }
        const std::string& text = option.value;
        if (!StartsWith(text, "-")) {
          return InvalidArgument(
              fmt::format("{}: slurm.sbatch_options: '{}' is not an option (they start with -)",
                          spec::SourceLine(where, option), text));
        }
        std::string name = text.substr(0, text.find('='));
        for (const char* owned : kOwnedOptions) {
          if (name == owned) {
            return InvalidArgument(fmt::format(
                "{}: slurm.sbatch_options: '{}' is set by air (from the workload's compute and "
                "timeout_minutes, or slurm.partition/account/qos); remove it",
                spec::SourceLine(where, option), text));
          }
        }
        out->sbatch_options.push_back(text);
      }
      continue;
    }
    if (!value.IsScalar()) {
      return InvalidArgument(
          fmt::format("{}: slurm.{}: expected a string", spec::SourceLine(where, value), key));
    }
    const std::string text = value.IsNull() ? "" : value.value;
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
            spec::SourceLine(where, value), text));
      }
      out->air_binary = text;
    } else {
      return InvalidArgument(fmt::format(
          "{}: slurm: unknown key '{}'; valid: partition, account, qos, sbatch_options, "
          "air_binary",
          spec::SourceLine(where, key_node), key));
    }
  }
  return Status::Ok();
}

}  // namespace air::backends
