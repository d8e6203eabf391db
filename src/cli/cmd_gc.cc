// `air gc [--older-than D]`: deletes every ended run that ended more than D ago (30d, 12h,
// 90m, 45s) like `air delete`, then removes the snapshots and Python environments no remaining
// run uses (runtime/retention.h). Without --older-than no run is deleted; only unused
// snapshots and environments go.
#include <memory>

#include "cli/commands.h"
#include "cli/retention_report.h"
#include "runtime/layout.h"
#include "runtime/retention.h"

namespace air::cli {

void RegisterGcCommand(CLI::App& root, CliContext& ctx) {
  auto older_than = std::make_shared<std::string>();
  auto* cmd = root.add_subcommand(
      "gc", "delete runs that ended long ago, and snapshots/environments no run uses");
  cmd->add_option("--older-than", *older_than,
                  "delete ended runs that ended more than this long ago: 30d, 12h, 90m, 45s");
  cmd->callback([&ctx, older_than] {
    std::optional<int64_t> age;
    if (!older_than->empty()) {
      auto parsed = runtime::ParseRetentionAge(*older_than);
      if (!parsed.ok()) return EmitError(ctx, parsed.status());
      age = *parsed;
    }
    RunRetention(ctx, [&](store::Store* store, const runtime::Layout& layout) {
      return runtime::CollectGarbage(store, layout, age, ctx.env);
    });
  });
}

}  // namespace air::cli
