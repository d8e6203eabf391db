// Slurm client commands: running and parsing.
#include "backends/slurm/slurm_cli.h"

#include <fmt/format.h>

#include <cctype>

#include "base/strings.h"
#include "base/subprocess.h"

namespace air::backends::slurm {
namespace {

// Is `line[i..]` the start of a " Key=" token?
bool KeyStartsAt(std::string_view line, size_t i) {
  size_t j = i;
  while (j < line.size() && (std::isalnum(static_cast<unsigned char>(line[j])) || line[j] == '_' ||
                             line[j] == ':' || line[j] == '/')) {
    ++j;
  }
  return j > i && j < line.size() && line[j] == '=' &&
         std::isupper(static_cast<unsigned char>(line[i]));
}

}  // namespace

Record ParseRecord(std::string_view line) {
  Record out;
  size_t i = 0;
  while (i < line.size() && line[i] == ' ') ++i;
  while (i < line.size()) {
    size_t eq = line.find('=', i);
    if (eq == std::string_view::npos) break;
    std::string key(line.substr(i, eq - i));
    size_t v = eq + 1;
    size_t end = v;
    while (end < line.size()) {
      if (line[end] == ' ' && KeyStartsAt(line, end + 1)) break;
      ++end;
    }
    std::string value(Trim(line.substr(v, end - v)));
    out[key] = value;
    i = end;
    while (i < line.size() && line[i] == ' ') ++i;
  }
  return out;
}

std::vector<Record> ParseRecords(std::string_view text) {
  std::vector<Record> out;
  for (const auto& line : Split(text, '\n')) {
    if (Trim(line).empty()) continue;
    out.push_back(ParseRecord(line));
  }
  return out;
}

JobPhase PhaseOfState(std::string_view state) {
  // A state may carry flags ("CANCELLED by 0", "RUNNING+..."): the first word decides.
  std::string_view word = state.substr(0, state.find_first_of(" +"));
  for (std::string_view queued : {"PENDING", "CONFIGURING", "REQUEUED", "REQUEUE_HOLD",
                                  "REQUEUE_FED", "RESV_DEL_HOLD", "SPECIAL_EXIT"}) {
    if (word == queued) return JobPhase::kQueued;
  }
  for (std::string_view ended :
       {"COMPLETED", "CANCELLED", "FAILED", "TIMEOUT", "NODE_FAIL", "PREEMPTED", "BOOT_FAIL",
        "DEADLINE", "OUT_OF_MEMORY", "REVOKED"}) {
    if (word == ended) return JobPhase::kEnded;
  }
  return JobPhase::kRunning;  // RUNNING, COMPLETING, SUSPENDED, STAGE_OUT, RESIZING, ...
}

JobInfo JobInfoFromRecord(const Record& record) {
  JobInfo info;
  auto get = [&record](const char* key) {
    auto it = record.find(key);
    return it == record.end() ? std::string() : it->second;
  };
  info.state = get("JobState");
  info.reason = get("Reason");
  info.nodes = get("NodeList");
  if (info.nodes == "(null)") info.nodes.clear();
  info.exit_code = get("ExitCode");
  info.comment = get("Comment");
  if (info.comment == "(null)") info.comment.clear();
  info.phase = PhaseOfState(info.state);
  return info;
}

int GpusInGres(std::string_view gres) {
  int total = 0;
  for (const auto& part : Split(gres, ',')) {
    std::string item(Trim(part));
    item = item.substr(0, item.find('('));
    std::vector<std::string> fields = Split(item, ':');
    if (fields.size() < 2 || fields[0] != "gpu") continue;
    const std::string& count = fields.back();
    if (!count.empty() && count.find_first_not_of("0123456789") == std::string::npos) {
      total += std::stoi(count);
    }
  }
  return total;
}

Result<std::string> ParseSbatchJobId(std::string_view output) {
  std::string first(Trim(output.substr(0, output.find('\n'))));
  first = first.substr(0, first.find(';'));
  if (first.empty() || first.find_first_not_of("0123456789") != std::string::npos) {
    return Internal(fmt::format("sbatch --parsable printed '{}', not a job id", Trim(output)));
  }
  return first;
}

Result<std::string> RunSlurm(const std::vector<std::string>& argv) {
  SubprocessOptions options;
  options.argv = argv;
  auto ran = RunSubprocess(options);
  if (!ran.ok()) {
    return Unavailable(fmt::format("cannot run `{}`: {}", argv[0], ran.status().message()));
  }
  if (!ran->succeeded()) {
    return Unavailable(
        fmt::format("`{}` failed ({}): {}", Join(argv, " "), ran->Describe(), Trim(ran->output)));
  }
  return ran->output;
}

Result<std::string> FindSlurmCommand(const std::string& command, Env* env) {
  std::string path = env->GetEnv("PATH").value_or("");
  for (const auto& dir : Split(path, ':')) {
    if (dir.empty()) continue;
    std::string candidate = dir + "/" + command;
    if (env->FileExists(candidate) && !env->IsDirectory(candidate)) return candidate;
  }
  return NotFound(fmt::format(
      "the slurm backend needs the Slurm command `{}`, which is not on PATH: install Slurm's "
      "client commands (Debian/Ubuntu: apt-get install slurm-client; or load your cluster's "
      "Slurm module) and set SLURM_CONF to the cluster's slurm.conf",
      command));
}

Result<JobInfo> QueryJob(const std::string& job_id) {
  SubprocessOptions options;
  options.argv = {"scontrol", "show", "job", "-o", job_id};
  auto ran = RunSubprocess(options);
  if (!ran.ok()) return Unavailable("cannot run scontrol: " + ran.status().message());
  if (!ran->succeeded()) {
    if (ran->output.find("Invalid job id") != std::string::npos) {
      return NotFound(fmt::format("Slurm no longer knows job {}", job_id));
    }
    return Unavailable(fmt::format("`scontrol show job {}` failed ({}): {}", job_id,
                                   ran->Describe(), Trim(ran->output)));
  }
  std::vector<Record> records = ParseRecords(ran->output);
  if (records.empty()) return NotFound(fmt::format("Slurm no longer knows job {}", job_id));
  return JobInfoFromRecord(records[0]);
}

}  // namespace air::backends::slurm
