// Progress figures from a run's steps, attempts and throughput.
#include "runtime/progress.h"

#include <fmt/format.h>

#include <algorithm>
#include <cctype>

#include "runtime/run_view.h"

namespace air::runtime {
namespace {

using nlohmann::json;

template <typename T>
json OrNull(const std::optional<T>& v) {
  return v ? json(*v) : json(nullptr);
}

// Reads decimal digits at `pos` (skipping spaces first); false when there are none.
bool ReadNumber(std::string_view s, size_t* pos, int64_t* out) {
  while (*pos < s.size() && s[*pos] == ' ') ++*pos;
  const size_t start = *pos;
  int64_t v = 0;
  while (*pos < s.size() && std::isdigit(static_cast<unsigned char>(s[*pos])) &&
         *pos - start < 15) {
    v = v * 10 + (s[*pos] - '0');
    ++*pos;
  }
  if (*pos == start) return false;
  *out = v;
  return true;
}

}  // namespace

RunProgress ComputeProgress(const ProgressInputs& in) {
  RunProgress p;
  for (const auto& a : in.attempts) {
    const int64_t end = a.ended_us.value_or(in.now_us);
    const double hours = static_cast<double>(std::max<int64_t>(0, end - a.started_us)) / 3.6e9;
    p.gpu_hours += hours * a.num_nodes * in.accelerators_per_node;
  }
  if (!in.attempts.empty())
    p.accelerators = in.attempts.back().num_nodes * in.accelerators_per_node;
  p.tokens_per_s = in.tokens_per_s;
  p.mfu = in.mfu;
  p.max_steps = in.max_steps;
  p.max_steps_source = in.max_steps_source;
  if (!in.last_step) return p;
  p.step = in.last_step->step;
  p.step_source = in.step_source;
  if (p.max_steps && *p.max_steps > 0) {
    p.percent = std::min(100.0, 100.0 * static_cast<double>(*p.step) / *p.max_steps);
  }
  if (in.first_step && !in.attempts.empty()) {
    p.time_to_first_step_s =
        static_cast<double>(in.first_step->time_us - in.attempts.back().started_us) / 1e6;
    const int64_t steps = in.last_step->step - in.first_step->step;
    const int64_t took_us = in.last_step->time_us - in.first_step->time_us;
    if (steps > 0 && took_us > 0) p.steps_per_s = steps / (static_cast<double>(took_us) / 1e6);
  }
  if (in.live && p.steps_per_s && p.max_steps && *p.max_steps >= *p.step) {
    // At the attempt's average pace up to now (as tqdm): a run that stalls after its newest
    // step sees its ETA grow, not run down to zero.
    const double steps = static_cast<double>(in.last_step->step - in.first_step->step);
    const double elapsed_s =
        static_cast<double>(std::max(in.now_us, in.last_step->time_us) - in.first_step->time_us) /
        1e6;
    p.eta_s = (*p.max_steps - *p.step) * elapsed_s / steps;
  }
  return p;
}

json ProgressJson(const RunProgress& p) {
  return {
      {"gpu_hours", p.gpu_hours},
      {"accelerators", p.accelerators},
      {"step", OrNull(p.step)},
      {"max_steps", OrNull(p.max_steps)},
      {"percent", OrNull(p.percent)},
      {"steps_per_s", OrNull(p.steps_per_s)},
      {"eta_s", OrNull(p.eta_s)},
      {"time_to_first_step_s", OrNull(p.time_to_first_step_s)},
      {"tokens_per_s", OrNull(p.tokens_per_s)},
      {"mfu", OrNull(p.mfu)},
      {"step_source", p.step_source.empty() ? json(nullptr) : json(p.step_source)},
      {"max_steps_source", p.max_steps_source.empty() ? json(nullptr) : json(p.max_steps_source)}};
}

std::vector<std::pair<std::string, std::string>> ProgressRows(const RunProgress& p) {
  std::vector<std::pair<std::string, std::string>> rows;
  auto seconds = [](double s) { return FormatDuration(static_cast<int64_t>(s * 1e6)); };
  if (p.step) {
    std::string text = p.max_steps ? fmt::format("step {}/{}", *p.step, *p.max_steps)
                                   : fmt::format("step {}", *p.step);
    if (p.percent) text += fmt::format(" ({:.0f}%)", *p.percent);
    if (p.steps_per_s) text += fmt::format(", {:.3g} steps/s", *p.steps_per_s);
    if (p.eta_s) text += ", ETA " + seconds(*p.eta_s);
    rows.emplace_back("progress", text);
  }
  if (p.time_to_first_step_s)
    rows.emplace_back("first step",
                      seconds(*p.time_to_first_step_s) + " after the attempt started");
  if (p.tokens_per_s || p.mfu) {
    std::string text = p.tokens_per_s ? fmt::format("{:.0f} tokens/s", *p.tokens_per_s) : "";
    if (p.mfu) text += fmt::format("{}MFU {:.1f}%", text.empty() ? "" : ", ", *p.mfu * 100);
    rows.emplace_back("throughput", text);
  }
  if (p.accelerators > 0 || p.gpu_hours > 0) {
    rows.emplace_back("gpu-hours",
                      fmt::format("{:.3f} ({} GPU{} in the latest attempt)", p.gpu_hours,
                                  p.accelerators, p.accelerators == 1 ? "" : "s"));
  }
  return rows;
}

std::optional<StepOfTotal> FindStepOfTotal(std::string_view line) {
  for (size_t at = line.find("step"); at != std::string_view::npos;
       at = line.find("step", at + 4)) {
    // A word of its own: not "steps", "max_step", "global_step".
    if (at > 0 && (std::isalnum(static_cast<unsigned char>(line[at - 1])) || line[at - 1] == '_')) {
      continue;
    }
    size_t pos = at + 4;
    if (pos < line.size() && (line[pos] == '=' || line[pos] == ':')) ++pos;
    if (pos >= line.size() ||
        !(line[pos] == ' ' || std::isdigit(static_cast<unsigned char>(line[pos])))) {
      continue;
    }
    StepOfTotal out;
    if (!ReadNumber(line, &pos, &out.step)) continue;
    while (pos < line.size() && line[pos] == ' ') ++pos;
    if (pos >= line.size() || line[pos] != '/') continue;
    ++pos;
    if (!ReadNumber(line, &pos, &out.total) || out.total <= 0) continue;
    return out;
  }
  return std::nullopt;
}

}  // namespace air::runtime
