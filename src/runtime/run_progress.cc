// Gathering a run's progress from the store, its tracking run and node 0's log.
#include "runtime/run_progress.h"

#include <charconv>
#include <cmath>
#include <cstdlib>

#include "agent/log_format.h"
#include "base/strings.h"
#include "base/time_format.h"
#include "runtime/log_reader.h"
#include "runtime/spec_codec.h"
#include "spec/yaml_tree.h"
#include "tracking/tracking_store.h"
#include "tracking/workload_metrics.h"

namespace air::runtime {
namespace {

constexpr size_t kLogHeadBytes = 1 << 20;
constexpr size_t kLogTailLines = 200;

std::optional<int64_t> PositiveInteger(std::string_view text) {
  int64_t v = 0;
  auto [ptr, ec] = std::from_chars(text.data(), text.data() + text.size(), v);
  if (ec != std::errc() || ptr != text.data() + text.size() || v <= 0) return std::nullopt;
  return v;
}

// A step line of a node log record, with the record's time.
std::optional<std::pair<StepOfTotal, int64_t>> StepLine(const std::string& line) {
  auto record = agent::ParseLogLine(line);
  if (!record || record->stream == "air") return std::nullopt;
  auto step = FindStepOfTotal(record->text);
  if (!step) return std::nullopt;
  auto time = ParseUtcTimestamp(record->timestamp);
  if (!time) return std::nullopt;
  return std::make_pair(*step, *time);
}

// The first step line in the first kLogHeadBytes of the log's oldest part.
std::optional<std::pair<StepOfTotal, int64_t>> FirstStepLine(Env* env, const std::string& log) {
  std::vector<std::string> parts = LogParts(env, log);
  if (parts.empty()) return std::nullopt;
  auto file = env->NewSequentialFile(parts.back());
  if (!file.ok()) return std::nullopt;
  std::string head(kLogHeadBytes, '\0');
  size_t filled = 0;
  while (filled < head.size()) {
    auto n = (*file)->Read(head.data() + filled, head.size() - filled);
    if (!n.ok() || *n == 0) break;
    filled += *n;
  }
  head.resize(filled);
  for (const std::string& line : Split(head, '\n')) {
    if (auto found = StepLine(line)) return found;
  }
  return std::nullopt;
}

std::optional<std::pair<StepOfTotal, int64_t>> LastStepLine(Env* env, const std::string& log) {
  auto lines = ReadLastLines(env, log, kLogTailLines);
  if (!lines.ok()) return std::nullopt;
  for (auto it = lines->rbegin(); it != lines->rend(); ++it) {
    if (auto found = StepLine(*it)) return found;
  }
  return std::nullopt;
}

// parameters.max_steps of the spec, when it is a positive integer.
std::optional<int64_t> SpecMaxSteps(const spec::WorkloadSpec& spec) {
  if (!spec.parameters_yaml) return std::nullopt;
  auto root = spec::LoadYaml(*spec.parameters_yaml, "parameters");
  if (!root.ok() || !root->IsMapping()) return std::nullopt;
  const spec::YamlNode* node = root->Find("max_steps");
  if (!node || !node->IsScalar()) return std::nullopt;
  return PositiveInteger(node->value);
}

}  // namespace

Result<RunProgress> LoadRunProgress(store::Store* store, const Layout& layout,
                                    const store::RunRecord& run, Env* env, int64_t now_us,
                                    ProgressDetail what) {
  ProgressInputs in;
  in.now_us = now_us;
  in.live = !store::IsTerminal(run.state);
  auto spec = SpecFromJsonText(run.spec_json);
  if (spec.ok()) {
    in.accelerators_per_node =
        spec->compute.kind == spec::AcceleratorKind::kGpu ? spec->compute.per_node : 0;
  }
  AIR_ASSIGN_OR_RETURN(std::vector<store::AttemptRecord> attempts, store->ListAttempts(run.id));
  for (const auto& a : attempts) {
    in.attempts.push_back(
        {a.started_us, a.ended_us, a.num_nodes > 0 ? a.num_nodes : run.num_nodes});
  }
  if (attempts.empty() || what == ProgressDetail::kAttemptsOnly) return ComputeProgress(in);
  const store::AttemptRecord& latest = attempts.back();
  const int64_t since_ms = latest.started_us / 1000;

  tracking::TrackingStore tracking(store->db(), env);
  AIR_ASSIGN_OR_RETURN(std::optional<tracking::RunLink> link, tracking.GetLink(run.id));
  if (link && link->tracking_uri.empty()) {
    const std::string& uuid = link->mlflow_run_id;
    store::Database* db = store->db();
    AIR_ASSIGN_OR_RETURN(auto span, tracking::WorkloadStepSpan(db, uuid, since_ms));
    if (span) {
      in.first_step = StepSample{span->first.step, span->first.timestamp_ms * 1000};
      in.last_step = StepSample{span->last.step, span->last.timestamp_ms * 1000};
      in.step_source = "metrics";
    }
    AIR_ASSIGN_OR_RETURN(in.tokens_per_s,
                         tracking::LatestMetricValue(db, uuid, "tokens_per_s", since_ms));
    AIR_ASSIGN_OR_RETURN(in.mfu, tracking::LatestMetricValue(db, uuid, "mfu", since_ms));
    for (const char* key : {"max_steps", "total_steps"}) {
      AIR_ASSIGN_OR_RETURN(auto value, tracking::RunParam(db, uuid, key));
      if (auto steps = value ? PositiveInteger(*value) : std::nullopt) {
        in.max_steps = steps;
        in.max_steps_source = std::string("param ") + key;
        break;
      }
    }
    if (!in.max_steps && in.last_step) {
      // HF Trainer by epochs (max_steps -1): its `epoch` metric against num_train_epochs.
      AIR_ASSIGN_OR_RETURN(auto epochs, tracking::RunParam(db, uuid, "num_train_epochs"));
      AIR_ASSIGN_OR_RETURN(auto epoch, tracking::LatestMetricValue(db, uuid, "epoch", since_ms));
      const double total = epochs ? std::strtod(epochs->c_str(), nullptr) : 0;
      if (total > 0 && epoch && *epoch > 0) {
        in.max_steps = std::llround(static_cast<double>(in.last_step->step) * total / *epoch);
        in.max_steps_source = "epoch of param num_train_epochs";
      }
    }
  }
  if (!in.max_steps && spec.ok()) {
    if ((in.max_steps = SpecMaxSteps(*spec))) in.max_steps_source = "parameters.max_steps";
  }
  if (!in.last_step || !in.max_steps) {
    const std::string log = layout.NodeLog(run.id, latest.attempt, 0);
    if (auto last = LastStepLine(env, log)) {
      if (!in.last_step) {
        in.last_step = StepSample{last->first.step, last->second};
        in.step_source = "log";
        if (auto first = FirstStepLine(env, log)) {
          in.first_step = StepSample{first->first.step, first->second};
        }
      }
      if (!in.max_steps) {
        in.max_steps = last->first.total;
        in.max_steps_source = "log";
      }
    }
  }
  return ComputeProgress(in);
}

}  // namespace air::runtime
