// What `air delete` and `air gc` share (defined in cmd_delete.cc): running one retention
// operation and printing what it removed, as JSON data or text.
// Thread safety: pure functions.
#pragma once

#include <functional>

#include "cli/context.h"
#include "runtime/layout.h"
#include "runtime/retention.h"
#include "store/store.h"

namespace air::cli {

// Opens AIR_HOME's store, runs `operation` (DeleteRuns or CollectGarbage) and prints its report,
// or the error.
void RunRetention(CliContext& ctx, const std::function<Result<runtime::RetentionReport>(
                                       store::Store*, const runtime::Layout&)>& operation);

}  // namespace air::cli
