// Shared helpers of the run commands (`air get/list/logs/cancel`, `air run --watch`): parsing a
// RUN_ID argument and opening the store for reading without creating AIR_HOME.
// Thread safety: stateless functions.
#pragma once

#include <cstdint>
#include <memory>
#include <string>

#include "base/env.h"
#include "base/status.h"
#include "runtime/layout.h"
#include "store/store.h"

namespace air::runtime {

// "12" -> 12; InvalidArgument naming the argument otherwise.
Result<int64_t> ParseRunId(const std::string& text);

// Opens the store of an existing AIR_HOME. When no run was ever submitted there, kNotFound
// naming the AIR_HOME (nothing is created).
Result<std::unique_ptr<store::Store>> OpenExistingStore(const Layout& layout, Env* env);

// GetRun + ReconcileRun.
Result<store::RunRecord> LoadRun(store::Store* store, const Layout& layout, int64_t run_id,
                                 Env* env);

}  // namespace air::runtime
