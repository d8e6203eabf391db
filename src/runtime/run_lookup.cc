// RUN_ID parsing and read-only store opening for the run commands.
#include "runtime/run_lookup.h"

#include <fmt/format.h>

#include <cctype>

#include "runtime/reconcile.h"

namespace air::runtime {

Result<int64_t> ParseRunId(const std::string& text) {
  bool digits = !text.empty() && text.size() <= 18;
  for (char c : text) digits = digits && std::isdigit(static_cast<unsigned char>(c));
  if (!digits || std::stoll(text) <= 0) {
    return InvalidArgument(fmt::format(
        "RUN_ID '{}' is not a run id: expected the positive number `air run` printed (see "
        "`air list --all-status`)",
        text));
  }
  return std::stoll(text);
}

Result<std::unique_ptr<store::Store>> OpenExistingStore(const Layout& layout, Env* env) {
  if (!env->FileExists(layout.DbPath())) {
    return NotFound(
        fmt::format("no runs under AIR_HOME={} (no {}); submit one with `air run -f "
                    "FILE`",
                    layout.home(), layout.DbPath()));
  }
  return store::Store::Open(layout.DbPath(), env);
}

Result<store::RunRecord> LoadRun(store::Store* store, const Layout& layout, int64_t run_id,
                                 Env* env) {
  AIR_ASSIGN_OR_RETURN(store::RunRecord run, store->GetRun(run_id));
  return ReconcileRun(store, layout, std::move(run), env);
}

}  // namespace air::runtime
