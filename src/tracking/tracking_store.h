// TrackingStore: MLflow's tracking entities in air's SQLite store (tables tracking_* of
// docs/store-schema.md, migration 3). The HTTP server (src/server) serves it as MLflow's REST
// API; `air run` creates one tracking run per air run through it. Every write is one IMMEDIATE
// transaction, validated before anything is written, so a refused request stores nothing.
// Thread safety: a TrackingStore uses the caller's connection; one per thread.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "base/env.h"
#include "base/status.h"
#include "store/sqlite.h"
#include "tracking/entities.h"

namespace air::tracking {

struct NewRun {
  std::string experiment_id;
  std::string run_id;  // "" : a fresh one
  std::string run_name;
  std::string user_id;
  std::optional<int64_t> start_time;  // ms; default now
  std::string status = "RUNNING";
  std::vector<KeyValue> tags;
};

struct RunUpdate {
  std::optional<std::string> status;
  std::optional<int64_t> end_time;
  std::optional<std::string> run_name;
};

// Which lifecycle stages a listing includes (MLflow's ViewType).
enum class ViewType { kActiveOnly, kDeletedOnly, kAll };
Result<ViewType> ParseViewType(const std::string& text);

// Where an air run's tracking run lives (table tracking_links).
struct RunLink {
  int64_t air_run_id = 0;
  std::string tracking_uri;  // "" : air's own server
  std::string mlflow_run_id;
  std::string experiment_id;
  std::string experiment_name;
  std::optional<std::string> token_secret;  // scope/key of the access token, never its value
};

class TrackingStore {
 public:
  TrackingStore(store::Database* db, Env* env) : db_(db), env_(env) {}

  // kAlreadyExists (MLflow's RESOURCE_ALREADY_EXISTS) when the name is taken.
  Result<Experiment> CreateExperiment(const std::string& name,
                                      const std::vector<KeyValue>& tags = {});
  // The experiment named `name`, created when missing (an air run's experiment).
  Result<Experiment> GetOrCreateExperiment(const std::string& name);
  Result<Experiment> GetExperiment(const std::string& experiment_id);
  Result<Experiment> GetExperimentByName(const std::string& name);
  Result<std::vector<Experiment>> ListExperiments(ViewType view);
  Status SetExperimentLifecycle(const std::string& experiment_id, const std::string& stage);
  Status RenameExperiment(const std::string& experiment_id, const std::string& new_name);
  Status SetExperimentTag(const std::string& experiment_id, const KeyValue& tag);

  Result<RunInfo> CreateRun(const NewRun& run);
  Result<Run> GetRun(const std::string& run_id);
  Result<RunInfo> UpdateRun(const std::string& run_id, const RunUpdate& update);
  Status SetRunLifecycle(const std::string& run_id, const std::string& stage);
  // Params are immutable (the same value again is fine); metrics are stored once per distinct
  // (key, step, timestamp, value).
  Status LogBatch(const std::string& run_id, const Batch& batch);
  Status DeleteTag(const std::string& run_id, const std::string& key);
  Result<std::vector<Metric>> GetMetricHistory(const std::string& run_id, const std::string& key);
  // Every run of the experiments, newest first, with its data.
  Result<std::vector<Run>> ListRuns(const std::vector<std::string>& experiment_ids, ViewType view);

  Status PutLink(const RunLink& link);
  Result<std::optional<RunLink>> GetLink(int64_t air_run_id);

  int64_t NowMillis() { return env_->NowMicros() / 1000; }

 private:
  Result<RunInfo> GetRunInfo(const std::string& run_id);
  Result<RunInfo> ActiveRun(const std::string& run_id);
  Status LoadRunData(Run* run);
  Status WriteTags(const std::string& run_id, const std::vector<KeyValue>& tags);

  store::Database* db_;
  Env* env_;
};

// An experiment id as MLflow sends it ("12"): InvalidArgument unless it is a non-negative integer.
Result<int64_t> ParseExperimentId(const std::string& text);

}  // namespace air::tracking
