// ThreadPool implementation (see thread_pool.h).
#include "engine/ops/cpu/thread_pool.h"

#include <algorithm>
#include <cstdlib>
#include <string>

namespace air::engine {

namespace {

// Chunk c of `chunks` equal parts of [0, n).
void ChunkBounds(int64_t n, int chunks, int c, int64_t* begin, int64_t* end) {
  *begin = n * c / chunks;
  *end = n * (c + 1) / chunks;
}

}  // namespace

ThreadPool::ThreadPool(int num_threads) : num_threads_(std::max(1, num_threads)) {
  for (int i = 1; i < num_threads_; ++i) workers_.emplace_back([this, i] { WorkerLoop(i); });
}

ThreadPool::~ThreadPool() {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    stopping_ = true;
  }
  work_ready_.notify_all();
  for (auto& t : workers_) t.join();
}

void ThreadPool::WorkerLoop(int index) {
  uint64_t seen = 0;
  while (true) {
    const std::function<void(int64_t, int64_t, int)>* task;
    int64_t n;
    int chunks;
    {
      std::unique_lock<std::mutex> lock(mutex_);
      work_ready_.wait(lock, [&] { return stopping_ || generation_ != seen; });
      if (stopping_) return;
      seen = generation_;
      task = task_;
      n = task_n_;
      chunks = task_chunks_;
    }
    if (index < chunks) {
      int64_t begin, end;
      ChunkBounds(n, chunks, index, &begin, &end);
      (*task)(begin, end, index);
    }
    {
      std::lock_guard<std::mutex> lock(mutex_);
      if (--pending_ == 0) work_done_.notify_one();
    }
  }
}

void ThreadPool::ParallelFor(int64_t n, int64_t min_chunk,
                             const std::function<void(int64_t, int64_t, int)>& fn) {
  if (n <= 0) return;
  const int64_t by_size = std::max<int64_t>(1, n / std::max<int64_t>(1, min_chunk));
  const int chunks = static_cast<int>(std::min<int64_t>(num_threads_, by_size));
  if (chunks <= 1) {
    fn(0, n, 0);
    return;
  }
  std::lock_guard<std::mutex> call_lock(call_mutex_);
  {
    std::lock_guard<std::mutex> lock(mutex_);
    task_ = &fn;
    task_n_ = n;
    task_chunks_ = chunks;
    pending_ = num_threads_ - 1;
    ++generation_;
  }
  work_ready_.notify_all();
  int64_t begin, end;
  ChunkBounds(n, chunks, 0, &begin, &end);
  fn(begin, end, 0);
  std::unique_lock<std::mutex> lock(mutex_);
  work_done_.wait(lock, [&] { return pending_ == 0; });
  task_ = nullptr;
}

int DefaultThreadCount() {
  if (const char* env = std::getenv("AIR_NUM_THREADS")) {
    char* end = nullptr;
    const long v = std::strtol(env, &end, 10);
    if (end != env && *end == '\0' && v > 0 && v <= 1024) return static_cast<int>(v);
  }
  return std::max(1u, std::thread::hardware_concurrency());
}

}  // namespace air::engine
