// ThreadPool implementation (see thread_pool.h).
#include "engine/backend/cpu/thread_pool.h"

#include <immintrin.h>

#include <algorithm>
#include <chrono>
#include <cstdlib>
#include <string>

#include "base/process_limits.h"

namespace air::engine {

namespace {

// Chunk c of `chunks` equal parts of [0, n).
void ChunkBounds(int64_t n, int chunks, int c, int64_t* begin, int64_t* end) {
  *begin = n * c / chunks;
  *end = n * (c + 1) / chunks;
}

// How long a thread polls for work (or for the end of a task) before it sleeps: each waiting
// thread keeps its own budget, doubled when the spin caught what it waited for and halved when
// it had to sleep anyway, within these bounds. On a quiet machine tasks follow each other
// within microseconds and the budget stays high; when another process takes a core, the
// thread waited for is off the CPU for a whole time slice and the spins shrink to the minimum.
constexpr int64_t kMaxSpinMicros = 50;
constexpr int64_t kMinSpinMicros = 4;

// How many CPUs this process may run on (its affinity mask, e.g. under taskset, or the node's
// share of the host under the local backend).
int UsableCpus() {
  const size_t allowed = AllowedCpus().size();
  if (allowed > 0) return static_cast<int>(allowed);
  return static_cast<int>(std::max(1u, std::thread::hardware_concurrency()));
}

}  // namespace

template <typename Done>
void ThreadPool::SpinThenWait(std::condition_variable& cv, Done done, int64_t& spin_micros) {
  if (spin_) {
    const auto until = std::chrono::steady_clock::now() + std::chrono::microseconds(spin_micros);
    while (!done()) {
      for (int i = 0; i < 64; ++i) _mm_pause();
      if (std::chrono::steady_clock::now() >= until) break;
    }
    if (done()) {
      spin_micros = std::min(kMaxSpinMicros, spin_micros * 2);
      return;
    }
    spin_micros = std::max(kMinSpinMicros, spin_micros / 2);
  }
  // The state a waiter checks is changed under mutex_, so no wake-up is lost.
  std::unique_lock<std::mutex> lock(mutex_);
  cv.wait(lock, done);
}

ThreadPool::ThreadPool(int num_threads)
    : num_threads_(std::max(1, num_threads)),
      spin_(num_threads_ <= UsableCpus()),
      caller_spin_micros_(kMaxSpinMicros),
      shares_(static_cast<size_t>(num_threads_)) {
  for (int i = 1; i < num_threads_; ++i) workers_.emplace_back([this, i] { WorkerLoop(i); });
}

ThreadPool::~ThreadPool() {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    stopping_.store(true, std::memory_order_release);
  }
  work_ready_.notify_all();
  for (auto& t : workers_) t.join();
}

void ThreadPool::WorkerLoop(int index) {
  uint64_t seen = 0;
  int64_t spin_micros = kMaxSpinMicros;
  auto new_task_or_stop = [&] {
    return stopping_.load(std::memory_order_acquire) ||
           generation_.load(std::memory_order_acquire) != seen;
  };
  while (true) {
    SpinThenWait(work_ready_, new_task_or_stop, spin_micros);
    if (stopping_.load(std::memory_order_acquire)) return;
    // The task's fields (and a balanced task's shares) were written before generation_ was
    // bumped (release).
    seen = generation_.load(std::memory_order_acquire);
    RunPart(index);
    if (pending_.fetch_sub(1, std::memory_order_acq_rel) == 1) {
      std::lock_guard<std::mutex> lock(mutex_);  // pairs with the caller's check under mutex_
      work_done_.notify_one();
    }
  }
}

void ThreadPool::ParallelFor(int64_t n, int64_t min_chunk,
                             const std::function<void(int64_t, int64_t, int)>& fn) {
  if (n <= 0) return;
  const int64_t by_size = std::max<int64_t>(1, n / std::max<int64_t>(1, min_chunk));
  const int chunks = static_cast<int>(std::min<int64_t>(num_threads_, by_size));
  if (chunks <= 1) return fn(0, n, 0);
  Start(fn, n, chunks, 0);
}

void ThreadPool::ParallelForBalanced(int64_t n, int64_t grain,
                                     const std::function<void(int64_t, int64_t, int)>& fn) {
  if (n <= 0) return;
  grain = std::max<int64_t>({1, grain, (n >> 31) + 1});  // piece indices fit in 32 bits
  const int64_t pieces = (n + grain - 1) / grain;
  const int chunks = static_cast<int>(std::min<int64_t>(num_threads_, pieces));
  if (chunks <= 1) return fn(0, n, 0);
  Start(fn, n, chunks, grain);
}

void ThreadPool::Start(const std::function<void(int64_t, int64_t, int)>& fn, int64_t n, int chunks,
                       int64_t grain) {
  std::lock_guard<std::mutex> call_lock(call_mutex_);
  {
    std::lock_guard<std::mutex> lock(mutex_);
    task_ = &fn;
    task_n_ = n;
    task_chunks_ = chunks;
    task_grain_ = grain;
    if (grain > 0) {
      const int64_t pieces = (n + grain - 1) / grain;
      for (int c = 0; c < num_threads_; ++c) {
        int64_t front = pieces, back = pieces;  // threads past `chunks` own nothing
        if (c < chunks) ChunkBounds(pieces, chunks, c, &front, &back);
        shares_[static_cast<size_t>(c)].range.store(
            static_cast<uint64_t>(front) << 32 | static_cast<uint64_t>(back),
            std::memory_order_relaxed);
      }
    }
    pending_.store(num_threads_ - 1, std::memory_order_relaxed);
    generation_.fetch_add(1, std::memory_order_release);
  }
  work_ready_.notify_all();
  RunPart(0);
  SpinThenWait(
      work_done_, [&] { return pending_.load(std::memory_order_acquire) == 0; },
      caller_spin_micros_);
}

bool ThreadPool::ClaimPiece(int owner, int index, int64_t* piece) {
  std::atomic<uint64_t>& range = shares_[static_cast<size_t>(owner)].range;
  uint64_t current = range.load(std::memory_order_relaxed);
  while (true) {
    const uint64_t front = current >> 32, back = current & 0xffffffffu;
    if (front >= back) return false;
    const bool own = owner == index;
    const uint64_t next = own ? (front + 1) << 32 | back : front << 32 | (back - 1);
    if (range.compare_exchange_weak(current, next, std::memory_order_relaxed)) {
      *piece = static_cast<int64_t>(own ? front : back - 1);
      return true;
    }
  }
}

void ThreadPool::RunPart(int index) {
  const int chunks = task_chunks_;
  if (task_grain_ == 0) {
    if (index >= chunks) return;
    int64_t begin, end;
    ChunkBounds(task_n_, chunks, index, &begin, &end);
    return (*task_)(begin, end, index);
  }
  const auto run = [&](int64_t piece) {
    const int64_t begin = piece * task_grain_;
    (*task_)(begin, std::min(task_n_, begin + task_grain_), index);
  };
  int64_t piece;
  while (ClaimPiece(index, index, &piece)) run(piece);
  for (int step = 1; step < num_threads_; ++step) {  // then the others', the next one first
    const int owner = (index + step) % num_threads_;
    while (ClaimPiece(owner, index, &piece)) run(piece);
  }
}

int DefaultThreadCount() {
  if (const char* env = std::getenv("AIR_NUM_THREADS")) {
    char* end = nullptr;
    const long v = std::strtol(env, &end, 10);
    if (end != env && *end == '\0' && v > 0 && v <= 1024) return static_cast<int>(v);
  }
  return UsableCpus();
}

}  // namespace air::engine
