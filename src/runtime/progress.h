// A run's progress (docs/state-machine.md, "Progress"): GPU-hours, the step it is at, its rate,
// the ETA, the time to its first step, tokens/s and MFU, computed from what the store and the
// tracking run hold (runtime/run_progress.h gathers it). Only what the run reports is shown:
// no ETA without a step count and a max_steps, no MFU unless air train logged it (it knows the
// device's peak), no GPU-hours for CPU shapes.
// Thread safety: pure functions.
#pragma once

#include <cstdint>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace air::runtime {

// One optimizer step as the run reported it, at a wall-clock time.
struct StepSample {
  int64_t step = 0;
  int64_t time_us = 0;
};

struct ProgressInputs {
  int64_t now_us = 0;
  bool live = false;              // the run has not ended
  int accelerators_per_node = 0;  // GPUs per node; 0 for CPU shapes
  struct Attempt {
    int64_t started_us = 0;
    std::optional<int64_t> ended_us;  // unset: still running
    int num_nodes = 0;
  };
  std::vector<Attempt> attempts;
  // The latest attempt's first and furthest step, and where they were read.
  std::optional<StepSample> first_step;
  std::optional<StepSample> last_step;
  std::string step_source;  // "metrics" or "log"
  std::optional<int64_t> max_steps;
  std::string max_steps_source;  // "param max_steps", "parameters.max_steps", "log", ...
  std::optional<double> tokens_per_s;
  std::optional<double> mfu;  // 0..1, as air train logs it
};

struct RunProgress {
  int accelerators = 0;  // of the latest attempt
  double gpu_hours = 0;  // sum over attempts of accelerators x wall time
  std::optional<int64_t> step;
  std::optional<int64_t> max_steps;
  std::string step_source;
  std::string max_steps_source;
  std::optional<double> percent;
  std::optional<double> steps_per_s;
  // Live runs only: the steps left at the attempt's average pace from its first step to now.
  std::optional<double> eta_s;
  std::optional<double> time_to_first_step_s;
  std::optional<double> tokens_per_s;
  std::optional<double> mfu;
};

RunProgress ComputeProgress(const ProgressInputs& in);

// {"gpu_hours", "accelerators", "step", "max_steps", "percent", "steps_per_s", "eta_s",
//  "time_to_first_step_s", "tokens_per_s", "mfu", "step_source", "max_steps_source"}: nulls
// where unknown.
nlohmann::json ProgressJson(const RunProgress& p);
// The rows `air get` shows: ("progress", "step 40/100 (40%), 2.1 steps/s, ETA 29 s"), ...
std::vector<std::pair<std::string, std::string>> ProgressRows(const RunProgress& p);

// A progress line's step and total: "step=12/100 loss=..." (the seed's train.py) or
// "step  12/100 | loss ..." (air train's progress line). nullopt when the line has none.
struct StepOfTotal {
  int64_t step = 0;
  int64_t total = 0;
};
std::optional<StepOfTotal> FindStepOfTotal(std::string_view line);

}  // namespace air::runtime
