#include "daemon/compile_queue.h"

namespace kiln {

CompileQueue::CompileQueue(int threads) {
  for (int i = 0; i < threads; ++i) threads_.emplace_back([this] { RunLoop(); });
}

CompileQueue::~CompileQueue() {
  Shutdown();
  for (std::thread& thread : threads_) thread.join();
}

void CompileQueue::Shutdown() {
  // Jobs not yet started are refused now, so that shutdown waits only for
  // the compiles already running.
  std::vector<Callback> refused;
  {
    absl::MutexLock lock(&mutex_);
    shutting_down_ = true;
    for (const std::string& key : queue_) {
      for (Callback& waiter : jobs_[key].waiters) refused.push_back(std::move(waiter));
      jobs_.erase(key);
    }
    queue_.clear();
  }
  for (Callback& waiter : refused) waiter(absl::UnavailableError("kilnd is shutting down"));
}

bool CompileQueue::Submit(const std::string& key, Work work, Callback done) {
  {
    absl::MutexLock lock(&mutex_);
    if (!shutting_down_) {
      auto [it, inserted] = jobs_.try_emplace(key);
      it->second.waiters.push_back(std::move(done));
      if (!inserted) return true;
      it->second.work = std::move(work);
      queue_.push_back(key);
      return false;
    }
  }
  done(absl::UnavailableError("kilnd is shutting down"));
  return false;
}

void CompileQueue::RunLoop() {
  while (true) {
    std::string key;
    Work work;
    {
      absl::MutexLock lock(&mutex_);
      mutex_.Await(absl::Condition(
          +[](CompileQueue* queue) ABSL_EXCLUSIVE_LOCKS_REQUIRED(queue->mutex_) {
            return !queue->queue_.empty() || queue->shutting_down_;
          },
          this));
      if (queue_.empty()) return;  // shutting down and drained
      key = std::move(queue_.front());
      queue_.pop_front();
      work = std::move(jobs_[key].work);
    }
    Result result = work();
    std::vector<Callback> waiters;
    {
      // Removing the job under the lock means a request arriving from now on
      // starts a new job, which will find the stored artifact.
      absl::MutexLock lock(&mutex_);
      waiters = std::move(jobs_[key].waiters);
      jobs_.erase(key);
    }
    for (Callback& waiter : waiters) waiter(result);
  }
}

}  // namespace kiln
