// LoadRunProgress: gathers a run's progress inputs (runtime/progress.h) from where the run
// reports them, and computes its progress for `air get`, `air list -o json` and the web UI:
//   - attempts (store): GPU-hours = GPUs of each attempt x its wall time (CPU shapes: 0);
//   - steps of the latest attempt: the workload's metrics on its tracking run in air's store
//     (any key but system/..., points logged since the attempt started: HF Trainer's MLflow
//     logging, air train, mlflow.log_metric(..., step=)); else progress lines in node 0's log
//     ("step=12/100", air train's "step  12/100 | ...");
//   - max_steps: the run's param max_steps (HF Trainer; > 0), total_steps (air train), HF
//     Trainer's `epoch` metric against its param num_train_epochs (training by epochs), the
//     spec's parameters.max_steps, else the total of a "step N/M" log line;
//   - tokens/s and MFU: the metrics tokens_per_s and mfu (air train logs them; mfu only where it
//     knows the device's peak).
// A run tracked on an external MLflow server gets its steps from its log only. Reads are
// bounded: node 0's log is read in its first 1 MiB and its last 200 lines.
// Thread safety: one thread (uses the caller's Store).
#pragma once

#include <cstdint>

#include "base/env.h"
#include "base/status.h"
#include "runtime/layout.h"
#include "runtime/progress.h"
#include "store/store.h"

namespace air::runtime {

// `what` kAttemptsOnly: GPU-hours alone, from the store's attempts (for long listings).
enum class ProgressDetail { kFull, kAttemptsOnly };
Result<RunProgress> LoadRunProgress(store::Store* store, const Layout& layout,
                                    const store::RunRecord& run, Env* env, int64_t now_us,
                                    ProgressDetail what = ProgressDetail::kFull);

}  // namespace air::runtime
