// Nodes' system metrics files -> the run's MLflow run.
#include "runtime/system_metrics_ingest.h"

#include <fmt/format.h>

#include "agent/system_sample.h"

namespace air::runtime {

SystemMetricsIngester::SystemMetricsIngester(store::Store* store, const Layout& layout,
                                             int64_t run_id, int attempt, int num_nodes, Env* env)
    : store_(store), air_home_(layout.home()), run_id_(run_id), attempt_(attempt), env_(env) {
  for (int rank = 0; rank < num_nodes; ++rank) {
    files_.emplace_back(layout.NodeMetricsFile(run_id, attempt, rank));
  }
  step_origin_us_ = env->NowMicros();
  if (auto run = store->GetRun(run_id); run.ok() && run->started_us) {
    step_origin_us_ = *run->started_us;
  }
}

void SystemMetricsIngester::Event(const std::string& message, std::optional<int> node_rank) {
  (void)store_->AppendEvent(run_id_, "system_metrics", message, attempt_, node_rank);
}

void SystemMetricsIngester::Poll(bool final) {
  const int64_t now = env_->MonotonicMicros();
  if (!final && now < next_poll_us_) return;
  next_poll_us_ = now + kIngestEveryUs;
  // Points a failed store left come first; while storing fails, new lines wait in the files.
  if (!Flush() && !final) {
    next_poll_us_ = now + kRetryAfterFailureUs;
    return;
  }
  for (size_t rank = 0; rank < files_.size(); ++rank) {
    do {
      auto lines = files_[rank].ReadNew(final);
      if (!lines.ok()) {
        if (!failure_reported_) {
          failure_reported_ = true;
          Event("system metrics: cannot read " + files_[rank].path() + ": " +
                    lines.status().message(),
                static_cast<int>(rank));
        }
        break;
      }
      for (const std::string& line : *lines) Ingest(static_cast<int>(rank), line);
    } while (final && files_[rank].more());
  }
  if (!Flush()) {
    next_poll_us_ = now + kRetryAfterFailureUs;
    if (final) pending_.clear();  // the attempt is over: what could not be stored is dropped
  }
}

void SystemMetricsIngester::Ingest(int node_rank, const std::string& line) {
  if (line.empty()) return;
  auto sample = agent::SystemSampleFromLine(line, files_[node_rank].path());
  if (!sample.ok()) return;  // only complete lines are read: a damaged file, skipped
  if (!sample->note.empty()) {
    if (notes_seen_.insert(sample->note).second) {
      Event(fmt::format("node {}: {}", node_rank, sample->note), node_rank);
    }
    return;
  }
  const std::string prefix = agent::SystemMetricPrefix(node_rank);
  const int64_t step =
      sample->ts_us > step_origin_us_ ? (sample->ts_us - step_origin_us_) / 1'000'000 : 0;
  for (const auto& [name, value] : sample->metrics) {
    pending_.push_back({prefix + name, value, sample->ts_us / 1000, step});
  }
}

bool SystemMetricsIngester::Flush() {
  if (pending_.empty()) return true;
  if (!writer_opened_) {
    writer_opened_ = true;
    auto writer = TrackingRunWriter::Open(store_, run_id_, air_home_, env_);
    if (writer.ok()) {
      writer_ = std::move(*writer);
    } else {
      failure_reported_ = true;
      Event("system metrics are not stored: " + writer.status().message(), std::nullopt);
    }
  }
  if (!writer_) {  // no tracking run (or no access to it): nothing to store them in
    pending_.clear();
    return true;
  }
  tracking::Batch batch;
  size_t sent = 0;
  while (sent < pending_.size()) {
    const size_t end = std::min(pending_.size(), sent + kMaxPointsPerBatch);
    batch.metrics.assign(pending_.begin() + sent, pending_.begin() + end);
    Status logged = writer_->LogBatch(batch);
    if (!logged.ok()) {
      if (!failure_reported_) {
        failure_reported_ = true;
        Event(fmt::format("system metrics could not be stored (retried every {} s while the "
                          "attempt runs; later failures are not recorded): {}",
                          kRetryAfterFailureUs / 1'000'000, logged.message()),
              std::nullopt);
      }
      break;
    }
    points_stored_ += static_cast<int64_t>(batch.metrics.size());
    sent = end;
  }
  pending_.erase(pending_.begin(), pending_.begin() + sent);
  return pending_.empty();
}

}  // namespace air::runtime
