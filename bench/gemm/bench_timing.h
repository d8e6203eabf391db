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
// thread's CPU time, which other load on the machine does not inflate. With `cold` (--cold)
// every timed call starts with the caches emptied of its operands (EvictCaches, untimed), as a
// call inside a training step finds them: the step's other ops have passed over more data than
// the caches hold since its operands were last touched.
struct Clock {
  bool cpu_time;
  bool cold = false;
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

// Writes a buffer twice the size of this machine's last-level caches (64 MiB: 32 MiB of L3
// here), so that what a call reads next comes from memory.
inline void EvictCaches() {
  static std::vector<char> sweep(size_t{64} << 20);
  for (size_t i = 0; i < sweep.size(); i += 64) sweep[i] = static_cast<char>(sweep[i] + 1);
}

// GFLOP/s of one window of calls to run: 0.25 s of them (and at most 50 with --cold, whose
// untimed evictions take longer than the calls).
inline double WindowGflops(const Clock& clock, double flops, const std::function<void()>& run) {
  int reps = 0;
  double seconds = 0.0;
  if (!clock.cold) {
    const double start = clock.Now();
    while (seconds < 0.25) {
      run();
      ++reps;
      seconds = clock.Now() - start;
    }
    return flops * reps / seconds / 1e9;
  }
  while (seconds < 0.25 && reps < 50) {
    EvictCaches();
    const double start = clock.Now();
    run();
    seconds += clock.Now() - start;
    ++reps;
  }
  return flops * reps / seconds / 1e9;
}

// The best GFLOP/s of each of `runs` over three windows, the runs' windows taken in turn
// (run 0, run 1, ..., run 0, ...) so that a change in other load hits them all alike.
inline std::vector<double> BestGflopsInterleaved(const Clock& clock, double flops,
                                                 const std::vector<std::function<void()>>& runs) {
  for (const auto& run : runs) run();  // warm-up: packing buffers, page faults, primitives
  std::vector<double> best(runs.size(), 0.0);
  for (int window = 0; window < 3; ++window) {
    for (size_t r = 0; r < runs.size(); ++r) {
      best[r] = std::max(best[r], WindowGflops(clock, flops, runs[r]));
    }
  }
  return best;
}

inline double BestGflops(const Clock& clock, double flops, const std::function<void()>& run) {
  return BestGflopsInterleaved(clock, flops, {run})[0];
}

// air_gemm_bench --attention (attention_bench.cc): argv holds argc shapes.
int AttentionMode(const Clock& clock, int threads, int argc, char** argv);
// air_gemm_bench --rowwise: the row-wise ops of a training step on one shape (rowwise_bench.cc).
int Rowwise(const Clock& clock, int threads, int argc, char** argv);

}  // namespace air::bench
