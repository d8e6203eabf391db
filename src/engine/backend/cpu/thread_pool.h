// ThreadPool: a fixed set of worker threads that run one ParallelFor at a time (the fast CPU
// ops' only source of parallelism). The calling thread takes part, so a pool of n threads
// starts n - 1 workers. Work is split into contiguous, statically assigned chunks, which keeps
// results deterministic for a given thread count. A training step makes hundreds of short
// ParallelFor calls, so workers and the caller spin briefly (up to 50 us, adapted to how often
// spinning pays: thread_pool.cc) on the task counter before sleeping on a condition variable:
// waking a sleeping thread costs tens of microseconds, as much as a small task. A pool with more
// threads than the CPUs the process may run on does not spin: a spinning thread would keep the one
// it waits for off the core. ParallelForBalanced lets a thread that is done take the remaining
// pieces of another's share: on a shared host one thread is often slowed down by other load
// (on a 2-vCPU VM the caller of the static split waited for the other thread 6-8% of a bf16
// training run, 100-500 us per GEMM); only work whose items' results do not depend on the
// thread that computes them may use it, so its results keep their bits too.
//
// Thread safety: ParallelFor may be called from one thread at a time per pool (calls are
// serialized by a mutex); calling ParallelFor from inside a task of the same pool deadlocks
// and is forbidden — use the task's own loop instead.
#pragma once

#include <atomic>
#include <condition_variable>
#include <cstdint>
#include <functional>
#include <mutex>
#include <thread>
#include <vector>

namespace air::engine {

class ThreadPool {
 public:
  // num_threads >= 1 (including the caller).
  explicit ThreadPool(int num_threads);
  ~ThreadPool();
  ThreadPool(const ThreadPool&) = delete;
  ThreadPool& operator=(const ThreadPool&) = delete;

  int num_threads() const { return num_threads_; }
  // Whether waiting threads poll before they sleep: only when the pool has no more threads than
  // the CPUs the process may run on.
  bool spins() const { return spin_; }

  // Calls fn(begin, end, thread_index) over [0, n) split into at most num_threads contiguous
  // chunks of at least `min_chunk` items; returns when all are done. Small n runs inline.
  void ParallelFor(int64_t n, int64_t min_chunk,
                   const std::function<void(int64_t, int64_t, int)>& fn);

  // The same over [0, n) in pieces of `grain` items: each thread starts on its contiguous share
  // of the pieces (front first) and, when done, takes pieces from the back of the shares still
  // running, one at a time. For work whose items' results do not depend on the thread that
  // computes them or on the pieces (fn's thread_index picks scratch only; no per-thread
  // partial sums): results are then the same bits as ParallelFor's, while a thread that other
  // load slows down no longer holds up the call. fn may be called several times per thread.
  void ParallelForBalanced(int64_t n, int64_t grain,
                           const std::function<void(int64_t, int64_t, int)>& fn);

 private:
  // A thread's share of a balanced task's pieces: [front, back) packed as front << 32 | back,
  // so that its owner (front) and a thief (back) claim pieces with one compare-and-swap each.
  struct alignas(64) Share {
    std::atomic<uint64_t> range{0};
  };
  // Runs thread `index`'s part of the current task (task_ and its fields, set by the caller).
  void RunPart(int index);
  // Balanced tasks: claims the next piece of share `owner`, from its front when `index` owns
  // it, else from its back; false when the share is empty.
  bool ClaimPiece(int owner, int index, int64_t* piece);
  void Start(const std::function<void(int64_t, int64_t, int)>& fn, int64_t n, int chunks,
             int64_t grain);
  void WorkerLoop(int index);
  // Waits until `done()` holds (read with acquire ordering): spinning first, when spin_, for
  // the waiting thread's current budget, which it then adapts.
  template <typename Done>
  void SpinThenWait(std::condition_variable& cv, Done done, int64_t& spin_micros);

  const int num_threads_;
  const bool spin_;             // num_threads_ <= the CPUs in the process's affinity mask
  int64_t caller_spin_micros_;  // the spin budget of ParallelFor's caller (under call_mutex_)
  std::vector<std::thread> workers_;
  std::mutex call_mutex_;  // one ParallelFor at a time

  std::mutex mutex_;
  std::condition_variable work_ready_;
  std::condition_variable work_done_;
  const std::function<void(int64_t, int64_t, int)>* task_ = nullptr;
  int64_t task_n_ = 0;
  int task_chunks_ = 0;
  int64_t task_grain_ = 0;               // items per piece of a balanced task; 0: a static one
  std::vector<Share> shares_;            // a balanced task's, one per thread
  std::atomic<uint64_t> generation_{0};  // bumped (under mutex_) for each task
  std::atomic<int> pending_{0};          // workers still running the current task
  std::atomic<bool> stopping_{false};
};

// The thread count to use when none is given: AIR_NUM_THREADS if set to a positive integer,
// else the CPUs the process may run on (its affinity mask: taskset, cgroup cpusets; at least 1).
int DefaultThreadCount();

}  // namespace air::engine
