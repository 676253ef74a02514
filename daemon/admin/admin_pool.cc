#include "daemon/admin/admin_pool.h"

#include <algorithm>
#include <utility>

namespace kiln {

AdminPool::AdminPool(Options options) : options_(options) {
  for (int i = 0; i < std::max(1, options_.threads); ++i) {
    threads_.emplace_back([this] { RunLoop(); });
  }
}

AdminPool::~AdminPool() {
  {
    absl::MutexLock lock(&mutex_);
    stopping_ = true;
  }
  for (std::thread& thread : threads_) thread.join();
}

bool AdminPool::Submit(absl::AnyInvocable<void() &&> job) {
  absl::MutexLock lock(&mutex_);
  if (static_cast<int>(queue_.size()) >= options_.max_queued) return false;
  queue_.push_back(std::move(job));
  return true;
}

void AdminPool::RunLoop() {
  while (true) {
    absl::AnyInvocable<void() &&> job;
    {
      absl::MutexLock lock(&mutex_);
      mutex_.Await(absl::Condition(
          +[](AdminPool* pool) ABSL_EXCLUSIVE_LOCKS_REQUIRED(pool->mutex_) {
            return pool->stopping_ || !pool->queue_.empty();
          },
          this));
      if (queue_.empty()) return;  // stopping, and nothing left to run
      job = std::move(queue_.front());
      queue_.pop_front();
    }
    std::move(job)();
  }
}

}  // namespace kiln
