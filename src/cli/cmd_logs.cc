// `air logs RUN_ID [--node N] [--retry K] [--lines N] [--minutes M] [--follow] [--timestamps]
// [--download-to DIR]`: a node's output for one attempt (default: node 0, the latest attempt),
// readable while the run is live. Before any attempt started it shows the setup log
// (environment preparation). --download-to copies every attempt's logs into DIR.
// `air logs RUN_ID --alerts [--node N] [--retry K]` lists the run's alerts (docs/alerts.md).
#include <fmt/format.h>

#include <functional>
#include <memory>

#include "agent/log_format.h"
#include "cli/commands.h"
#include "cli/run_watch.h"
#include "runtime/alerts.h"
#include "runtime/layout.h"
#include "runtime/log_reader.h"
#include "runtime/run_lookup.h"
#include "runtime/watch.h"

namespace air::cli {
namespace {

struct LogsFlags {
  std::string run_id;
  int node = 0;
  int retry = -1;
  int lines = 0;
  double minutes = 0;
  bool follow = false;
  bool timestamps = false;
  std::string download_to;
  bool alerts = false;
  bool node_given = false;   // --node was on the command line (a filter for --alerts)
  bool retry_given = false;  // --retry was
};

// `air logs RUN --alerts [--node N] [--retry K]`: the run's alerts (runtime/alerts.h), every
// attempt and node unless filtered.
Status ShowAlerts(CliContext& ctx, const LogsFlags& flags, store::Store* store,
                  const store::RunRecord& run) {
  for (const auto& [given, name] :
       {std::pair{flags.follow, "--follow"}, std::pair{flags.lines != 0, "--lines"},
        std::pair{flags.minutes != 0, "--minutes"}, std::pair{flags.timestamps, "--timestamps"},
        std::pair{!flags.download_to.empty(), "--download-to"}}) {
    if (given) {
      return InvalidArgument(fmt::format(
          "--alerts lists the run's alerts and cannot be combined with {} (with --alerts, only "
          "--node N and --retry K may narrow the list)",
          name));
    }
  }
  AIR_ASSIGN_OR_RETURN(auto events, store->ListEvents(run.id));
  std::vector<runtime::Alert> alerts;
  for (runtime::Alert& alert : runtime::AlertsFromEvents(events)) {
    if (flags.node_given && alert.node != flags.node) continue;
    if (flags.retry_given && alert.attempt != flags.retry) continue;
    alerts.push_back(std::move(alert));
  }
  nlohmann::json items = nlohmann::json::array();
  for (const runtime::Alert& alert : alerts) items.push_back(runtime::AlertJson(alert));
  std::string text = runtime::AlertsText(alerts);
  if (alerts.empty()) {
    text = fmt::format("no alerts for run {} (state {})\n", run.id, store::RunStateName(run.state));
  }
  EmitData(ctx, {{"run_id", run.id}, {"state", store::RunStateName(run.state)}, {"alerts", items}},
           text);
  return Status::Ok();
}

Status Download(CliContext& ctx, const runtime::Layout& layout, const store::RunRecord& run,
                const std::string& dest) {
  std::string root = fmt::format("{}/run_{}", dest, run.id);
  AIR_RETURN_IF_ERROR(ctx.env->CreateDirs(root));
  std::vector<std::string> written;
  auto copy = [&](const std::string& from, const std::string& to) -> Status {
    if (!ctx.env->FileExists(from)) return Status::Ok();
    AIR_ASSIGN_OR_RETURN(std::string text, ctx.env->ReadFile(from));
    AIR_RETURN_IF_ERROR(ctx.env->WriteFileAtomic(to, text));
    written.push_back(to);
    return Status::Ok();
  };
  AIR_RETURN_IF_ERROR(copy(layout.SetupLog(run.id), root + "/setup.log"));
  for (int attempt = 0; attempt < run.attempt_count; ++attempt) {
    std::string dir = fmt::format("{}/attempt_{}", root, attempt);
    AIR_RETURN_IF_ERROR(ctx.env->CreateDirs(dir));
    for (int node = 0; node < run.num_nodes; ++node) {
      AIR_RETURN_IF_ERROR(
          copy(layout.NodeLog(run.id, attempt, node), fmt::format("{}/node_{}.log", dir, node)));
    }
  }
  EmitData(ctx, {{"run_id", run.id}, {"directory", root}, {"files", written}},
           fmt::format("wrote {} log file(s) of run {} to {}", written.size(), run.id, root));
  return Status::Ok();
}

Status ShowLogs(CliContext& ctx, const LogsFlags& flags) {
  AIR_ASSIGN_OR_RETURN(int64_t run_id, runtime::ParseRunId(flags.run_id));
  AIR_ASSIGN_OR_RETURN(std::string air_home, AirHome(ctx));
  AIR_ASSIGN_OR_RETURN(runtime::Layout layout, runtime::ResolveLayout(air_home, ctx.env));
  AIR_ASSIGN_OR_RETURN(auto store, runtime::OpenExistingStore(layout, ctx.env));
  AIR_ASSIGN_OR_RETURN(store::RunRecord run,
                       runtime::LoadRun(store.get(), layout, run_id, ctx.env));
  if (flags.node < 0 || flags.node >= run.num_nodes) {
    return InvalidArgument(
        fmt::format("--node {}: run {} has nodes 0..{}", flags.node, run_id, run.num_nodes - 1));
  }
  if (flags.lines < 0) return InvalidArgument("--lines must be 0 (all) or more");
  if (flags.minutes < 0) return InvalidArgument("--minutes must be more than 0 (0: no limit)");
  std::optional<int> attempt;
  if (flags.retry >= 0) {
    if (flags.retry >= run.attempt_count) {
      return InvalidArgument(fmt::format(
          "--retry {}: run {} has {} attempt(s){}", flags.retry, run_id, run.attempt_count,
          run.attempt_count > 0 ? fmt::format(" (0..{})", run.attempt_count - 1) : ""));
    }
    attempt = flags.retry;
  } else if (flags.retry != -1) {
    return InvalidArgument("--retry must be an attempt number (0, 1, ...) or -1 for the latest");
  }
  if (flags.alerts) return ShowAlerts(ctx, flags, store.get(), run);
  if (!flags.download_to.empty()) return Download(ctx, layout, run, flags.download_to);
  if (flags.follow) {
    WatchRequest request;
    request.run_id = run_id;
    request.node = flags.node;
    request.attempt = attempt;
    request.timestamps = flags.timestamps;
    request.emit_final = false;
    request.start_lines = static_cast<size_t>(flags.lines);
    return WatchAndReport(ctx, request);
  }
  int shown_attempt = attempt ? *attempt : run.attempt_count - 1;
  std::string path = shown_attempt >= 0 ? layout.NodeLog(run_id, shown_attempt, flags.node)
                                        : layout.SetupLog(run_id);
  auto no_output = [&] {
    return fmt::format(
        "(no output yet from node {} of run {}, {}; state {})\n", flags.node, run_id,
        shown_attempt >= 0 ? fmt::format("attempt {}", shown_attempt) : "before its first attempt",
        store::RunStateName(run.state));
  };
  std::vector<std::string> lines;
  if (flags.lines == 0 && flags.minutes == 0 && !ctx.json()) {
    // The whole log as text: streamed a block at a time, oldest rotated part first.
    std::vector<std::string> parts = runtime::LogParts(ctx.env, path);
    bool shown = false;
    for (auto part = parts.rbegin(); part != parts.rend(); ++part) {
      runtime::LogFollower reader(*part);
      do {
        AIR_ASSIGN_OR_RETURN(std::vector<std::string> block, reader.ReadNew(true));
        for (const auto& line : block) {
          *ctx.out << runtime::RenderLogLine(line, flags.timestamps) << "\n";
        }
        shown = shown || !block.empty();
      } while (reader.more());
    }
    if (!shown) *ctx.err << no_output();
    return Status::Ok();
  }
  // The last lines (--lines) and/or the recent ones (--minutes), read backwards from the end.
  std::function<bool(const std::string&)> recent;
  if (flags.minutes > 0) {
    std::string since = agent::FormatLogTimestamp(ctx.env->NowMicros() -
                                                  static_cast<int64_t>(flags.minutes * 60e6));
    recent = [since](const std::string& line) {
      auto record = agent::ParseLogLine(line);
      return !record || record->timestamp >= since;
    };
  }
  AIR_ASSIGN_OR_RETURN(
      lines, runtime::ReadLastLines(ctx.env, path, static_cast<size_t>(flags.lines), recent));
  nlohmann::json records = nlohmann::json::array();
  std::string text;
  for (const auto& line : lines) {
    if (auto record = agent::ParseLogLine(line)) {
      records.push_back(
          {{"ts", record->timestamp}, {"stream", record->stream}, {"text", record->text}});
    } else {
      records.push_back({{"stream", shown_attempt >= 0 ? "raw" : "setup"}, {"text", line}});
    }
    text += runtime::RenderLogLine(line, flags.timestamps) + "\n";
  }
  if (lines.empty() && !ctx.json()) *ctx.err << no_output();
  EmitData(ctx,
           {{"run_id", run_id},
            {"node", flags.node},
            {"attempt", shown_attempt >= 0 ? nlohmann::json(shown_attempt) : nullptr},
            {"state", store::RunStateName(run.state)},
            {"path", path},
            {"lines", records}},
           text);
  return Status::Ok();
}

}  // namespace

void RegisterLogsCommand(CLI::App& root, CliContext& ctx) {
  auto flags = std::make_shared<LogsFlags>();
  auto* cmd = root.add_subcommand("logs", "show a node's output for one attempt of a run");
  cmd->add_option("RUN_ID", flags->run_id, "the run")->required();
  auto* node = cmd->add_option("--node", flags->node, "node rank (default 0)");
  auto* retry =
      cmd->add_option("--retry", flags->retry, "attempt number, 0-based (default -1: the latest)");
  cmd->add_option("--lines", flags->lines, "only the last N lines");
  cmd->add_option("--minutes", flags->minutes, "only lines from the last M minutes");
  cmd->add_flag("--follow", flags->follow, "keep printing new lines until the run ends");
  cmd->add_flag("--timestamps", flags->timestamps, "show each line's time and stream");
  cmd->add_option("--download-to", flags->download_to,
                  "copy every attempt's node logs into DIR/run_<id>/");
  cmd->add_flag("--alerts", flags->alerts,
                "list the run's alerts (known fatal lines: CUDA OOM, NCCL timeouts, ...)");
  cmd->callback([&ctx, flags, node, retry] {
    flags->node_given = node->count() > 0;
    flags->retry_given = retry->count() > 0 && flags->retry >= 0;
    Status status = ShowLogs(ctx, *flags);
    if (!status.ok()) EmitError(ctx, status);
  });
}

}  // namespace air::cli
