// GPU leases (see store.h): one row per leased device, taken in one IMMEDIATE transaction so two
// supervisors starting attempts at the same moment never get the same device.
#include <set>

#include "store/store.h"

namespace air::store {

Result<std::vector<std::string>> Store::LeaseDevices(int64_t run_id, int attempt,
                                                     const std::vector<std::string>& devices,
                                                     size_t count, std::vector<int64_t>* holders) {
  AIR_ASSIGN_OR_RETURN(auto txn, Transaction::Begin(db_.get()));
  // A run that ended (or whose supervisor died and was reconciled) holds nothing.
  AIR_RETURN_IF_ERROR(db_->Execute(
      "DELETE FROM gpu_leases WHERE run_id = ? OR run_id IN (SELECT id FROM runs WHERE state "
      "NOT IN ('PENDING', 'RUNNING', 'TERMINATING'))",
      run_id));
  AIR_ASSIGN_OR_RETURN(Statement held, db_->Query("SELECT device, run_id FROM gpu_leases"));
  std::set<std::string> busy;
  std::set<int64_t> owners;
  while (true) {
    AIR_ASSIGN_OR_RETURN(bool row, held.Step());
    if (!row) break;
    busy.insert(held.ColumnText(0));
    owners.insert(held.ColumnInt(1));
  }
  std::vector<std::string> leased;
  for (const auto& device : devices) {
    if (leased.size() == count) break;
    if (busy.count(device) == 0) leased.push_back(device);
  }
  if (leased.size() < count) {
    if (holders) holders->assign(owners.begin(), owners.end());
    AIR_RETURN_IF_ERROR(txn->Commit());  // the stale leases stay dropped
    return std::vector<std::string>();
  }
  const int64_t now = env_->NowMicros();
  for (const auto& device : leased) {
    AIR_RETURN_IF_ERROR(db_->Execute(
        "INSERT INTO gpu_leases (device, run_id, attempt, leased_us) VALUES (?, ?, ?, ?)", device,
        run_id, attempt, now));
  }
  AIR_RETURN_IF_ERROR(txn->Commit());
  return leased;
}

Status Store::ReleaseDevices(int64_t run_id) {
  return db_->Execute("DELETE FROM gpu_leases WHERE run_id = ?", run_id);
}

}  // namespace air::store
