// metrics.jsonl and the progress line (see step_metrics.h).
#include "engine/train/step_metrics.h"

#include <fmt/format.h>

#include <cmath>
#include <nlohmann/json.hpp>

namespace air::engine::train {

std::string FormatDuration(double seconds) {
  if (!std::isfinite(seconds) || seconds < 0) return "?";
  int64_t s = static_cast<int64_t>(std::llround(seconds));
  int64_t h = s / 3600, m = (s / 60) % 60, sec = s % 60;
  if (h > 0) return fmt::format("{}:{:02}:{:02}", h, m, sec);
  return fmt::format("{}:{:02}", m, sec);
}

Result<MetricsLog> MetricsLog::Create(Env* env, const std::string& output_dir) {
  AIR_RETURN_IF_ERROR(env->CreateDirs(output_dir));
  std::string path = output_dir + "/metrics.jsonl";
  AIR_RETURN_IF_ERROR(env->WriteFileAtomic(path, ""));
  return MetricsLog(env, path);
}

Result<MetricsLog> MetricsLog::Resume(Env* env, const std::string& output_dir, int step) {
  const std::string path = output_dir + "/metrics.jsonl";
  std::string kept;
  if (env->FileExists(path)) {
    AIR_ASSIGN_OR_RETURN(std::string text, env->ReadFile(path));
    size_t start = 0;
    while (start < text.size()) {
      size_t end = text.find('\n', start);
      if (end == std::string::npos) break;  // a torn last line is dropped
      const std::string line = text.substr(start, end - start);
      nlohmann::json j = nlohmann::json::parse(line, nullptr, false);
      if (j.is_object() && j.value("step", 0) <= step) kept += line + "\n";
      start = end + 1;
    }
  }
  AIR_RETURN_IF_ERROR(env->WriteFileAtomic(path, kept));
  return MetricsLog(env, path);
}

Status MetricsLog::Append(const StepMetrics& m) {
  nlohmann::ordered_json j;
  j["step"] = m.step;
  j["loss"] = m.loss;
  j["lr"] = m.lr;
  j["grad_norm"] = m.grad_norm;
  j["tokens"] = m.tokens;
  j["tokens_per_s"] = m.tokens_per_s;
  j["elapsed_s"] = m.elapsed_s;
  j["epoch"] = m.epoch;
  j["peak_memory_bytes"] = m.peak_memory_bytes;
  return env_->AppendToFile(path_, j.dump() + "\n");
}

std::string ProgressDisplay::Line(const StepMetrics& m) {
  double eta = m.step > 0 ? m.elapsed_s / m.step * (m.total_steps - m.step) : NAN;
  int width = static_cast<int>(std::to_string(m.total_steps).size());
  return fmt::format(
      "step {:>{}}/{} | loss {:.4f} | lr {:.3e} | grad norm {:.3f} | {:.0f} tok/s | "
      "elapsed {} | ETA {}",
      m.step, width, m.total_steps, m.loss, m.lr, m.grad_norm, m.tokens_per_s,
      FormatDuration(m.elapsed_s), FormatDuration(eta));
}

void ProgressDisplay::Update(const StepMetrics& m) {
  if (is_tty_) {
    *out_ << '\r' << Line(m) << "\x1b[K" << std::flush;
    line_open_ = true;
  } else if (m.step % logging_steps_ == 0 || m.step == m.total_steps) {
    *out_ << Line(m) << '\n' << std::flush;
  }
}

void ProgressDisplay::Note(const std::string& message) {
  Finish();
  *out_ << message << '\n' << std::flush;
}

void ProgressDisplay::Finish() {
  if (line_open_) {
    *out_ << '\n' << std::flush;
    line_open_ = false;
  }
}

}  // namespace air::engine::train
