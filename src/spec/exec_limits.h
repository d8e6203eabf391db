// What Linux lets a node's command carry (execve(2)), checked when a spec is validated, so that
// `air run --dry-run` and submit refuse a command or environment the nodes could never start
// (before, it passed and every node then failed with "cannot execute the shell", E2BIG).
//
//   - the command is one argument of `bash -c`, and each env_variables entry one NAME=VALUE
//     string: each at most MAX_ARG_STRLEN, 32 pages (131,072 bytes) with its final NUL byte;
//   - all arguments and environment strings together, a pointer each included, at most ARG_MAX
//     (sysconf(_SC_ARG_MAX): a quarter of the stack limit, 2 MiB by default). The node's
//     environment also holds what it inherits (this process's environment, which a local
//     run's nodes get) and what air adds (kAirReserveBytes for its own variables, PATH and
//     secret names).
// Thread safety: pure functions (ExecLimitsOfThisProcess reads `environ` and sysconf).
#pragma once

#include <cstddef>
#include <string>
#include <vector>

#include "spec/workload_spec.h"

namespace air::spec {

inline constexpr size_t kMaxArgStrlen = 32 * 4096;
inline constexpr size_t kAirReserveBytes = 32 * 1024;

struct ExecLimits {
  size_t arg_max = 2 * 1024 * 1024;  // bytes of arguments and environment together
  size_t inherited_bytes = 0;        // the environment nodes inherit, with a pointer each
};

// This machine's ARG_MAX and the size of this process's environment.
ExecLimits ExecLimitsOfThisProcess();

struct ExecLimitProblem {
  std::string field;  // "command" or "env_variables.NAME" (or "env_variables" for the total)
  std::string message;
};

// The problems of `spec`'s command and env_variables against `limits` (none: it fits).
std::vector<ExecLimitProblem> CheckExecLimits(const WorkloadSpec& spec, const ExecLimits& limits);

}  // namespace air::spec
