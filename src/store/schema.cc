// The ordered migrations of the air store and the code that applies them.
#include "store/schema.h"

#include <fmt/format.h>

namespace air::store {

const std::vector<Migration>& Migrations() {
  static const std::vector<Migration> kMigrations = {
      {1, "experiments, runs, attempts, nodes and events", R"sql(
CREATE TABLE experiments (
  id          INTEGER PRIMARY KEY,
  name        TEXT NOT NULL UNIQUE,
  created_us  INTEGER NOT NULL
);
CREATE TABLE runs (
  id                     INTEGER PRIMARY KEY AUTOINCREMENT,
  experiment_id          INTEGER NOT NULL REFERENCES experiments(id),
  state                  TEXT NOT NULL,
  spec_json              TEXT NOT NULL,
  source_path            TEXT NOT NULL,
  accelerator_type       TEXT NOT NULL,
  num_nodes              INTEGER NOT NULL,
  per_node               INTEGER NOT NULL,
  max_retries            INTEGER NOT NULL,
  timeout_minutes        INTEGER,
  idempotency_token      TEXT UNIQUE,
  mlflow_run_id          TEXT NOT NULL,
  snapshot_id            TEXT,
  backend                TEXT NOT NULL,
  created_us             INTEGER NOT NULL,
  started_us             INTEGER,
  ended_us               INTEGER,
  supervisor_pid         INTEGER,
  supervisor_start_ticks INTEGER,
  cancel_requested       INTEGER NOT NULL DEFAULT 0,
  failure_summary        TEXT
);
CREATE INDEX runs_by_state ON runs(state);
CREATE TABLE attempts (
  run_id           INTEGER NOT NULL REFERENCES runs(id) ON DELETE CASCADE,
  attempt          INTEGER NOT NULL,
  state            TEXT NOT NULL,
  master_port      INTEGER NOT NULL,
  started_us       INTEGER NOT NULL,
  ended_us         INTEGER,
  failure_summary  TEXT,
  PRIMARY KEY (run_id, attempt)
);
CREATE TABLE nodes (
  run_id      INTEGER NOT NULL,
  attempt     INTEGER NOT NULL,
  node_rank   INTEGER NOT NULL,
  state       TEXT NOT NULL,
  agent_pid   INTEGER,
  pid         INTEGER,
  pgid        INTEGER,
  exit_code   INTEGER,
  signal      INTEGER,
  started_us  INTEGER,
  ended_us    INTEGER,
  PRIMARY KEY (run_id, attempt, node_rank),
  FOREIGN KEY (run_id, attempt) REFERENCES attempts(run_id, attempt) ON DELETE CASCADE
);
CREATE TABLE events (
  id          INTEGER PRIMARY KEY AUTOINCREMENT,
  run_id      INTEGER NOT NULL REFERENCES runs(id) ON DELETE CASCADE,
  ts_us       INTEGER NOT NULL,
  attempt     INTEGER,
  node_rank   INTEGER,
  kind        TEXT NOT NULL,
  from_state  TEXT,
  to_state    TEXT,
  message     TEXT NOT NULL DEFAULT ''
);
CREATE INDEX events_by_run ON events(run_id, id);
)sql"},
      {2, "index runs by experiment for `air list --filter experiment=...`", R"sql(
CREATE INDEX runs_by_experiment ON runs(experiment_id, id);
)sql"},
      {3, "GPU leases: concurrent local runs get disjoint devices", R"sql(
CREATE TABLE gpu_leases (
  device     TEXT PRIMARY KEY,
  run_id     INTEGER NOT NULL REFERENCES runs(id) ON DELETE CASCADE,
  attempt    INTEGER NOT NULL,
  leased_us  INTEGER NOT NULL
);
)sql"},
      // MLflow-compatible tracking (src/tracking, docs/tracking.md). Experiment 0 is MLflow's
      // "Default". Metrics are keyed by every field, as in MLflow's SQL store, so a retried
      // request stores each point once.
      {4, "MLflow tracking: experiments, runs, params, tags, metrics, links to air runs", R"sql(
CREATE TABLE tracking_experiments (
  experiment_id     INTEGER PRIMARY KEY,
  name              TEXT NOT NULL UNIQUE,
  artifact_location TEXT NOT NULL,
  lifecycle_stage   TEXT NOT NULL DEFAULT 'active',
  creation_time     INTEGER NOT NULL,
  last_update_time  INTEGER NOT NULL
);
INSERT INTO tracking_experiments VALUES
  (0, 'Default', 'mlflow-artifacts:/0', 'active', CAST(strftime('%s', 'now') AS INTEGER) * 1000,
   CAST(strftime('%s', 'now') AS INTEGER) * 1000);
CREATE TABLE tracking_experiment_tags (
  experiment_id INTEGER NOT NULL REFERENCES tracking_experiments(experiment_id) ON DELETE CASCADE,
  key           TEXT NOT NULL,
  value         TEXT NOT NULL,
  PRIMARY KEY (experiment_id, key)
);
CREATE TABLE tracking_runs (
  run_uuid        TEXT PRIMARY KEY,
  experiment_id   INTEGER NOT NULL REFERENCES tracking_experiments(experiment_id),
  name            TEXT NOT NULL,
  user_id         TEXT NOT NULL DEFAULT '',
  status          TEXT NOT NULL,
  start_time      INTEGER NOT NULL,
  end_time        INTEGER,
  lifecycle_stage TEXT NOT NULL DEFAULT 'active',
  artifact_uri    TEXT NOT NULL
);
CREATE INDEX tracking_runs_by_experiment ON tracking_runs(experiment_id, start_time);
CREATE TABLE tracking_params (
  run_uuid TEXT NOT NULL REFERENCES tracking_runs(run_uuid) ON DELETE CASCADE,
  key      TEXT NOT NULL,
  value    TEXT NOT NULL,
  PRIMARY KEY (run_uuid, key)
) WITHOUT ROWID;
CREATE TABLE tracking_tags (
  run_uuid TEXT NOT NULL REFERENCES tracking_runs(run_uuid) ON DELETE CASCADE,
  key      TEXT NOT NULL,
  value    TEXT NOT NULL,
  PRIMARY KEY (run_uuid, key)
) WITHOUT ROWID;
CREATE TABLE tracking_metrics (
  run_uuid  TEXT NOT NULL REFERENCES tracking_runs(run_uuid) ON DELETE CASCADE,
  key       TEXT NOT NULL,
  step      INTEGER NOT NULL,
  timestamp INTEGER NOT NULL,
  value     REAL NOT NULL,
  is_nan    INTEGER NOT NULL,
  PRIMARY KEY (run_uuid, key, step, timestamp, value, is_nan)
) WITHOUT ROWID;
CREATE TABLE tracking_latest_metrics (
  run_uuid  TEXT NOT NULL REFERENCES tracking_runs(run_uuid) ON DELETE CASCADE,
  key       TEXT NOT NULL,
  step      INTEGER NOT NULL,
  timestamp INTEGER NOT NULL,
  value     REAL NOT NULL,
  is_nan    INTEGER NOT NULL,
  PRIMARY KEY (run_uuid, key)
) WITHOUT ROWID;
CREATE TABLE tracking_links (
  air_run_id      INTEGER PRIMARY KEY REFERENCES runs(id) ON DELETE CASCADE,
  tracking_uri    TEXT NOT NULL,
  mlflow_run_id   TEXT NOT NULL,
  experiment_id   TEXT NOT NULL,
  experiment_name TEXT NOT NULL,
  token_secret    TEXT
);
)sql"},
  };
  return kMigrations;
}

int LatestSchemaVersion() { return Migrations().back().version; }

Result<int> SchemaVersion(Database* db) {
  AIR_ASSIGN_OR_RETURN(Statement stmt, db->Prepare("PRAGMA user_version"));
  AIR_ASSIGN_OR_RETURN(bool row, stmt.Step());
  if (!row) return Internal("PRAGMA user_version returned no row");
  return static_cast<int>(stmt.ColumnInt(0));
}

Status Migrate(Database* db, int target_version) {
  const int latest = LatestSchemaVersion();
  if (target_version < 0) target_version = latest;
  AIR_ASSIGN_OR_RETURN(int current, SchemaVersion(db));
  if (current > latest) {
    return FailedPrecondition(
        fmt::format("{}: database schema version {} is newer than this air understands (up to {}); "
                    "use a newer air or another AIR_HOME",
                    db->path(), current, latest));
  }
  for (const Migration& migration : Migrations()) {
    if (migration.version > target_version) break;
    if (migration.version <= current) continue;
    AIR_ASSIGN_OR_RETURN(auto txn, Transaction::Begin(db));
    // Another process may have applied it while we waited for the write lock.
    AIR_ASSIGN_OR_RETURN(int now, SchemaVersion(db));
    if (now >= migration.version) {
      current = now;
      continue;
    }
    AIR_RETURN_IF_ERROR(db->Exec(migration.sql)
                            .WithContext(fmt::format("schema migration {} ({})", migration.version,
                                                     migration.what)));
    // PRAGMA takes no bound parameters; the version is an integer from the table above.
    AIR_RETURN_IF_ERROR(db->Exec(fmt::format("PRAGMA user_version = {}", migration.version)));
    AIR_RETURN_IF_ERROR(txn->Commit());
    current = migration.version;
  }
  return Status::Ok();
}

}  // namespace air::store
