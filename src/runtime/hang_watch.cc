// Hang detection over node log sizes and the workload's metric marker.
#include "runtime/hang_watch.h"

#include <fmt/format.h>

#include <algorithm>
#include <numeric>

#include "runtime/failure.h"
#include "runtime/run_view.h"

namespace air::runtime {

std::string Hang::NodeNames() const {
  std::string names;
  for (const SilentNode& node : nodes) {
    names += fmt::format("{}node {}", names.empty() ? "" : ", ", node.node_rank);
  }
  return names;
}

std::string Hang::Describe(const std::string& timeout_text) const {
  std::string text = fmt::format("no node wrote output or logged a metric for {} ({})",
                                 FormatDuration(silent_us), timeout_text);
  for (size_t i = 0; i < nodes.size(); ++i) {
    text += i == 0 ? fmt::format("; node {} went silent first ({})", nodes[i].node_rank,
                                 FormatDuration(nodes[i].silent_us))
                   : fmt::format(", then node {} ({})", nodes[i].node_rank,
                                 FormatDuration(nodes[i].silent_us));
  }
  if (more_nodes > 0) {
    text += fmt::format(", and {} more node{}", more_nodes, more_nodes == 1 ? "" : "s");
  }
  for (const SilentNode& node : nodes) {
    text += node.last_lines.empty()
                ? fmt::format("\nnode {} wrote no output", node.node_rank)
                : fmt::format("\nlast lines of node {}:\n{}", node.node_rank, node.last_lines);
  }
  return text;
}

HangWatch::HangWatch(Env* env, HangWatchOptions options) : env_(env), options_(std::move(options)) {
  log_states_.resize(options_.node_logs.size());
  last_output_us_.assign(options_.node_logs.size(), 0);
}

void HangWatch::Observe(const std::vector<NodeLife>& lives, int64_t now) {
  // The log's size and mtime: a new record grows it, a progress bar's unfinished line bumps
  // its mtime (agent/log_format.h), a rotation changes both.
  auto log_state = [this](size_t rank) -> std::optional<std::pair<uint64_t, int64_t>> {
    auto size = env_->FileSize(options_.node_logs[rank]);
    auto modified = env_->FileModifiedMicros(options_.node_logs[rank]);
    if (!size.ok() || !modified.ok()) return std::nullopt;
    return std::make_pair(*size, *modified);
  };
  if (!armed_) {
    const bool all_started = std::none_of(lives.begin(), lives.end(),
                                          [](NodeLife l) { return l == NodeLife::kNotStarted; });
    if (!all_started || lives.size() != log_states_.size()) return;
    armed_ = true;
    for (size_t rank = 0; rank < log_states_.size(); ++rank) {
      log_states_[rank] = log_state(rank);
      last_output_us_[rank] = now;
    }
    if (options_.metric_marker) marker_ = options_.metric_marker();
    last_metric_us_ = now;
    next_marker_us_ = now + options_.metric_interval_us;
    next_logs_us_ = now + options_.output_interval_us;
    return;
  }
  if (now >= next_logs_us_) {
    next_logs_us_ = now + options_.output_interval_us;
    for (size_t rank = 0; rank < log_states_.size(); ++rank) {
      auto state = log_state(rank);
      if (state != log_states_[rank]) {
        log_states_[rank] = state;
        last_output_us_[rank] = now;
      }
    }
  }
  if (options_.metric_marker && now >= next_marker_us_) {
    next_marker_us_ = now + options_.metric_interval_us;
    std::string marker = options_.metric_marker();
    if (marker != marker_) {
      marker_ = std::move(marker);
      last_metric_us_ = now;
    }
  }
}

std::optional<Hang> HangWatch::Check(const std::vector<NodeLife>& lives) {
  if (reported_ || options_.timeout_us <= 0) return std::nullopt;
  const int64_t now = env_->MonotonicMicros();
  Observe(lives, now);
  if (!armed_ || last_output_us_.empty()) return std::nullopt;
  std::vector<size_t> running;
  for (size_t rank = 0; rank < lives.size(); ++rank) {
    if (lives[rank] == NodeLife::kRunning) running.push_back(rank);
  }
  if (running.empty()) return std::nullopt;
  const int64_t last_activity =
      std::max(last_metric_us_, *std::max_element(last_output_us_.begin(), last_output_us_.end()));
  if (now - last_activity < options_.timeout_us) return std::nullopt;
  reported_ = true;
  // The first to go silent first; equal times by rank.
  std::stable_sort(running.begin(), running.end(),
                   [this](size_t a, size_t b) { return last_output_us_[a] < last_output_us_[b]; });
  Hang hang;
  hang.silent_us = now - last_activity;
  const size_t named = std::min(running.size(), options_.max_named_nodes);
  for (size_t i = 0; i < named; ++i) {
    const size_t rank = running[i];
    hang.nodes.push_back({static_cast<int>(rank), now - last_output_us_[rank],
                          LastLogLines(options_.node_logs[rank], options_.last_lines)});
  }
  hang.more_nodes = running.size() - named;
  return hang;
}

}  // namespace air::runtime
