// Talking to Slurm through its own client commands (sbatch, scontrol, scancel): running them
// (base/subprocess.h, no shell) and parsing what they print. Pure parsing is separate from
// running so it is unit-tested on recorded output (tests/unit/runtime/slurm_parse_test.cc).
//
// air reads job states with `scontrol show job -o` (one key=value record per line): it needs no
// accounting database, which many clusters (and the test cluster) do not run.
// Thread safety: pure functions, and subprocess calls that touch no shared state.
#pragma once

#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "base/env.h"
#include "base/status.h"

namespace air::backends::slurm {

using Record = std::map<std::string, std::string>;

// One `scontrol show ... -o` line: "JobId=5 JobName=x Reason=None Command=/a b" -> fields.
// A value runs to the next " Key=" (values such as Command may hold spaces).
Record ParseRecord(std::string_view line);
std::vector<Record> ParseRecords(std::string_view text);

enum class JobPhase { kQueued, kRunning, kEnded };

struct JobInfo {
  std::string state;      // "PENDING", "RUNNING", "TIMEOUT", "NODE_FAIL", ...
  std::string reason;     // "Resources", "None", ...
  std::string nodes;      // "node[1-2]" once allocated
  std::string exit_code;  // "0:0" (exit code:signal of the batch script)
  std::string comment;    // the job's Comment ("" when unset)
  JobPhase phase = JobPhase::kQueued;
};

// The phase of a Slurm job state; unknown states count as running (they are transient).
JobPhase PhaseOfState(std::string_view state);
JobInfo JobInfoFromRecord(const Record& record);

// The GPUs in a node's Gres field ("gpu:4", "gpu:a100:2(S:0-1),shard:8" -> 4, 2; "(null)" -> 0).
int GpusInGres(std::string_view gres);

// The first line of sbatch --parsable's output: "42" or "42;cluster" -> "42".
Result<std::string> ParseSbatchJobId(std::string_view output);

// Runs a Slurm command (argv[0] looked up on PATH) and returns its stdout+stderr; a non-zero
// exit is kUnavailable naming the command line and quoting its output.
Result<std::string> RunSlurm(const std::vector<std::string>& argv);

// The directory-qualified path of `command` on PATH, or kNotFound with what to install.
Result<std::string> FindSlurmCommand(const std::string& command, Env* env);

// Current state of a job; kNotFound when Slurm no longer knows it (purged after MinJobAge).
Result<JobInfo> QueryJob(const std::string& job_id);

}  // namespace air::backends::slurm
