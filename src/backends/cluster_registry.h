// The backend registry: backends are chosen by name ("local", "slurm"), from `air run
// --backend NAME` or AIR_HOME/config.yaml (`backend: NAME`); the runtime asks the registry for
// the chosen backend's capabilities (checked at submit, before anything is written) and for one
// ClusterBackend instance per attempt, and never names a backend itself.
//
// AIR_HOME/config.yaml (optional; docs/slurm.md):
//   backend: slurm              # the default for `air run` (local when absent)
//   shared_root: /shared/air    # where runs, snapshots and environments live (default AIR_HOME)
//   volumes_root: /shared/vols  # what nodes see at /Volumes (default <shared_root>/volumes)
//   slurm: {partition: ..., account: ..., qos: ..., sbatch_options: [...], air_binary: ...}
//   tracking_uri: https://mlflow.example.com   # an external MLflow server (docs/tracking.md)
//   tracking_token_secret: mlflow/token        # its credentials, as air secrets (scope/key):
//   tracking_username_secret: mlflow/user      #   a Bearer token, or a basic-auth user and
//   tracking_password_secret: mlflow/password  #   password
//   tracking_server: {host: 0.0.0.0, port: 5005, advertise_host: login1,
//                     artifact_max_file_size: 5GiB, artifact_max_run_size: 50GiB}
// The workload YAML never names a backend: the same file runs anywhere.
// Thread safety: pure functions over values (the table of backends is constant).
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "backends/cluster_backend.h"
#include "backends/slurm/slurm_config.h"
#include "base/env.h"
#include "base/status.h"

namespace air::backends {

// The external MLflow server of AIR_HOME/config.yaml, and the air secrets (scope/key, never
// values) holding air's credentials for it. The credentials also apply to a server named by
// MLFLOW_TRACKING_URI at submit.
struct TrackingConfig {
  std::string uri;              // "" : air's own server (unless MLFLOW_TRACKING_URI is set)
  std::string token_secret;     // Bearer token (MLFLOW_TRACKING_TOKEN), or ""
  std::string username_secret;  // basic auth (MLFLOW_TRACKING_USERNAME / _PASSWORD), or ""
  std::string password_secret;
  std::string config_path;  // where these came from, for messages ("" when no file)
};

// `tracking_server:` of config.yaml: where the `air server` that air starts on demand listens,
// and the address nodes use to reach it (docs/tracking.md; needed where nodes are other
// machines, as on Slurm), and the artifact quotas it enforces (read at each upload). Every
// request needs the server's generated token, which nodes get as the secret
// MLFLOW_TRACKING_TOKEN.
struct TrackingServerConfig {
  std::string host = "127.0.0.1";  // bind address
  int port = 0;                    // 0: the last one when free, else any
  std::string advertise_host;      // "" = host, or this machine's name when host is 0.0.0.0/::
  uint64_t artifact_max_file_bytes = uint64_t{5} << 30;  // one artifact file
  uint64_t artifact_max_run_bytes = uint64_t{50} << 30;  // all artifacts of one run
  bool configured = false;  // config.yaml has the block: a server started otherwise is
                            // restarted with these settings
};

struct ClusterConfig {
  std::string name = "local";
  std::string air_home;
  std::string shared_root;  // "" = AIR_HOME
  // Where runs, snapshots and environments live: shared_root, else AIR_HOME.
  std::string DataRoot() const { return shared_root.empty() ? air_home : shared_root; }
  std::string volumes_root;  // "" = DataRoot()/volumes (runtime/volumes.h)
  std::string config_path;   // the file it came from ("" when there is none)
  SlurmConfig slurm;
  TrackingConfig tracking;
  TrackingServerConfig tracking_server;
};

// The registered backend names, in order ("local", "slurm").
std::vector<std::string> ClusterBackendNames();

// Reads AIR_HOME/config.yaml when it exists (else the defaults).
// `backend_override` (from
// --backend; "" = none) replaces the file's `backend`. Errors name FILE:LINE:
// KEY and the valid values; an unknown backend name lists the registered ones.
Result<ClusterConfig> LoadClusterConfig(const std::string& air_home,
                                        const std::string& backend_override, Env* env);

// What the chosen backend can run, after checking that it is usable now (Slurm:
// its commands are installed, the controller answers, the partition exists, the
// shared root is writable). Nothing is submitted or written (but a probe file
// in the shared root).
Result<ClusterCapabilities> DescribeClusterBackend(const ClusterConfig& config, Env* env);

// For a run whose supervisor is gone: a note ("Slurm job 42 RUNNING") when the attempt in
// `attempt_dir` lives on in the chosen backend's scheduler and a new supervisor can adopt it
// (ClusterBackend::Attach); "" when nothing lives on (the local backend's nodes end with it).
Result<std::string> DescribeDetachedAttempt(const ClusterConfig& config,
                                            const std::string& attempt_dir, Env* env);

// One ClusterBackend instance for one attempt. `agent_binary` is the air executable
// providing `air agent` (the Slurm backend prefers slurm.air_binary when set).
Result<std::unique_ptr<ClusterBackend>> CreateClusterBackend(const ClusterConfig& config,
                                                             const std::string& agent_binary,
                                                             Env* env);

}  // namespace air::backends
