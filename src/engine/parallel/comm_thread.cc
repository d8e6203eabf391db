// The communication thread (see comm_thread.h).
#include "engine/parallel/comm_thread.h"

#include <chrono>

namespace air::engine::parallel {
namespace {

double Now() {
  return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count();
}

}  // namespace

CommThread::CommThread(bool inline_tasks) : inline_(inline_tasks) {
  if (!inline_) thread_ = std::thread([this] { Loop(); });
}

CommThread::~CommThread() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    stopping_ = true;
  }
  work_cv_.notify_all();
  if (thread_.joinable()) thread_.join();
}

CommThread::Ticket CommThread::Submit(std::function<Status()> task) {
  if (inline_) {
    const double start = Now();
    Status s = first_error_.ok() ? task() : first_error_;
    std::lock_guard<std::mutex> lock(mu_);
    busy_seconds_ += Now() - start;
    if (!s.ok() && first_error_.ok()) first_error_ = s;
    finished_ = ++submitted_;
    return submitted_;
  }
  Ticket ticket;
  {
    std::lock_guard<std::mutex> lock(mu_);
    ticket = ++submitted_;
    queue_.emplace_back(ticket, std::move(task));
  }
  work_cv_.notify_one();
  return ticket;
}

Status CommThread::Wait(Ticket ticket) {
  if (ticket <= 0) return Status::Ok();
  const double start = Now();
  std::unique_lock<std::mutex> lock(mu_);
  done_cv_.wait(lock, [&] { return finished_ >= ticket; });
  wait_seconds_ += Now() - start;
  return first_error_;
}

double CommThread::busy_seconds() const {
  std::lock_guard<std::mutex> lock(mu_);
  return busy_seconds_;
}

void CommThread::ResetTimers() {
  std::lock_guard<std::mutex> lock(mu_);
  busy_seconds_ = 0.0;
  wait_seconds_ = 0.0;
}

void CommThread::Loop() {
  std::unique_lock<std::mutex> lock(mu_);
  while (true) {
    work_cv_.wait(lock, [&] { return stopping_ || !queue_.empty(); });
    if (queue_.empty()) return;  // stopping, nothing left
    auto [ticket, task] = std::move(queue_.front());
    queue_.pop_front();
    const bool skip = !first_error_.ok();
    lock.unlock();
    const double start = Now();
    Status s = skip ? Status::Ok() : task();
    const double busy = Now() - start;
    lock.lock();
    busy_seconds_ += busy;
    if (!s.ok() && first_error_.ok()) first_error_ = s;
    finished_ = ticket;
    done_cv_.notify_all();
  }
}

}  // namespace air::engine::parallel
