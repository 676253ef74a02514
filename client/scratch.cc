#include "client/scratch.h"

#include <atomic>

#include "client/runtime/runtime.h"

namespace kiln {
namespace {

// Bumped by TrimScratch: each thread trims its arena on its next call.
std::atomic<uint64_t> scratch_trim_epoch{0};

}  // namespace

void* ThreadScratch(int64_t bytes) {
  thread_local GrowingBuffer arena;
  thread_local uint64_t trimmed_at = 0;
  const uint64_t epoch = scratch_trim_epoch.load(std::memory_order_relaxed);
  if (trimmed_at != epoch) {
    trimmed_at = epoch;
    if (arena.size() > 2 * bytes) arena.Release();
  }
  return arena.Get(bytes);
}

void TrimScratch() { scratch_trim_epoch.fetch_add(1, std::memory_order_relaxed); }

}  // namespace kiln
