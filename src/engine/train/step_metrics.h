// StepMetrics: what one optimizer step reports, and the two places it goes — metrics.jsonl in the
// output directory (MetricsLog) and the one-line progress display (ProgressDisplay).
//
// metrics.jsonl holds one JSON object per logged step:
//   {"step":12,"loss":2.3456,"lr":0.0001,"grad_norm":1.23,"tokens":45678,"tokens_per_s":2100.5,
//    "elapsed_s":21.7,"epoch":0.48,"peak_memory_bytes":123456789}
// loss is the mean over the logged interval of each step's loss (the mean token loss over the
// step's accumulated micro-batches), tokens the non-padding tokens seen so far, tokens_per_s the
// throughput over the logged interval. The progress line shows step/total, loss, lr, grad norm,
// tokens/s, elapsed and ETA — updated in place (carriage return) on a terminal every step;
// otherwise (a pipe, a node's log) one full line every `logging_steps` steps and at the last
// step, so a long run's log holds one line per logged interval, not one per step.
// Thread safety: none; owned by the training loop.
#pragma once

#include <cstdint>
#include <ostream>
#include <string>

#include "base/env.h"
#include "base/status.h"

namespace air::engine::train {

struct StepMetrics {
  int step = 0;  // 1-based optimizer step
  int total_steps = 0;
  double loss = 0.0;
  double lr = 0.0;         // the learning rate this step used
  double grad_norm = 0.0;  // global norm before clipping
  int64_t tokens = 0;      // non-padding tokens seen so far
  double tokens_per_s = 0.0;
  double elapsed_s = 0.0;  // since training started (after loading)
  double epoch = 0.0;      // fractional epochs done
  // The most bytes this rank's device buffers have held at once so far (metrics.jsonl only).
  int64_t peak_memory_bytes = 0;
};

// "1:02:03" or "2:03" for a number of seconds.
std::string FormatDuration(double seconds);

class MetricsLog {
 public:
  // Starts output_dir/metrics.jsonl afresh (a previous file is replaced).
  static Result<MetricsLog> Create(Env* env, const std::string& output_dir);
  // Continues output_dir/metrics.jsonl after a resume at `step`: keeps the lines of steps up to
  // it and drops later ones (logged by the run that was stopped after its last checkpoint).
  static Result<MetricsLog> Resume(Env* env, const std::string& output_dir, int step);

  Status Append(const StepMetrics& m);
  const std::string& path() const { return path_; }

 private:
  MetricsLog(Env* env, std::string path) : env_(env), path_(std::move(path)) {}
  Env* env_;
  std::string path_;
};

class ProgressDisplay {
 public:
  ProgressDisplay(std::ostream* out, bool is_tty, int logging_steps = 1)
      : out_(out), is_tty_(is_tty), logging_steps_(logging_steps < 1 ? 1 : logging_steps) {}

  // The text of the line for `m` (no carriage return or newline).
  static std::string Line(const StepMetrics& m);

  void Update(const StepMetrics& m);
  // Prints a message on its own line without breaking an in-place progress line.
  void Note(const std::string& message);
  // Ends an in-place line with a newline.
  void Finish();

 private:
  std::ostream* out_;
  bool is_tty_;
  int logging_steps_;
  bool line_open_ = false;
};

}  // namespace air::engine::train
