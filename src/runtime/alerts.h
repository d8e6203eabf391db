// Alerts on the supervisor's side (docs/alerts.md): each node agent appends the known fatal
// lines of its output to attempt_K/node_N.alerts (agent/alert_scanner.h); the AlertIngester
// records each new one as a run event of kind "alert" (Store::AppendEvent, with the attempt and
// node; the message is the agent's JSON record), and the views read them back from the events:
// `air get`, `air logs --alerts`, the server's run JSON, the failure summary's first line.
// Thread safety: AlertIngester is used by one thread (the run's supervisor); the rest is pure.
#pragma once

#include <cstdint>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <vector>

#include "agent/alert_scanner.h"
#include "base/env.h"
#include "runtime/layout.h"
#include "store/store.h"

namespace air::runtime {

inline constexpr const char* kAlertEventKind = "alert";

struct Alert {
  int attempt = 0;
  int node = 0;
  agent::AlertRecord record;
};

// The alerts among a run's events, in the order of their lines' times.
std::vector<Alert> AlertsFromEvents(const std::vector<store::EventRecord>& events);
// The earliest fatal alert by the time of its line (warnings such as "NCCL WARN" lines never
// lead a failure summary); nullopt for none.
std::optional<Alert> FirstAlert(const std::vector<Alert>& alerts);

// "CUDA out of memory on node 1, rank 3 (tried 2.00 GiB, gpu 0, total 79.10 GiB, free 1.06 GiB)"
std::string AlertHeadline(const Alert& alert);
// One alert for the JSON views: attempt, node, rank, class, title, severity, time, time_us,
// stream, fields, headline, line.
nlohmann::json AlertJson(const Alert& alert);
// One alert per entry, its time first, the line indented below:
//   2026-12-05T14:00:40.123Z attempt 0 CUDA out of memory on node 1, rank 3 (tried 2.00 GiB)
//       [rank3]: torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 GiB. ...
std::string AlertsText(const std::vector<Alert>& alerts);

// For `air get`: one line per attempt, node and class (its first alert, how many recorded), at
// most `max_lines` (then "... N more"), each prefixed by `indent`:
//   2026-12-05T14:00:40.123Z attempt 0 CUDA out of memory on node 1, rank 1 (...) x5
std::string AlertGroupsText(const std::vector<Alert>& alerts, size_t max_lines,
                            const std::string& indent);

class AlertIngester {
 public:
  AlertIngester(store::Store* store, const Layout& layout, Env* env, int64_t run_id, int attempt,
                int num_nodes);

  // For an attempt a restarted supervisor adopts: the alerts already recorded as events are
  // not recorded again (each node's first N records are skipped).
  Status Resume();
  // Records every complete record the nodes appended since the last call.
  Status Poll();
  // The earliest fatal alert of the attempt so far, by the time of its line.
  const std::optional<Alert>& first() const { return first_; }

 private:
  // Appends the node's complete records not yet read to *fresh.
  void ReadNode(int node, std::vector<Alert>* fresh);

  store::Store* store_;
  Layout layout_;
  Env* env_;
  int64_t run_id_;
  int attempt_;
  std::vector<size_t> offsets_;       // bytes of each node's file already consumed
  std::vector<int> records_to_skip_;  // Resume: records already in the store
  std::optional<Alert> first_;
};

}  // namespace air::runtime
