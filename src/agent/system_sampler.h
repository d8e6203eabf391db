// The node agent's system metrics sampler: a thread of its own (off the command's path: the
// agent's main loop keeps reading output) that every system_metrics_interval_s appends one
// sample of what the node uses (agent/node_usage.h) and of the GPUs it sees
// (agent/nvml_reader.h) to the node's metrics file (agent/system_sample.h), which the
// supervisor stores in the run's MLflow run. NVML is opened on this thread too.
//
// Bounded: after kSamplesPerStage samples the interval doubles, and doubles again after each
// further kSamplesPerStage, so a long run keeps covering its whole length in a file that grows
// with the logarithm of its duration; at kMaxSamples samples the sampler stops with a note.
// Thread safety: Start and Stop from the agent's main thread (Start after the agent blocked
// its signals: the sampler thread inherits that mask and so never takes them).
#pragma once

#include <condition_variable>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <thread>

#include "agent/node_launch.h"
#include "agent/node_usage.h"
#include "agent/process_tracker.h"
#include "agent/system_sample.h"
#include "base/env.h"

namespace air::agent {

inline constexpr int kSamplesPerStage = 1000;
inline constexpr int kMaxSamples = 10000;

struct SystemSamplerOptions {
  std::string path;         // the node's metrics file (appended to)
  int64_t interval_us = 0;  // > 0
  NodeUsageSource usage;
  std::optional<std::string> cuda_visible_devices;  // nullopt: unset (every GPU)
  int samples_per_stage = kSamplesPerStage;
  int max_samples = kMaxSamples;
};

class SystemSampler {
 public:
  // Starts sampling as the launch asks (nullptr when system_metrics_interval_s is 0): the
  // node's processes as `tracker` tracks them, its GPUs as CUDA_VISIBLE_DEVICES (the launch's,
  // else the agent's own) shows them.
  static std::unique_ptr<SystemSampler> ForNode(const NodeLaunch& launch,
                                                const TrackerInfo& tracker, Env* env);
  SystemSampler(SystemSamplerOptions options, Env* env);
  ~SystemSampler();  // Stop()
  SystemSampler(const SystemSampler&) = delete;
  SystemSampler& operator=(const SystemSampler&) = delete;

  // Ends sampling (an interval in progress is cut short) and joins the thread. Idempotent.
  void Stop();

 private:
  void Loop();
  // Waits up to `micros`; true when Stop was called.
  bool WaitForStop(int64_t micros);
  bool Append(const SystemSample& sample);

  SystemSamplerOptions options_;
  Env* env_;
  std::mutex mu_;
  std::condition_variable cv_;
  bool stopping_ = false;
  std::thread thread_;
};

}  // namespace air::agent
