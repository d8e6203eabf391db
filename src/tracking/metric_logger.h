// MetricLogger: `air train`'s native MLflow logging. Points are queued (bounded) by the training
// loop and sent by a background thread as runs/log-batch requests of up to 1000 metrics, so a
// slow or dead tracking server never stalls training: when the queue is full new points are
// dropped and counted; a batch that fails is retried a few times, then counted as unsent.
// Finish() flushes what it can within a deadline and reports what was sent, dropped and unsent.
// Thread safety: Log/LogParams from one thread (the trainer); the sender runs on its own thread.
#pragma once

#include <condition_variable>
#include <cstdint>
#include <deque>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "tracking/entities.h"
#include "tracking/http_client.h"

namespace air::tracking {

struct MetricLoggerReport {
  int64_t sent = 0;     // points the server stored
  int64_t dropped = 0;  // points the full queue refused
  int64_t unsent = 0;   // points whose batch failed every try, or left at Finish()'s deadline
  std::string last_error;
};

class MetricLogger {
 public:
  MetricLogger(std::string tracking_uri, Credentials credentials, std::string run_id,
               size_t capacity = 100000);
  ~MetricLogger();
  MetricLogger(const MetricLogger&) = delete;
  MetricLogger& operator=(const MetricLogger&) = delete;

  void LogParams(std::vector<KeyValue> params);
  void Log(std::vector<Metric> points);
  // Sends what is queued (up to `deadline_ms`), stops the sender and reports.
  MetricLoggerReport Finish(int64_t deadline_ms = 10000);

 private:
  void Send();

  std::string uri_;
  Credentials credentials_;
  std::string run_id_;
  size_t capacity_;
  std::mutex mu_;
  std::condition_variable cv_;
  std::deque<Metric> queue_;
  std::vector<KeyValue> params_;
  bool stopping_ = false;
  int64_t stop_deadline_ms_ = 0;  // steady clock ms
  MetricLoggerReport report_;
  std::thread sender_;
};

}  // namespace air::tracking
