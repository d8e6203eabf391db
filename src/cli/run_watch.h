// Streaming a run to the terminal for `air run --watch` and `air logs --follow`: log lines on
// stdout (text: the line; JSON: one envelope per line with run_id, attempt, node, ts, stream,
// text), progress notes on stderr (text mode), and a final summary. Interrupting the watcher
// only stops the watching; the run goes on under its supervisor.
// Thread safety: the CLI's main thread.
#pragma once

#include <cstdint>
#include <optional>

#include "cli/context.h"
#include "store/store.h"

namespace air::cli {

struct WatchRequest {
  int64_t run_id = 0;
  int node = 0;
  std::optional<int> attempt;  // nullopt: follow each attempt in turn
  bool timestamps = false;
  size_t start_lines = 0;  // > 0: begin with the last N lines of the log (runtime/watch.h)
  bool emit_final = true;  // print the run's outcome and set the exit code from it
};

// Follows the run until it ends (or the fixed attempt ends). With emit_final, prints the
// outcome and sets ctx.exit_code: 0 only when the run SUCCEEDED.
Status WatchAndReport(CliContext& ctx, const WatchRequest& request);

}  // namespace air::cli
