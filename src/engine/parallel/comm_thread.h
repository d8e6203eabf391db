// CommThread: the one thread that talks to a ProcessGroup during training, so that
// communication overlaps compute (FSDP prefetches the next unit's all-gather and
// reduce-scatters a unit's gradients while the compute thread runs the neighbouring unit).
//
// Tasks run one at a time in submission order, which is what keeps every rank's collectives in
// the same order: each rank's compute thread submits the same sequence. Submit returns a Ticket;
// Wait blocks until that task has finished and returns its Status. With overlap off (the
// `inline_tasks` option) Submit runs the task on the caller's thread, which gives the same
// results without a second thread (a debugging aid and the reference for the overlap figures).
//
// It also measures: busy_seconds is the time spent inside tasks (communication), wait_seconds
// the time the compute thread spent blocked in Wait — the communication overlap did not hide.
// Thread safety: Submit and Wait are called by one compute thread; tasks run on the comm thread
// (they must not touch what the compute thread is using until their ticket is waited for).
#pragma once

#include <condition_variable>
#include <cstdint>
#include <deque>
#include <functional>
#include <mutex>
#include <thread>

#include "base/status.h"

namespace air::engine::parallel {

class CommThread {
 public:
  using Ticket = int64_t;  // 1, 2, ... in submission order; 0 means "nothing to wait for"

  explicit CommThread(bool inline_tasks = false);
  ~CommThread();  // runs what is queued, then joins
  CommThread(const CommThread&) = delete;
  CommThread& operator=(const CommThread&) = delete;

  Ticket Submit(std::function<Status()> task);
  // The status of task `ticket` (Ok for 0). After a failed task every later task is skipped and
  // reports the first failure: a broken group stays broken.
  Status Wait(Ticket ticket);
  // Submit and wait.
  Status Run(std::function<Status()> task) { return Wait(Submit(std::move(task))); }

  double busy_seconds() const;
  double wait_seconds() const { return wait_seconds_; }
  void ResetTimers();

 private:
  void Loop();

  const bool inline_;
  mutable std::mutex mu_;
  std::condition_variable work_cv_, done_cv_;
  std::deque<std::pair<Ticket, std::function<Status()>>> queue_;
  Ticket submitted_ = 0;
  Ticket finished_ = 0;
  Status first_error_;
  bool stopping_ = false;
  double busy_seconds_ = 0.0;  // guarded by mu_
  double wait_seconds_ = 0.0;  // the compute thread's only
  std::thread thread_;
};

}  // namespace air::engine::parallel
