// The timing of bench/gemm's tool (air_gemm_bench): a clock that other load on the machine does
// not inflate, and the best GFLOP/s of a few windows after a warm-up call (other load only ever
// slows a window down). Shared by gemm_bench.cc, attention_bench.cc and rowwise_bench.cc.
// Thread safety: pure functions of their arguments.
#pragma once

#include <time.h>

#include <algorithm>
#include <chrono>
#include <functional>
#include <vector>

namespace air::bench {

// The clock the figures are taken on: the wall clock, or with one thread (--cpu-clock) the
// thread's CPU time, which other load on the machine does not inflate.
struct Clock {
  bool cpu_time;
  double Now() const {
    if (!cpu_time) {
      return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch())
          .count();
    }
    timespec t;
    clock_gettime(CLOCK_THREAD_CPUTIME_ID, &t);
    return static_cast<double>(t.tv_sec) + 1e-9 * static_cast<double>(t.tv_nsec);
  }
};

// The best GFLOP/s of each of `runs` over three 0.25 s windows, the runs' windows taken in
// turn (run 0, run 1, ..., run 0, ...) so that a change in other load hits them all alike.
inline std::vector<double> BestGflopsInterleaved(const Clock& clock, double flops,
                                                 const std::vector<std::function<void()>>& runs) {
  for (const auto& run : runs) run();  // warm-up: packing buffers, page faults, primitives
  std::vector<double> best(runs.size(), 0.0);
  for (int window = 0; window < 3; ++window) {
    for (size_t r = 0; r < runs.size(); ++r) {
      int reps = 0;
      double seconds = 0.0;
      const double start = clock.Now();
      while (seconds < 0.25) {
        runs[r]();
        ++reps;
        seconds = clock.Now() - start;
      }
      best[r] = std::max(best[r], flops * reps / seconds / 1e9);
    }
  }
  return best;
}

inline double BestGflops(const Clock& clock, double flops, const std::function<void()>& run) {
  run();  // warm-up: packing buffers, page faults, primitive creation
  double best = 0.0;
  for (int window = 0; window < 3; ++window) {
    int reps = 0;
    double seconds = 0.0;
    const double start = clock.Now();
    while (seconds < 0.25) {
      run();
      ++reps;
      seconds = clock.Now() - start;
    }
    best = std::max(best, flops * reps / seconds / 1e9);
  }
  return best;
}

// air_gemm_bench --attention (attention_bench.cc): argv holds argc shapes.
int AttentionMode(const Clock& clock, int threads, int argc, char** argv);
// air_gemm_bench --rowwise: the row-wise ops of a training step on one shape (rowwise_bench.cc).
int Rowwise(const Clock& clock, int threads, int argc, char** argv);

}  // namespace air::bench
