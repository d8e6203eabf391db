// Argument and environment sizes against the kernel's limits (see exec_limits.h).
#include "spec/exec_limits.h"

#include <fmt/format.h>
#include <unistd.h>

#include "base/posix_io.h"

namespace air::spec {
namespace {

// 1048576 -> "1,048,576".
std::string Grouped(size_t n) {
  std::string digits = std::to_string(n);
  std::string out;
  for (size_t i = 0; i < digits.size(); ++i) {
    if (i > 0 && (digits.size() - i) % 3 == 0) out += ',';
    out += digits[i];
  }
  return out;
}

}  // namespace

ExecLimits ExecLimitsOfThisProcess() {
  ExecLimits limits;
  long arg_max = ::sysconf(_SC_ARG_MAX);
  if (arg_max > 0) limits.arg_max = static_cast<size_t>(arg_max);
  for (const std::string& entry : MergedEnvironment({})) {
    limits.inherited_bytes += entry.size() + 1 + sizeof(char*);
  }
  return limits;
}

std::vector<ExecLimitProblem> CheckExecLimits(const WorkloadSpec& spec, const ExecLimits& limits) {
  std::vector<ExecLimitProblem> problems;
  const size_t command_bytes = spec.command.size() + 1;
  if (command_bytes > kMaxArgStrlen) {
    problems.push_back(
        {"command",
         fmt::format("is {} bytes; Linux passes the command to the shell as one argument of at "
                     "most {} bytes including a final NUL byte (MAX_ARG_STRLEN), so no node "
                     "could start it: put it in a script in the code snapshot and run that",
                     Grouped(spec.command.size()), Grouped(kMaxArgStrlen))});
  }
  size_t env_bytes = 0;
  for (const auto& [name, value] : spec.env_variables) {
    const size_t entry = name.size() + 1 + value.size() + 1;  // NAME=VALUE\0
    env_bytes += entry + sizeof(char*);
    if (entry > kMaxArgStrlen) {
      problems.push_back(
          {"env_variables." + name,
           fmt::format("is {} bytes; Linux limits one environment entry NAME=VALUE to {} bytes "
                       "including the '=' and a final NUL byte (MAX_ARG_STRLEN), so no node "
                       "could start with it: keep large values in a file in the code snapshot "
                       "and put its path here",
                       Grouped(value.size()), Grouped(kMaxArgStrlen))});
    }
  }
  // bash -c COMMAND: three arguments and their pointers, then the environment.
  const size_t total = command_bytes + sizeof("bash") + sizeof("-c") + 4 * sizeof(char*) +
                       env_bytes + limits.inherited_bytes + kAirReserveBytes;
  if (problems.empty() && total > limits.arg_max) {
    const bool env_larger = env_bytes > command_bytes;
    problems.push_back(
        {env_larger ? "env_variables" : "command",
         fmt::format("the command ({} bytes) and env_variables ({} bytes in {} variable{}), with "
                     "the environment nodes inherit ({} bytes) and what air adds (up to {} "
                     "bytes), come to {} bytes; Linux starts a command with at most {} bytes of "
                     "arguments and environment (ARG_MAX on this machine), so no node could "
                     "start it: move large values into files in the code snapshot",
                     Grouped(spec.command.size()), Grouped(env_bytes), spec.env_variables.size(),
                     spec.env_variables.size() == 1 ? "" : "s", Grouped(limits.inherited_bytes),
                     Grouped(kAirReserveBytes), Grouped(total), Grouped(limits.arg_max))});
  }
  return problems;
}

}  // namespace air::spec
