// Deleting ended runs from the store (`air delete`, `air gc`; see store.h).
#include <fmt/format.h>

#include "store/store.h"

namespace air::store {

Status Store::DeleteRun(int64_t run_id) {
  AIR_ASSIGN_OR_RETURN(auto txn, Transaction::Begin(db_.get()));
  AIR_ASSIGN_OR_RETURN(RunRecord run, GetRun(run_id));
  if (!IsTerminal(run.state)) {
    return FailedPrecondition(
        fmt::format("run {} is {}; only ended runs can be deleted (stop it first: air cancel {})",
                    run_id, RunStateName(run.state), run_id));
  }
  // Attempts, their nodes and the events go with the run (ON DELETE CASCADE).
  AIR_RETURN_IF_ERROR(db_->Execute("DELETE FROM runs WHERE id = ?", run_id));
  return txn->Commit();
}

}  // namespace air::store
