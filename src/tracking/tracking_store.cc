// TrackingStore over SQLite: experiments, runs, params, tags, metrics.
#include "tracking/tracking_store.h"

#include <fmt/format.h>

#include <cerrno>
#include <cfloat>
#include <cmath>
#include <cstdlib>
#include <set>

#include "tracking/validation.h"

namespace air::tracking {
namespace {

using store::Statement;
using store::Transaction;

constexpr char kRunColumns[] =
    "run_uuid, experiment_id, name, user_id, status, start_time, end_time, lifecycle_stage, "
    "artifact_uri";

RunInfo ReadRunInfo(const Statement& stmt) {
  RunInfo info;
  info.run_id = stmt.ColumnText(0);
  info.experiment_id = std::to_string(stmt.ColumnInt(1));
  info.run_name = stmt.ColumnText(2);
  info.user_id = stmt.ColumnText(3);
  info.status = stmt.ColumnText(4);
  info.start_time = stmt.ColumnInt(5);
  info.end_time = stmt.ColumnOptionalInt(6);
  info.lifecycle_stage = stmt.ColumnText(7);
  info.artifact_uri = stmt.ColumnText(8);
  return info;
}

Metric ReadMetric(const Statement& stmt, int first) {
  Metric m;
  m.key = stmt.ColumnText(first);
  m.step = stmt.ColumnInt(first + 1);
  m.timestamp = stmt.ColumnInt(first + 2);
  m.value = stmt.ColumnInt(first + 4) != 0 ? std::nan("") : stmt.ColumnDouble(first + 3);
  return m;
}

Status RunNotFound(const std::string& run_id) {
  return NotFound(fmt::format("Run with id={} not found", run_id));
}

bool IsLifecycleStage(const std::string& stage) { return stage == "active" || stage == "deleted"; }

}  // namespace

bool IsRunStatus(const std::string& s) {
  return s == "RUNNING" || s == "SCHEDULED" || s == "FINISHED" || s == "FAILED" || s == "KILLED";
}

bool IsTerminalRunStatus(const std::string& s) {
  return s == "FINISHED" || s == "FAILED" || s == "KILLED";
}

Result<ViewType> ParseViewType(const std::string& text) {
  if (text.empty() || text == "ACTIVE_ONLY" || text == "1") return ViewType::kActiveOnly;
  if (text == "DELETED_ONLY" || text == "2") return ViewType::kDeletedOnly;
  if (text == "ALL" || text == "3") return ViewType::kAll;
  return InvalidArgument(fmt::format(
      "Invalid value \"{}\" for parameter 'view_type' supplied: use ACTIVE_ONLY, DELETED_ONLY or "
      "ALL",
      text));
}

Result<int64_t> ParseExperimentId(const std::string& text) {
  errno = 0;
  char* end = nullptr;
  long long id = std::strtoll(text.c_str(), &end, 10);
  if (text.empty() || *end != '\0' || errno != 0 || id < 0) {
    return InvalidArgument(fmt::format(
        "Invalid value \"{}\" for parameter 'experiment_id' supplied: experiment ids are "
        "non-negative integers",
        text));
  }
  return static_cast<int64_t>(id);
}

static bool ViewIncludes(ViewType view, const std::string& stage) {
  switch (view) {
    case ViewType::kActiveOnly:
      return stage == "active";
    case ViewType::kDeletedOnly:
      return stage == "deleted";
    case ViewType::kAll:
      return true;
  }
  return false;
}

// --- experiments ---

Result<Experiment> TrackingStore::CreateExperiment(const std::string& name,
                                                   const std::vector<KeyValue>& tags) {
  AIR_RETURN_IF_ERROR(ValidateExperimentName(name));
  for (const KeyValue& tag : tags) AIR_RETURN_IF_ERROR(ValidateTag(tag));
  AIR_ASSIGN_OR_RETURN(auto txn, Transaction::Begin(db_));
  AIR_ASSIGN_OR_RETURN(Statement find,
                       db_->Query("SELECT 1 FROM tracking_experiments WHERE name = ?", name));
  AIR_ASSIGN_OR_RETURN(bool exists, find.Step());
  if (exists) {
    return AlreadyExists(fmt::format("Experiment '{}' already exists.", name));
  }
  int64_t now = NowMillis();
  AIR_RETURN_IF_ERROR(
      db_->Execute("INSERT INTO tracking_experiments (name, artifact_location, creation_time, "
                   "last_update_time) VALUES (?, '', ?, ?)",
                   name, now, now));
  int64_t id = db_->LastInsertRowId();
  AIR_RETURN_IF_ERROR(
      db_->Execute("UPDATE tracking_experiments SET artifact_location = ? WHERE experiment_id = ?",
                   fmt::format("mlflow-artifacts:/{}", id), id));
  for (const KeyValue& tag : tags) {
    AIR_RETURN_IF_ERROR(
        db_->Execute("INSERT OR REPLACE INTO tracking_experiment_tags (experiment_id, key, value) "
                     "VALUES (?, ?, ?)",
                     id, tag.key, tag.value));
  }
  AIR_RETURN_IF_ERROR(txn->Commit());
  return GetExperiment(std::to_string(id));
}

Result<Experiment> TrackingStore::GetOrCreateExperiment(const std::string& name) {
  auto found = GetExperimentByName(name);
  if (found.ok() || found.status().code() != ErrorCode::kNotFound) return found;
  auto created = CreateExperiment(name);
  // A concurrent submit may have created it first.
  if (created.status().code() == ErrorCode::kAlreadyExists) return GetExperimentByName(name);
  return created;
}

static Result<Experiment> ReadExperiment(store::Database* db, Statement& stmt) {
  AIR_ASSIGN_OR_RETURN(bool row, stmt.Step());
  if (!row) return NotFound("");
  Experiment e;
  int64_t id = stmt.ColumnInt(0);
  e.experiment_id = std::to_string(id);
  e.name = stmt.ColumnText(1);
  e.artifact_location = stmt.ColumnText(2);
  e.lifecycle_stage = stmt.ColumnText(3);
  e.creation_time = stmt.ColumnInt(4);
  e.last_update_time = stmt.ColumnInt(5);
  AIR_ASSIGN_OR_RETURN(
      Statement tags,
      db->Query("SELECT key, value FROM tracking_experiment_tags WHERE experiment_id = ? "
                "ORDER BY key",
                id));
  while (true) {
    AIR_ASSIGN_OR_RETURN(bool more, tags.Step());
    if (!more) break;
    e.tags.emplace_back(tags.ColumnText(0), tags.ColumnText(1));
  }
  return e;
}

constexpr char kExperimentColumns[] =
    "experiment_id, name, artifact_location, lifecycle_stage, creation_time, last_update_time";

Result<Experiment> TrackingStore::GetExperiment(const std::string& experiment_id) {
  AIR_ASSIGN_OR_RETURN(int64_t id, ParseExperimentId(experiment_id));
  AIR_ASSIGN_OR_RETURN(
      Statement stmt,
      db_->Query(fmt::format("SELECT {} FROM tracking_experiments WHERE experiment_id = ?",
                             kExperimentColumns),
                 id));
  auto e = ReadExperiment(db_, stmt);
  if (e.status().code() == ErrorCode::kNotFound) {
    return NotFound(fmt::format("No Experiment with id={} exists", experiment_id));
  }
  return e;
}

Result<Experiment> TrackingStore::GetExperimentByName(const std::string& name) {
  AIR_ASSIGN_OR_RETURN(Statement stmt,
                       db_->Query(fmt::format("SELECT {} FROM tracking_experiments WHERE name = ?",
                                              kExperimentColumns),
                                  name));
  auto e = ReadExperiment(db_, stmt);
  if (e.status().code() == ErrorCode::kNotFound) {
    return NotFound(fmt::format("Could not find experiment with name '{}'", name));
  }
  return e;
}

Result<std::vector<Experiment>> TrackingStore::ListExperiments(ViewType view) {
  AIR_ASSIGN_OR_RETURN(Statement ids,
                       db_->Query("SELECT experiment_id, lifecycle_stage FROM tracking_experiments "
                                  "ORDER BY experiment_id DESC"));
  std::vector<std::string> wanted;
  while (true) {
    AIR_ASSIGN_OR_RETURN(bool row, ids.Step());
    if (!row) break;
    if (ViewIncludes(view, ids.ColumnText(1))) wanted.push_back(std::to_string(ids.ColumnInt(0)));
  }
  std::vector<Experiment> out;
  for (const std::string& id : wanted) {
    AIR_ASSIGN_OR_RETURN(Experiment e, GetExperiment(id));
    out.push_back(std::move(e));
  }
  return out;
}

Status TrackingStore::SetExperimentLifecycle(const std::string& experiment_id,
                                             const std::string& stage) {
  AIR_ASSIGN_OR_RETURN(Experiment e, GetExperiment(experiment_id));
  if (e.experiment_id == "0" && stage == "deleted") {
    return InvalidArgument(
        "Cannot delete the default experiment '0'. This is an internally "
        "reserved experiment.");
  }
  return db_->Execute(
      "UPDATE tracking_experiments SET lifecycle_stage = ?, last_update_time = ? "
      "WHERE experiment_id = ?",
      stage, NowMillis(), *ParseExperimentId(experiment_id));
}

Status TrackingStore::RenameExperiment(const std::string& experiment_id,
                                       const std::string& new_name) {
  AIR_RETURN_IF_ERROR(ValidateExperimentName(new_name));
  AIR_ASSIGN_OR_RETURN(Experiment e, GetExperiment(experiment_id));
  if (e.name == new_name) return Status::Ok();
  Status renamed = db_->Execute(
      "UPDATE tracking_experiments SET name = ?, last_update_time = ? "
      "WHERE experiment_id = ?",
      new_name, NowMillis(), *ParseExperimentId(experiment_id));
  if (renamed.code() == ErrorCode::kAlreadyExists) {
    return AlreadyExists(fmt::format("Experiment '{}' already exists.", new_name));
  }
  return renamed;
}

Status TrackingStore::SetExperimentTag(const std::string& experiment_id, const KeyValue& tag) {
  AIR_RETURN_IF_ERROR(ValidateTag(tag));
  AIR_ASSIGN_OR_RETURN(Experiment e, GetExperiment(experiment_id));
  return db_->Execute(
      "INSERT OR REPLACE INTO tracking_experiment_tags (experiment_id, key, value) "
      "VALUES (?, ?, ?)",
      *ParseExperimentId(e.experiment_id), tag.key, tag.value);
}

// --- runs ---

Result<RunInfo> TrackingStore::CreateRun(const NewRun& run) {
  if (!IsRunStatus(run.status)) {
    return InvalidArgument(fmt::format("Invalid run status '{}'", run.status));
  }
  for (const KeyValue& tag : run.tags) AIR_RETURN_IF_ERROR(ValidateTag(tag));
  std::string experiment_id = run.experiment_id.empty() ? "0" : run.experiment_id;
  AIR_ASSIGN_OR_RETURN(Experiment experiment, GetExperiment(experiment_id));
  if (experiment.lifecycle_stage != "active") {
    return InvalidArgument(
        fmt::format("The experiment {} must be in the 'active' state. Current state is {}.",
                    experiment_id, experiment.lifecycle_stage));
  }
  std::string run_id = run.run_id.empty() ? NewRunId() : run.run_id;
  std::string name = run.run_name;
  for (const KeyValue& tag : run.tags) {
    if (tag.key == "mlflow.runName" && name.empty()) name = tag.value;
  }
  if (name.empty()) name = "run-" + run_id.substr(0, 8);
  RunInfo info;
  info.run_id = run_id;
  info.experiment_id = experiment.experiment_id;
  info.run_name = name;
  info.user_id = run.user_id;
  info.status = run.status;
  info.start_time = run.start_time.value_or(NowMillis());
  info.artifact_uri =
      fmt::format("mlflow-artifacts:/{}/{}/artifacts", experiment.experiment_id, run_id);
  AIR_ASSIGN_OR_RETURN(auto txn, Transaction::Begin(db_));
  Status inserted = db_->Execute(
      fmt::format("INSERT INTO tracking_runs ({}) VALUES (?, ?, ?, ?, ?, ?, NULL, 'active', ?)",
                  kRunColumns),
      info.run_id, *ParseExperimentId(info.experiment_id), info.run_name, info.user_id, info.status,
      info.start_time, info.artifact_uri);
  if (inserted.code() == ErrorCode::kAlreadyExists) {
    return AlreadyExists(fmt::format("Run with id={} already exists", run_id));
  }
  AIR_RETURN_IF_ERROR(inserted);
  std::vector<KeyValue> tags = run.tags;
  bool has_name_tag = false;
  for (KeyValue& tag : tags) {
    if (tag.key == "mlflow.runName") {
      tag.value = name;
      has_name_tag = true;
    }
  }
  if (!has_name_tag) tags.push_back({"mlflow.runName", name});
  AIR_RETURN_IF_ERROR(WriteTags(run_id, tags));
  AIR_RETURN_IF_ERROR(txn->Commit());
  return info;
}

Result<RunInfo> TrackingStore::GetRunInfo(const std::string& run_id) {
  AIR_ASSIGN_OR_RETURN(
      Statement stmt,
      db_->Query(fmt::format("SELECT {} FROM tracking_runs WHERE run_uuid = ?", kRunColumns),
                 run_id));
  AIR_ASSIGN_OR_RETURN(bool row, stmt.Step());
  if (!row) return RunNotFound(run_id);
  return ReadRunInfo(stmt);
}

Result<RunInfo> TrackingStore::ActiveRun(const std::string& run_id) {
  AIR_ASSIGN_OR_RETURN(RunInfo info, GetRunInfo(run_id));
  if (info.lifecycle_stage != "active") return RunNotActive(run_id, info.lifecycle_stage);
  return info;
}

Status TrackingStore::LoadRunData(Run* run) {
  const std::string& id = run->info.run_id;
  AIR_ASSIGN_OR_RETURN(
      Statement metrics,
      db_->Query("SELECT key, step, timestamp, value, is_nan FROM tracking_latest_metrics "
                 "WHERE run_uuid = ? ORDER BY key",
                 id));
  while (true) {
    AIR_ASSIGN_OR_RETURN(bool row, metrics.Step());
    if (!row) break;
    run->metrics.push_back(ReadMetric(metrics, 0));
  }
  for (auto [table, out] :
       {std::pair{"tracking_params", &run->params}, std::pair{"tracking_tags", &run->tags}}) {
    AIR_ASSIGN_OR_RETURN(
        Statement stmt,
        db_->Query(fmt::format("SELECT key, value FROM {} WHERE run_uuid = ? ORDER BY key", table),
                   id));
    while (true) {
      AIR_ASSIGN_OR_RETURN(bool row, stmt.Step());
      if (!row) break;
      out->push_back({stmt.ColumnText(0), stmt.ColumnText(1)});
    }
  }
  return Status::Ok();
}

Result<Run> TrackingStore::GetRun(const std::string& run_id) {
  Run run;
  AIR_ASSIGN_OR_RETURN(run.info, GetRunInfo(run_id));
  AIR_RETURN_IF_ERROR(LoadRunData(&run));
  return run;
}

Result<RunInfo> TrackingStore::UpdateRun(const std::string& run_id, const RunUpdate& update) {
  if (update.status && !IsRunStatus(*update.status)) {
    return InvalidArgument(fmt::format(
        "Invalid value \"{}\" for parameter 'status' supplied: use RUNNING, SCHEDULED, FINISHED, "
        "FAILED or KILLED",
        *update.status));
  }
  AIR_ASSIGN_OR_RETURN(auto txn, Transaction::Begin(db_));
  AIR_ASSIGN_OR_RETURN(RunInfo info, ActiveRun(run_id));
  if (update.status) info.status = *update.status;
  if (update.end_time) info.end_time = *update.end_time;
  if (update.run_name && !update.run_name->empty()) info.run_name = *update.run_name;
  AIR_RETURN_IF_ERROR(
      db_->Execute("UPDATE tracking_runs SET status = ?, end_time = ?, name = ? WHERE run_uuid = ?",
                   info.status, info.end_time, info.run_name, run_id));
  if (update.run_name && !update.run_name->empty()) {
    AIR_RETURN_IF_ERROR(WriteTags(run_id, {{"mlflow.runName", info.run_name}}));
  }
  AIR_RETURN_IF_ERROR(txn->Commit());
  return info;
}

Status TrackingStore::SetRunLifecycle(const std::string& run_id, const std::string& stage) {
  if (!IsLifecycleStage(stage)) return Internal("bad lifecycle stage " + stage);
  AIR_ASSIGN_OR_RETURN(RunInfo info, GetRunInfo(run_id));
  (void)info;
  return db_->Execute("UPDATE tracking_runs SET lifecycle_stage = ? WHERE run_uuid = ?", stage,
                      run_id);
}

Status TrackingStore::WriteTags(const std::string& run_id, const std::vector<KeyValue>& tags) {
  if (tags.empty()) return Status::Ok();
  AIR_ASSIGN_OR_RETURN(
      Statement stmt,
      db_->Prepare("INSERT OR REPLACE INTO tracking_tags (run_uuid, key, value) VALUES (?, ?, ?)"));
  for (const KeyValue& tag : tags) {
    AIR_RETURN_IF_ERROR(stmt.BindAll(run_id, tag.key, tag.value));
    AIR_RETURN_IF_ERROR(stmt.Run());
    AIR_RETURN_IF_ERROR(stmt.Reset());
  }
  return Status::Ok();
}

Status TrackingStore::LogBatch(const std::string& run_id, const Batch& batch) {
  AIR_RETURN_IF_ERROR(ValidateBatch(batch));
  AIR_ASSIGN_OR_RETURN(auto txn, Transaction::Begin(db_));
  AIR_RETURN_IF_ERROR(ActiveRun(run_id).status());
  if (!batch.params.empty()) {
    AIR_ASSIGN_OR_RETURN(
        Statement find,
        db_->Prepare("SELECT value FROM tracking_params WHERE run_uuid = ? AND key = ?"));
    AIR_ASSIGN_OR_RETURN(
        Statement insert,
        db_->Prepare(
            "INSERT OR IGNORE INTO tracking_params (run_uuid, key, value) VALUES (?, ?, ?)"));
    for (const KeyValue& param : batch.params) {
      AIR_RETURN_IF_ERROR(find.BindAll(run_id, param.key));
      AIR_ASSIGN_OR_RETURN(bool exists, find.Step());
      if (exists && find.ColumnText(0) != param.value) {
        return InvalidArgument(fmt::format(
            "Changing param values is not allowed. Param with key='{}' was already logged with "
            "value='{}' for run ID='{}'. Attempted logging new value '{}'.",
            param.key, find.ColumnText(0), run_id, param.value));
      }
      AIR_RETURN_IF_ERROR(find.Reset());
      AIR_RETURN_IF_ERROR(insert.BindAll(run_id, param.key, param.value));
      AIR_RETURN_IF_ERROR(insert.Run());
      AIR_RETURN_IF_ERROR(insert.Reset());
    }
  }
  if (!batch.metrics.empty()) {
    AIR_ASSIGN_OR_RETURN(
        Statement insert,
        db_->Prepare("INSERT OR IGNORE INTO tracking_metrics (run_uuid, key, step, timestamp, "
                     "value, is_nan) VALUES (?, ?, ?, ?, ?, ?)"));
    // The latest value of a key is the one with the greatest (step, timestamp, value), as in
    // MLflow's SQL store.
    AIR_ASSIGN_OR_RETURN(
        Statement latest,
        db_->Prepare(
            "INSERT INTO tracking_latest_metrics (run_uuid, key, step, timestamp, value, is_nan) "
            "VALUES (?, ?, ?, ?, ?, ?) ON CONFLICT (run_uuid, key) DO UPDATE SET "
            "step = excluded.step, timestamp = excluded.timestamp, value = excluded.value, "
            "is_nan = excluded.is_nan WHERE (excluded.step, excluded.timestamp, excluded.value) > "
            "(step, timestamp, value)"));
    for (const Metric& m : batch.metrics) {
      bool is_nan = std::isnan(m.value);
      double value = is_nan ? 0.0 : std::isinf(m.value) ? std::copysign(DBL_MAX, m.value) : m.value;
      for (Statement* stmt : {&insert, &latest}) {
        AIR_RETURN_IF_ERROR(stmt->BindAll(run_id, m.key, m.step, m.timestamp, value, is_nan));
        AIR_RETURN_IF_ERROR(stmt->Run());
        AIR_RETURN_IF_ERROR(stmt->Reset());
      }
    }
  }
  AIR_RETURN_IF_ERROR(WriteTags(run_id, batch.tags));
  return txn->Commit();
}

Status TrackingStore::DeleteTag(const std::string& run_id, const std::string& key) {
  AIR_RETURN_IF_ERROR(ActiveRun(run_id).status());
  AIR_ASSIGN_OR_RETURN(
      Statement find,
      db_->Query("SELECT 1 FROM tracking_tags WHERE run_uuid = ? AND key = ?", run_id, key));
  AIR_ASSIGN_OR_RETURN(bool exists, find.Step());
  if (!exists) {
    return NotFound(fmt::format("No tag with name: {} in run with id {}", key, run_id));
  }
  return db_->Execute("DELETE FROM tracking_tags WHERE run_uuid = ? AND key = ?", run_id, key);
}

Result<std::vector<Metric>> TrackingStore::GetMetricHistory(const std::string& run_id,
                                                            const std::string& key) {
  AIR_RETURN_IF_ERROR(GetRunInfo(run_id).status());
  AIR_ASSIGN_OR_RETURN(
      Statement stmt, db_->Query("SELECT key, step, timestamp, value, is_nan FROM tracking_metrics "
                                 "WHERE run_uuid = ? AND key = ? ORDER BY step, timestamp, value",
                                 run_id, key));
  std::vector<Metric> out;
  while (true) {
    AIR_ASSIGN_OR_RETURN(bool row, stmt.Step());
    if (!row) break;
    out.push_back(ReadMetric(stmt, 0));
  }
  return out;
}

Result<std::vector<Run>> TrackingStore::ListRuns(const std::vector<std::string>& experiment_ids,
                                                 ViewType view) {
  std::vector<Run> out;
  std::set<int64_t> seen;
  for (const std::string& text : experiment_ids) {
    AIR_ASSIGN_OR_RETURN(int64_t id, ParseExperimentId(text));
    if (!seen.insert(id).second) continue;
    AIR_ASSIGN_OR_RETURN(
        Statement stmt,
        db_->Query(fmt::format("SELECT {} FROM tracking_runs WHERE experiment_id = ? "
                               "ORDER BY start_time DESC, run_uuid",
                               kRunColumns),
                   id));
    while (true) {
      AIR_ASSIGN_OR_RETURN(bool row, stmt.Step());
      if (!row) break;
      Run run;
      run.info = ReadRunInfo(stmt);
      if (!ViewIncludes(view, run.info.lifecycle_stage)) continue;
      out.push_back(std::move(run));
    }
  }
  for (Run& run : out) AIR_RETURN_IF_ERROR(LoadRunData(&run));
  return out;
}

// --- links to air runs ---

Status TrackingStore::PutLink(const RunLink& link) {
  return db_->Execute(
      "INSERT OR REPLACE INTO tracking_links (air_run_id, tracking_uri, mlflow_run_id, "
      "experiment_id, experiment_name, token_secret) VALUES (?, ?, ?, ?, ?, ?)",
      link.air_run_id, link.tracking_uri, link.mlflow_run_id, link.experiment_id,
      link.experiment_name, link.token_secret);
}

Result<std::optional<RunLink>> TrackingStore::GetLink(int64_t air_run_id) {
  AIR_ASSIGN_OR_RETURN(
      Statement stmt,
      db_->Query("SELECT tracking_uri, mlflow_run_id, experiment_id, experiment_name, "
                 "token_secret FROM tracking_links WHERE air_run_id = ?",
                 air_run_id));
  AIR_ASSIGN_OR_RETURN(bool row, stmt.Step());
  if (!row) return std::optional<RunLink>();
  RunLink link;
  link.air_run_id = air_run_id;
  link.tracking_uri = stmt.ColumnText(0);
  link.mlflow_run_id = stmt.ColumnText(1);
  link.experiment_id = stmt.ColumnText(2);
  link.experiment_name = stmt.ColumnText(3);
  link.token_secret = stmt.ColumnOptionalText(4);
  return std::optional<RunLink>(std::move(link));
}

}  // namespace air::tracking
