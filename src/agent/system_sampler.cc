// The sampler thread: measure, append, wait.
#include "agent/system_sampler.h"

#include <fmt/format.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>

#include "agent/nvml_reader.h"
#include "agent/system_sample.h"

namespace air::agent {

std::unique_ptr<SystemSampler> SystemSampler::ForNode(const NodeLaunch& launch,
                                                      const TrackerInfo& tracker, Env* env) {
  if (launch.system_metrics_interval_s <= 0 || launch.metrics_path.empty()) return nullptr;
  SystemSamplerOptions options;
  options.path = launch.metrics_path;
  options.interval_us = int64_t{launch.system_metrics_interval_s} * 1'000'000;
  options.usage.kind = tracker.kind;
  if (tracker.kind != TrackerKind::kSession) options.usage.command_cgroup = tracker.cgroup + "/cmd";
  options.usage.agent_pid = ::getpid();
  options.usage.workdir = launch.workdir;
  // The launch's (the local backend's lease) wins over the agent's own (Slurm's GPU binding).
  for (const auto& [name, value] : launch.env) {
    if (name == "CUDA_VISIBLE_DEVICES") options.cuda_visible_devices = value;
  }
  if (!options.cuda_visible_devices)
    options.cuda_visible_devices = env->GetEnv("CUDA_VISIBLE_DEVICES");
  return std::make_unique<SystemSampler>(std::move(options), env);
}

SystemSampler::SystemSampler(SystemSamplerOptions options, Env* env)
    : options_(std::move(options)), env_(env) {
  thread_ = std::thread([this] { Loop(); });
}

SystemSampler::~SystemSampler() { Stop(); }

void SystemSampler::Stop() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    stopping_ = true;
  }
  cv_.notify_all();
  if (thread_.joinable()) thread_.join();
}

bool SystemSampler::WaitForStop(int64_t micros) {
  std::unique_lock<std::mutex> lock(mu_);
  return cv_.wait_for(lock, std::chrono::microseconds(micros), [this] { return stopping_; });
}

bool SystemSampler::Append(const SystemSample& sample) {
  Status appended = env_->AppendToFile(options_.path, SystemSampleToLine(sample));
  if (appended.ok()) return true;
  // Nowhere else to say it: the agent's stderr is the supervisor's log.
  std::fprintf(stderr, "air agent: system metrics stopped: %s\n", appended.message().c_str());
  return false;
}

void SystemSampler::Loop() {
  NodeUsageMeter meter(options_.usage, env_->MonotonicMicros());
  std::string note;
  std::unique_ptr<NvmlReader> gpus = NvmlReader::Open(options_.cuda_visible_devices, &note);
  if (!note.empty() && !Append({env_->NowMicros(), {}, note})) return;
  int64_t interval_us = options_.interval_us;
  for (int written = 0; !WaitForStop(interval_us);) {
    SystemSample sample;
    sample.ts_us = env_->NowMicros();
    sample.metrics = meter.Read(env_->MonotonicMicros());
    if (sample.metrics.empty()) continue;  // the command has ended
    if (gpus) {
      std::vector<std::pair<std::string, double>> gpu_metrics;
      if (gpus->Read(&gpu_metrics, &note)) {
        sample.metrics.insert(sample.metrics.end(), gpu_metrics.begin(), gpu_metrics.end());
      } else {
        gpus.reset();
        if (!Append({sample.ts_us, {}, note})) return;
      }
    }
    if (!Append(sample)) return;
    if (++written >= options_.max_samples) {
      (void)Append({env_->NowMicros(),
                    {},
                    fmt::format("system metrics stopped after {} samples (the cap per node and "
                                "attempt)",
                                options_.max_samples)});
      return;
    }
    if (written % options_.samples_per_stage == 0) interval_us *= 2;
  }
}

}  // namespace air::agent
