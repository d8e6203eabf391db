// Following a run live (`air run --watch`, `air logs --follow`): streams one node's log as it
// grows, moving on to each new attempt as the supervisor starts it (and showing the setup log
// while the environment is prepared), until the run ends. Watching only reads: stopping the
// watcher (Ctrl-C, kill) leaves the run running.
// Thread safety: one thread.
#pragma once

#include <cstdint>
#include <functional>
#include <optional>
#include <string>

#include "base/env.h"
#include "base/status.h"
#include "runtime/layout.h"
#include "store/store.h"

namespace air::runtime {

struct WatchOptions {
  int node = 0;
  std::optional<int> attempt;  // follow only this attempt; nullopt: each attempt in turn
  int64_t poll_interval_us = 100'000;
  // > 0: the first log followed starts at its last start_lines lines (`air logs --follow
  // --lines N`), read from the end of the file.
  size_t start_lines = 0;
  // Receives each raw log line; attempt is -1 for the setup log. Default: the line's text on
  // stdout.
  std::function<void(int attempt, const std::string& line)> on_line;
  // Called when the watch moves to an attempt's log (also the first).
  std::function<void(int attempt)> on_attempt;
};

// Returns the run as it ended (or, with a fixed attempt, once that attempt has ended).
Result<store::RunRecord> WatchRun(const Layout& layout, int64_t run_id, const WatchOptions& options,
                                  Env* env);

// The text `air logs` and `--watch` print for one raw log line: the line's text, air's own
// records as "[air] text", and with timestamps "TS STREAM text".
std::string RenderLogLine(const std::string& raw, bool timestamps);

}  // namespace air::runtime
