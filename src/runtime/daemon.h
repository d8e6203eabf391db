// Starting a run's supervisor detached from the CLI: `air supervise RUN_ID --air-home DIR` in a
// new session (setsid), double-forked so it is re-parented away from the CLI, with stdin from
// /dev/null and stdout/stderr appended to the run's supervisor.log. The CLI can exit, be killed,
// or lose its terminal: the run goes on.
// Thread safety: as base/subprocess.h (StartDetachedSubprocess).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "base/status.h"

namespace air::runtime {

// The absolute path of the running executable (/proc/self/exe).
Result<std::string> CurrentExecutable();

// Returns once the supervisor has been exec'd (or with the reason it could not be).
Status StartDetachedSupervisor(const std::string& air_binary, int64_t run_id,
                               const std::string& air_home, const std::string& log_path);

// The same detached launch for any `air ARGS...` daemon (the tracking server); `what` names it
// in errors.
Status StartDetachedAir(const std::string& air_binary, const std::vector<std::string>& args,
                        const std::string& log_path, const std::string& what);

}  // namespace air::runtime
