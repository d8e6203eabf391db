// `air server [--host H] [--port P]`: AIR_HOME's tracking and UI server in the foreground
// (server/server.h). `air run` and `air ui` start the same command detached when none runs.
// `air server --stop` stops the running one. Every request needs the access token kept in
// AIR_HOME/tracking/server.token (created, mode 0600, on first use; never printed) or a browser
// session from `air ui`'s login link; loopback is no exception (any local user can reach it).
#include <fmt/format.h>
#include <signal.h>

#include <memory>

#include "backends/cluster_registry.h"
#include "base/log.h"
#include "cli/commands.h"
#include "server/server.h"
#include "tracking/server_files.h"

namespace air::cli {
namespace {

struct ServerFlags {
  std::string air_home;
  std::string host = "127.0.0.1";
  int port = 0;
  int idle_exit = 0;
  bool stop = false;
};

Status StopServer(CliContext& ctx, const tracking::ServerFiles& files) {
  auto info = tracking::ReadServerInfo(files, ctx.env);
  if (!info || info->pid <= 0 || ::kill(static_cast<pid_t>(info->pid), SIGTERM) != 0) {
    EmitData(ctx, {{"stopped", false}}, "no air server was running for this AIR_HOME");
    return Status::Ok();
  }
  EmitData(ctx, {{"stopped", true}, {"pid", info->pid}},
           fmt::format("stopped the air server (pid {})", info->pid));
  return Status::Ok();
}

Status Serve(CliContext& ctx, const ServerFlags& flags) {
  server::ServerOptions options;
  if (flags.air_home.empty()) {
    AIR_ASSIGN_OR_RETURN(options.air_home, AirHome(ctx));
  } else {
    options.air_home = flags.air_home;
  }
  tracking::ServerFiles files(options.air_home);
  if (flags.stop) return StopServer(ctx, files);
  options.host = flags.host;
  options.port = flags.port;
  options.idle_exit_seconds = flags.idle_exit;
  if (options.port < 0 || options.port > 65535) {
    return InvalidArgument(fmt::format("--port {}: use 0 (any free port) to 65535", options.port));
  }
  AIR_ASSIGN_OR_RETURN(options.token, tracking::ServerToken(files, ctx.env));
  // config.yaml's advertise_host is a name nodes use for this server: its Host header is valid.
  AIR_ASSIGN_OR_RETURN(backends::ClusterConfig config,
                       backends::LoadClusterConfig(options.air_home, "", ctx.env));
  options.advertise_host = config.tracking_server.advertise_host;
  return server::RunServer(options, ctx.env, [&ctx, &options](const std::string& url) {
    // One line, flushed: scripts that start it in the foreground wait for it.
    EmitData(ctx, {{"url", url}, {"token_required", true}},
             fmt::format("air server listening on {} (token in AIR_HOME/tracking/server.token; "
                         "`air ui` prints a browser login link)",
                         url));
    ctx.out->flush();
  });
}

}  // namespace

void RegisterServerCommand(CLI::App& root, CliContext& ctx) {
  auto flags = std::make_shared<ServerFlags>();
  auto* cmd = root.add_subcommand(
      "server", "serve the MLflow tracking API, air's JSON API and the web UI for AIR_HOME");
  cmd->add_option("--air-home", flags->air_home, "AIR_HOME to serve (default: $AIR_HOME)");
  cmd->add_option("--host", flags->host, "address to bind (default 127.0.0.1)");
  cmd->add_option("--port", flags->port, "port (default: the last one when free, else any)");
  cmd->add_option("--idle-exit", flags->idle_exit,
                  "exit after SECONDS without requests while no run is live (0: never)");
  cmd->add_flag("--stop", flags->stop, "stop the running server of this AIR_HOME");
  cmd->callback([&ctx, flags] {
    Status status = Serve(ctx, *flags);
    if (!status.ok()) EmitError(ctx, status);
  });
}

}  // namespace air::cli
