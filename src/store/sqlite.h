// A small RAII wrapper over the SQLite C API: Database (one connection), Statement (one prepared
// statement with positional bound parameters) and Transaction (BEGIN IMMEDIATE ... COMMIT, rolled
// back when dropped uncommitted). Values only ever reach SQL through Bind*: no SQL is built by
// formatting user data.
//
// Connections are opened in WAL mode with a busy timeout, so several processes (the CLI, one
// supervisor per run) may read and write the same file concurrently; writers serialize on
// BEGIN IMMEDIATE and wait up to the busy timeout.
// Thread safety: a Database and its Statements belong to one thread at a time. Never use a
// connection in a child process after fork().
#pragma once

#include <sqlite3.h>

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <type_traits>

#include "base/status.h"

namespace air::store {

class Statement {
 public:
  Statement() = default;
  Statement(sqlite3* db, sqlite3_stmt* stmt) : db_(db), stmt_(stmt) {}
  Statement(Statement&& other) noexcept;
  Statement& operator=(Statement&& other) noexcept;
  Statement(const Statement&) = delete;
  Statement& operator=(const Statement&) = delete;
  ~Statement();

  // Parameters are 1-based, as in sqlite3_bind_*.
  Status BindInt(int index, int64_t value);
  Status BindDouble(int index, double value);
  Status BindText(int index, std::string_view value);
  Status BindNull(int index);
  Status BindOptionalText(int index, const std::optional<std::string>& value);

  // Binds every argument in order, starting at parameter 1. Integers bind as INTEGER,
  // strings as TEXT, std::nullopt/std::optional as NULL or the value.
  template <typename... Args>
  Status BindAll(const Args&... args) {
    int index = 0;
    Status status;
    ((status.ok() ? (status = BindOne(++index, args), 0) : 0), ...);
    (void)index;
    return status;
  }

  // Advances: true when a row is available, false when the statement is done.
  Result<bool> Step();
  // Steps until done (for INSERT/UPDATE/DELETE).
  Status Run();
  // Makes the statement ready to bind and run again (bulk inserts reuse one prepared statement).
  Status Reset();

  int64_t ColumnInt(int column) const;
  double ColumnDouble(int column) const;
  std::string ColumnText(int column) const;
  bool ColumnIsNull(int column) const;
  std::optional<std::string> ColumnOptionalText(int column) const;
  std::optional<int64_t> ColumnOptionalInt(int column) const;
  // An INTEGER column of int range (exit codes, signals, ranks), or nullopt when NULL.
  std::optional<int> ColumnOptionalInt32(int column) const;

 private:
  template <typename T>
  Status BindOne(int index, const T& value) {
    if constexpr (std::is_same_v<T, std::nullopt_t>) {
      return BindNull(index);
    } else if constexpr (std::is_same_v<T, std::optional<std::string>>) {
      return BindOptionalText(index, value);
    } else if constexpr (std::is_same_v<T, std::optional<int64_t>> ||
                         std::is_same_v<T, std::optional<int>>) {
      return value ? BindInt(index, *value) : BindNull(index);
    } else if constexpr (std::is_same_v<T, bool>) {
      return BindInt(index, value ? 1 : 0);
    } else if constexpr (std::is_floating_point_v<T>) {
      return BindDouble(index, static_cast<double>(value));
    } else if constexpr (std::is_integral_v<T> || std::is_enum_v<T>) {
      return BindInt(index, static_cast<int64_t>(value));
    } else {
      return BindText(index, std::string_view(value));
    }
  }

  Status Error(const char* what) const;

  sqlite3* db_ = nullptr;
  sqlite3_stmt* stmt_ = nullptr;
};

class Database {
 public:
  // Opens (creating when missing) the database file at `path` in WAL mode with foreign keys on
  // and a busy timeout of `busy_timeout_ms`.
  static Result<std::unique_ptr<Database>> Open(const std::string& path,
                                                int busy_timeout_ms = 10000);
  ~Database();
  Database(const Database&) = delete;
  Database& operator=(const Database&) = delete;

  // Runs one or more statements without parameters (DDL, PRAGMA).
  Status Exec(const std::string& sql);
  Result<Statement> Prepare(const std::string& sql);

  // Prepares `sql` and binds `args` in order.
  template <typename... Args>
  Result<Statement> Query(const std::string& sql, const Args&... args) {
    AIR_ASSIGN_OR_RETURN(Statement stmt, Prepare(sql));
    AIR_RETURN_IF_ERROR(stmt.BindAll(args...));
    return stmt;
  }

  // Prepares, binds and runs a statement that returns no rows.
  template <typename... Args>
  Status Execute(const std::string& sql, const Args&... args) {
    AIR_ASSIGN_OR_RETURN(Statement stmt, Query(sql, args...));
    return stmt.Run();
  }

  int64_t LastInsertRowId() const;
  int64_t ChangedRows() const;
  const std::string& path() const { return path_; }

 private:
  Database(sqlite3* db, std::string path) : db_(db), path_(std::move(path)) {}

  sqlite3* db_;
  std::string path_;
};

// BEGIN IMMEDIATE on construction (taking the write lock up front, so read-then-write logic
// inside cannot deadlock against another writer); ROLLBACK on destruction unless Commit().
class Transaction {
 public:
  static Result<std::unique_ptr<Transaction>> Begin(Database* db);
  ~Transaction();
  Status Commit();

 private:
  explicit Transaction(Database* db) : db_(db) {}
  Database* db_;
  bool done_ = false;
};

}  // namespace air::store
