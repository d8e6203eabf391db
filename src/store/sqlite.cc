// SQLite RAII wrapper: connection setup (WAL, busy timeout, foreign keys), statements, and
// IMMEDIATE transactions.
#include "store/sqlite.h"

#include <utility>

namespace air::store {
namespace {

ErrorCode CodeFor(int rc) {
  switch (rc & 0xff) {
    case SQLITE_BUSY:
    case SQLITE_LOCKED:
      return ErrorCode::kUnavailable;
    case SQLITE_FULL:
      return ErrorCode::kResourceExhausted;
    case SQLITE_CORRUPT:
    case SQLITE_NOTADB:
      return ErrorCode::kDataLoss;
    case SQLITE_PERM:
    case SQLITE_READONLY:
    case SQLITE_CANTOPEN:
      return ErrorCode::kPermissionDenied;
    case SQLITE_CONSTRAINT:
      return ErrorCode::kAlreadyExists;
    default:
      return ErrorCode::kInternal;
  }
}

Status SqliteStatus(sqlite3* db, int rc, const std::string& what) {
  std::string detail = db != nullptr ? sqlite3_errmsg(db) : sqlite3_errstr(rc);
  return Status(CodeFor(rc), what + ": " + detail);
}

}  // namespace

Statement::Statement(Statement&& other) noexcept
    : db_(std::exchange(other.db_, nullptr)), stmt_(std::exchange(other.stmt_, nullptr)) {}

Statement& Statement::operator=(Statement&& other) noexcept {
  if (this != &other) {
    if (stmt_ != nullptr) sqlite3_finalize(stmt_);
    db_ = std::exchange(other.db_, nullptr);
    stmt_ = std::exchange(other.stmt_, nullptr);
  }
  return *this;
}

Statement::~Statement() {
  if (stmt_ != nullptr) sqlite3_finalize(stmt_);
}

Status Statement::Error(const char* what) const {
  std::string sql = stmt_ != nullptr ? sqlite3_sql(stmt_) : "";
  // Name the file: "attempt to write a readonly database" alone does not say which one.
  const char* file = sqlite3_db_filename(db_, "main");
  std::string where = file != nullptr && *file != '\0' ? "sqlite " + std::string(file) + ": " : "";
  return SqliteStatus(db_, sqlite3_errcode(db_), where + what + " [" + sql + "]");
}

Status Statement::BindInt(int index, int64_t value) {
  if (sqlite3_bind_int64(stmt_, index, value) != SQLITE_OK) return Error("bind");
  return Status::Ok();
}

Status Statement::BindDouble(int index, double value) {
  if (sqlite3_bind_double(stmt_, index, value) != SQLITE_OK) return Error("bind");
  return Status::Ok();
}

Status Statement::BindText(int index, std::string_view value) {
  if (sqlite3_bind_text(stmt_, index, value.data(), static_cast<int>(value.size()),
                        SQLITE_TRANSIENT) != SQLITE_OK) {
    return Error("bind");
  }
  return Status::Ok();
}

Status Statement::BindNull(int index) {
  if (sqlite3_bind_null(stmt_, index) != SQLITE_OK) return Error("bind");
  return Status::Ok();
}

Status Statement::BindOptionalText(int index, const std::optional<std::string>& value) {
  return value ? BindText(index, *value) : BindNull(index);
}

Result<bool> Statement::Step() {
  int rc = sqlite3_step(stmt_);
  if (rc == SQLITE_ROW) return true;
  if (rc == SQLITE_DONE) return false;
  return Error("step");
}

Status Statement::Run() {
  while (true) {
    AIR_ASSIGN_OR_RETURN(bool row, Step());
    if (!row) return Status::Ok();
  }
}

Status Statement::Reset() {
  sqlite3_reset(stmt_);
  if (sqlite3_clear_bindings(stmt_) != SQLITE_OK) return Error("reset");
  return Status::Ok();
}

int64_t Statement::ColumnInt(int column) const { return sqlite3_column_int64(stmt_, column); }

double Statement::ColumnDouble(int column) const { return sqlite3_column_double(stmt_, column); }

std::string Statement::ColumnText(int column) const {
  const unsigned char* text = sqlite3_column_text(stmt_, column);
  if (text == nullptr) return "";
  return std::string(reinterpret_cast<const char*>(text),
                     static_cast<size_t>(sqlite3_column_bytes(stmt_, column)));
}

bool Statement::ColumnIsNull(int column) const {
  return sqlite3_column_type(stmt_, column) == SQLITE_NULL;
}

std::optional<std::string> Statement::ColumnOptionalText(int column) const {
  if (ColumnIsNull(column)) return std::nullopt;
  return ColumnText(column);
}

std::optional<int64_t> Statement::ColumnOptionalInt(int column) const {
  if (ColumnIsNull(column)) return std::nullopt;
  return ColumnInt(column);
}

std::optional<int> Statement::ColumnOptionalInt32(int column) const {
  if (ColumnIsNull(column)) return std::nullopt;
  return static_cast<int>(ColumnInt(column));
}

Result<std::unique_ptr<Database>> Database::Open(const std::string& path, int busy_timeout_ms) {
  sqlite3* raw = nullptr;
  int rc =
      sqlite3_open_v2(path.c_str(), &raw,
                      SQLITE_OPEN_READWRITE | SQLITE_OPEN_CREATE | SQLITE_OPEN_NOMUTEX, nullptr);
  if (rc != SQLITE_OK) {
    Status status = SqliteStatus(raw, rc, "open database " + path);
    sqlite3_close(raw);
    return status;
  }
  std::unique_ptr<Database> db(new Database(raw, path));
  sqlite3_busy_timeout(raw, busy_timeout_ms);
  sqlite3_extended_result_codes(raw, 1);
  // Short-lived processes (every CLI command, each supervisor) would otherwise checkpoint the
  // WAL, with an fsync, each time they close the file; the automatic checkpoint in a later
  // commit (every 1000 pages) keeps the WAL bounded instead.
  sqlite3_db_config(raw, SQLITE_DBCONFIG_NO_CKPT_ON_CLOSE, 1, nullptr);
  // WAL: readers never block the writer; NORMAL sync is durable across process crashes (the
  // WAL is fsynced at checkpoints) and avoids an fsync per commit.
  AIR_RETURN_IF_ERROR(db->Exec("PRAGMA journal_mode=WAL").WithContext(path));
  AIR_RETURN_IF_ERROR(db->Exec("PRAGMA synchronous=NORMAL; PRAGMA foreign_keys=ON;"));
  return db;
}

Database::~Database() { sqlite3_close_v2(db_); }

Status Database::Exec(const std::string& sql) {
  char* message = nullptr;
  int rc = sqlite3_exec(db_, sql.c_str(), nullptr, nullptr, &message);
  if (rc != SQLITE_OK) {
    std::string detail = message != nullptr ? message : sqlite3_errstr(rc);
    sqlite3_free(message);
    return Status(CodeFor(rc), "sqlite " + path_ + ": " + detail);
  }
  return Status::Ok();
}

Result<Statement> Database::Prepare(const std::string& sql) {
  sqlite3_stmt* stmt = nullptr;
  int rc = sqlite3_prepare_v2(db_, sql.c_str(), static_cast<int>(sql.size()), &stmt, nullptr);
  if (rc != SQLITE_OK) return SqliteStatus(db_, rc, "sqlite " + path_ + ": prepare [" + sql + "]");
  return Statement(db_, stmt);
}

int64_t Database::LastInsertRowId() const { return sqlite3_last_insert_rowid(db_); }

int64_t Database::ChangedRows() const { return sqlite3_changes64(db_); }

Result<std::unique_ptr<Transaction>> Transaction::Begin(Database* db) {
  AIR_RETURN_IF_ERROR(db->Exec("BEGIN IMMEDIATE"));
  return std::unique_ptr<Transaction>(new Transaction(db));
}

Transaction::~Transaction() {
  if (!done_) (void)db_->Exec("ROLLBACK");
}

Status Transaction::Commit() {
  done_ = true;
  Status status = db_->Exec("COMMIT");
  if (!status.ok()) (void)db_->Exec("ROLLBACK");
  return status;
}

}  // namespace air::store
