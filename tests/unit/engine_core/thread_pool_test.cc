// Tests for ThreadPool: every index runs exactly once per call, chunks are the same for a
// thread count, and calls keep working across the spin and the sleep phases of the workers
// (back to back, after the workers went to sleep, and with more threads than cores); a
// balanced call runs whole pieces and lets the other threads finish the share of one that is
// held up.
#include "engine/backend/cpu/thread_pool.h"

#include <gtest/gtest.h>
#include <sched.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <thread>
#include <vector>

namespace air::engine {
namespace {

// Runs one ParallelFor over n items and checks that each ran once, on a valid thread index.
void CheckOneCall(ThreadPool& pool, int64_t n, int64_t min_chunk) {
  std::vector<std::atomic<int>> hits(static_cast<size_t>(n));
  std::atomic<bool> bad_thread{false};
  pool.ParallelFor(n, min_chunk, [&](int64_t begin, int64_t end, int thread) {
    if (thread < 0 || thread >= pool.num_threads()) bad_thread = true;
    for (int64_t i = begin; i < end; ++i) hits[static_cast<size_t>(i)].fetch_add(1);
  });
  EXPECT_FALSE(bad_thread);
  for (int64_t i = 0; i < n; ++i) ASSERT_EQ(hits[static_cast<size_t>(i)].load(), 1) << i;
}

TEST(ThreadPool, EveryIndexOnceOverManyBackToBackCalls) {
  for (int threads : {1, 2, 3, 8}) {
    ThreadPool pool(threads);
    for (int call = 0; call < 2000; ++call) CheckOneCall(pool, 1 + call % 37, 1);
  }
}

TEST(ThreadPool, CallsAfterTheWorkersSleptStillRun) {
  ThreadPool pool(3);
  for (int call = 0; call < 5; ++call) {
    std::this_thread::sleep_for(std::chrono::milliseconds(5));  // past the spin: workers sleep
    CheckOneCall(pool, 100, 1);
  }
}

TEST(ThreadPool, MoreThreadsThanCpusSleepInsteadOfSpinning) {
  // Pins this thread (and so the pool's workers, which inherit it) to one CPU. Spinning threads
  // there would make each call wait out the spins of the threads sharing the core (about 0.9 ms
  // per call with 16 threads, against about 40 us sleeping at once), so such a pool never spins;
  // a pool that fits the CPUs does.
  cpu_set_t all, one;
  ASSERT_EQ(sched_getaffinity(0, sizeof(all), &all), 0);
  int cpu = 0;
  while (cpu < CPU_SETSIZE && !CPU_ISSET(cpu, &all)) ++cpu;
  CPU_ZERO(&one);
  CPU_SET(cpu, &one);
  ASSERT_EQ(sched_setaffinity(0, sizeof(one), &one), 0);
  {
    ThreadPool crowded(16);
    EXPECT_FALSE(crowded.spins());
    for (int call = 0; call < 1000; ++call) CheckOneCall(crowded, 16, 1);
    ThreadPool fits(1);
    EXPECT_TRUE(fits.spins());
  }
  sched_setaffinity(0, sizeof(all), &all);
  ThreadPool two(2);
  EXPECT_EQ(two.spins(), CPU_COUNT(&all) >= 2);
}

TEST(ThreadPool, ChunksAreFixedForAThreadCount) {
  ThreadPool pool(3);
  auto chunks = [&] {
    std::vector<std::pair<int64_t, int64_t>> seen(3, {-1, -1});
    pool.ParallelFor(10, 1, [&](int64_t b, int64_t e, int t) {
      seen[static_cast<size_t>(t)] = {b, e};
    });
    return seen;
  };
  const auto first = chunks();
  EXPECT_EQ(first, (std::vector<std::pair<int64_t, int64_t>>{{0, 3}, {3, 6}, {6, 10}}));
  for (int i = 0; i < 100; ++i) EXPECT_EQ(chunks(), first);
}

TEST(ThreadPool, SmallWorkRunsInlineAndPoolsCanBeDestroyedAtOnce) {
  ThreadPool pool(4);
  int calls = 0;
  pool.ParallelFor(5, 100, [&](int64_t b, int64_t e, int t) {
    EXPECT_EQ(t, 0);
    EXPECT_EQ(b, 0);
    EXPECT_EQ(e, 5);
    ++calls;
  });
  EXPECT_EQ(calls, 1);
  for (int i = 0; i < 50; ++i) ThreadPool(3);  // workers still spinning when it is destroyed
}

// Runs one ParallelForBalanced over n items in pieces of `grain`: each item once, every call
// one whole piece (or the whole range inline), on a valid thread index.
void CheckOneBalancedCall(ThreadPool& pool, int64_t n, int64_t grain) {
  std::vector<std::atomic<int>> hits(static_cast<size_t>(n));
  std::atomic<bool> bad_piece{false}, bad_thread{false};
  std::atomic<int> calls{0};
  pool.ParallelForBalanced(n, grain, [&](int64_t begin, int64_t end, int thread) {
    ++calls;
    if (thread < 0 || thread >= pool.num_threads()) bad_thread = true;
    const bool whole_range = begin == 0 && end == n;
    if (!whole_range && (begin % grain != 0 || end != std::min(n, begin + grain))) {
      bad_piece = true;
    }
    for (int64_t i = begin; i < end; ++i) hits[static_cast<size_t>(i)].fetch_add(1);
  });
  EXPECT_FALSE(bad_thread);
  EXPECT_FALSE(bad_piece) << "n " << n << " grain " << grain;
  for (int64_t i = 0; i < n; ++i) ASSERT_EQ(hits[static_cast<size_t>(i)].load(), 1) << i;
}

TEST(ThreadPool, BalancedRunsEveryIndexOnceInWholePieces) {
  for (int threads : {1, 2, 3, 8}) {
    ThreadPool pool(threads);
    for (int call = 0; call < 2000; ++call) {
      CheckOneBalancedCall(pool, 1 + call % 53, 1 + call % 5);
      if (call % 2 == 0) CheckOneCall(pool, 1 + call % 37, 1);  // static calls in between
    }
  }
}

// The thread that runs piece 0 waits there until every other piece has run: the others must
// take the rest of its share. (A static split would leave that rest to it: the wait would end
// at its deadline and the test fail.)
TEST(ThreadPool, BalancedOthersFinishTheShareOfAThreadHeldUp) {
  for (int threads : {2, 3, 4}) {
    ThreadPool pool(threads);
    for (int call = 0; call < 20; ++call) {
      const int64_t n = 40;
      std::atomic<int> done{0};
      std::vector<int> ran_on(static_cast<size_t>(n), -1);
      bool finished_in_time = true;
      pool.ParallelForBalanced(n, 1, [&](int64_t begin, int64_t, int thread) {
        ran_on[static_cast<size_t>(begin)] = thread;
        if (begin == 0) {
          const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(30);
          while (done.load() < n - 1) {
            if (std::chrono::steady_clock::now() > deadline) {
              finished_in_time = false;
              break;
            }
            std::this_thread::yield();
          }
        }
        done.fetch_add(1);
      });
      ASSERT_TRUE(finished_in_time) << threads << " threads: the held share was not taken over";
      EXPECT_EQ(done.load(), n);
      for (int64_t i = 0; i < n; ++i) EXPECT_NE(ran_on[static_cast<size_t>(i)], -1) << i;
    }
  }
}

}  // namespace
}  // namespace air::engine
