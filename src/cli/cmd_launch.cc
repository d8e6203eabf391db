// `air launch`: torchrun's command line for starting the workers of one node (launch/).
//
//   air launch [--nnodes N] [--node-rank R] [--nproc-per-node P] [--master-addr A]
//              [--master-port PORT] [--max-restarts K] [--log-dir DIR] [--standalone]
//              [--no-python | -m] [--run-id ID] [--monitor-interval S] [--stop-grace S]
//              [--join-timeout S] SCRIPT [ARGS...]
//
// Under srun (one task per node) without --nnodes/--node-rank/--master-addr, those come from
// Slurm's task environment (backends/slurm/srun_task.h).
// Everything from SCRIPT on belongs to the workers. Exit code: 0 when every worker of the last
// attempt succeeded, 1 when the group failed (the summary on stderr names the first failure),
// 2 for bad options, 128+N when air launch was stopped by signal N.
#include "backends/slurm/srun_task.h"
#include "cli/commands.h"
#include "launch/launcher.h"

namespace air::cli {

void RegisterLaunchCommand(CLI::App& root, CliContext& ctx) {
  auto* cmd = root.add_subcommand(
      "launch", "start a node's training workers with torchrun's environment contract");
  auto options = std::make_shared<launch::LaunchOptions>();
  cmd->add_option("--nnodes", options->nnodes, "number of nodes")->capture_default_str();
  cmd->add_option("--node-rank,--node_rank", options->node_rank, "this node's rank (0..nnodes-1)")
      ->capture_default_str();
  cmd->add_option("--nproc-per-node,--nproc_per_node", options->nproc_per_node,
                  "workers on this node")
      ->capture_default_str();
  cmd->add_option("--master-addr,--master_addr", options->master_addr,
                  "host of node 0 (the rendezvous store)")
      ->capture_default_str();
  cmd->add_option("--master-port,--master_port", options->master_port,
                  "port of the rendezvous store on node 0")
      ->capture_default_str();
  cmd->add_option("--max-restarts,--max_restarts", options->max_restarts,
                  "restarts of the whole group after a worker fails")
      ->capture_default_str();
  cmd->add_option("--log-dir,--log_dir", options->log_dir,
                  "write each worker's output and error file under DIR/attempt_K/node_N/LOCAL/");
  cmd->add_flag("--standalone", options->standalone,
                "one node, a free port on localhost, a random run id");
  cmd->add_option("--run-id,--run_id,--rdzv-id,--rdzv_id", options->run_id,
                  "TORCHELASTIC_RUN_ID for the workers")
      ->capture_default_str();
  cmd->add_flag("--no-python,--no_python", options->no_python,
                "run SCRIPT as a program instead of `python3 -u SCRIPT`");
  cmd->add_flag("-m,--module", options->module, "run SCRIPT as a module: `python3 -u -m SCRIPT`");
  cmd->add_option("--monitor-interval,--monitor_interval", options->monitor_interval_s,
                  "seconds between checks of the workers")
      ->capture_default_str();
  cmd->add_option("--stop-grace", options->stop_grace_s,
                  "seconds between SIGTERM and SIGKILL when workers are stopped")
      ->capture_default_str();
  cmd->add_option("--join-timeout", options->join_timeout_s,
                  "seconds for every node's air launch to join")
      ->capture_default_str();
  // SCRIPT and everything after it are the workers' (not passed up to the root app).
  cmd->prefix_command();
  cmd->fallthrough(false);
  cmd->callback([&ctx, cmd, options] {
    options->command = cmd->remaining();
    // As an srun task, the node's place comes from Slurm where no flag gives it.
    const bool placed =
        cmd->count("--nnodes") + cmd->count("--node-rank") + cmd->count("--master-addr") > 0;
    if (!placed && !options->standalone) {
      auto srun = backends::slurm::ReadSrunNodePlace(ctx.env);
      if (!srun.ok()) {
        EmitError(ctx, srun.status());
        return;
      }
      if (*srun) {
        options->nnodes = (*srun)->nnodes;
        options->node_rank = (*srun)->node_rank;
        options->master_addr = (*srun)->master_addr;
      }
    }
    Result<int> code = launch::RunLaunch(*options, ctx.env);
    if (!code.ok()) {
      EmitError(ctx, code.status());
      return;
    }
    ctx.exit_code = *code;
  });
}

}  // namespace air::cli
