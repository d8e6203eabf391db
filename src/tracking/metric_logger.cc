// The background sender of MetricLogger.
#include "tracking/metric_logger.h"

#include <chrono>
#include <cmath>
#include <nlohmann/json.hpp>

#include "tracking/http_client.h"

namespace air::tracking {
namespace {

int64_t SteadyMillis() {
  return std::chrono::duration_cast<std::chrono::milliseconds>(
             std::chrono::steady_clock::now().time_since_epoch())
      .count();
}

nlohmann::json MetricValueJson(double v) {
  if (std::isnan(v)) return "NaN";
  if (std::isinf(v)) return v > 0 ? "Infinity" : "-Infinity";
  return v;
}

constexpr size_t kBatch = 1000;
constexpr int kTries = 3;

}  // namespace

MetricLogger::MetricLogger(std::string tracking_uri, Credentials credentials, std::string run_id,
                           size_t capacity)
    : uri_(std::move(tracking_uri)),
      credentials_(std::move(credentials)),
      run_id_(std::move(run_id)),
      capacity_(capacity) {
  sender_ = std::thread([this] { Send(); });
}

MetricLogger::~MetricLogger() {
  if (sender_.joinable()) Finish(0);
}

void MetricLogger::LogParams(std::vector<KeyValue> params) {
  std::lock_guard<std::mutex> lock(mu_);
  for (auto& p : params) params_.push_back(std::move(p));
  cv_.notify_one();
}

void MetricLogger::Log(std::vector<Metric> points) {
  std::lock_guard<std::mutex> lock(mu_);
  for (auto& p : points) {
    if (queue_.size() >= capacity_) {
      ++report_.dropped;
      continue;
    }
    queue_.push_back(std::move(p));
  }
  cv_.notify_one();
}

void MetricLogger::Send() {
  MlflowRest rest(uri_, credentials_, 5000);
  while (true) {
    std::vector<Metric> batch;
    std::vector<KeyValue> params;
    int64_t deadline = 0;
    bool stopping = false;
    {
      std::unique_lock<std::mutex> lock(mu_);
      cv_.wait(lock, [this] { return stopping_ || !queue_.empty() || !params_.empty(); });
      stopping = stopping_;
      deadline = stop_deadline_ms_;
      if (stopping && (SteadyMillis() >= deadline || (queue_.empty() && params_.empty()))) {
        report_.unsent += static_cast<int64_t>(queue_.size());
        queue_.clear();
        return;
      }
      params.swap(params_);
      while (!queue_.empty() && batch.size() < kBatch && params.size() + batch.size() < kBatch) {
        batch.push_back(std::move(queue_.front()));
        queue_.pop_front();
      }
    }
    nlohmann::json body = {{"run_id", run_id_}};
    nlohmann::json metrics = nlohmann::json::array();
    for (const Metric& m : batch) {
      metrics.push_back({{"key", m.key},
                         {"value", MetricValueJson(m.value)},
                         {"timestamp", m.timestamp},
                         {"step", m.step}});
    }
    body["metrics"] = metrics;
    nlohmann::json param_list = nlohmann::json::array();
    for (const KeyValue& p : params) param_list.push_back({{"key", p.key}, {"value", p.value}});
    if (!params.empty()) body["params"] = param_list;
    Status sent;
    for (int attempt = 0; attempt < kTries; ++attempt) {
      sent = rest.Call("POST", "runs/log-batch", body).status();
      // A refused request (a bad key, a changed param) will not succeed on a retry.
      if (sent.ok() || sent.code() == ErrorCode::kInvalidArgument) break;
      if (stopping && SteadyMillis() >= deadline) break;
      std::this_thread::sleep_for(std::chrono::milliseconds(200 << attempt));
    }
    std::lock_guard<std::mutex> lock(mu_);
    if (sent.ok()) {
      report_.sent += static_cast<int64_t>(batch.size());
    } else {
      report_.unsent += static_cast<int64_t>(batch.size());
      report_.last_error = sent.message();
    }
  }
}

MetricLoggerReport MetricLogger::Finish(int64_t deadline_ms) {
  {
    std::lock_guard<std::mutex> lock(mu_);
    stopping_ = true;
    stop_deadline_ms_ = SteadyMillis() + deadline_ms;
    cv_.notify_one();
  }
  if (sender_.joinable()) sender_.join();
  std::lock_guard<std::mutex> lock(mu_);
  return report_;
}

}  // namespace air::tracking
