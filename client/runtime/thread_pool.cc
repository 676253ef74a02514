#include "client/runtime/thread_pool.h"

#include <pthread.h>

#include <algorithm>

#include "absl/time/clock.h"

namespace kiln {
namespace {

thread_local bool inside_pool_loop = false;

}  // namespace

ThreadPool::ThreadPool(int threads) : threads_(std::max(1, threads)) { RegisterForFork(); }

ThreadPool::~ThreadPool() {
  UnregisterForFork();
  {
    absl::MutexLock lock(&mutex_);
    stopping_ = true;
  }
  absl::MutexLock lock(&call_mutex_);
  for (std::thread& worker : workers_) worker.join();
}

// Around fork(): no loop in flight and no workers at all (a worker waiting
// on mutex_ would stay queued on it in the child, where it does not
// exist); StartWorkers makes new ones on the next loop, on either side.
void ThreadPool::BeforeFork() ABSL_NO_THREAD_SAFETY_ANALYSIS {
  call_mutex_.Lock();
  {
    absl::MutexLock lock(&mutex_);
    stopping_ = true;
  }
  for (std::thread& worker : workers_) worker.join();
  workers_.clear();
  absl::MutexLock lock(&mutex_);
  stopping_ = false;
}

void ThreadPool::AfterForkInParent() ABSL_NO_THREAD_SAFETY_ANALYSIS { call_mutex_.Unlock(); }

void ThreadPool::AfterForkInChild() ABSL_NO_THREAD_SAFETY_ANALYSIS { call_mutex_.Unlock(); }

void ThreadPool::StartWorkers() {
  while (static_cast<int>(workers_.size()) + 1 < threads_) {
    workers_.emplace_back([this] { WorkerLoop(); });
    pthread_setname_np(workers_.back().native_handle(), "kiln-pool");
  }
}

void ThreadPool::ParallelFor(int64_t n, int64_t grain, Body body) {
  if (n <= 0) return;
  grain = std::max<int64_t>(grain, 1);
  if (const Loops* loops = loops_.load(std::memory_order_acquire); loops != nullptr) {
    loops->parallel_for(n, grain, body);
    return;
  }
  const int64_t chunks = std::min<int64_t>(threads(), (n + grain - 1) / grain);
  if (chunks <= 1 || inside_pool_loop || !call_mutex_.TryLock()) {
    // Serial: small work, a nested loop, or another thread's loop holds the
    // workers (waiting for it would only idle this thread).
    body(0, n);
    return;
  }
  StartWorkers();
  {
    // As many chunks as it takes at that length: never an empty one.
    const int64_t chunk = (n + chunks - 1) / chunks;
    absl::MutexLock lock(&mutex_);
    batch_ = Batch{&body, n, chunk, 0, (n + chunk - 1) / chunk, 0};
    ++generation_;
    published_.store(generation_, std::memory_order_release);
  }
  // The caller takes chunks too, then waits for the rest.
  inside_pool_loop = true;
  while (true) {
    int64_t begin;
    {
      absl::MutexLock lock(&mutex_);
      if (batch_.next >= batch_.chunks) break;
      begin = batch_.next++ * batch_.chunk;
    }
    body(begin, std::min(n, begin + batch_.chunk));
    absl::MutexLock lock(&mutex_);
    ++batch_.finished;
  }
  inside_pool_loop = false;
  {
    absl::MutexLock lock(&mutex_);
    mutex_.Await(
        absl::Condition(+[](Batch* batch) { return batch->finished == batch->chunks; }, &batch_));
    batch_.body = nullptr;
  }
  call_mutex_.Unlock();
}

void ThreadPool::WorkerLoop() {
  inside_pool_loop = true;
  uint64_t seen = 0;
  while (true) {
    // Spin before sleeping: a sleeping worker takes tens of microseconds to
    // wake on a VM, by which time the caller has run every chunk itself
    // (mlp's 64x1024x256 GEMM split in two took as long as unsplit), and
    // the loops of one Run come microseconds apart.
    const int64_t spin_until = absl::GetCurrentTimeNanos() + kSpinNanoseconds;
    while (published_.load(std::memory_order_acquire) == seen &&
           absl::GetCurrentTimeNanos() < spin_until) {
#if defined(__x86_64__) || defined(__i386__)
      __builtin_ia32_pause();
#endif
    }
    const Body* body;
    int64_t begin, end;
    {
      absl::MutexLock lock(&mutex_);
      auto news = [&]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mutex_) {
        return stopping_ || generation_ != seen;
      };
      mutex_.Await(absl::Condition(&news));
      if (stopping_) return;
      if (batch_.body == nullptr || batch_.next >= batch_.chunks) {
        seen = generation_;  // the caller took every chunk
        continue;
      }
      body = batch_.body;
      begin = batch_.next++ * batch_.chunk;
      end = std::min(batch_.n, begin + batch_.chunk);
      if (batch_.next >= batch_.chunks) seen = generation_;
    }
    (*body)(begin, end);
    absl::MutexLock lock(&mutex_);
    ++batch_.finished;
  }
}

}  // namespace kiln
