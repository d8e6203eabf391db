// The store's schema as an ordered list of migrations (docs/store-schema.md). The database's
// version is PRAGMA user_version; Migrate() applies every newer migration in order, each in its
// own IMMEDIATE transaction that re-reads the version first, so several processes opening a
// fresh database at once apply each migration exactly once. A database newer than this binary
// is refused with a message naming both versions.
// Thread safety: functions over a caller-owned connection.
#pragma once

#include <string>
#include <vector>

#include "base/status.h"
#include "store/sqlite.h"

namespace air::store {

struct Migration {
  int version;       // the user_version after this migration (1, 2, ...)
  std::string what;  // one line for docs and errors
  std::string sql;
};

// Every migration, oldest first; versions are 1..N without gaps.
const std::vector<Migration>& Migrations();
int LatestSchemaVersion();

Result<int> SchemaVersion(Database* db);

// Applies migrations up to `target_version` (default: the latest).
Status Migrate(Database* db, int target_version = -1);

}  // namespace air::store
