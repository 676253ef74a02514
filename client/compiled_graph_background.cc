// CompiledGraph's background thread (queued exact specializations, idle
// closing) and what fork() does to it.
#include <malloc.h>

#include <algorithm>

#include "client/compiled_graph.h"
#include "client/scratch.h"

namespace kiln {

void CompiledGraph::set_close_after(absl::Duration idle) {
  absl::MutexLock lock(&background_mutex_);
  close_after_ = idle;
  if (idle > absl::ZeroDuration()) StartBackgroundThread();
}

int CompiledGraph::CloseIdle() {
  std::vector<std::unique_ptr<Entry>> freed;  // dlclosed outside the lock
  int closed = 0;
  {
    absl::MutexLock lock(&mutex_);
    for (auto it = entries_.begin(); it != entries_.end();) {
      Entry& entry = **it;
      if (entry.used.exchange(false, std::memory_order_relaxed)) {
        ++it;
        continue;
      }
      if (entry.guards.num_symbols() == 0) {
        std::vector<const Entry*>& filed = static_by_sizes_[entry.sizes_hash];
        filed.erase(std::find(filed.begin(), filed.end(), &entry));
        if (filed.empty()) static_by_sizes_.erase(entry.sizes_hash);
        if (entry.source != nullptr) closed_[entry.sizes_hash] = {entry.source, entry.warmed};
      }
      if (given_ == &entry) given_ = nullptr;
      retired_.push_back(std::move(*it));
      it = entries_.erase(it);
      ++closed;
    }
    // A call finds an entry and marks it in flight under this mutex: once
    // out of the tables, an entry at zero has no call left.
    for (auto it = retired_.begin(); it != retired_.end();) {
      if ((*it)->in_flight.load(std::memory_order_acquire) == 0) {
        freed.push_back(std::move(*it));
        it = retired_.erase(it);
      } else {
        ++it;
      }
    }
  }
  TrimScratch();
  if (!freed.empty()) {
    freed.clear();
    malloc_trim(0);  // what the closed entries held, back to the system
  }
  return closed;
}

// Around fork(): the background thread stopped (it may finish a compile
// first: a thread waiting on background_mutex_ would stay queued on it in
// the child) and both locks held; it starts again on both sides when it
// has work.
void CompiledGraph::BeforeFork() ABSL_NO_THREAD_SAFETY_ANALYSIS {
  std::thread background;
  {
    absl::MutexLock lock(&background_mutex_);
    stopping_ = true;
    background = std::move(background_);
  }
  if (background.joinable()) background.join();
  mutex_.Lock();
  background_mutex_.Lock();
  stopping_ = false;
}

void CompiledGraph::AfterForkInParent() ABSL_NO_THREAD_SAFETY_ANALYSIS {
  if (!background_queue_.empty() || close_after_ > absl::ZeroDuration()) StartBackgroundThread();
  background_mutex_.Unlock();
  mutex_.Unlock();
}

void CompiledGraph::AfterForkInChild() ABSL_NO_THREAD_SAFETY_ANALYSIS { AfterForkInParent(); }

void CompiledGraph::StartBackgroundThread() {
  if (!background_.joinable() && !stopping_)
    background_ = std::thread([this] { BackgroundLoop(); });
}

void CompiledGraph::BackgroundLoop() {
  absl::MutexLock lock(&background_mutex_);
  absl::Time next_sweep = absl::InfiniteFuture();
  while (!stopping_) {
    if (!background_queue_.empty()) {
      const std::vector<std::vector<int64_t>> sizes = std::move(background_queue_.front());
      background_queue_.pop_front();
      background_mutex_.Unlock();
      // On failure the symbolic entry goes on serving these sizes.
      SpecializeExactly(sizes).IgnoreError();
      background_mutex_.Lock();
      continue;
    }
    if (close_after_ > absl::ZeroDuration()) {
      if (next_sweep == absl::InfiniteFuture()) next_sweep = absl::Now() + close_after_;
      if (absl::Now() >= next_sweep) {
        background_mutex_.Unlock();
        CloseIdle();
        background_mutex_.Lock();
        next_sweep = absl::Now() + close_after_;
        continue;
      }
    } else {
      next_sweep = absl::InfiniteFuture();
    }
    auto wake = [this]() ABSL_SHARED_LOCKS_REQUIRED(background_mutex_) {
      return stopping_ || !background_queue_.empty();
    };
    background_mutex_.AwaitWithDeadline(absl::Condition(&wake), next_sweep);
  }
}

}  // namespace kiln
